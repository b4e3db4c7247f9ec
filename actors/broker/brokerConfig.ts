/**
 * Broker options (API.md `Broker.start`) and their defaults, RocketMQ's names and values where
 * RocketMQ has them.
 */

import { DEFAULT_FILE_RESERVED_TIME_HOURS } from "../../store/index.ts";
import { optionNamesOf } from "../../transport/optionNames.ts";
import {
  BROKER_ID_RULE,
  BROKER_NAME_PATTERN,
  checkBoolean,
  checkNotReserved,
  checkRange,
  DEFAULT_CLUSTER,
  DEFAULT_MAX_MESSAGE_BYTES,
  INT32_MAX,
  isBrokerId,
  MASTER_ID,
  MAX_PERM,
  MAX_TIMER_MS,
  MQError,
  PERM_READ_WRITE,
  shownValue,
} from "../../transport/protocol.ts";
import { checkTcpPort } from "../../transport/zmqNode.ts";
import { defaultLogLevel } from "../logger.ts";
import type { CurveClientKeys, CurveServerKey, CurveServerKeys } from "../runtime/index.ts";
import type { ConsumerTuning } from "./consumerManager.ts";
import type { OffsetTuning } from "./consumerOffsetManager.ts";
import { parseDelayLevels } from "./delayLevels.ts";
import type { HaTuning } from "./haTuning.ts";
import { DEFAULT_HEAP_RESERVE_MB } from "./heapReserve.ts";
import type { HoldTuning } from "./holdService.ts";
import type { LockTuning } from "./lockManager.ts";
import type { PullTuning } from "./pullProcessor.ts";
import type { SchedulerTuning } from "./scheduler.ts";

export const DEFAULT_BROKER_LISTEN = "tcp://127.0.0.1:10911";
/** Queues of a topic created on first send (RocketMQ's `defaultTopicQueueNums` is 8; actormq uses 4). */
export const DEFAULT_QUEUE_NUMS = 4;
/** How often the broker re-registers with every name server (`registerNameServerPeriod`). */
export const DEFAULT_REGISTER_INTERVAL_MS = 30_000;
/** How long name servers keep this broker without a registration. */
export const DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS = 120_000;
/** Puts the store actor accepts at once before answering SYSTEM_BUSY. */
export const DEFAULT_STORE_MAX_IN_FLIGHT = 4096;
/** A sync-flush put that has not reached disk within this time answers FLUSH_DISK_TIMEOUT (`syncFlushTimeout`). */
export const DEFAULT_SYNC_FLUSH_TIMEOUT_MS = 5_000;

export const BROKER_ROLES = ["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] as const;
export type BrokerRole = (typeof BROKER_ROLES)[number];
export type FlushMode = "sync" | "async";

/** Options of `Broker.start`. */
export interface BrokerOptions {
  brokerName: string;
  /** 0 = master, > 0 = slave (one id per slave of a brokerName). @default 0 */
  brokerId?: number;
  /** letters, digits, '.', '_' and '-', as brokerName. @default "DefaultCluster" */
  clusterName?: string;
  /** ZeroMQ endpoint to bind. @default "tcp://127.0.0.1:10911" */
  listen?: string;
  /** address others should use, when it differs from the bound one */
  advertise?: string;
  nameservers: string[];
  storeDir: string;
  /** "sync": a send is acknowledged after fdatasync (group commit); "async": RocketMQ's ASYNC_FLUSH. @default "sync" */
  flush?: FlushMode;
  /** @default "ASYNC_MASTER" (or "SLAVE" when brokerId > 0); a SLAVE needs brokerId > 0, a master 0 */
  role?: BrokerRole;
  masterAddress?: string;
  /** create unknown topics on first send with `defaultQueueNums` queues. @default true */
  autoCreateTopic?: boolean;
  /** @default true */
  autoCreateSubscriptionGroup?: boolean;
  /** @default 4 */
  defaultQueueNums?: number;
  /** @default true */
  longPolling?: boolean;
  /** commit-log segment size in bytes, an integer >= 4096. @default 1 GiB */
  segmentBytes?: number;
  /** @default "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h" */
  messageDelayLevel?: string;
  /** @default 4 MiB */
  maxMessageBytes?: number;
  /** hours a commit-log segment is kept after its last write (RocketMQ's fileReservedTime). @default 72 */
  fileReservedTimeHours?: number;
  /**
   * disk use in percent from which the oldest segments are deleted before they expire (RocketMQ's
   * diskSpaceCleanForciblyRatio, 85 there). @default off: a broker on a shared disk does not delete data
   * because other files fill it
   */
  diskCleanForciblyPercent?: number;
  /**
   * disk use in percent from which sends are refused with DISK_FULL (RocketMQ's diskSpaceWarningLevelRatio, 90 there),
   * until it is at or below diskCleanForciblyPercent again (below this when that is off). @default off
   */
  diskFullPercent?: number;
  /**
   * broker-wide permission (`brokerPermission`): 6 = read and write, 4 = read only, 2 = write only;
   * short of 6, the broker registers each topic with `perm & brokerPermission`. Changed on a running
   * broker by UPDATE_BROKER_CONFIG (`Admin.updateBrokerConfig`), which keeps it in
   * `<storeDir>/config/broker.json` for later starts; given here, it wins over that file. @default 6
   */
  brokerPermission?: number;
  /** ms between registrations with every name server, an integer > 0 (RocketMQ's registerNameServerPeriod). @default 30000 */
  registerIntervalMs?: number;
  /** ms the name servers keep this broker without a registration, an integer from 1 to 2^31 - 1, more than registerIntervalMs. @default 120000 */
  heartbeatTimeoutMs?: number;
  /** puts the store actor takes at once before answering SYSTEM_BUSY, an integer >= 1. @default 4096 */
  storeMaxInFlight?: number;
  /** pino level; @default ACTORMQ_LOG_LEVEL, else "info" ("warn" under the test runner) */
  logLevel?: string;
  /**
   * MiB of V8 heap the process holds in reserve while the broker is open, when node was started
   * without `--initial-old-space-size` (README, Operate: node flags); 0 = none. @default 32
   */
  heapReserveMb?: number;
  /** CURVE on the broker's listening socket (docs/security.md). @default none (plaintext) */
  curve?: CurveServerKeys;
  /**
   * the key pair of the broker's links to its name servers and master, which their allow-lists
   * check. @default the `curve` key pair, else a fresh one (needs `curveServerKey`)
   */
  curveClient?: CurveClientKeys;
  /** the public key of the name servers and master: set, the broker's links to them use CURVE. @default none (plaintext) */
  curveServerKey?: CurveServerKey;
}

/** The names {@link BrokerOptions} may hold. */
export const BROKER_OPTION_NAMES = optionNamesOf<BrokerOptions>()([
  "brokerName",
  "brokerId",
  "clusterName",
  "listen",
  "advertise",
  "nameservers",
  "storeDir",
  "flush",
  "role",
  "masterAddress",
  "autoCreateTopic",
  "autoCreateSubscriptionGroup",
  "defaultQueueNums",
  "longPolling",
  "segmentBytes",
  "messageDelayLevel",
  "maxMessageBytes",
  "fileReservedTimeHours",
  "diskCleanForciblyPercent",
  "diskFullPercent",
  "brokerPermission",
  "registerIntervalMs",
  "heartbeatTimeoutMs",
  "storeMaxInFlight",
  "logLevel",
  "heapReserveMb",
  "curve",
  "curveClient",
  "curveServerKey",
]);

/**
 * Tuning options the broker's parts read from its options (each part documents its own), also
 * taken by `Broker.start`: for tests and operators that need shorter intervals or other limits.
 */
export type BrokerTuning = LockTuning & HoldTuning & PullTuning & ConsumerTuning & SchedulerTuning & OffsetTuning & HaTuning;

/** The names {@link BrokerTuning} may hold. */
export const BROKER_TUNING_OPTION_NAMES = optionNamesOf<BrokerTuning>()([
  "lockMaxLiveTimeMs",
  "holdCheckIntervalMs",
  "enablePropertyFilter",
  "slaveReadEnable",
  "shortPollingTimeMills",
  "channelExpiredTimeoutMs",
  "clientScanIntervalMs",
  "delayOffsetPersistIntervalMs",
  "flushConsumerOffsetIntervalMs",
  "queueHandOverTimeoutMs",
  "haTransferBatchBytes",
  "haHoldMs",
  "haSyncTimeoutMs",
  "haMaxGapNotInSync",
  "haSlaveExpireMs",
  "haReconnectMs",
  "slaveSyncIntervalMs",
  "accessMessageInMemoryMaxRatio",
  "physicalMemoryBytes",
]);

/** The numeric {@link BrokerTuning} options. */
type NumericTuningName = {
  [K in keyof BrokerTuning]-?: NonNullable<BrokerTuning[K]> extends number ? K : never;
}[keyof BrokerTuning];

/**
 * The range of each numeric tuning option. Intervals and timeouts run timers: from 1 ms (0 would
 * spin) to 2^31 - 1 ms (a longer timer fires at once); a slave's transfer request waits `haHoldMs`
 * and as long again, so the hold stops at half of that.
 */
const BROKER_TUNING_RANGES: Record<NumericTuningName, readonly [min: number, max: number]> = {
  lockMaxLiveTimeMs: [1, MAX_TIMER_MS],
  holdCheckIntervalMs: [1, MAX_TIMER_MS],
  shortPollingTimeMills: [1, MAX_TIMER_MS],
  channelExpiredTimeoutMs: [1, MAX_TIMER_MS],
  clientScanIntervalMs: [1, MAX_TIMER_MS],
  delayOffsetPersistIntervalMs: [1, MAX_TIMER_MS],
  flushConsumerOffsetIntervalMs: [1, MAX_TIMER_MS],
  queueHandOverTimeoutMs: [1, MAX_TIMER_MS],
  haTransferBatchBytes: [1, INT32_MAX],
  haHoldMs: [1, Math.floor(MAX_TIMER_MS / 2)],
  haSyncTimeoutMs: [1, MAX_TIMER_MS],
  haMaxGapNotInSync: [1, Number.MAX_SAFE_INTEGER],
  haSlaveExpireMs: [1, MAX_TIMER_MS],
  haReconnectMs: [1, MAX_TIMER_MS],
  slaveSyncIntervalMs: [1, MAX_TIMER_MS],
  accessMessageInMemoryMaxRatio: [0, 100],
  physicalMemoryBytes: [1, Number.MAX_SAFE_INTEGER],
};

/**
 * Refuses a tuning option that is given but not an integer in its range, or a flag that is not
 * true or false (ILLEGAL_ARGUMENT naming it, its value and the range). Checked once, at
 * `Broker.start`: the broker's parts read them over their defaults, where a "5000" was ignored or
 * used as it is.
 */
export function checkBrokerTuning(opts: BrokerTuning): void {
  const given = opts as Record<string, unknown>;
  for (const [name, [min, max]] of Object.entries(BROKER_TUNING_RANGES))
    if (given[name] !== undefined) checkRange(name, given[name], min, max);
  checkBoolean("enablePropertyFilter", opts.enablePropertyFilter);
  checkBoolean("slaveReadEnable", opts.slaveReadEnable);
}

type OptionalBrokerOptions =
  | "curve"
  | "curveClient"
  | "curveServerKey"
  | "masterAddress"
  | "advertise"
  | "messageDelayLevel"
  | "segmentBytes"
  | "diskCleanForciblyPercent"
  | "diskFullPercent";

/** Options with every default filled in. */
export type BrokerConfig = Required<Omit<BrokerOptions, OptionalBrokerOptions>> & Pick<BrokerOptions, OptionalBrokerOptions>;

/** The defaults, spread under the user's options. */
export function defaultBrokerOptions(): Omit<BrokerConfig, "brokerName" | "nameservers" | "storeDir"> {
  return {
    brokerId: MASTER_ID,
    clusterName: DEFAULT_CLUSTER,
    listen: DEFAULT_BROKER_LISTEN,
    flush: "sync",
    role: "ASYNC_MASTER",
    autoCreateTopic: true,
    autoCreateSubscriptionGroup: true,
    defaultQueueNums: DEFAULT_QUEUE_NUMS,
    longPolling: true,
    maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
    fileReservedTimeHours: DEFAULT_FILE_RESERVED_TIME_HOURS,
    brokerPermission: PERM_READ_WRITE,
    registerIntervalMs: DEFAULT_REGISTER_INTERVAL_MS,
    heartbeatTimeoutMs: DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS,
    storeMaxInFlight: DEFAULT_STORE_MAX_IN_FLIGHT,
    logLevel: defaultLogLevel(),
    heapReserveMb: DEFAULT_HEAP_RESERVE_MB,
  };
}

/** Fills defaults and checks the options; throws MQError ILLEGAL_ARGUMENT with what to fix. */
export function resolveBrokerConfig(opts: BrokerOptions): BrokerConfig {
  const defined = Object.fromEntries(Object.entries(opts ?? {}).filter(([, v]) => v !== undefined)) as BrokerOptions;
  const cfg = { ...defaultBrokerOptions(), ...defined } as BrokerConfig;
  if (opts?.brokerId !== undefined && opts.brokerId > 0 && opts.role === undefined) cfg.role = "SLAVE";
  if (typeof cfg.brokerName !== "string" || !BROKER_NAME_PATTERN.test(cfg.brokerName)) {
    throw new MQError("ILLEGAL_ARGUMENT", `brokerName "${String(cfg.brokerName)}" is not valid: use letters, digits, '.', '_' and '-'.`);
  }
  checkNotReserved(cfg.brokerName, "broker");
  // the name servers refuse a registration without one: the broker would run and never be routed
  if (typeof cfg.clusterName !== "string" || !BROKER_NAME_PATTERN.test(cfg.clusterName)) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `clusterName ${typeof cfg.clusterName === "string" ? `"${cfg.clusterName}"` : String(cfg.clusterName)} is not valid: use letters, digits, '.', '_' and '-' (default "${DEFAULT_CLUSTER}").`,
    );
  }
  checkNotReserved(cfg.clusterName, "cluster");
  if (!Array.isArray(cfg.nameservers) || cfg.nameservers.some((a) => typeof a !== "string" || a.length === 0)) {
    throw new MQError("ILLEGAL_ARGUMENT", "nameservers must be an array of name server addresses such as tcp://127.0.0.1:9876.");
  }
  for (const a of cfg.nameservers) checkTcpPort(a, "nameservers entry", true);
  // anything else would start a slave that fails to connect every second and never replicates
  if (cfg.masterAddress !== undefined && typeof cfg.masterAddress !== "string")
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `masterAddress must be the master's endpoint as a string such as tcp://127.0.0.1:10911, got ${typeof cfg.masterAddress} ${String(cfg.masterAddress)}.`,
    );
  if (cfg.masterAddress !== undefined) checkTcpPort(cfg.masterAddress, "masterAddress", true);
  if (typeof cfg.storeDir !== "string" || cfg.storeDir.length === 0) {
    throw new MQError("ILLEGAL_ARGUMENT", "storeDir is required: the directory that holds the broker's commit log and config.");
  }
  for (const k of ["autoCreateTopic", "autoCreateSubscriptionGroup", "longPolling"] as const) checkBoolean(k, cfg[k]);
  if (cfg.flush !== "sync" && cfg.flush !== "async")
    throw new MQError("ILLEGAL_ARGUMENT", `flush must be "sync" or "async", not "${String(cfg.flush)}".`);
  if (!Number.isInteger(cfg.defaultQueueNums) || cfg.defaultQueueNums < 1 || cfg.defaultQueueNums > 1024) {
    throw new MQError("ILLEGAL_ARGUMENT", "defaultQueueNums must be an integer between 1 and 1024.");
  }
  if (!isBrokerId(cfg.brokerId))
    throw new MQError("ILLEGAL_ARGUMENT", `brokerId must be ${BROKER_ID_RULE}, got ${shownValue(cfg.brokerId)}.`);
  // RocketMQ's BrokerStartup: the name server keys a broker name's addresses by brokerId, 0 being
  // the master's, so a slave with id 0 would replace its master in every route
  if (!(BROKER_ROLES as readonly string[]).includes(cfg.role))
    throw new MQError("ILLEGAL_ARGUMENT", `role "${String(cfg.role)}" is not valid: use ASYNC_MASTER, SYNC_MASTER or SLAVE.`);
  if (cfg.role === "SLAVE" && cfg.brokerId === MASTER_ID)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      "A SLAVE needs brokerId > 0 (1, 2, ...: one per slave of the same brokerName); brokerId 0 is the master's.",
    );
  if (cfg.role !== "SLAVE" && cfg.brokerId !== MASTER_ID)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `role ${cfg.role} is a master role and needs brokerId 0, not ${cfg.brokerId}; a broker with brokerId > 0 runs as role SLAVE.`,
    );
  for (const k of ["diskCleanForciblyPercent", "diskFullPercent"] as const) {
    const v = cfg[k];
    if (v !== undefined && (typeof v !== "number" || !(v > 0 && v <= 100)))
      throw new MQError("ILLEGAL_ARGUMENT", `${k} must be a percentage in (0, 100], not ${String(v)}.`);
  }
  if (!Number.isInteger(cfg.heapReserveMb) || cfg.heapReserveMb < 0 || cfg.heapReserveMb > 1024)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `heapReserveMb must be an integer number of MiB from 0 (none) to 1024, not ${String(cfg.heapReserveMb)}.`,
    );
  // checked here, under the broker's names: the store's check names commitLogSegmentBytes, and
  // comes after the node has sized its inbound limit from maxMessageBytes
  if (cfg.segmentBytes !== undefined && !(Number.isSafeInteger(cfg.segmentBytes) && cfg.segmentBytes >= 4096))
    throw new MQError("ILLEGAL_ARGUMENT", `segmentBytes must be an integer number of bytes >= 4096, not ${String(cfg.segmentBytes)}.`);
  if (!(Number.isSafeInteger(cfg.maxMessageBytes) && cfg.maxMessageBytes >= 1))
    throw new MQError("ILLEGAL_ARGUMENT", `maxMessageBytes must be an integer number of bytes >= 1, not ${String(cfg.maxMessageBytes)}.`);
  if (typeof cfg.fileReservedTimeHours !== "number" || !(cfg.fileReservedTimeHours > 0))
    throw new MQError("ILLEGAL_ARGUMENT", `fileReservedTimeHours must be a number of hours > 0, not ${String(cfg.fileReservedTimeHours)}.`);
  // 0, NaN or past setTimeout's range (which fires at once) would re-register with every name server back to back
  if (!Number.isInteger(cfg.registerIntervalMs) || cfg.registerIntervalMs < 1 || cfg.registerIntervalMs > MAX_TIMER_MS)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `registerIntervalMs must be an integer number of ms from 1 to ${MAX_TIMER_MS} (default ${DEFAULT_REGISTER_INTERVAL_MS}), not ${String(cfg.registerIntervalMs)}.`,
    );
  // name servers refuse more: a broker silent that long would in effect never leave the routes
  if (!Number.isInteger(cfg.heartbeatTimeoutMs) || cfg.heartbeatTimeoutMs < 1 || cfg.heartbeatTimeoutMs > MAX_TIMER_MS)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `heartbeatTimeoutMs must be an integer number of ms from 1 to ${MAX_TIMER_MS} (default ${DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS}), not ${String(cfg.heartbeatTimeoutMs)}.`,
    );
  // the name servers would drop the broker between two of its registrations (RocketMQ: 30 s and 120 s)
  if (cfg.heartbeatTimeoutMs <= cfg.registerIntervalMs)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `heartbeatTimeoutMs ${cfg.heartbeatTimeoutMs} is not more than registerIntervalMs ${cfg.registerIntervalMs}: name servers would drop the broker from the routes between its registrations. Keep it several registrations long (defaults ${DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS} and ${DEFAULT_REGISTER_INTERVAL_MS}).`,
    );
  // 0 or less answers every send SYSTEM_BUSY; NaN makes the store actor's in-flight count NaN, so
  // puts are never answered and close waits for them
  if (!Number.isSafeInteger(cfg.storeMaxInFlight) || cfg.storeMaxInFlight < 1)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `storeMaxInFlight must be an integer number of puts >= 1 (default ${DEFAULT_STORE_MAX_IN_FLIGHT}), not ${String(cfg.storeMaxInFlight)}.`,
    );
  if (!Number.isInteger(cfg.brokerPermission) || cfg.brokerPermission < 0 || cfg.brokerPermission > MAX_PERM)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `brokerPermission must be a PermName bit set from 0 to 15 (READ 4 | WRITE 2: 6 read and write, 4 read only, 2 write only), not ${String(cfg.brokerPermission)}.`,
    );
  // refused at start, as RocketMQ's ScheduleMessageService.load() does: with no levels the broker
  // would run without a scheduler and answer every delayed send and send-back ILLEGAL_ARGUMENT
  if (cfg.messageDelayLevel !== undefined) parseDelayLevels(cfg.messageDelayLevel);
  return cfg;
}
