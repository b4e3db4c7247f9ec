/**
 * PushConsumer (RocketMQ's `DefaultMQPushConsumer`): messages pushed to a listener, built on
 * pulls. Parts, each an actor hosted on the client instance's node:
 * `<group>/rebalancer` (which queues this member holds), `<group>/pull` (the pull loop with long
 * polling and flow control), `<group>/consume` (the listener pool); plus one process queue per
 * held queue and an offset store (the broker for clustering, a local file for broadcasting).
 */
import type { SubscriptionExpression } from "../../filter/index.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import {
  BrokerActor,
  type ConsumeFromWhere,
  type ConsumerData,
  checkBoolean,
  checkNotReserved,
  checkRange,
  checkRetryTopicFits,
  isGroupName,
  MAX_TIMER_MS,
  type MessageModel,
  type MessageQueue,
  MQError,
  mqKey,
  shownValue,
  topicCreateCommand,
  type UnregisterClientRequest,
} from "../../transport/protocol.ts";
import { askUnlessConnectionLost, unlessConnectionLost } from "../runtime/index.ts";
import {
  type AllocateOptions,
  type AllocateStrategyName,
  checkAllocateOptions,
  DEFAULT_ALLOCATE_STRATEGY,
  getAllocateStrategy,
} from "./allocateStrategies.ts";
import { CLIENT_INSTANCE_OPTION_NAMES, type ClientEvent, ClientInstance, type ClientInstanceOptions } from "./clientInstance.ts";
import {
  type ConsumeOrderlyContext,
  ConsumeOrderlyService,
  consumeOrderlyServiceMachine,
  DEFAULT_SUSPEND_CURRENT_QUEUE_TIME_MS,
  ORDERLY_DEFAULT_MAX_RECONSUME_TIMES,
  type OrderlyListener,
  orderlySkipLogger,
} from "./consumeOrderlyService.ts";
import {
  type ConcurrentListener,
  type ConsumeConcurrentlyContext,
  ConsumeService,
  consumeServiceMachine,
  DEFAULT_CONSUME_MESSAGE_BATCH_MAX_SIZE,
  DEFAULT_CONSUME_THREADS,
  DEFAULT_CONSUME_TIMEOUT_MINUTES,
  RECONSUME_LATER_DELAY_MS,
} from "./consumeService.ts";
import {
  DEFAULT_PERSIST_OFFSET_INTERVAL_MS,
  LocalFileOffsetStore,
  localOffsetsClientId,
  localOffsetsPath,
  localPersistFailureLogger,
  type OffsetStore,
  RemoteOffsetStore,
} from "./offsetStore.ts";
import type { ProcessQueue } from "./processQueue.ts";
import type { ConsumerHost, ConsumerRegistration, PullRequest } from "./pullRequest.ts";
import {
  BROKER_SUSPEND_MAX_TIME_MILLIS,
  DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
  DEFAULT_PULL_BATCH_SIZE,
  DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
  DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE,
  flowControlLogger,
  MAX_BROKER_SUSPEND_MS,
  PullService,
  pullFailureLogger,
  pullServiceMachine,
  pullTimeoutFor,
} from "./pullService.ts";
import {
  DEFAULT_REBALANCE_LOCK_INTERVAL_MS,
  DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS,
  lockRenewIntervalMs,
  QueueLocks,
  queueLocksMachine,
  REBALANCE_LOCK_FIRST_DELAY_MS,
} from "./queueLocks.ts";
import { DEFAULT_REBALANCE_INTERVAL_MS, type HeldQueue, offsetsToPersist, Rebalancer, RebalanceTrigger } from "./rebalancer.ts";
import { createSendBack, type SendBack } from "./sendBack.ts";
import { SubscriptionTable } from "./subscriptions.ts";

/** consumeTimestamp default: 30 minutes ago (RocketMQ's default). */
export const DEFAULT_CONSUME_TIMESTAMP_AGO_MS = 30 * 60_000;
/** @default 16 */
export const DEFAULT_MAX_RECONSUME_TIMES = 16;

/** What a push consumer's listener gets besides the messages (concurrent or orderly). */
export type ConsumeContext = ConsumeConcurrentlyContext | ConsumeOrderlyContext;

/** How long a lost orderly queue may wait for its batch in hand before it is unlocked anyway (UNLOCK_DELAY_TIME_MILLS). */
export const ORDERLY_RELEASE_MAX_WAIT_MS = 20_000;

/** Listener results: concurrent and orderly statuses (orderly's deprecated COMMIT and ROLLBACK: see ConsumeOrderlyContext.autoCommit). */
export type ConsumeStatus = "CONSUME_SUCCESS" | "RECONSUME_LATER" | "SUCCESS" | "SUSPEND_CURRENT_QUEUE_A_MOMENT" | "COMMIT" | "ROLLBACK";

/** Options of {@link PushConsumer.start} (API.md). */
export interface PushConsumerOptions extends ClientInstanceOptions {
  group: string;
  subscriptions: Record<string, SubscriptionExpression>;
  /**
   * async (msgs, ctx) => "CONSUME_SUCCESS" | "RECONSUME_LATER" (a throw counts as RECONSUME_LATER, so
   * does any other status, logged at warn; "SUCCESS" counts as CONSUME_SUCCESS);
   * orderly: "SUCCESS" | "SUSPEND_CURRENT_QUEUE_A_MOMENT" (a throw counts as SUSPEND); with
   * `ctx.autoCommit = false` set for the batch, SUCCESS does not commit and "COMMIT" | "ROLLBACK" do
   */
  listener: (msgs: MessageExt[], ctx: ConsumeContext) => Promise<ConsumeStatus>;
  /** @default "CLUSTERING" */
  model?: MessageModel;
  /** @default "CONSUME_FROM_LAST_OFFSET" */
  consumeFromWhere?: ConsumeFromWhere;
  /** CONSUME_FROM_TIMESTAMP's time, ms since the epoch @default now − 30 min */
  consumeTimestamp?: number;
  /** @default "AVERAGELY" */
  allocateStrategy?: AllocateStrategyName;
  /** settings of BY_CONFIG (messageQueueList), BY_MACHINE_ROOM (consumeridcs, machineRoomOf), CONSISTENT_HASH (virtualNodes) */
  allocateOptions?: AllocateOptions;
  /** orderly consumption: one batch at a time per queue, under the queue's broker lock when clustering @default false */
  orderly?: boolean;
  /** orderly: pause of a queue after SUSPEND_CURRENT_QUEUE_A_MOMENT, ms @default 1000 */
  suspendCurrentQueueTimeMillis?: number;
  /** orderly clustering: how often held queues' broker locks are renewed (every rebalanceLockMaxLiveTimeMs / 2 instead when this leaves under a third of it as margin) @default 20000 */
  rebalanceLockIntervalMs?: number;
  /** orderly clustering: a lock not renewed for this long is considered lost (keep it below the broker's lock expiry) @default 30000 */
  rebalanceLockMaxLiveTimeMs?: number;
  /** @default 32 */
  pullBatchSize?: number;
  /** @default 1000 */
  pullThresholdForQueue?: number;
  /** MiB @default 100 */
  pullThresholdSizeForQueue?: number;
  /** @default 2000 */
  consumeConcurrentlyMaxSpan?: number;
  /** @default 1 */
  consumeMessageBatchMaxSize?: number;
  /** listener calls at a time (RocketMQ's consume thread pool; orderly: across queues, each queue one at a time) @default 20 */
  consumeThreads?: number;
  /** -1 means the default, as unset @default 16 (concurrent), unlimited (orderly) */
  maxReconsumeTimes?: number;
  /** how long a message may stay in a concurrent listener before it is sent back, minutes (> 0) @default 15 */
  consumeTimeoutMinutes?: number;
  /** broadcasting's offsets directory @default ~/.actormq_offsets */
  offsetStoreDir?: string;
  /** how long the broker may hold an empty pull @default 15000 */
  brokerSuspendMaxTimeMillis?: number;
  /** @default 20000 */
  rebalanceIntervalMs?: number;
  /** @default 5000 */
  persistConsumerOffsetIntervalMs?: number;
  /** delay before a RECONSUME_LATER batch is redelivered locally @default 5000 */
  reconsumeLaterDelayMs?: number;
}

/** RocketMQ's pull throttles that are not built (README, RocketMQ differences), and what does their work. */
const PUSH_CONSUMER_OPTIONS_NOT_BUILT = {
  pullInterval:
    "a queue is pulled again as soon as its answer is handled; to slow consumption, use suspend() and resume() or a slower listener",
  pullThresholdForTopic:
    "the flow control is per queue: pullThresholdForQueue (messages cached per queue, default 1000) and consumeConcurrentlyMaxSpan",
  pullThresholdSizeForTopic: "the flow control is per queue: pullThresholdSizeForQueue (MiB cached per queue, default 100)",
};

/** The names {@link PushConsumerOptions} may hold; PushConsumer.start refuses any other. */
export const PUSH_CONSUMER_OPTION_NAMES = optionNamesOf<PushConsumerOptions>()([
  "group",
  ...CLIENT_INSTANCE_OPTION_NAMES,
  "subscriptions",
  "listener",
  "model",
  "consumeFromWhere",
  "consumeTimestamp",
  "allocateStrategy",
  "allocateOptions",
  "orderly",
  "suspendCurrentQueueTimeMillis",
  "rebalanceLockIntervalMs",
  "rebalanceLockMaxLiveTimeMs",
  "pullBatchSize",
  "pullThresholdForQueue",
  "pullThresholdSizeForQueue",
  "consumeConcurrentlyMaxSpan",
  "consumeMessageBatchMaxSize",
  "consumeThreads",
  "maxReconsumeTimes",
  "consumeTimeoutMinutes",
  "offsetStoreDir",
  "brokerSuspendMaxTimeMillis",
  "rebalanceIntervalMs",
  "persistConsumerOffsetIntervalMs",
  "reconsumeLaterDelayMs",
]);

type Resolved = Required<Omit<PushConsumerOptions, keyof ClientInstanceOptions | "allocateOptions" | "offsetStoreDir">> &
  Pick<PushConsumerOptions, "allocateOptions" | "offsetStoreDir">;

/** RocketMQ's defaults for everything but group, subscriptions and listener. */
export function defaultPushConsumerOptions() {
  return {
    model: "CLUSTERING" as MessageModel,
    consumeFromWhere: "CONSUME_FROM_LAST_OFFSET" as ConsumeFromWhere,
    allocateStrategy: DEFAULT_ALLOCATE_STRATEGY,
    orderly: false,
    pullBatchSize: DEFAULT_PULL_BATCH_SIZE,
    pullThresholdForQueue: DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
    pullThresholdSizeForQueue: DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE,
    consumeConcurrentlyMaxSpan: DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    consumeMessageBatchMaxSize: DEFAULT_CONSUME_MESSAGE_BATCH_MAX_SIZE,
    consumeThreads: DEFAULT_CONSUME_THREADS,
    maxReconsumeTimes: DEFAULT_MAX_RECONSUME_TIMES,
    consumeTimeoutMinutes: DEFAULT_CONSUME_TIMEOUT_MINUTES,
    brokerSuspendMaxTimeMillis: BROKER_SUSPEND_MAX_TIME_MILLIS,
    rebalanceIntervalMs: DEFAULT_REBALANCE_INTERVAL_MS,
    persistConsumerOffsetIntervalMs: DEFAULT_PERSIST_OFFSET_INTERVAL_MS,
    reconsumeLaterDelayMs: RECONSUME_LATER_DELAY_MS,
    suspendCurrentQueueTimeMillis: DEFAULT_SUSPEND_CURRENT_QUEUE_TIME_MS,
    rebalanceLockIntervalMs: DEFAULT_REBALANCE_LOCK_INTERVAL_MS,
    rebalanceLockMaxLiveTimeMs: DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS,
  };
}

/** RocketMQ's `getMaxReconsumeTimes`: unset or -1 means 16 (concurrent) or unlimited (orderly). */
export function effectiveMaxReconsumeTimes(configured: number | undefined, orderly: boolean): number {
  if (configured === undefined || configured === -1) return orderly ? ORDERLY_DEFAULT_MAX_RECONSUME_TIMES : DEFAULT_MAX_RECONSUME_TIMES;
  return configured;
}

/** Validates a consumer group name (RocketMQ's group rules match topic names). */
export function checkGroup(group: unknown): asserts group is string {
  if (!isGroupName(group)) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `The consumer group ${JSON.stringify(group)} is not valid: use 1-255 letters, digits, '%', '|', '_' or '-'.`,
    );
  }
  checkNotReserved(group, "consumer group");
  // RocketMQ's consumers refuse it too: it is the group of clients that never named one
  if (group === DEFAULT_CONSUMER_GROUP)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `The consumer group may not be ${DEFAULT_CONSUMER_GROUP} (RocketMQ's reserved default): name your group.`,
    );
}

/** Refuses a consumeTimestamp that is not a number of ms since the epoch (ILLEGAL_ARGUMENT). */
export function checkConsumeTimestamp(v: unknown): void {
  // RocketMQ's "yyyyMMddHHmmss" strings included: the broker's offset search refuses them at every rebalance
  if (typeof v !== "number" || !Number.isFinite(v))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `consumeTimestamp must be a time in ms since the epoch (such as Date.parse("2020-01-01T00:00:00Z")), got ${shownValue(v)}.`,
    );
}

/**
 * Refuses BY_CONFIG queues of topics the consumer does not subscribe (ILLEGAL_ARGUMENT): such a
 * queue (a typo) was held, never pulled, dropped as not subscribed and held again every round.
 */
function checkConfiguredTopics(queues: readonly MessageQueue[], subscriptions: SubscriptionTable): void {
  const topics = subscriptions.topics();
  const unknown = [...new Set(queues.map((q) => q.topic).filter((t) => !topics.includes(t)))];
  if (unknown.length > 0)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `allocateOptions.messageQueueList has queues of ${unknown.map((t) => JSON.stringify(t)).join(", ")}, which this consumer does not subscribe: ` +
        `list queues of its topics (${topics.join(", ")}), or subscribe the topic.`,
    );
}

/** RocketMQ's `MixAll.DEFAULT_CONSUMER_GROUP`. */
export const DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER";

/** The consumer's view of a ClientInstance. */
export function consumerHostOf(inst: ClientInstance): ConsumerHost {
  const unsubs = new Map<string, (() => void)[]>();
  return {
    node: inst.node,
    clientId: inst.clientId,
    brokerAddress: (name, id) => inst.routes.brokerAddress(name, id),
    isBrokerUnreachable: (addr) => inst.node.peerUnreachable(addr),
    brokerLostAt: (addr) => inst.node.peerLostAt(addr),
    async fetchSubscribeQueues(topic) {
      const info = await inst.updateRoute(topic);
      if (!info)
        throw new MQError(
          "TOPIC_NOT_EXIST",
          `Topic ${topic} has no route; create it with \`${topicCreateCommand(topic)}\` (Admin.createTopic in code) or wait for its broker to register.`,
        );
      return inst.routes.subscribeQueues(topic);
    },
    async publishQueues(topic, refresh) {
      const info = (refresh ? undefined : inst.routes.publishInfo(topic)) ?? (await inst.updateRoute(topic));
      return info?.queues.slice() ?? [];
    },
    unlessBrokerLost: (addr, ask) => unlessConnectionLost(inst.node, addr, ask),
    readQueueNums: (topic, brokerName) => inst.routes.route(topic)?.queueDatas.find((q) => q.brokerName === brokerName)?.readQueueNums,
    registerConsumer(c: ConsumerRegistration) {
      // wanted topics are asked for every second until they have a route (MISSING_ROUTE_RETRY_MS),
      // so a consumer started before its topic exists begins as soon as the topic is created
      const topics = c.consumerData().subscriptionDataSet.map((sd) => sd.topic);
      for (const t of topics) inst.addTopicInterest(t);
      let awaited: Promise<void> | null = null;
      const offs = [
        () => {
          for (const t of topics) inst.removeTopicInterest(t);
        },
        inst.addHeartbeatSource(() => ({ consumerData: [c.consumerData()] })),
        inst.addBrokerUser(() => c.brokersInUse?.() ?? []),
        inst.onClientEvent((e: ClientEvent) => {
          if (e.type === "NOTIFY_CONSUMER_IDS_CHANGED" && e.consumerGroup === c.group) c.rebalanceNow();
        }),
        // a route that appears or changes may name a broker that has not heard of this consumer yet:
        // heartbeat first, so its consumer list includes us when the rebalance asks for it; routes
        // changed together share one heartbeat and one rebalance
        inst.onRouteChange(() => {
          const hb = inst.heartbeatSoon();
          if (hb === awaited) return;
          awaited = hb;
          void hb.then(() => c.rebalanceNow());
        }),
      ];
      unsubs.set(c.group, offs);
    },
    async unregisterConsumer(group) {
      for (const off of unsubs.get(group) ?? []) off();
      unsubs.delete(group);
      const req: UnregisterClientRequest = { clientID: inst.clientId, consumerGroup: group };
      // every address, slaves too: consumers heartbeat to slaves (which answer the member list while
      // their master is down), as RocketMQ's unregisterClient tells every broker address
      const addrs = [...inst.routes.brokers().values()].flatMap((a) => Object.values(a)).filter((a): a is string => !!a);
      // a broker whose connection is lost is not waited on: it has not heard from this client since,
      // and forgets it at its channel expiry (RocketMQ's unregister fails as fast on a connection it
      // cannot make); one lost while the goodbye waits ends the wait too. A ref() that throws (an
      // address it cannot connect to) is skipped the same way, so close() still resolves
      await Promise.all(
        addrs.map((addr) =>
          askUnlessConnectionLost(
            inst.node,
            addr,
            BrokerActor.CONSUMERS,
            { type: "UNREGISTER_CLIENT", ...req },
            { timeoutMs: 3000, serveLate: true },
          ).catch(() => undefined),
        ),
      );
    },
    sendHeartbeatToAllBrokers: () => inst.sendHeartbeatToAllBrokers(),
    release: () => inst.release(),
  };
}

/**
 * `clientId|group` of every running consumer of this process, push and pull: two consumers of one
 * group on one client id are one member to the broker, and each would take every queue (RocketMQ's
 * registerConsumer refuses the second one too).
 */
const activeGroups = new Set<string>();

/** Claims `group` on the instance for one consumer; otherwise releases the instance and throws. */
export async function claimGroup(inst: ClientInstance, group: string): Promise<void> {
  const key = `${inst.clientId}|${group}`;
  if (!activeGroups.has(key)) {
    activeGroups.add(key);
    return;
  }
  await inst.release();
  throw new MQError(
    "ILLEGAL_ARGUMENT",
    `Consumer group ${group} already has a consumer on client ${inst.clientId}; close it first or give this one another instanceName.`,
  );
}

/** Gives back what {@link claimGroup} claimed. */
export function releaseGroup(clientId: string, group: string): void {
  activeGroups.delete(`${clientId}|${group}`);
}

/** A push consumer: see API.md. */
export class PushConsumer {
  private readonly held = new Map<string, HeldQueue>();
  /** Orderly queues given up whose release (batch in hand, offset stored) has not ended: their locks are still renewed. */
  private readonly releasing = new Set<HeldQueue>();
  private readonly names: { rebalancer: string; pull: string; consume: string; locks: string };
  private persistTimer: NodeJS.Timeout | null = null;
  private closing: Promise<void> | null = null;
  private suspended = false;
  private readonly rebalancer: Rebalancer;
  private readonly rebalanceTrigger: RebalanceTrigger;
  readonly pullService: PullService;
  readonly consumeService: ConsumeService;
  /** orderly consumers: the per-queue consume loops (null when concurrent) */
  readonly orderlyService: ConsumeOrderlyService | null = null;
  /** orderly clustering consumers: the broker locks of held queues (null otherwise) */
  readonly queueLocks: QueueLocks | null = null;
  /** the send-backs of the consume services (close waits for those in flight) */
  private readonly sendBacks: SendBack[] = [];
  /** a failed write of the local offsets file (broadcasting): logged; the remote store reports nothing here */
  private readonly persistFailed: (error: unknown, closing: boolean) => void;

  private constructor(
    private readonly host: ConsumerHost,
    readonly group: string,
    private readonly opts: Resolved,
    readonly subscriptions: SubscriptionTable,
    readonly offsetStore: OffsetStore,
  ) {
    const prefix = `${group}/`;
    this.names = { rebalancer: `${prefix}rebalancer`, pull: `${prefix}pull`, consume: `${prefix}consume`, locks: `${prefix}locks` };
    this.rebalanceTrigger = new RebalanceTrigger(host.node, this.names.rebalancer);
    this.persistFailed = offsetStore instanceof LocalFileOffsetStore ? localPersistFailureLogger(offsetStore.file, group) : () => {};
    if (opts.orderly) this.createOrderly(host, offsetStore);
    this.consumeService = new ConsumeService({
      group,
      model: opts.model,
      listener: opts.listener as ConcurrentListener,
      offsetStore,
      settings: {
        consumeThreads: opts.consumeThreads,
        consumeMessageBatchMaxSize: opts.consumeMessageBatchMaxSize,
        consumeTimeoutMinutes: opts.consumeTimeoutMinutes,
        reconsumeLaterDelayMs: opts.reconsumeLaterDelayMs,
      },
      processQueues: () => this.held.values(),
      sendBack: this.newSendBack(),
      onDrained: (mq, pq) => {
        // messages skipped by the filter after the last delivered one are done too
        const h = this.held.get(mqKey(mq));
        if (h && h.pq === pq) offsetStore.updateOffset(mq, h.request.nextOffset, true);
      },
    });
    this.pullService = new PullService({
      host,
      group,
      model: opts.model,
      subscriptions,
      offsetStore,
      settings: {
        pullBatchSize: opts.pullBatchSize,
        pullThresholdForQueue: opts.pullThresholdForQueue,
        pullThresholdSizeForQueue: opts.pullThresholdSizeForQueue,
        consumeConcurrentlyMaxSpan: opts.consumeConcurrentlyMaxSpan,
        orderly: opts.orderly,
        lockMaxLiveTimeMs: opts.rebalanceLockMaxLiveTimeMs,
        brokerSuspendMaxTimeMillis: opts.brokerSuspendMaxTimeMillis,
        pullTimeoutMillis: pullTimeoutFor(opts.brokerSuspendMaxTimeMillis),
      },
      onFound: (req, msgs, dispatch) =>
        this.orderlyService ? this.orderlyService.submit(req.mq, req.pq, dispatch) : this.consumeService.submit(req.mq, req.pq, msgs),
      onOffsetIllegal: (req) => void this.onOffsetIllegal(req),
      onError: pullFailureLogger(host, group),
      onFlowControl: flowControlLogger(group, opts),
      onOffsetStale: () => this.rebalanceNow(),
    });
    this.rebalancer = new Rebalancer({
      host,
      group,
      model: opts.model,
      strategy: getAllocateStrategy(opts.allocateStrategy),
      allocateOptions: opts.allocateOptions,
      subscriptions,
      offsetStore,
      consumeFromWhere: opts.consumeFromWhere,
      consumeTimestamp: opts.consumeTimestamp,
      held: this.held,
      startPull: (req) => this.startPull(req),
      dropPullExpired: true,
      onPersistFailed: (e) => this.persistFailed(e, false),
      ...(this.queueLocks
        ? {
            lockQueue: (mq: MessageQueue, pq: ProcessQueue<MessageExt>) => this.queueLocks!.lock(mq, pq, true),
            releaseQueue: (h: HeldQueue) => this.releaseOrderlyQueue(h),
            unlockQueue: (mq: MessageQueue) => this.queueLocks!.unlock([mq]),
          }
        : {}),
    });
  }

  private newSendBack(): SendBack {
    const s = createSendBack(this.host, this.group, this.opts.maxReconsumeTimes);
    this.sendBacks.push(s);
    return s;
  }

  // --- orderly consumption -------------------------------------------------------------------

  private createOrderly(host: ConsumerHost, offsetStore: OffsetStore): void {
    const opts = this.opts;
    const locks =
      opts.model === "CLUSTERING"
        ? new QueueLocks({
            host,
            group: this.group,
            lockMaxLiveTimeMs: opts.rebalanceLockMaxLiveTimeMs,
            held: () => this.held.values(),
            releasing: () => this.releasing,
            onRegained: (q) => this.rebuildQueue(q.mq, q.pq),
            rebalanceNow: () => this.rebalanceNow(),
          })
        : null;
    const service = new ConsumeOrderlyService({
      group: this.group,
      model: opts.model,
      listener: opts.listener as OrderlyListener,
      offsetStore,
      settings: {
        consumeThreads: opts.consumeThreads,
        consumeMessageBatchMaxSize: opts.consumeMessageBatchMaxSize,
        suspendCurrentQueueTimeMillis: opts.suspendCurrentQueueTimeMillis,
        maxReconsumeTimes: opts.maxReconsumeTimes,
        lockMaxLiveTimeMs: opts.rebalanceLockMaxLiveTimeMs,
      },
      ...(locks ? { lockQueue: (mq: MessageQueue, pq: ProcessQueue<MessageExt>) => locks.lock(mq, pq) } : {}),
      sendBack: opts.model === "CLUSTERING" ? this.newSendBack() : undefined,
      onSkipped: orderlySkipLogger(this.group),
      onDrained: (mq, pq) => {
        const h = this.held.get(mqKey(mq));
        if (h && h.pq === pq) offsetStore.updateOffset(mq, h.request.nextOffset, true);
      },
    });
    (this as { orderlyService: ConsumeOrderlyService | null }).orderlyService = service;
    (this as { queueLocks: QueueLocks | null }).queueLocks = locks;
  }

  /**
   * A lost orderly queue: the batch in hand finishes and commits, the offset is persisted (unless the
   * lock lapsed meanwhile), then the broker lock goes.
   */
  private async releaseOrderlyQueue(h: HeldQueue): Promise<void> {
    // its lock is renewed meanwhile: a batch in hand longer than the lock's life still commits
    this.releasing.add(h);
    try {
      await this.orderlyService!.release(h.pq, ORDERLY_RELEASE_MAX_WAIT_MS);
      // a lapsed lock's offset may be behind another member's (see persistableQueues)
      // still under this member's lock, and before the unlock on the same connection: served however late
      if (this.queueLocks!.isLockHeld(h.pq)) await this.offsetStore.persist(h.mq, true).catch(() => {});
    } finally {
      this.releasing.delete(h);
    }
    // the queue came back to this client while it was released: keep the lock, the new entry uses it
    if (this.held.has(mqKey(h.mq))) return;
    this.offsetStore.removeOffset(h.mq);
    await this.queueLocks!.unlock([h.mq]);
  }

  /** An orderly queue locked again after its lock was lost: its cache and offset are stale, so it is rebuilt by a rebalance. */
  private rebuildQueue(mq: MessageQueue, pq: ProcessQueue<MessageExt>): void {
    const k = mqKey(mq);
    if (this.held.get(k)?.pq !== pq) return;
    pq.dropped = true;
    this.held.delete(k);
    this.rebalancer.droppedLocked(mq);
    this.offsetStore.removeOffset(mq);
    this.rebalanceNow();
  }

  /**
   * Starts a consumer: validates options, parses subscriptions (SUBSCRIPTION_PARSE_FAILED here,
   * never later), loads a broadcasting member's offsets file (MALFORMED when it and its .bak exist
   * but cannot be read), registers with every broker and runs the first rebalance.
   */
  static async start(options: PushConsumerOptions): Promise<PushConsumer> {
    checkOptionNames("PushConsumer.start", options, PUSH_CONSUMER_OPTION_NAMES, PUSH_CONSUMER_OPTIONS_NOT_BUILT);
    const o = {
      ...defaultPushConsumerOptions(),
      consumeTimestamp: Date.now() - DEFAULT_CONSUME_TIMESTAMP_AGO_MS,
      ...stripUndefined(options),
    } as Resolved & ClientInstanceOptions;
    checkGroup(o.group);
    if (typeof o.listener !== "function")
      throw new MQError("ILLEGAL_ARGUMENT", 'PushConsumer needs a listener: async (msgs, ctx) => "CONSUME_SUCCESS" | "RECONSUME_LATER".');
    checkBoolean("orderly", o.orderly);
    checkRange("maxReconsumeTimes", o.maxReconsumeTimes, -1, ORDERLY_DEFAULT_MAX_RECONSUME_TIMES);
    o.maxReconsumeTimes = effectiveMaxReconsumeTimes(options.maxReconsumeTimes, o.orderly);
    if (o.model !== "CLUSTERING" && o.model !== "BROADCASTING")
      throw new MQError("ILLEGAL_ARGUMENT", `model must be "CLUSTERING" or "BROADCASTING", got ${shownValue(o.model)}.`);
    if (o.model === "CLUSTERING") checkRetryTopicFits(o.group);
    if (!["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"].includes(o.consumeFromWhere)) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `consumeFromWhere must be CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET or CONSUME_FROM_TIMESTAMP, got ${shownValue(o.consumeFromWhere)}.`,
      );
    }
    checkConsumeTimestamp(o.consumeTimestamp);
    checkRange("pullBatchSize", o.pullBatchSize, 1, 1024);
    checkRange("pullThresholdForQueue", o.pullThresholdForQueue, 1, 65535);
    checkRange("pullThresholdSizeForQueue", o.pullThresholdSizeForQueue, 1, 1024);
    checkRange("consumeConcurrentlyMaxSpan", o.consumeConcurrentlyMaxSpan, 1, 65535);
    checkRange("consumeMessageBatchMaxSize", o.consumeMessageBatchMaxSize, 1, 1024);
    checkRange("consumeThreads", o.consumeThreads, 1, 1000);
    // 0 or below would send back messages the listener is still working on (delivered twice), NaN
    // would run the clean-up every millisecond; a fraction of a minute is fine
    if (typeof o.consumeTimeoutMinutes !== "number" || !Number.isFinite(o.consumeTimeoutMinutes) || o.consumeTimeoutMinutes <= 0)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `consumeTimeoutMinutes must be a number of minutes above 0 (default ${DEFAULT_CONSUME_TIMEOUT_MINUTES}), got ${shownValue(o.consumeTimeoutMinutes)}.`,
      );
    // timer delays: NaN, 0 or below would fire at once (lock renewals, suspended queues retried without pause)
    // 0 is RocketMQ's 10 ms floor, as a listener's value is (orderlySuspendTime)
    checkRange("suspendCurrentQueueTimeMillis", o.suspendCurrentQueueTimeMillis, 0, MAX_TIMER_MS);
    checkRange("rebalanceLockIntervalMs", o.rebalanceLockIntervalMs, 1, MAX_TIMER_MS);
    checkRange("rebalanceLockMaxLiveTimeMs", o.rebalanceLockMaxLiveTimeMs, 1, MAX_TIMER_MS);
    // rebalance rounds and offset persists back to back, every pull timing out on the broker at once
    checkRange("rebalanceIntervalMs", o.rebalanceIntervalMs, 1, MAX_TIMER_MS);
    checkRange("persistConsumerOffsetIntervalMs", o.persistConsumerOffsetIntervalMs, 1, MAX_TIMER_MS);
    checkRange("brokerSuspendMaxTimeMillis", o.brokerSuspendMaxTimeMillis, 1, MAX_BROKER_SUSPEND_MS);
    // 0 redelivers a failed batch at once, as a timer does
    checkRange("reconsumeLaterDelayMs", o.reconsumeLaterDelayMs, 0, MAX_TIMER_MS);
    if (o.offsetStoreDir !== undefined && typeof o.offsetStoreDir !== "string")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `offsetStoreDir must be a directory path (broadcasting offsets are kept there), got ${shownValue(o.offsetStoreDir)}.`,
      );
    getAllocateStrategy(o.allocateStrategy);
    o.allocateOptions = checkAllocateOptions(o.allocateStrategy, o.allocateOptions);
    const subscriptions = SubscriptionTable.build(o.group, o.subscriptions, o.model);
    if (o.allocateStrategy === "BY_CONFIG") checkConfiguredTopics(o.allocateOptions!.messageQueueList!, subscriptions);

    const inst = await ClientInstance.acquire(o);
    await claimGroup(inst, o.group);
    const host = consumerHostOf(inst);
    let c: PushConsumer;
    try {
      const offsetStore: OffsetStore =
        o.model === "BROADCASTING"
          ? new LocalFileOffsetStore(localOffsetsPath(o.offsetStoreDir, localOffsetsClientId(inst.instanceName), o.group))
          : new RemoteOffsetStore(host, o.group);
      await offsetStore.load();
      c = new PushConsumer(host, o.group, o, subscriptions, offsetStore);
    } catch (e) {
      releaseGroup(inst.clientId, o.group);
      await host.release();
      throw e;
    }
    try {
      await c.begin();
    } catch (e) {
      // registered and its actors spawned: a shared instance would keep heartbeating the group (a
      // member consuming nothing, left its share of the queues) and the actors would keep their
      // names from the group's next start; close gives back all of it, locks and group included
      await c.close().catch(() => {});
      throw e;
    }
    return c;
  }

  private async begin(): Promise<void> {
    const { node } = this.host;
    // routes first, so the heartbeat reaches every broker serving the topics; registered after
    // them, so the routes learned here do not each trigger a heartbeat (this one covers them)
    await Promise.all(this.subscriptions.topics().map((t) => this.host.fetchSubscribeQueues(t).catch(() => undefined)));
    this.host.registerConsumer({
      group: this.group,
      consumerData: () => this.consumerData(),
      rebalanceNow: () => this.rebalanceNow(),
      brokersInUse: () => this.rebalancer.brokersInUse(),
    });
    await this.host.sendHeartbeatToAllBrokers();
    if (this.orderlyService)
      node.spawn(this.names.consume, consumeOrderlyServiceMachine, {
        input: { service: this.orderlyService },
        supervision: { strategy: "stop" },
        localOnly: "all",
      });
    else
      node.spawn(this.names.consume, consumeServiceMachine, {
        input: { service: this.consumeService },
        supervision: { strategy: "stop" },
        localOnly: "all",
      });
    // a lock life shorter than the interval would lapse between renewals
    const renew = lockRenewIntervalMs(this.opts.rebalanceLockIntervalMs, this.opts.rebalanceLockMaxLiveTimeMs);
    if (this.queueLocks)
      node.spawn(this.names.locks, queueLocksMachine, {
        input: { locks: this.queueLocks, intervalMs: renew, firstDelayMs: Math.min(REBALANCE_LOCK_FIRST_DELAY_MS, renew) },
        supervision: { strategy: "stop" },
        localOnly: "all",
      });
    node.spawn(this.names.pull, pullServiceMachine, {
      input: { service: this.pullService, inspecting: () => node.inspecting },
      supervision: { strategy: "stop" },
      localOnly: "all",
    });
    await this.rebalancer.doRebalance();
    this.rebalanceTrigger.spawn(this.rebalancer, this.opts.rebalanceIntervalMs);
    this.persistTimer = setInterval(() => void this.persistOffsets(), this.opts.persistConsumerOffsetIntervalMs);
    this.persistTimer.unref();
  }

  /** This consumer's part of each heartbeat. */
  consumerData(): ConsumerData {
    return {
      groupName: this.group,
      consumeType: "CONSUME_PASSIVELY",
      messageModel: this.opts.model,
      consumeFromWhere: this.opts.consumeFromWhere,
      subscriptionDataSet: this.subscriptions.all(),
    };
  }

  /** The client id this consumer is known by in its group. */
  get clientId(): string {
    return this.host.clientId;
  }

  /** The message queues this instance holds now. */
  assignment(): MessageQueue[] {
    return [...this.held.values()].map((h) => ({ ...h.mq }));
  }

  /** Per held queue: cached message count and bytes, the next pull offset (tests, tools). */
  processQueueStats(): { mq: MessageQueue; msgCount: number; msgSize: number; nextOffset: number }[] {
    return [...this.held.values()].map((h) => ({
      mq: { ...h.mq },
      msgCount: h.pq.msgCount,
      msgSize: h.pq.msgSize,
      nextOffset: h.request.nextOffset,
    }));
  }

  /** The process queue of a held queue (tests, tools). */
  processQueue(mq: MessageQueue): ProcessQueue<MessageExt> | undefined {
    return this.held.get(mqKey(mq))?.pq;
  }

  /** Runs a rebalance round now. */
  rebalanceNow(): void {
    this.rebalanceTrigger.request();
  }

  /** Stops pulling (messages already cached are still consumed). */
  async suspend(): Promise<void> {
    this.checkOpen();
    this.suspended = true;
    this.host.node.actorOf(this.names.pull)?.send({ type: "SUSPEND" });
  }

  /** Resumes pulling and rebalances. */
  async resume(): Promise<void> {
    this.checkOpen();
    if (!this.suspended) return;
    this.suspended = false;
    this.host.node.actorOf(this.names.pull)?.send({ type: "RESUME" });
    this.rebalanceNow();
  }

  /** Persists every held queue's offset now (orderly: those whose lock still holds). */
  async persistOffsets(): Promise<void> {
    const { synced, unsynced } = this.persistableQueues();
    await this.offsetStore.persistAll(synced, unsynced).catch((e) => this.persistFailed(e, false));
  }

  /**
   * The held queues whose offsets may be stored (synced), and those kept in memory only (unsynced).
   * An orderly queue whose lock lapsed (its client frozen or cut off past rebalanceLockMaxLiveTimeMs)
   * is left out, and its offset forgotten: another member may have consumed and committed past it
   * meanwhile, and storing it would move the group's offset back. The queue's rebuild reads the
   * broker's offset again when it is relocked. A concurrent queue whose broker connection was lost
   * since its offset was read is unsynced for the same reason, until a rebalance reads it again.
   */
  private persistableQueues(): { synced: MessageQueue[]; unsynced: MessageQueue[] } {
    const locks = this.queueLocks;
    if (!locks) return offsetsToPersist(this.held.values());
    const synced: MessageQueue[] = [];
    for (const h of this.held.values()) if (locks.isLockHeld(h.pq)) synced.push(h.mq);
    return { synced, unsynced: [] };
  }

  /** Stops pulling and consuming, persists offsets, leaves the group, releases everything. */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.doClose();
    return this.closing;
  }

  /** Its pull and consume actors are stopped once close began. */
  private checkOpen(): void {
    if (this.closing) throw new MQError("CLOSED", `The push consumer of group ${this.group} was closed; start a new one.`);
  }

  private async doClose(): Promise<void> {
    const { node } = this.host;
    if (this.persistTimer) clearInterval(this.persistTimer);
    this.persistTimer = null;
    const roundEnded = this.rebalancer.stop();
    this.pullService.stop();
    // Send-backs in flight (RocketMQ's shutdown waits for its consume threads, which send back):
    // from now on a failed one is not followed by a retry copy, and once the listeners stopped,
    // close waits for those in flight to settle, each bounded by its own timeout (5 s; a copy under
    // way, 3 s; a broker whose connection is lost fails them at once). A message whose send-back
    // failed or did not end is not acknowledged: it is still in its process queue, so the offset
    // persisted below stays before it and the group gets it again. After close resolves nothing is
    // sent back, copied or logged.
    for (const s of this.sendBacks) s.beginClose();
    await this.consumeService.stop();
    await this.orderlyService?.stop();
    await Promise.all(this.sendBacks.map((s) => s.close()));
    this.queueLocks?.stop();
    for (const name of [this.names.rebalancer, this.names.pull, this.names.consume, this.names.locks]) node.stopActor(name);
    const mqs = [...this.held.values()].map((h) => h.mq);
    for (const h of this.held.values()) h.pq.dropped = true;
    const { synced, unsynced } = this.persistableQueues();
    // RocketMQ's order, persistConsumerOffset, then unlocks, then unregisterClient, kept at each broker
    // by sending them in that order over its one connection, and awaited together: a broker that is
    // gone or slow is waited on once, not once per step
    const persisted = this.offsetStore.persistAll(synced, unsynced, true).catch((e) => this.persistFailed(e, true));
    // orderly: the queues are free for the group's other members once their offsets are stored,
    // and so are those a rebalance round had just locked for a gain it will not complete
    // a round locking a queue now gives it back itself when its answer comes: wait for it
    await roundEnded;
    const locked = this.queueLocks ? [...mqs, ...this.rebalancer.lockedForGain()] : [];
    const unlocked = locked.length > 0 ? this.queueLocks!.unlock(locked) : undefined;
    this.held.clear();
    await Promise.all([persisted, unlocked, this.host.unregisterConsumer(this.group)]);
    releaseGroup(this.host.clientId, this.group);
    await this.host.release();
  }

  private startPull(req: PullRequest): void {
    this.host.node.actorOf(this.names.pull)?.send({ type: "EXECUTE_PULL", request: req });
  }

  /**
   * PULL_OFFSET_MOVED: adopt the broker's offset, persist it, drop the queue and rebuild it by
   * rebalance. Not persisted for an orderly queue whose lock lapsed (see persistableQueues).
   */
  private async onOffsetIllegal(req: PullRequest): Promise<void> {
    const { mq } = req;
    this.offsetStore.updateAndFreeze(mq, req.nextOffset);
    // a local file that cannot be written must not stop the queue's rebuild (nor reject unhandled)
    if (!this.queueLocks || this.queueLocks.isLockHeld(req.pq))
      await this.offsetStore.persist(mq).catch((e) => this.persistFailed(e, false));
    const k = mqKey(mq);
    // a rebalance during the store may have let the queue go (its release dropped the entry) and
    // held it again: the entry is then the new holding's, which must keep what it consumed
    if (this.held.get(k)?.pq !== req.pq) return;
    this.held.delete(k);
    if (this.queueLocks) this.rebalancer.droppedLocked(mq);
    this.offsetStore.removeOffset(mq);
    this.rebalanceNow();
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] !== undefined) out[k] = o[k];
  return out;
}
