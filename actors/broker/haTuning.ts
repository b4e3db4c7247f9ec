/**
 * Replication options (RocketMQ's `haSendHeartbeatInterval`, `haMaxGapNotInSync`,
 * `syncFlushTimeout`, `accessMessageInMemoryMaxRatio`, ...) and the "consume too slow, read from
 * a slave" rule. They are read from the broker's options (`Broker.start({ ..., haSyncTimeoutMs })`),
 * like the pull processor's tuning.
 */
import os from "node:os";

/** Commit-log bytes per transfer to a slave (stored records as they are, never re-encoded). */
export const DEFAULT_HA_TRANSFER_BATCH_BYTES = 256 * 1024;
/** How long the master holds a slave's transfer request when it has nothing new; also the slave's heartbeat period (`haSendHeartbeatInterval`). */
export const DEFAULT_HA_HOLD_MS = 5_000;
/** How long a SYNC_MASTER send waits for a slave's acknowledgement before FLUSH_SLAVE_TIMEOUT (`syncFlushTimeout`). */
export const DEFAULT_HA_SYNC_TIMEOUT_MS = 5_000;
/** A slave further behind than this answers SYNC_MASTER sends SLAVE_NOT_AVAILABLE (`haMaxGapNotInSync`). */
export const DEFAULT_HA_MAX_GAP_NOT_IN_SYNC = 256 * 1024 * 1024;
/**
 * A slave not heard from for this long is forgotten (`haHousekeepingInterval`); it stops counting
 * as connected much sooner, see {@link haTransferMarginMs}.
 */
export const DEFAULT_HA_SLAVE_EXPIRE_MS = 20_000;
/** Delay before a slave tries its master again after a failed transfer. */
export const DEFAULT_HA_RECONNECT_MS = 1_000;
/** How often a slave copies topic and subscription-group configs from its master (`SlaveSynchronize`). */
export const DEFAULT_SLAVE_SYNC_INTERVAL_MS = 10_000;
/** Percent of physical memory a consumer may lag behind before the master suggests a slave (`accessMessageInMemoryMaxRatio`). */
export const DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40;

/** Replication options, all optional on `Broker.start`. */
export interface HaTuning {
  /** @default 256 KiB */
  haTransferBatchBytes?: number;
  /** @default 5000 */
  haHoldMs?: number;
  /** @default 5000 */
  haSyncTimeoutMs?: number;
  /** @default 256 MiB */
  haMaxGapNotInSync?: number;
  /** @default 20000 */
  haSlaveExpireMs?: number;
  /** @default 1000 */
  haReconnectMs?: number;
  /** @default 10000 */
  slaveSyncIntervalMs?: number;
  /** @default 40 */
  accessMessageInMemoryMaxRatio?: number;
  /** the memory figure the 40 % rule uses; smaller values make the rule testable. @default os.totalmem() */
  physicalMemoryBytes?: number;
}

/** Least extra time a slave's transfer request may take beyond the master's hold. */
const MIN_HA_TRANSFER_MARGIN_MS = 1_000;

/**
 * How long a transfer may take beyond the master's hold: the slave's request times out after
 * `haHoldMs` + this, and the master stops counting a slave as connected when no request of it is
 * held and none came within this of the last hold's end (or of the last answer, if later). It is
 * the hold itself when longer than 1 s, so a busy event loop on either side does not drop a live slave.
 */
export function haTransferMarginMs(t: Pick<Required<HaTuning>, "haHoldMs">): number {
  return Math.max(MIN_HA_TRANSFER_MARGIN_MS, t.haHoldMs);
}

/** Every {@link HaTuning} default. */
export function defaultHaTuning(): Required<HaTuning> {
  return {
    haTransferBatchBytes: DEFAULT_HA_TRANSFER_BATCH_BYTES,
    haHoldMs: DEFAULT_HA_HOLD_MS,
    haSyncTimeoutMs: DEFAULT_HA_SYNC_TIMEOUT_MS,
    haMaxGapNotInSync: DEFAULT_HA_MAX_GAP_NOT_IN_SYNC,
    haSlaveExpireMs: DEFAULT_HA_SLAVE_EXPIRE_MS,
    haReconnectMs: DEFAULT_HA_RECONNECT_MS,
    slaveSyncIntervalMs: DEFAULT_SLAVE_SYNC_INTERVAL_MS,
    accessMessageInMemoryMaxRatio: DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO,
    physicalMemoryBytes: os.totalmem(),
  };
}

/** The tuning of a broker config: its own values over the defaults (Broker.start checked them; undefined and non-numbers ignored). */
export function haTuningOf(config: object): Required<HaTuning> {
  const t = defaultHaTuning();
  const c = config as Record<string, unknown>;
  for (const k of Object.keys(t) as (keyof HaTuning)[]) {
    const v = c[k];
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) t[k] = v;
  }
  return t;
}

/**
 * RocketMQ's `suggestPullingFromSlave`: the consumer reads data that is no longer "in memory",
 * i.e. more than `accessMessageInMemoryMaxRatio` % of physical memory behind the commit log's end.
 */
export function suggestPullingFromSlave(
  maxPhyOffset: number,
  lastPulledPhyOffset: number,
  t: Pick<Required<HaTuning>, "accessMessageInMemoryMaxRatio" | "physicalMemoryBytes">,
): boolean {
  if (lastPulledPhyOffset < 0) return false;
  return checkInDiskByCommitOffset(maxPhyOffset, lastPulledPhyOffset, t);
}

/**
 * RocketMQ's `checkInDiskByCommitOffset`: the record at `phyOffset` is no longer "in memory", i.e.
 * more than `accessMessageInMemoryMaxRatio` % of physical memory behind the commit log's end.
 */
export function checkInDiskByCommitOffset(
  maxPhyOffset: number,
  phyOffset: number,
  t: Pick<Required<HaTuning>, "accessMessageInMemoryMaxRatio" | "physicalMemoryBytes">,
): boolean {
  return maxPhyOffset - phyOffset > (t.physicalMemoryBytes * t.accessMessageInMemoryMaxRatio) / 100;
}
