/**
 * PullConsumer (RocketMQ's `DefaultLitePullConsumer`): the application polls. Subscribe (queues
 * assigned by the group's rebalance) or assign queues by hand; the same pull service as the push
 * consumer fills a buffer in the background (long polling, flow control per queue); `poll` takes
 * from it; offsets are committed automatically every 5 s or by `commit()`.
 */
import type { SubscriptionExpression } from "../../filter/index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import {
  type ConsumeFromWhere,
  type ConsumerData,
  checkBoolean,
  checkRange,
  checkRetryTopicFits,
  checkTopic,
  hasMessageQueueFields,
  isMQError,
  MASTER_ID,
  MAX_TIMER_MS,
  type MessageQueue,
  MQError,
  mqKey,
  shownValue,
  topicCreateCommand,
} from "../../transport/protocol.ts";
import {
  type AllocateOptions,
  type AllocateStrategyName,
  checkAllocateOptions,
  DEFAULT_ALLOCATE_STRATEGY,
  getAllocateStrategy,
} from "./allocateStrategies.ts";
import { CLIENT_INSTANCE_OPTION_NAMES, ClientInstance, type ClientInstanceOptions } from "./clientInstance.ts";
import { OFFSET_REQUEST_TIMEOUT_MS, offsetLog, RemoteOffsetStore } from "./offsetStore.ts";
import { ProcessQueue } from "./processQueue.ts";
import { computePullFromWhere } from "./pullFromWhere.ts";
import { askMasterOffset, type ConsumerHost, type PullRequest } from "./pullRequest.ts";
import {
  DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
  DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE,
  LITE_BROKER_SUSPEND_MAX_TIME_MILLIS,
  MAX_BROKER_SUSPEND_MS,
  PullService,
  pullFailureLogger,
  pullServiceMachine,
  pullTimeoutFor,
} from "./pullService.ts";
import { checkConsumeTimestamp, checkGroup, claimGroup, consumerHostOf, releaseGroup } from "./pushConsumer.ts";
import { DEFAULT_REBALANCE_INTERVAL_MS, type HeldQueue, offsetsToPersist, Rebalancer, RebalanceTrigger } from "./rebalancer.ts";
import { SubscriptionTable } from "./subscriptions.ts";

/** @default 10 — messages per pull of the lite pull consumer. */
export const DEFAULT_LITE_PULL_BATCH_SIZE = 10;
/** @default 5000 */
export const DEFAULT_AUTO_COMMIT_INTERVAL_MS = 5_000;
/** @default 5000 */
export const DEFAULT_POLL_TIMEOUT_MS = 5_000;
/** ILLEGAL_ARGUMENT naming queues whose ids the route shows do not exist, with the read queue count there. */
function missingQueuesError(missing: readonly MessageQueue[], readQueueNums: (mq: MessageQueue) => number): MQError {
  const each = missing.map((mq) => {
    const n = readQueueNums(mq);
    return `${mqKey(mq)}: topic ${mq.topic} has ${n} read queues on broker ${mq.brokerName}${n > 0 ? ` (ids 0 to ${n - 1})` : ""}`;
  });
  return new MQError(
    "ILLEGAL_ARGUMENT",
    `${missing.length === 1 ? "This queue does" : "These queues do"} not exist, so nothing was assigned: ${each.join("; ")}. ` +
      "Assign queues fetchMessageQueues(topic) returns (the route of a topic that grew is looked up again).",
  );
}

const CONSUME_FROM_WHERE: readonly ConsumeFromWhere[] = ["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"];

/**
 * Refuses a poll timeout that is not a number of ms from 0 up (ILLEGAL_ARGUMENT): NaN or a negative
 * one would return at once, a string would be compared as one. Infinity waits until messages come.
 */
export function checkPollTimeout(timeoutMs: unknown): void {
  if (typeof timeoutMs !== "number" || Number.isNaN(timeoutMs) || timeoutMs < 0)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `poll timeoutMs must be a number of ms >= 0 (0 takes what is buffered without waiting, Infinity waits until messages come), got ${shownValue(timeoutMs)}.`,
    );
}

/** Options of {@link PullConsumer.start} (API.md). */
export interface PullConsumerOptions extends ClientInstanceOptions {
  group: string;
  /** commit what poll returned every autoCommitIntervalMs @default true */
  autoCommit?: boolean;
  /** @default 5000 (at least 1000) */
  autoCommitIntervalMs?: number;
  /** messages per pull @default 10 */
  pullBatchSize?: number;
  /** @default 1000 */
  pullThresholdForQueue?: number;
  /** MiB @default 100 */
  pullThresholdSizeForQueue?: number;
  /** @default "CONSUME_FROM_LAST_OFFSET" */
  consumeFromWhere?: ConsumeFromWhere;
  /** @default now − 30 min */
  consumeTimestamp?: number;
  /** @default "AVERAGELY" */
  allocateStrategy?: AllocateStrategyName;
  /** settings of BY_CONFIG (messageQueueList), BY_MACHINE_ROOM (consumeridcs, machineRoomOf), CONSISTENT_HASH (virtualNodes) */
  allocateOptions?: AllocateOptions;
  /** @default 20000 (RocketMQ's lite pull consumer; the push consumer's is 15000) */
  brokerSuspendMaxTimeMillis?: number;
  /** @default 20000 */
  rebalanceIntervalMs?: number;
}

/** The names {@link PullConsumerOptions} may hold; PullConsumer.start refuses any other. */
export const PULL_CONSUMER_OPTION_NAMES = optionNamesOf<PullConsumerOptions>()([
  "group",
  ...CLIENT_INSTANCE_OPTION_NAMES,
  "autoCommit",
  "autoCommitIntervalMs",
  "pullBatchSize",
  "pullThresholdForQueue",
  "pullThresholdSizeForQueue",
  "consumeFromWhere",
  "consumeTimestamp",
  "allocateStrategy",
  "allocateOptions",
  "brokerSuspendMaxTimeMillis",
  "rebalanceIntervalMs",
]);

interface Buffered {
  held: HeldQueue;
  msgs: MessageExt[];
}

/** A pull consumer: see API.md. */
export class PullConsumer {
  private readonly held = new Map<string, HeldQueue>();
  private readonly subscriptions = new SubscriptionTable();
  private readonly offsetStore: RemoteOffsetStore;
  private readonly pullService: PullService;
  private readonly rebalancer: Rebalancer;
  private readonly rebalanceTrigger: RebalanceTrigger;
  private readonly names: { rebalancer: string; pull: string };
  private buffer: Buffered[] = [];
  private waiters: (() => void)[] = [];
  /**
   * queue key -> offset to commit, from messages poll returned; `rewind`: a seek may move it back;
   * `held`: the holding it was made in (one of a queue lost since is not committed: see commitConsumed)
   */
  private readonly consumed = new Map<string, { offset: number; rewind: boolean; held: HeldQueue }>();
  private mode: "none" | "subscribe" | "assign" = "none";
  private commitTimer: NodeJS.Timeout | null = null;
  /** the assign() calls in progress, run one after the other */
  private assigning: Promise<void> = Promise.resolve();
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly host: ConsumerHost,
    readonly group: string,
    private readonly opts: Required<Omit<PullConsumerOptions, keyof ClientInstanceOptions | "allocateOptions">> &
      Pick<PullConsumerOptions, "allocateOptions">,
  ) {
    this.names = { rebalancer: `${group}/pull-rebalancer`, pull: `${group}/pull-loop` };
    this.rebalanceTrigger = new RebalanceTrigger(host.node, this.names.rebalancer);
    this.offsetStore = new RemoteOffsetStore(host, group);
    this.pullService = new PullService({
      host,
      group,
      model: "CLUSTERING",
      subscriptions: this.subscriptions,
      offsetStore: this.offsetStore,
      settings: {
        pullBatchSize: opts.pullBatchSize,
        pullThresholdForQueue: opts.pullThresholdForQueue,
        pullThresholdSizeForQueue: opts.pullThresholdSizeForQueue,
        consumeConcurrentlyMaxSpan: Number.MAX_SAFE_INTEGER,
        orderly: false,
        brokerSuspendMaxTimeMillis: opts.brokerSuspendMaxTimeMillis,
        pullTimeoutMillis: pullTimeoutFor(opts.brokerSuspendMaxTimeMillis),
      },
      onFound: (req, msgs) => this.onFound(req, msgs),
      onOffsetIllegal: (req) => void this.onOffsetIllegal(req),
      onError: pullFailureLogger(host, group),
      // subscribe: the rebalance reads the offset again (assigned queues are never stale: no member takes them over)
      onOffsetStale: () => this.rebalanceNow(),
      autoCommit: opts.autoCommit,
    });
    this.rebalancer = new Rebalancer({
      host,
      group,
      model: "CLUSTERING",
      strategy: getAllocateStrategy(opts.allocateStrategy),
      allocateOptions: opts.allocateOptions,
      subscriptions: this.subscriptions,
      offsetStore: this.offsetStore,
      consumeFromWhere: opts.consumeFromWhere,
      consumeTimestamp: opts.consumeTimestamp,
      held: this.held,
      startPull: (req) => this.pullService.executeNow(req),
      autoCommit: opts.autoCommit,
    });
  }

  static async start(options: PullConsumerOptions): Promise<PullConsumer> {
    checkOptionNames("PullConsumer.start", options, PULL_CONSUMER_OPTION_NAMES);
    checkGroup(options.group);
    // always clustering: the broker creates the group's retry topic when it heartbeats
    checkRetryTopicFits(options.group);
    const opts = {
      autoCommit: true,
      autoCommitIntervalMs: DEFAULT_AUTO_COMMIT_INTERVAL_MS,
      pullBatchSize: DEFAULT_LITE_PULL_BATCH_SIZE,
      pullThresholdForQueue: DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
      pullThresholdSizeForQueue: DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE,
      consumeFromWhere: "CONSUME_FROM_LAST_OFFSET" as ConsumeFromWhere,
      consumeTimestamp: Date.now() - 30 * 60_000,
      allocateStrategy: DEFAULT_ALLOCATE_STRATEGY,
      brokerSuspendMaxTimeMillis: LITE_BROKER_SUSPEND_MAX_TIME_MILLIS,
      rebalanceIntervalMs: DEFAULT_REBALANCE_INTERVAL_MS,
      group: options.group,
    };
    for (const [k, v] of Object.entries(options)) if (v !== undefined && k in opts) (opts as Record<string, unknown>)[k] = v;
    checkBoolean("autoCommit", opts.autoCommit);
    // timer delays above 2^31 - 1 ms fire at once, as NaN does
    checkRange("autoCommitIntervalMs", opts.autoCommitIntervalMs, 1000, MAX_TIMER_MS);
    checkRange("pullBatchSize", opts.pullBatchSize, 1, 1024);
    checkRange("pullThresholdForQueue", opts.pullThresholdForQueue, 1, 65535);
    checkRange("pullThresholdSizeForQueue", opts.pullThresholdSizeForQueue, 1, 1024);
    checkRange("brokerSuspendMaxTimeMillis", opts.brokerSuspendMaxTimeMillis, 1, MAX_BROKER_SUSPEND_MS);
    checkRange("rebalanceIntervalMs", opts.rebalanceIntervalMs, 1, MAX_TIMER_MS);
    checkConsumeTimestamp(opts.consumeTimestamp);
    if (!CONSUME_FROM_WHERE.includes(opts.consumeFromWhere)) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `consumeFromWhere must be ${CONSUME_FROM_WHERE.join(", ")}, got ${shownValue(opts.consumeFromWhere)}.`,
      );
    }
    getAllocateStrategy(opts.allocateStrategy);
    const allocateOptions = checkAllocateOptions(opts.allocateStrategy, options.allocateOptions);
    const inst = await ClientInstance.acquire(options);
    // a push or pull consumer of this group on the same client would take the same queues
    await claimGroup(inst, opts.group);
    const host = consumerHostOf(inst);
    let c: PullConsumer;
    try {
      c = new PullConsumer(host, opts.group, { ...opts, allocateOptions });
      host.registerConsumer({
        group: opts.group,
        consumerData: () => c.consumerData(),
        rebalanceNow: () => c.rebalanceNow(),
        brokersInUse: () => c.rebalancer.brokersInUse(),
      });
      host.node.spawn(c.names.pull, pullServiceMachine, {
        input: { service: c.pullService, inspecting: () => host.node.inspecting },
        supervision: { strategy: "stop" },
        localOnly: "all",
      });
    } catch (e) {
      // the instance would keep heartbeating the group, and keep the process alive
      await host.unregisterConsumer(opts.group);
      releaseGroup(inst.clientId, opts.group);
      await host.release();
      throw e;
    }
    if (opts.autoCommit) {
      c.commitTimer = setInterval(() => void c.commitConsumed().catch(() => {}), opts.autoCommitIntervalMs);
      c.commitTimer.unref();
    }
    return c;
  }

  private consumerData(): ConsumerData {
    return {
      groupName: this.group,
      consumeType: "CONSUME_ACTIVELY",
      messageModel: "CLUSTERING",
      consumeFromWhere: this.opts.consumeFromWhere,
      subscriptionDataSet: this.subscriptions.all(),
    };
  }

  private rebalanceNow(): void {
    this.rebalanceTrigger.request();
  }

  /**
   * Subscribes to a topic; its queues are shared with the group's other members by rebalance. A
   * topic that does not exist is refused (TOPIC_NOT_EXIST) and not kept: subscribe again once it does.
   */
  async subscribe(topic: string, expr: SubscriptionExpression = "*"): Promise<void> {
    this.checkOpen();
    if (this.mode === "assign")
      throw new MQError("ILLEGAL_ARGUMENT", "This pull consumer uses assign(); subscribe and assign cannot be mixed.");
    const had = this.subscriptions.get(topic);
    // the topic name and expression are checked before the mode changes: a subscribe that fails
    // leaves the consumer free to assign()
    const sd = this.subscriptions.subscribe(topic, expr);
    this.mode = "subscribe";
    // the topic's pulls held by the broker filter with the old expression and would move past what
    // the new one matches: stop them now, start again once the brokers have the new subscription
    const paused = had && (had.subString !== sd.subString || had.expressionType !== sd.expressionType) ? this.pauseTopic(topic) : [];
    const undo = () => {
      if (had) this.subscriptions.restore(topic, had);
      else this.subscriptions.unsubscribe(topic);
      if (this.subscriptions.topics().length === 0) this.mode = "none";
    };
    try {
      try {
        await this.host.fetchSubscribeQueues(topic);
      } catch (e) {
        // nor is a topic without a route kept (a re-subscribe keeps its earlier expression)
        undo();
        this.checkOpen();
        // refused at once so a mistyped topic is seen; waiting would not help, as nothing is kept to retry
        if (isMQError(e, "TOPIC_NOT_EXIST"))
          throw new MQError(
            "TOPIC_NOT_EXIST",
            `Topic ${topic} has no route, so this subscribe was not kept: create it with \`${topicCreateCommand(topic)}\` ` +
              "(Admin.createTopic in code) or wait for its broker to register, " +
              "then call subscribe again.",
            { cause: e },
          );
        throw e;
      }
      if (!this.closing) await this.host.sendHeartbeatToAllBrokers();
      if (!this.closing) await this.rebalancer.doRebalance();
    } finally {
      this.resumePaused(paused);
    }
    // close began meanwhile: it stopped the rebalancer actor, and one spawned now would outlive the
    // consumer (and stand in for the rebalancer of the group's next consumer on this client)
    if (this.closing) {
      undo();
      this.checkOpen();
    }
    this.rebalanceTrigger.spawn(this.rebalancer, this.opts.rebalanceIntervalMs);
  }

  /**
   * Drops the held queues of `topic` (their pulls in flight are ignored, their buffered messages
   * discarded) but keeps them held, with the first offset poll has not returned yet: pulled again
   * from there, nothing the new expression matches is skipped and nothing polled comes twice.
   */
  private pauseTopic(topic: string): { key: string; held: HeldQueue; offset: number }[] {
    const paused: { key: string; held: HeldQueue; offset: number }[] = [];
    for (const [key, h] of this.held) {
      if (h.mq.topic !== topic) continue;
      h.pq.dropped = true;
      this.dropBuffered(key);
      paused.push({ key, held: h, offset: h.pq.firstOffset() ?? h.request.nextOffset });
    }
    return paused;
  }

  /** Pulls again the queues {@link pauseTopic} stopped that are still held as they were (not lost to a rebalance, nor sought). */
  private resumePaused(paused: { key: string; held: HeldQueue; offset: number }[]): void {
    if (this.closing) return;
    for (const { key, held, offset } of paused) if (this.held.get(key) === held) this.startQueue(held.mq, offset, held.pq);
  }

  /** Takes exactly these queues (no rebalance); each starts at its committed offset. */
  async assign(queues: MessageQueue[]): Promise<void> {
    this.checkOpen();
    if (!Array.isArray(queues) || !queues.every(hasMessageQueueFields))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        "assign takes an array of queues { topic, brokerName, queueId }, such as fetchMessageQueues(topic) returns.",
      );
    const negative = queues.find((q) => q.queueId < 0);
    if (negative)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Queue ${mqKey(negative)} does not exist: queue ids start at 0. Assign queues fetchMessageQueues(topic) returns.`,
      );
    if (this.mode === "subscribe")
      throw new MQError("ILLEGAL_ARGUMENT", "This pull consumer uses subscribe(); subscribe and assign cannot be mixed.");
    this.mode = "assign";
    const want = new Map(queues.map((q) => [mqKey(q), { topic: q.topic, brokerName: q.brokerName, queueId: q.queueId }]));
    // calls made at once take effect one after the other, so the last one's queues are held: run
    // together, each would keep what the other started, and a queue in both would be pulled twice
    const run = this.assigning.then(() => this.assignNow(want));
    this.assigning = run.catch(() => {});
    return run;
  }

  /** What {@link assign} does, one call at a time; a call refused changes nothing. */
  private async assignNow(want: Map<string, MessageQueue>): Promise<void> {
    this.checkOpen();
    // close may begin at each await: its requests then fail for that reason, not the queue's, and
    // a queue started after it would be held (and pulled) by the closed consumer
    const unlessClosed = <T>(p: Promise<T>): Promise<T> =>
      p.then(
        (v) => {
          this.checkOpen();
          return v;
        },
        (e: unknown) => {
          this.checkOpen();
          throw e;
        },
      );
    // the offset look-ups need the queue's broker address, and its queue id is judged by the route:
    // the route is fetched for a new topic, and again when it names no such broker (its first fetch
    // failed, or the route is gone since) or no such queue (the topic may have grown since)
    const fetched = new Set<string>();
    const added: string[] = [];
    // not kept for a topic without a route or queue: the next assign fetches it again (and refuses
    // it again while it does not exist), whatever brokers the client knows from other topics
    const refuse = (e: unknown): never => {
      for (const topic of added) this.subscriptions.unsubscribe(topic);
      throw e;
    };
    for (const mq of want.values()) {
      if (fetched.has(mq.topic)) continue;
      if (this.subscriptions.get(mq.topic) && this.host.brokerAddress(mq.brokerName) !== undefined && !this.pastRoute(mq)) continue;
      fetched.add(mq.topic);
      if (!this.subscriptions.get(mq.topic)) {
        this.subscriptions.subscribe(mq.topic, "*");
        added.push(mq.topic);
      }
      await unlessClosed(this.host.fetchSubscribeQueues(mq.topic)).catch(refuse);
    }
    const missing = [...want.values()].filter((mq) => this.pastRoute(mq));
    if (missing.length > 0) refuse(missingQueuesError(missing, (mq) => this.host.readQueueNums!(mq.topic, mq.brokerName)!));
    const letGo: MessageQueue[] = [];
    for (const [k, h] of this.held) {
      if (want.has(k)) continue;
      h.pq.dropped = true;
      this.held.delete(k);
      this.dropBuffered(k);
      letGo.push(h.mq);
    }
    await Promise.all(letGo.map((mq) => this.commitLetGo(mq)));
    for (const [k, mq] of want) {
      if (this.held.has(k)) continue;
      const offset = await unlessClosed(
        computePullFromWhere(
          this.opts.consumeFromWhere,
          this.opts.consumeTimestamp,
          mq,
          this.rebalancer.lookups,
          // no rebalance comes back to an assigned queue
          "check the queue's broker name and that its broker is up, then call assign again",
        ),
      );
      this.startQueue(mq, offset);
    }
  }

  /**
   * True when the cached route lists `mq`'s broker for its topic with fewer read queues than its id.
   * RocketMQ's broker refuses such a queue's pulls ("queueId[...] is illegal") and its lite pull
   * consumer logs and pulls it again for good; assign refuses it instead, so a mistyped queue id is
   * seen (as subscribe refuses a topic that does not exist). A queue whose topic shrank after it was
   * assigned is pulled as RocketMQ does, its refusals logged (the topic may grow again).
   */
  private pastRoute(mq: MessageQueue): boolean {
    const n = this.host.readQueueNums?.(mq.topic, mq.brokerName);
    return n !== undefined && mq.queueId >= n;
  }

  /**
   * A queue assign() let go: with autoCommit, what poll returned of it is committed now, as a
   * subscribed queue lost to a rebalance is (and Kafka's assign does): the next commit covers only
   * the queues held then. Without autoCommit nothing is (as a rebalance). Its offset is forgotten
   * either way, so an assign that takes it again reads the group's.
   */
  private async commitLetGo(mq: MessageQueue): Promise<void> {
    const k = mqKey(mq);
    const c = this.consumed.get(k);
    this.consumed.delete(k);
    if (this.opts.autoCommit) {
      if (c) this.offsetStore.updateOffset(mq, c.offset, !c.rewind);
      // no later commit covers it: a failure is told (the group gets those messages again), and
      // a lost connection ends the wait at once instead of after the request timeout
      await this.offsetStore
        .persistStrict(mq)
        .catch((e: unknown) =>
          offsetLog().warn({ queue: k, err: (e as Error).message }, "the offset of a queue assign() let go was not committed"),
        );
    }
    this.offsetStore.removeOffset(mq);
  }

  /** The queues held now. */
  assignment(): MessageQueue[] {
    return [...this.held.values()].map((h) => ({ ...h.mq }));
  }

  /** The readable queues of a topic. */
  async fetchMessageQueues(topic: string): Promise<MessageQueue[]> {
    this.checkOpen();
    // said here, as subscribe does: the name server's refusal speaks of the request, not the argument
    checkTopic(topic, "fetchMessageQueues");
    return this.host.fetchSubscribeQueues(topic);
  }

  /**
   * Messages pulled since the last poll, waiting up to `timeoutMs` for some; [] on timeout. What
   * it returns counts as consumed: committed by the next commit (automatic or manual).
   */
  async poll(timeoutMs: number = DEFAULT_POLL_TIMEOUT_MS): Promise<MessageExt[]> {
    this.checkOpen();
    checkPollTimeout(timeoutMs);
    const deadline = monotonicNow() + timeoutMs;
    for (;;) {
      if (this.buffer.length === 0 && deadline - monotonicNow() > 0) await this.messagesOrDeadline(deadline);
      const out = this.takeBuffered();
      // a wake-up another poll answered first, or whose messages were let go meanwhile, is no
      // answer: this poll waits on for its whole timeout, as RocketMQ's (which takes its turn) does
      if (out.length > 0 || this.closing || deadline - monotonicNow() <= 0) return out;
    }
  }

  /** Resolves when messages are buffered (or close began), or at `deadline` ({@link monotonicNow} ms). */
  private messagesOrDeadline(deadline: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let t: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(t);
        resolve();
      };
      // a timer longer than 2^31 - 1 ms fires at once: a long wait (or Infinity) is waited in steps
      const arm = () => {
        t = setTimeout(
          () => {
            if (deadline - monotonicNow() > 0) return arm();
            // a poll that times out takes its wake-up with it: idle polls would pile them up until a message came
            const i = this.waiters.indexOf(done);
            if (i >= 0) this.waiters.splice(i, 1);
            done();
          },
          Math.min(MAX_TIMER_MS, Math.max(0, deadline - monotonicNow())),
        );
      };
      arm();
      this.waiters.push(done);
    });
  }

  /** Up to pullBatchSize buffered messages of queues still held, marked as polled for the next commit. */
  private takeBuffered(): MessageExt[] {
    const out: MessageExt[] = [];
    while (this.buffer.length > 0 && out.length < this.opts.pullBatchSize) {
      const b = this.buffer.shift()!;
      if (b.held.pq.dropped || this.held.get(mqKey(b.held.mq)) !== b.held) continue;
      const offset = b.held.pq.removeMessages(b.msgs);
      if (offset >= 0) {
        const k = mqKey(b.held.mq);
        const c = this.consumed.get(k);
        this.consumed.set(k, { offset, rewind: c?.held === b.held && c.rewind, held: b.held });
      }
      for (const m of b.msgs) out.push(m);
    }
    return out;
  }

  /**
   * Moves a held queue to `offset`, which must lie within the queue's [min, max] offsets:
   * buffered messages are discarded, pulling restarts there.
   */
  async seek(queue: MessageQueue, offset: number): Promise<void> {
    this.checkOpen();
    if (!hasMessageQueueFields(queue))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `seek takes a queue { topic, brokerName, queueId } this consumer holds (assign()'s, or from fetchMessageQueues(topic)), got ${queue === null || typeof queue !== "object" ? shownValue(queue) : "an object without them"}.`,
      );
    const k = mqKey(queue);
    const notHeld = () => new MQError("ILLEGAL_ARGUMENT", `The queue ${k} is not assigned to this consumer; seek only assigned queues.`);
    if (!this.held.has(k)) throw notHeld();
    if (!Number.isInteger(offset) || offset < 0)
      throw new MQError("ILLEGAL_ARGUMENT", `seek offset must be a non-negative integer, got ${shownValue(offset)}.`);
    // an offset outside the queue would be moved by the broker, but the next commit would store it
    // (RocketMQ's DefaultLitePullConsumerImpl.seek refuses it the same way)
    let min: number;
    let max: number;
    try {
      [min, max] = await Promise.all([this.queueOffset(queue, "GET_MIN_OFFSET"), this.queueOffset(queue, "GET_MAX_OFFSET")]);
    } finally {
      // close began meanwhile: it let the queue go (and its requests may have failed for that reason)
      this.checkOpen();
    }
    if (offset < min || offset > max)
      throw new MQError("ILLEGAL_ARGUMENT", `Seek offset illegal: ${offset} is outside ${k}'s offsets [${min}, ${max}]; seek within them.`);
    const h = this.held.get(k);
    if (!h) throw notHeld();
    h.pq.dropped = true;
    this.dropBuffered(k);
    this.startQueue(h.mq, offset, h.pq);
    // committed by the next commit, like what poll returns (without autoCommit, only commit() moves the stored offset)
    this.consumed.set(k, { offset, rewind: true, held: this.held.get(k)! });
  }

  /**
   * Commits the offsets of what poll returned, to the brokers. Rejects (MQError) when a broker did
   * not acknowledge some: they are kept, and the next commit sends them again.
   */
  async commit(): Promise<void> {
    this.checkOpen();
    await this.commitConsumed(false, true);
  }

  /** What {@link commit} does (`strict`: rejects on an offset not acknowledged); also the auto commit and close's last commit. */
  private async commitConsumed(final = false, strict = false): Promise<void> {
    // only for queues held since: a queue lost to a rebalance was released at what it had pulled, and
    // one held again since starts at the group's offset, which a seek made before would move back
    for (const [k, { offset, rewind, held }] of this.consumed)
      if (this.held.get(k) === held) this.offsetStore.updateOffset(held.mq, offset, !rewind);
    this.consumed.clear();
    // a queue whose broker connection was lost since its offset was read is not committed until a rebalance reads it again
    const { synced, unsynced } = offsetsToPersist(this.held.values());
    await this.offsetStore.persistAll(synced, unsynced, final, strict);
  }

  close(): Promise<void> {
    if (!this.closing) this.closing = this.doClose();
    return this.closing;
  }

  /** Its queues, subscriptions and client instance are gone once close began. */
  private checkOpen(): void {
    if (this.closing) throw new MQError("CLOSED", `The pull consumer of group ${this.group} was closed; start a new one.`);
  }

  private async doClose(): Promise<void> {
    if (this.commitTimer) clearInterval(this.commitTimer);
    void this.rebalancer.stop();
    this.pullService.stop();
    for (const w of this.waiters.splice(0)) w();
    // the last commit, then unregisterClient, sent in that order over each broker's one connection
    // and awaited together: a broker that is gone or slow is waited on once
    const committed = this.opts.autoCommit ? this.commitConsumed(true).catch(() => {}) : undefined;
    for (const name of [this.names.rebalancer, this.names.pull]) this.host.node.stopActor(name);
    for (const h of this.held.values()) h.pq.dropped = true;
    this.held.clear();
    this.buffer = [];
    await Promise.all([committed, this.host.unregisterConsumer(this.group)]);
    releaseGroup(this.host.clientId, this.group);
    await this.host.release();
  }

  /** GET_MIN_OFFSET / GET_MAX_OFFSET of a queue, asked of its master (RocketMQ's MQAdminImpl.minOffset / maxOffset). */
  private async queueOffset(mq: MessageQueue, type: "GET_MIN_OFFSET" | "GET_MAX_OFFSET"): Promise<number> {
    const offset = await askMasterOffset(this.host, mq, type, OFFSET_REQUEST_TIMEOUT_MS);
    if (offset === undefined)
      throw new MQError(
        "SERVICE_NOT_AVAILABLE",
        `No address is known for the master of broker ${mq.brokerName}; seek ${mqKey(mq)} once it is back.`,
      );
    return offset;
  }

  /**
   * Holds `mq` from `offset` with a new process queue; one that replaces `prev` keeps what it knew
   * of the offset's freshness (ProcessQueue.isOffsetStale) and what poll returned of it (the same holding).
   */
  private startQueue(mq: MessageQueue, offset: number, prev?: ProcessQueue<MessageExt>): void {
    const pq = new ProcessQueue<MessageExt>();
    if (prev) pq.takeOffsetStateOf(prev);
    const request: PullRequest = { consumerGroup: this.group, mq, pq, nextOffset: offset, brokerId: MASTER_ID };
    const k = mqKey(mq);
    const held = { mq, pq, request };
    this.held.set(k, held);
    const c = this.consumed.get(k);
    if (prev && c?.held.pq === prev) c.held = held;
    this.pullService.executeNow(request);
  }

  private dropBuffered(key: string): void {
    this.buffer = this.buffer.filter((b) => mqKey(b.held.mq) !== key);
  }

  private onFound(req: PullRequest, msgs: MessageExt[]): void {
    const h = this.held.get(mqKey(req.mq));
    if (!h || h.pq !== req.pq) return;
    this.buffer.push({ held: h, msgs });
    for (const w of this.waiters.splice(0)) w();
  }

  private async onOffsetIllegal(req: PullRequest): Promise<void> {
    const k = mqKey(req.mq);
    const h = this.held.get(k);
    if (!h || h.pq !== req.pq) return;
    this.dropBuffered(k);
    // what poll returned (or a seek) before the move would be committed over the broker's offset
    this.consumed.delete(k);
    this.offsetStore.updateAndFreeze(req.mq, req.nextOffset);
    await this.offsetStore.persist(req.mq);
    // close or an assign() without this queue may have come meanwhile: it let the queue go
    if (this.closing || this.held.get(k) !== h) return;
    this.offsetStore.removeOffset(req.mq);
    if (this.mode === "assign") this.startQueue(req.mq, req.nextOffset);
    else {
      this.held.delete(k);
      this.rebalanceNow();
    }
  }
}
