/**
 * `Broker.start(...)`: one broker process part — an ActorNode hosting the broker's actors
 * (brokerActors.ts) around a MessageStore, with topic and subscription-group configs persisted
 * under `<storeDir>/config/`. Resolves once the broker serves and has registered with its name
 * servers; `close()` unregisters, drains puts, and releases every socket, timer and file.
 */
import { lookup } from "node:dns/promises";
import { isIPv4 } from "node:net";
import path from "node:path";
import { MessageStore, openFileUse } from "../../store/index.ts";
import { ioError } from "../../store/ioError.ts";
import { mkdirs } from "../../store/mkdirs.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import { checkNotSystemTopic, MQError, PERM_READ_WRITE, shownValue, type TopicConfig } from "../../transport/protocol.ts";
import { DEFAULT_MAX_INBOUND_BYTES } from "../../transport/zmqNode.ts";
import { LogThrottle, logTransportDrops } from "../logger.ts";
import { ActorNode, logActorFailures, resolveCurveLink, resolveCurveServer } from "../runtime/index.ts";
import { type BrokerActorEntry, brokerActors } from "./brokerActors.ts";
import {
  BROKER_OPTION_NAMES,
  BROKER_TUNING_OPTION_NAMES,
  type BrokerConfig,
  type BrokerOptions,
  type BrokerTuning,
  checkBrokerTuning,
  resolveBrokerConfig,
} from "./brokerConfig.ts";
import { type BrokerContext, createBrokerContext, createLogger } from "./brokerContext.ts";
import { CONFIG_DIR } from "./configFile.ts";
import { consumerOffsetsOf } from "./consumerOffsetManager.ts";
import { watchFullGcs } from "./fullGcWatch.ts";
import { holdHeapReserve } from "./heapReserve.ts";
import { BrokerMetrics, instrumentBroker, type MetricsServer, parseHostPort, startMetricsServer } from "./metrics.ts";
import { attachRuntimeConfig, RuntimeConfig } from "./runtimeConfig.ts";
import { checkDelayOffsetFile, DELAY_OFFSET_FILE } from "./scheduler.ts";
import { SubscriptionGroupManager } from "./subscriptionGroupManager.ts";
import { TopicConfigManager } from "./topicConfigManager.ts";

/** Time a shutdown step may take before close moves on. */
const SHUTDOWN_STEP_TIMEOUT_MS = 10_000;
/** Longest a close waits for the replies to the requests it served to leave (ZmqNode.flushReplies). */
const CLOSE_REPLY_GRACE_MS = 200;
/** A failing disk's flush errors: one log line per file this often (each is counted in the metrics). */
const FLUSH_ERROR_LOG_INTERVAL_MS = 30_000;
/** Open files at start, as a share of what new consume queues may use, past which the broker warns. */
const OPEN_FILES_WARN_SHARE = 0.8;

/** Options of `Broker.createTopic`. */
export interface CreateTopicOptions {
  topic: string;
  /** an existing topic keeps its count when not given; a new one gets writeQueueNums, else the broker's defaultQueueNums */
  readQueueNums?: number;
  /** an existing topic keeps its count when not given; a new one gets readQueueNums, else the broker's defaultQueueNums */
  writeQueueNums?: number;
  /** @default 6 (read and write) */
  perm?: number;
  /** @default false */
  order?: boolean;
}

/** Every option name of {@link CreateTopicOptions}, checked by `Broker.createTopic`. */
const CREATE_TOPIC_OPTION_NAMES = optionNamesOf<CreateTopicOptions>()(["topic", "readQueueNums", "writeQueueNums", "perm", "order"]);

/**
 * "ip:port" of the broker's tcp endpoint, stamped in records and offset msg ids: RocketMQ's store
 * host is a resolved IPv4 address (reference §10.1), so a host name is looked up here; left as a
 * name it would be written as 0.0.0.0, and brokers on the same port would hand out the same ids.
 */
async function storeHostOf(address: string, what: string): Promise<string> {
  const m = /^tcp:\/\/([^:/[\]]+):(\d+)$/.exec(address);
  const refuse = (why: string) =>
    new MQError(
      "ILLEGAL_ARGUMENT",
      `The ${what} endpoint ${address} ${why}; offset message ids carry the broker's IPv4 address and port. ` +
        "Use tcp://<IPv4 address or a host name that resolves to one>:<port>, e.g. --advertise tcp://10.0.0.2:10911.",
    );
  if (!m) throw refuse(address.startsWith("tcp://[") ? "is an IPv6 address" : "is not tcp://host:port");
  const host = m[1]!;
  const port = m[2]!;
  // a wildcard bind without an advertised address names no one host: the loopback address stands for it
  if (host === "*" || host === "0.0.0.0") return `127.0.0.1:${port}`;
  if (isIPv4(host)) return `${host}:${port}`;
  try {
    const { address: ip } = await lookup(host, { family: 4 });
    return `${ip}:${port}`;
  } catch (e) {
    throw refuse(`cannot be resolved to an IPv4 address (${(e as Error).message})`);
  }
}

/** What `Broker.start` takes: the broker's options, its parts' tuning, and where to serve metrics. */
export type BrokerStartOptions = BrokerOptions & BrokerTuning & { metricsListen?: string };

/** The names `Broker.start` takes; any other is refused. */
export const BROKER_START_OPTION_NAMES: readonly (keyof BrokerStartOptions)[] = [
  ...BROKER_OPTION_NAMES,
  ...BROKER_TUNING_OPTION_NAMES,
  "metricsListen",
];

/** A running broker. */
export class Broker {
  private closing: Promise<void> | null = null;
  /** the Prometheus endpoint, when started with `metricsListen` */
  metrics: MetricsServer | null = null;

  private constructor(
    readonly ctx: BrokerContext,
    private readonly entries: BrokerActorEntry[],
    private readonly heapReserve: { mb: number; release: () => void },
  ) {}

  /**
   * Starts a broker; see API.md for the options. Throws MQError ILLEGAL_ARGUMENT (bad option, port in use) or STORE_LOCKED.
   * With `metricsListen` ("host:port", port 0 = any) it also serves Prometheus text at `broker.metrics.url`.
   */
  static async start(opts: BrokerStartOptions): Promise<Broker> {
    checkOptionNames("Broker.start", opts, BROKER_START_OPTION_NAMES);
    checkBrokerTuning(opts);
    const { metricsListen, ...brokerOpts } = opts;
    // checked before the broker starts: past it, a bad address failed only after registering
    if (metricsListen !== undefined && metricsListen !== null && typeof metricsListen !== "string")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `metricsListen must be a "host:port" string such as 127.0.0.1:9100 (port 0 picks a free port), got ${shownValue(metricsListen)}.`,
      );
    if (!metricsListen) return Broker.startBroker(brokerOpts);
    parseHostPort(metricsListen);
    const broker = await Broker.startBroker(brokerOpts);
    try {
      const m = new BrokerMetrics(broker.ctx);
      instrumentBroker(broker.ctx, m);
      broker.metrics = await startMetricsServer(metricsListen, () => m.render());
      broker.ctx.logger.info({ metrics: broker.metrics.url }, "metrics served");
      return broker;
    } catch (e) {
      await broker.close().catch(() => {});
      throw e;
    }
  }

  private static async startBroker(options: BrokerOptions): Promise<Broker> {
    // kept out of the config, which is logged and shown: they hold secret keys
    const { curve: curveOption, curveClient, curveServerKey, ...opts } = options;
    const config: BrokerConfig = resolveBrokerConfig(opts);
    const curve = resolveCurveServer(curveOption);
    const curveLinks = resolveCurveLink({ curveClient, curveServerKey }, curve);
    const logger = createLogger(`broker:${config.brokerName}`, config.logLevel);
    const flushErrorLog = new LogThrottle(FLUSH_ERROR_LOG_INTERVAL_MS);
    try {
      // one level at a time: Node's recursive mkdir spun forever, deaf to SIGTERM, on a path in /proc
      mkdirs(config.storeDir);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EEXIST" || code === "ENOTDIR")
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `The broker's storeDir ${config.storeDir} is not a directory: a file is in the way on its path. Move the file or choose another storeDir.`,
          { cause: e },
        );
      // its parent is there (mkdirs made it or found it): a file system that takes no new directories
      if (code === "ENOENT")
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `The broker's storeDir ${config.storeDir} cannot be made (${(e as Error).message}): its file system takes no new directories there, as /proc and /sys do. Choose a storeDir on a disk.`,
          { cause: e },
        );
      throw ioError(e, `creating the store directory ${config.storeDir}`);
    }
    // what UPDATE_BROKER_CONFIG changed before a restart, unless a start option says otherwise (read
    // once the store directory is known to be one: a file in its way is named as such above)
    const runtimeConfig = RuntimeConfig.load(config, opts, logger);
    const node = await ActorNode.start({
      listen: config.listen,
      advertise: config.advertise,
      // a send of the largest message this broker accepts is refused with its own clear error, not cut off
      maxInboundBytes: Math.max(DEFAULT_MAX_INBOUND_BYTES, 4 * config.maxMessageBytes),
      curve,
      curveClient: curveLinks,
    });
    logActorFailures(node, () => logger);
    logTransportDrops(node.transport, logger, `broker ${config.brokerName}`);
    let store: MessageStore | undefined;
    // in place before the first request: taken under load it would itself cost a mark-compact
    const heapReserve = holdHeapReserve(config.heapReserveMb);
    try {
      // an address libzmq cannot connect to ("foo", http://...) fails the start, as it fails a
      // client's, instead of every registration or replication attempt of a broker that runs on
      for (const a of [...config.nameservers, ...(config.masterAddress === undefined ? [] : [config.masterAddress])])
        node.transport.peer(a);
      const brokerAddr = node.address!;
      const storeHost = await storeHostOf(brokerAddr, config.advertise ? "advertise" : "listen");
      store = await MessageStore.open({
        dir: config.storeDir,
        flush: config.flush,
        maxMessageBytes: config.maxMessageBytes,
        fileReservedTimeHours: config.fileReservedTimeHours,
        ...(config.diskCleanForciblyPercent !== undefined ? { diskCleanForciblyPercent: config.diskCleanForciblyPercent } : {}),
        ...(config.diskFullPercent !== undefined ? { diskFullPercent: config.diskFullPercent } : {}),
        storeHost,
        ...(config.segmentBytes ? { commitLogSegmentBytes: config.segmentBytes } : {}),
        ...(config.messageDelayLevel !== undefined ? { messageDelayLevel: config.messageDelayLevel } : {}),
        // acknowledged messages in the range may be lost by a power loss: the operator must know
        // (a disk that keeps failing fails every flush: one line per file per 30 s, all counted)
        onFlushError: ({ file, from, to, error }) => {
          const held = flushErrorLog.pass(file);
          if (held !== undefined)
            logger.error(
              { file, from, to, code: error.code, err: error.message, ...(held > 0 ? { failuresNotLogged: held } : {}) },
              "store flush failed: the range may not be on disk",
            );
        },
        // in the broker's log, not process warnings on stderr: refused puts need an operator, and
        // the all-clear ends the incident
        onDiskSpace: ({ kind, dir, usedPercent, segments, message }) => {
          const fields = { dir, usedPercent: Math.round(usedPercent * 10) / 10, ...(segments !== undefined ? { segments } : {}) };
          if (kind === "full" || kind === "cleanFailed") logger.error(fields, message);
          else if (kind === "notFull") logger.info(fields, message);
          else logger.warn(fields, message);
        },
        // a damaged record is skipped, never delivered: the message is lost to its consumers
        onDamage: (message) => logger.error(message),
      });
      const { mode, log, rebuilt, missingLog } = store.recovery;
      // a rebuild reads the whole log (minutes for a large store): the operator must see why; a
      // missing segment file's messages are lost, each pull of them would otherwise only count them
      (mode === "normal" && log.cutBytes === 0 && log.damagedRegions === 0 && rebuilt === null && missingLog.length === 0
        ? logger.info.bind(logger)
        : logger.warn.bind(logger))(
        {
          mode,
          records: log.records,
          endOffset: log.end,
          truncatedBytes: log.cutBytes,
          damagedRegions: log.damagedRegions,
          ...(rebuilt === null ? {} : { rebuilt }),
          ...(missingLog.length === 0 ? {} : { missingLog }),
        },
        "store recovered",
      );
      // the queues opened at start may leave little of the open-file limit: say so now, not at the first refused put
      const files = openFileUse();
      if (files && files.inUse >= OPEN_FILES_WARN_SHARE * (files.limit - files.reserve))
        logger.warn(
          { openFiles: files.inUse, openFileLimit: files.limit, reserved: files.reserve },
          `open files near the limit: puts to new queues are refused once ${files.limit - files.reserve} files are open ` +
            `(the last ${files.reserve} are kept for connections); raise the open-file limit (ulimit -n, systemd LimitNOFILE, e.g. 65536)`,
        );
      const topics = await TopicConfigManager.load({
        storeDir: config.storeDir,
        autoCreateTopic: config.autoCreateTopic,
        defaultQueueNums: config.defaultQueueNums,
        logger,
      });
      const groups = await SubscriptionGroupManager.load({
        storeDir: config.storeDir,
        autoCreateSubscriptionGroup: config.autoCreateSubscriptionGroup,
        logger,
      });
      const ctx = createBrokerContext({ config, node, store, topics, groups, logger, brokerAddr, storeHost });
      attachRuntimeConfig(ctx, runtimeConfig);
      // the offset files are read now, so that one that cannot be loaded refuses the start (as the
      // config files above) instead of failing the first request, or resetting progress, later
      consumerOffsetsOf(ctx);
      checkDelayOffsetFile(path.join(config.storeDir, CONFIG_DIR, DELAY_OFFSET_FILE), logger);
      const knownTopics = new Set(Object.keys(topics.all()));
      topics.onChange((tc, deleted) => {
        if (deleted) {
          knownTopics.delete(tc.topicName);
          logger.info({ topic: tc.topicName }, "topic deleted");
          return;
        }
        const created = !knownTopics.has(tc.topicName);
        knownTopics.add(tc.topicName);
        logger.info(
          { topic: tc.topicName, readQueueNums: tc.readQueueNums, writeQueueNums: tc.writeQueueNums, perm: tc.perm },
          created ? "topic created" : "topic updated",
        );
      });
      const entries = brokerActors.filter((e) => e.enabled?.(ctx) ?? true);
      for (const e of entries)
        node.spawn(e.name, e.logic, {
          input: { ctx },
          ...(e.supervision ? { supervision: e.supervision } : {}),
          ...(e.direct ? { direct: e.direct } : {}),
          ...(e.localOnly ? { localOnly: e.localOnly } : {}),
        });
      await ctx.registerNow();
      logger.info(
        {
          brokerAddr,
          storeDir: config.storeDir,
          flush: config.flush,
          nameservers: config.nameservers,
          heapReserveMb: heapReserve.mb,
          ...(curve ? { curve: { publicKey: curve.publicKey, allowedClientKeys: curve.allowedClientKeys?.length ?? "any" } } : {}),
          ...(curveLinks ? { curveLinks: { publicKey: curveLinks.publicKey } } : {}),
          brokerPermission: config.brokerPermission,
        },
        "broker started",
      );
      watchFullGcs((fields, msg) => logger.warn(fields, msg));
      return new Broker(ctx, entries, heapReserve);
    } catch (e) {
      heapReserve.release();
      await node.close().catch(() => {});
      await store?.close().catch(() => {});
      throw e;
    }
  }

  /** The address clients and name servers use for this broker. */
  get address(): string {
    return this.ctx.brokerAddr;
  }

  get brokerName(): string {
    return this.ctx.config.brokerName;
  }

  /** MiB of heap reserve this broker holds (0 with `--initial-old-space-size` or `heapReserveMb: 0`; heapReserve.ts). */
  get heapReserveMb(): number {
    return this.heapReserve.mb;
  }

  /** The broker's store (tests and tools read it directly). */
  get store(): MessageStore {
    return this.ctx.store;
  }

  /** Creates or updates a topic on this broker, then re-registers so routes show it. */
  async createTopic(opts: CreateTopicOptions): Promise<TopicConfig> {
    if (this.closing) throw new MQError("CLOSED", `Broker ${this.brokerName} is closed.`);
    if (typeof opts !== "object" || opts === null)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        "createTopic takes an options object: { topic, readQueueNums?, writeQueueNums?, perm?, order? }.",
      );
    checkOptionNames("Broker.createTopic", opts, CREATE_TOPIC_OPTION_NAMES);
    checkNotSystemTopic(opts.topic);
    const tc = await this.ctx.topics.createOrUpdate({
      topicName: opts.topic,
      ...this.ctx.topics.queueNumsFor(opts.topic, opts.readQueueNums, opts.writeQueueNums, this.ctx.config.defaultQueueNums),
      perm: opts.perm ?? PERM_READ_WRITE,
      order: opts.order ?? false,
    });
    await this.ctx.registerNow();
    return tc;
  }

  /** Unregisters from the name servers, drains puts in flight, closes the node, store and config files. */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    const { node, store, topics, groups, logger } = this.ctx;
    await this.metrics?.close();
    for (const e of [...this.entries].reverse()) {
      if (!e.shutdown) continue;
      await node
        .ref(null, e.name)
        .ask({ type: "SHUTDOWN" }, { timeoutMs: SHUTDOWN_STEP_TIMEOUT_MS })
        .catch((err: unknown) => {
          logger.warn({ actor: e.name, err: (err as Error).message }, "shutdown step failed");
        });
    }
    // the replies to the sends drained above are still on their way: closed now, the node would
    // drop them, and the clients would take stored messages for failed ones and send them again
    await node.transport.flushReplies(CLOSE_REPLY_GRACE_MS);
    await node.close();
    // the offsets actor persisted at its SHUTDOWN, but the node served commits (requests and pulls)
    // until it closed: write what they changed now that no more can come
    try {
      await consumerOffsetsOf(this.ctx).persist();
    } catch (err) {
      logger.error({ err }, "writing consumerOffset.json failed");
    }
    this.heapReserve.release(); // no more load
    await topics.close().catch((err: unknown) => logger.error({ err }, "writing topics.json failed"));
    await groups.close().catch((err: unknown) => logger.error({ err }, "writing subscriptionGroup.json failed"));
    await store.close();
    logger.info("broker closed");
  }
}
