/**
 * The broker's pull processing (RocketMQ's `PullMessageProcessor` + `DefaultPullMessageResultHandler`,
 * reference §7): the checks in RocketMQ's order, the store read with the subscription's filter, the
 * status -> response-code mapping, the offset committed on a pull, and the hand-over of a pull that
 * found nothing to the hold service (long polling). The reply body is the stored record slices.
 *
 * There is no per-queue actor (DESIGN's `queue` actor): the consume queues live in the store, which
 * already answers min/max offsets and announces arrivals per queue, and a queue actor in between
 * would add one event hop to every pull. The pull, hold, offsets and consumers actors share the
 * broker's offset table and consumer table directly (one per broker, see `consumerOffsetsOf` and
 * `consumerTableOf`), so a pull costs one actor event and one store read.
 *
 * Tuning options the consumption actors read from the broker's options, besides `longPolling`:
 * `enablePropertyFilter` (default true: SQL92 is part of the public subscription API),
 * `shortPollingTimeMills` (1000), `holdCheckIntervalMs` (5000), `channelExpiredTimeoutMs`
 * (120000), `clientScanIntervalMs` (10000), `flushConsumerOffsetIntervalMs` (5000),
 * `lockMaxLiveTimeMs` (60000), `slaveReadEnable` (false).
 */
import { setup } from "xstate";
import { compileSql92, parseSubscription, type Sql92Predicate } from "../../filter/index.ts";
import type { GetMessageResult, GetMessageStatus, MessageFilter } from "../../store/index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import {
  BrokerActor,
  MASTER_ID,
  MQError,
  Perm,
  type PullMessageReply,
  type PullMessageRequest,
  type PullResponseStatus,
  PullSysFlag,
  type SubscriptionData,
  shownValue,
  topicCreateCommand,
} from "../../transport/protocol.ts";
import type { DirectHandlers, Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { type BrokerStats, brokerStatsOf } from "./brokerStats.ts";
import { type ConsumerTable, consumerTableOf, isBroadcastingGroup } from "./consumerManager.ts";
import { type ConsumerOffsetManager, consumerOffsetsOf } from "./consumerOffsetManager.ts";
import { haClientOf } from "./haClient.ts";
import { type HaTuning, haTuningOf, suggestPullingFromSlave } from "./haTuning.ts";

/** Messages per pull when the request gives no valid number (`pullBatchSize`). */
export const DEFAULT_PULL_BATCH_SIZE = 32;
/** How long a pull waits under short polling (`shortPollingTimeMills`). */
export const DEFAULT_SHORT_POLLING_TIME_MS = 1_000;
/**
 * Longest a pull is held under long polling, whatever `suspendTimeoutMillis` the client asks
 * (RocketMQ's clients ask 15 000 to 30 000; RocketMQ itself takes any value): past it the pull is
 * answered PULL_NOT_FOUND and the client pulls again, so a broker never keeps a pull from a client
 * that may be long gone.
 */
export const MAX_SUSPEND_TIMEOUT_MS = 300_000;
/** Compiled subscriptions kept per broker before the cache starts over. */
const FILTER_CACHE_LIMIT = 4096;

/** Broker options this part reads (passed through `Broker.start` options). */
export interface PullTuning {
  /** evaluate SQL92 subscriptions on the broker (RocketMQ's `enablePropertyFilter`). @default true */
  enablePropertyFilter?: boolean;
  /** let consumers read from slaves when they fall behind (`slaveReadEnable`). @default false */
  slaveReadEnable?: boolean;
  /** how long a pull waits when `longPolling` is false (`shortPollingTimeMills`). @default 1000 */
  shortPollingTimeMills?: number;
}

/** A subscription ready for the store and the hold service. */
export interface ResolvedFilter {
  sub: SubscriptionData | null;
  /** what the store checks; null matches everything */
  filter: MessageFilter | null;
  /** the SQL92 selector, for arrival checks on properties */
  predicate: Sql92Predicate | null;
}

/** A pull waiting in the hold service. */
export interface HeldPull {
  req: PullMessageRequest;
  reply: Replier;
  /** `topic@queueId` */
  key: string;
  /** when it was held ({@link monotonicNow}, as `deadline`) */
  suspendTimestamp: number;
  /** when it is answered (PULL_NOT_FOUND) at the latest */
  deadline: number;
  filter: ResolvedFilter;
}

/** What a pull comes to: an answer now, or a wait in the hold service. */
export type PullOutcome =
  | { kind: "answer"; fields: PullMessageReply; buffers: Buffer[] }
  | { kind: "suspend"; holdMs: number; filter: ResolvedFilter };

/** The parts of a broker a pull uses, resolved once. */
export interface PullServices {
  ctx: BrokerContext;
  offsets: ConsumerOffsetManager;
  consumers: ConsumerTable;
  /** msgGetTotalTodayNow and getTransferedTps (one call per pull that found messages) */
  stats: BrokerStats;
  filters: Map<string, ResolvedFilter>;
  enablePropertyFilter: boolean;
  slaveReadEnable: boolean;
  longPolling: boolean;
  shortPollingMs: number;
  isSlave: boolean;
  /** a slave replicating from a reachable master (false on a master) */
  masterOnline: () => boolean;
  /** the "consume too slow" rule's figures (accessMessageInMemoryMaxRatio, physicalMemoryBytes) */
  memoryRule: Required<HaTuning>;
}

const services = new WeakMap<BrokerContext, PullServices>();

/** The pull services of a broker, shared by the `pull` and `hold` actors. */
export function pullServicesOf(ctx: BrokerContext): PullServices {
  let s = services.get(ctx);
  if (!s) {
    const tuning = ctx.config as PullTuning;
    s = {
      ctx,
      offsets: consumerOffsetsOf(ctx),
      consumers: consumerTableOf(ctx),
      stats: brokerStatsOf(ctx),
      filters: new Map(),
      enablePropertyFilter: tuning.enablePropertyFilter ?? true,
      slaveReadEnable: tuning.slaveReadEnable ?? false,
      longPolling: ctx.config.longPolling,
      shortPollingMs: tuning.shortPollingTimeMills ?? DEFAULT_SHORT_POLLING_TIME_MS,
      isSlave: ctx.config.role === "SLAVE",
      masterOnline: ctx.config.role === "SLAVE" ? () => haClientOf(ctx).status.connected : () => false,
      memoryRule: haTuningOf(ctx.config),
    };
    services.set(ctx, s);
  }
  return s;
}

const MATCH_ALL: ResolvedFilter = { sub: null, filter: null, predicate: null };

/** The store filter of a subscription, compiled once per (type, expression). */
function resolveFilter(s: PullServices, sub: SubscriptionData): ResolvedFilter {
  const cacheKey = `${sub.expressionType}\u0000${sub.subString}`;
  let f = s.filters.get(cacheKey);
  if (f) return f;
  f = compileFilter(sub);
  if (s.filters.size >= FILTER_CACHE_LIMIT) s.filters.clear();
  s.filters.set(cacheKey, f);
  return f;
}

function compileFilter(sub: SubscriptionData): ResolvedFilter {
  let f: ResolvedFilter;
  if (sub.expressionType === "SQL92") {
    const predicate = compileSql92(sub.subString);
    f = { sub, filter: { matchProperties: predicate }, predicate };
  } else if (sub.subString === "*" || !Array.isArray(sub.codeSet) || sub.codeSet.length === 0) {
    f = { ...MATCH_ALL, sub };
  } else {
    f = { sub, filter: { tagsCodes: new Set(sub.codeSet.map((c) => c | 0)) }, predicate: null };
  }
  return f;
}

function checkRequest(req: PullMessageRequest): void {
  if (typeof req.consumerGroup !== "string" || req.consumerGroup.length === 0)
    throw new MQError("INVALID_PARAMETER", "PULL_MESSAGE needs a consumerGroup.");
  if (typeof req.topic !== "string" || req.topic.length === 0) throw new MQError("INVALID_PARAMETER", "PULL_MESSAGE needs a topic.");
  if (!Number.isInteger(req.queueId))
    throw new MQError("INVALID_PARAMETER", `PULL_MESSAGE needs an integer queueId, got ${String(req.queueId)}.`);
  if (!Number.isInteger(req.queueOffset) || req.queueOffset < 0)
    throw new MQError("INVALID_PARAMETER", `PULL_MESSAGE needs a queueOffset >= 0, got ${String(req.queueOffset)}.`);
  // the offset a pull commits is stored as the group's, as UPDATE_CONSUMER_OFFSET stores one: 1.5
  // would make every later pull from it invalid, Infinity read back as 0 after a restart
  if (
    typeof req.sysFlag === "number" &&
    req.sysFlag & PullSysFlag.COMMIT_OFFSET &&
    !(Number.isSafeInteger(req.commitOffset) && req.commitOffset! >= 0)
  )
    throw new MQError(
      "INVALID_PARAMETER",
      `PULL_MESSAGE with the commit-offset flag needs an integer commitOffset >= 0, got ${shownValue(req.commitOffset)}.`,
    );
}

/**
 * The filter of a pull's subscription (reference §7.2 step 8), parsed and compiled once per
 * expression. `broadcastAllowed` is the group's consumeBroadcastEnable.
 */
function filterOf(s: PullServices, req: PullMessageRequest, sysFlag: number, broadcastAllowed: boolean): ResolvedFilter {
  if (!(sysFlag & PullSysFlag.SUBSCRIPTION)) return resolveFilter(s, registeredSubscription(s, req, broadcastAllowed));
  const f = pullSubscriptionFilter(s, req);
  // RocketMQ checks this only on the registered-subscription path, since its push consumers send
  // no subscription; actormq's always do, so a broadcasting group known by heartbeat is checked here too
  if (!broadcastAllowed && s.consumers.group(req.consumerGroup)?.messageModel === "BROADCASTING") throw broadcastRefused(s, req);
  return f;
}

function broadcastRefused(s: PullServices, req: PullMessageRequest): MQError {
  return new MQError(
    "NO_PERMISSION",
    `Group ${req.consumerGroup} may not consume in broadcasting mode on broker ${s.ctx.config.brokerName} (consumeBroadcastEnable is false); consume in clustering mode or enable it for the group.`,
  );
}

/** The filter of the subscription the pull carries. */
function pullSubscriptionFilter(s: PullServices, req: PullMessageRequest): ResolvedFilter {
  const expr = typeof req.subscription === "string" ? req.subscription : "*";
  const sql = req.expressionType === "SQL92";
  const cacheKey = `pull\u0000${sql ? "SQL92" : "TAG"}\u0000${expr}`;
  let f = s.filters.get(cacheKey);
  if (!f) {
    f = compileFilter(parseSubscription(req.topic, sql ? { sql92: expr } : expr, req.subVersion ?? 0));
    if (s.filters.size >= FILTER_CACHE_LIMIT) s.filters.clear();
    s.filters.set(cacheKey, f);
  }
  return f;
}

/** The subscription the group registered by heartbeat. */
function registeredSubscription(s: PullServices, req: PullMessageRequest, broadcastAllowed: boolean): SubscriptionData {
  const { ctx } = s;
  const g = s.consumers.group(req.consumerGroup);
  if (!g) {
    throw new MQError(
      "SUBSCRIPTION_NOT_EXIST",
      `the consumer's group info not exist: group ${req.consumerGroup} has not sent a heartbeat to broker ${ctx.config.brokerName}; send one first.`,
    );
  }
  if (g.messageModel === "BROADCASTING" && !broadcastAllowed) throw broadcastRefused(s, req);
  const sub = g.subscriptions.get(req.topic);
  if (!sub)
    throw new MQError(
      "SUBSCRIPTION_NOT_EXIST",
      `the consumer's subscription not exist: group ${req.consumerGroup} has no subscription to ${req.topic}; subscribe and heartbeat first.`,
    );
  if ((sub.subVersion ?? 0) < (req.subVersion ?? 0)) {
    throw new MQError(
      "SUBSCRIPTION_NOT_LATEST",
      `The broker's subscription of group ${req.consumerGroup} to ${req.topic} is older than the pull's; retry after the next heartbeat.`,
    );
  }
  return sub;
}

function responseStatus(status: GetMessageStatus, requestOffset: number): PullResponseStatus {
  switch (status) {
    case "FOUND":
      return "SUCCESS";
    case "MESSAGE_WAS_REMOVING":
    case "NO_MATCHED_MESSAGE":
      return "PULL_RETRY_IMMEDIATELY";
    case "NO_MATCHED_LOGIC_QUEUE":
    case "NO_MESSAGE_IN_QUEUE":
      return requestOffset !== 0 ? "PULL_OFFSET_MOVED" : "PULL_NOT_FOUND";
    case "OFFSET_FOUND_NULL":
    case "OFFSET_OVERFLOW_ONE":
      return "PULL_NOT_FOUND";
    case "OFFSET_OVERFLOW_BADLY":
    case "OFFSET_TOO_SMALL":
      return "PULL_OFFSET_MOVED";
  }
}

/**
 * Processes one pull. `brokerAllowSuspend` is true for a pull as it arrives and false when the
 * hold service re-executes it: a re-executed pull is never held again and never commits the
 * offset it carries. Throws MQError for a failed check.
 */
export function processPull(s: PullServices, req: PullMessageRequest, brokerAllowSuspend: boolean): PullOutcome {
  const { ctx } = s;
  const name = ctx.config.brokerName;
  checkRequest(req);
  const sysFlag = typeof req.sysFlag === "number" ? req.sysFlag : 0;
  // 1. broker readable
  if (!(ctx.config.brokerPermission & Perm.READ))
    throw new MQError("NO_PERMISSION", `the broker[${name}] pulling message is forbidden; pull from another broker.`);
  // 3. subscription group exists (or is auto-created). A held pull re-executed is not a member
  // speaking now (its consumer may be gone): it must not bring back a group deleted meanwhile
  const groupCfg = brokerAllowSuspend ? ctx.groups.findOrAutoCreate(req.consumerGroup) : ctx.groups.get(req.consumerGroup);
  if (!groupCfg) {
    throw new MQError(
      "SUBSCRIPTION_GROUP_NOT_EXIST",
      `subscription group [${req.consumerGroup}] does not exist on broker ${name}; create it (autoCreateSubscriptionGroup is off).`,
    );
  }
  // 4. consume enabled
  if (!groupCfg.consumeEnable)
    throw new MQError("NO_PERMISSION", `subscription group no permission, ${req.consumerGroup}: consumption is disabled for this group.`);
  // 5. topic exists, 6. readable
  const tc = ctx.topics.get(req.topic);
  if (!tc)
    throw new MQError(
      "TOPIC_NOT_EXIST",
      `topic[${req.topic}] not exist, apply first please! Create it with \`${topicCreateCommand(req.topic)}\` (broker ${name}).`,
    );
  if (!(tc.perm & Perm.READ)) throw new MQError("NO_PERMISSION", `the topic[${req.topic}] pulling message is forbidden on broker ${name}.`);
  // 7. queue id in range
  if (req.queueId < 0 || req.queueId >= tc.readQueueNums) {
    throw new MQError(
      "INVALID_PARAMETER",
      `queueId[${req.queueId}] is illegal, topic:[${req.topic}] topicConfig.readQueueNums:[${tc.readQueueNums}] on broker ${name}.`,
    );
  }
  // 8. subscription
  const filter = filterOf(s, req, sysFlag, groupCfg.consumeBroadcastEnable !== false);
  // 9. SQL92 needs property filtering
  if (filter.predicate && !s.enablePropertyFilter) {
    throw new MQError(
      "SYSTEM_ERROR",
      `The broker ${name} does not support SQL92 filtering (enablePropertyFilter is false); subscribe by tag or enable it.`,
    );
  }

  const maxMsgNums = Number.isInteger(req.maxMsgNums) && req.maxMsgNums > 0 ? req.maxMsgNums : DEFAULT_PULL_BATCH_SIZE;
  // 10. a pending server-side reset is answered once, as OFFSET_MOVED to the reset offset; one left
  // by a group whose members came back broadcasting is dropped: it would move only this member
  const reset = s.offsets.takeReset(req.consumerGroup, req.topic, req.queueId);
  if (reset !== undefined && !isBroadcastingGroup(ctx, req.consumerGroup)) {
    return {
      kind: "answer",
      fields: {
        status: "PULL_OFFSET_MOVED",
        nextBeginOffset: reset,
        minOffset: ctx.store.getMinOffset(req.topic, req.queueId),
        maxOffset: ctx.store.getMaxOffset(req.topic, req.queueId),
        suggestWhichBrokerId: MASTER_ID,
        messageCount: 0,
      },
      buffers: [],
    };
  }
  // 11. the store
  const r: GetMessageResult = ctx.store.getMessage(
    req.consumerGroup,
    req.topic,
    req.queueId,
    req.queueOffset,
    maxMsgNums,
    filter.filter,
    req.maxMsgBytes,
    req.verifyRecords === true,
  );
  let status = responseStatus(r.status, req.queueOffset);
  let nextBeginOffset = r.nextBeginOffset;
  if (r.messageCount > 0) {
    s.offsets.notePulled(req.consumerGroup, req.topic, r.messageCount);
    s.stats.noteGet(r.messageCount);
  }
  const tooSlow = r.suggestPullingFromSlave || suggestPullingFromSlave(ctx.store.maxPhyOffset, r.lastPhysicalOffset, s.memoryRule);
  let suggestWhichBrokerId = s.slaveReadEnable ? (tooSlow ? groupCfg.whichBrokerWhenConsumeSlowly : groupCfg.brokerId) : MASTER_ID;
  if (s.isSlave) {
    // a slave never moves the consumer's offset; it sends it back to the master
    if (status !== "SUCCESS" && status !== "PULL_RETRY_IMMEDIATELY") nextBeginOffset = req.queueOffset;
    if (status === "PULL_OFFSET_MOVED") {
      status = "PULL_RETRY_IMMEDIATELY";
      suggestWhichBrokerId = groupCfg.brokerId;
    } else if (status !== "SUCCESS" && s.masterOnline()) {
      // nothing to serve here while the master is up: the consumer goes back to it at once, not held
      // on the slave (reference §7.4)
      status = "PULL_RETRY_IMMEDIATELY";
      suggestWhichBrokerId = MASTER_ID;
    }
  }
  // the puller holds the queue (hand-over); a pull of a member that already let the queue go was
  // on its way before the release and does not commit its offset
  const mayCommit =
    brokerAllowSuspend && !s.isSlave && typeof req.clientId === "string" && req.clientId.length > 0
      ? s.offsets.notePuller(req.consumerGroup, req.topic, req.queueId, req.clientId)
      : true;
  if (mayCommit && brokerAllowSuspend && sysFlag & PullSysFlag.COMMIT_OFFSET && !s.isSlave) {
    // checkRequest made sure a pull with the flag carries an integer >= 0
    if (!s.offsets.hasPendingReset(req.consumerGroup, req.topic, req.queueId))
      s.offsets.commitOffset(req.consumerGroup, req.topic, req.queueId, req.commitOffset!);
  }
  if (status === "PULL_NOT_FOUND" && brokerAllowSuspend && sysFlag & PullSysFlag.SUSPEND) {
    const asked = typeof req.suspendTimeoutMillis === "number" ? Math.min(req.suspendTimeoutMillis, MAX_SUSPEND_TIMEOUT_MS) : 0;
    const holdMs = s.longPolling ? asked : s.shortPollingMs;
    if (holdMs > 0) return { kind: "suspend", holdMs, filter };
  }
  return {
    kind: "answer",
    fields: { status, nextBeginOffset, minOffset: r.minOffset, maxOffset: r.maxOffset, suggestWhichBrokerId, messageCount: r.messageCount },
    buffers: r.buffers,
  };
}

/** A PULL_NOT_FOUND answer at the request's own offset (a held pull answered at close). */
export function notFoundReply(ctx: BrokerContext, req: PullMessageRequest): PullMessageReply {
  return {
    status: "PULL_NOT_FOUND",
    nextBeginOffset: req.queueOffset,
    minOffset: ctx.store.getMinOffset(req.topic, req.queueId),
    maxOffset: ctx.store.getMaxOffset(req.topic, req.queueId),
    suggestWhichBrokerId: MASTER_ID,
    messageCount: 0,
  };
}

/** Answers a pull through its replier; errors other than MQError become SYSTEM_ERROR. */
export function answerPull(s: PullServices, req: PullMessageRequest, reply: Replier, outcome: PullOutcome): void {
  if (outcome.kind === "answer") {
    if (outcome.buffers.length > 0) reply.ok(outcome.fields, outcome.buffers);
    else reply.ok(outcome.fields);
    return;
  }
  // monotonic: a wall clock step must neither answer every held pull at once nor hold them for hours
  const now = monotonicNow();
  const held: HeldPull = {
    req,
    reply,
    key: `${req.topic}@${req.queueId}`,
    suspendTimestamp: now,
    deadline: now + outcome.holdMs,
    filter: outcome.filter,
  };
  try {
    s.ctx.ref(BrokerActor.HOLD).send({ type: "HOLD_PULL", held });
  } catch {
    reply.ok(notFoundReply(s.ctx, req));
  }
}

/** Turns anything thrown while pulling into the MQError to answer. */
export function pullError(s: PullServices, e: unknown): MQError {
  if (e instanceof MQError) return e;
  s.ctx.logger.error({ err: e }, "pull failed");
  return new MQError("SYSTEM_ERROR", `The broker ${s.ctx.config.brokerName} failed to process the pull: ${String(e)}`);
}

// ---------------------------------------------------------------------------------------------
// The `pull` actor

export type PullEvent = ({ type: "PULL_MESSAGE" } & PullMessageRequest & { reply?: Replier }) | { type: string; reply?: Replier };

export interface PullContext {
  services: PullServices;
}

export interface PullInput {
  ctx: BrokerContext;
}

/** PULL_MESSAGE: one store read, then the answer or a hand-over to `hold`. */
function handlePull(context: PullContext, event: PullEvent): void {
  const reply = event.reply;
  const s = context.services;
  if (!reply) return; // a pull sent one-way has nobody to answer
  const req = event as unknown as PullMessageRequest;
  let outcome: PullOutcome;
  try {
    outcome = processPull(s, req, true);
  } catch (e) {
    reply.fail(pullError(s, e));
    return;
  }
  answerPull(s, req, reply, outcome);
}

/** The pulls the node may hand to {@link handlePull} without a macrostep (state `serving` only runs it). */
export const pullDirect: DirectHandlers = { state: "serving", handlers: { PULL_MESSAGE: handlePull } };

/** The `pull` actor: one event per pull request, one store read, the answer or a hand-over to `hold`. */
export const pullMachine = setup({
  types: {
    context: {} as PullContext,
    events: {} as PullEvent,
    input: {} as PullInput,
  },
  actions: {
    pull: ({ context, event }) => handlePull(context, event),
    unsupported: ({ context, event }) => {
      event.reply?.fail(
        new MQError(
          "REQUEST_CODE_NOT_SUPPORTED",
          `Broker ${context.services.ctx.config.brokerName} does not handle ${event.type} on actor "pull".`,
        ),
      );
    },
  },
}).createMachine({
  id: "pull",
  context: ({ input }) => ({ services: pullServicesOf(input.ctx) }),
  initial: "serving",
  states: {
    serving: {
      on: {
        PULL_MESSAGE: { actions: "pull" },
        "*": { actions: "unsupported" },
      },
    },
  },
});
