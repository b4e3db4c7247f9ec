/**
 * The `locks` actor: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ for orderly consumption (RocketMQ's
 * `RebalanceLockManager` behind `AdminBrokerProcessor#lockBatchMQ`), answered from the pure
 * {@link LockTable}.
 */
import { fromCallback, setup } from "xstate";
import { type LockBatchReply, type LockBatchRequest, type MessageQueue, MQError } from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { DEFAULT_LOCK_MAX_LIVE_TIME_MS, LockTable } from "./lockTable.ts";
import { checkGroupName } from "./subscriptionGroupManager.ts";

/** Broker options this part reads (passed through `Broker.start` options). */
export interface LockTuning {
  /** @default 60000 */
  lockMaxLiveTimeMs?: number;
}

type Asked = { reply?: Replier };

export type LocksEvent =
  | ({ type: "LOCK_BATCH_MQ" } & LockBatchRequest & Asked)
  | ({ type: "UNLOCK_BATCH_MQ" } & LockBatchRequest & Asked)
  | { type: "SWEEP" }
  | ({ type: string } & Asked);

const tables = new WeakMap<BrokerContext, LockTable>();

/**
 * The lock table of a broker, shared by the `locks` actor and the send path (whether a group holds
 * a live lock, RocketMQ's `isLockAllExpired`).
 */
export function lockTableOf(ctx: BrokerContext): LockTable {
  let t = tables.get(ctx);
  if (!t) {
    const maxLive = (ctx.config as LockTuning).lockMaxLiveTimeMs;
    tables.set(ctx, (t = new LockTable(maxLive ? { lockMaxLiveTimeMs: maxLive } : {})));
  }
  return t;
}

export interface LocksContext {
  ctx: BrokerContext;
  table: LockTable;
}

export interface LocksInput {
  ctx: BrokerContext;
}

/** Checks the request's fields; returns the queues asked for. */
function lockArgs(e: Partial<LockBatchRequest>): { group: string; clientId: string; mqs: MessageQueue[] } {
  if (typeof e.consumerGroup !== "string" || e.consumerGroup.length === 0)
    throw new MQError("INVALID_PARAMETER", "LOCK_BATCH_MQ / UNLOCK_BATCH_MQ need a consumerGroup.");
  checkGroupName(e.consumerGroup);
  if (typeof e.clientId !== "string" || e.clientId.length === 0)
    throw new MQError("INVALID_PARAMETER", "LOCK_BATCH_MQ / UNLOCK_BATCH_MQ need a clientId.");
  if (!Array.isArray(e.mqSet))
    throw new MQError("INVALID_PARAMETER", "LOCK_BATCH_MQ / UNLOCK_BATCH_MQ need an mqSet array of { topic, brokerName, queueId }.");
  // refused whole, as RocketMQ's decoding fails on an entry that is no message queue (a negative
  // queue id is our own check): left out, the client would take the queue for not granted (or,
  // unlocking, for let go) without knowing why
  e.mqSet.forEach((q: unknown, i) => {
    const why = badQueue(q);
    if (why)
      throw new MQError(
        "INVALID_PARAMETER",
        `LOCK_BATCH_MQ / UNLOCK_BATCH_MQ mqSet[${i}] ${why}: send each entry as { topic, brokerName, queueId } with a non-empty topic and brokerName and an integer queueId >= 0.`,
      );
  });
  return { group: e.consumerGroup, clientId: e.clientId, mqs: e.mqSet };
}

/** What is wrong with an mqSet entry, or undefined when it is a message queue. */
function badQueue(q: unknown): string | undefined {
  if (typeof q !== "object" || q === null) return `is ${q === null ? "null" : typeof q}, not an object`;
  const { topic, brokerName, queueId } = q as Partial<MessageQueue>;
  if (typeof topic !== "string" || topic.length === 0) return "has no topic";
  if (typeof brokerName !== "string" || brokerName.length === 0) return "has no brokerName";
  if (!Number.isInteger(queueId) || (queueId as number) < 0) return `has queueId ${JSON.stringify(queueId)}, not an integer >= 0`;
  return undefined;
}

/** Why `mq` is not a queue of this broker (another broker's, a topic it does not have, a queue id past its read queues holding no messages), or undefined. */
function notHere(ctx: BrokerContext, mq: MessageQueue): MQError | undefined {
  const name = ctx.config.brokerName;
  if (mq.brokerName !== name)
    return new MQError(
      "INVALID_PARAMETER",
      `queue ${mq.topic}@${mq.brokerName}@${mq.queueId} is broker ${mq.brokerName}'s, not ${name}'s: lock it on its own broker.`,
    );
  const tc = ctx.topics.get(mq.topic);
  if (!tc)
    return new MQError(
      "TOPIC_NOT_EXIST",
      `topic[${mq.topic}] not exist on broker ${name}: lock queues of the topic's route (update it, or create the topic).`,
    );
  // one past the read count that holds entries is still this broker's: a member whose route is older
  // than the shrink lets it go at its next route refresh, and commits it then only under its lock
  if (mq.queueId >= tc.readQueueNums && ctx.store.getMaxOffset(mq.topic, mq.queueId) === 0)
    return new MQError(
      "INVALID_PARAMETER",
      `queueId[${mq.queueId}] is illegal, topic:[${mq.topic}] topicConfig.readQueueNums:[${tc.readQueueNums}] on broker ${name}: lock queues of the topic's route.`,
    );
  return undefined;
}

/**
 * The queues of `mqs` this broker has: only they are locked, so no client can grow the table with
 * made-up queues. Others are left out (not granted: a client whose route is older than a topic's
 * shrink or deletion keeps its other locks); a request of none of them is refused with the reason.
 */
function ownQueues(ctx: BrokerContext, mqs: MessageQueue[]): MessageQueue[] {
  let refusal: MQError | undefined;
  const own = mqs.filter((mq) => {
    const why = notHere(ctx, mq);
    refusal ??= why;
    return !why;
  });
  if (own.length === 0 && refusal) throw refusal;
  return own;
}

/** Drops expired lock entries every lock life (one-way: the actor just needs the tick). */
const sweepTicker = fromCallback<{ type: string }, { intervalMs: number }>(({ sendBack, input }) => {
  const t = setInterval(() => sendBack({ type: "SWEEP" }), input.intervalMs);
  t.unref?.();
  return () => clearInterval(t);
});

/** The `locks` actor. */
export const locksMachine = setup({
  types: {
    context: {} as LocksContext,
    events: {} as LocksEvent,
    input: {} as LocksInput,
  },
  actors: { sweepTicker },
  actions: {
    answer: ({ context, event }) => {
      const reply = (event as Asked).reply;
      try {
        if (event.type === "LOCK_BATCH_MQ") {
          const { group, clientId, mqs } = lockArgs(event as Partial<LockBatchRequest>);
          const out: LockBatchReply = { lockOKMQSet: context.table.tryLockBatch(group, ownQueues(context.ctx, mqs), clientId) };
          reply?.ok(out);
        } else if (event.type === "UNLOCK_BATCH_MQ") {
          const { group, clientId, mqs } = lockArgs(event as Partial<LockBatchRequest>);
          context.table.unlockBatch(group, mqs, clientId);
          reply?.ok({});
        } else {
          throw new MQError(
            "REQUEST_CODE_NOT_SUPPORTED",
            `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "locks".`,
          );
        }
      } catch (e) {
        reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to handle ${event.type}: ${String(e)}`));
      }
    },
  },
}).createMachine({
  id: "locks",
  context: ({ input }) => ({ ctx: input.ctx, table: lockTableOf(input.ctx) }),
  initial: "serving",
  states: {
    serving: {
      invoke: {
        src: "sweepTicker",
        input: ({ context }) => ({
          intervalMs: (context.ctx.config as LockTuning).lockMaxLiveTimeMs || DEFAULT_LOCK_MAX_LIVE_TIME_MS,
        }),
      },
      on: {
        SWEEP: { actions: ({ context }) => context.table.purgeExpired() },
        "*": { actions: "answer" },
      },
    },
  },
});
