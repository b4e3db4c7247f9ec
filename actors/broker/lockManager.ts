/**
 * The `locks` actor: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ for orderly consumption (RocketMQ's
 * `RebalanceLockManager` behind `AdminBrokerProcessor#lockBatchMQ`), answered from the pure
 * {@link LockTable}.
 */
import { setup } from "xstate";
import { type LockBatchReply, type LockBatchRequest, type MessageQueue, MQError } from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { LockTable } from "./lockTable.ts";

/** Broker options this part reads (passed through `Broker.start` options). */
export interface LockTuning {
  /** @default 60000 */
  lockMaxLiveTimeMs?: number;
}

type Asked = { reply?: Replier };

export type LocksEvent =
  | ({ type: "LOCK_BATCH_MQ" } & LockBatchRequest & Asked)
  | ({ type: "UNLOCK_BATCH_MQ" } & LockBatchRequest & Asked)
  | ({ type: typeof GROUP_HOLDS_LIVE_LOCK; consumerGroup: string } & Asked)
  | ({ type: string } & Asked);

/**
 * Local request (the send path asks it): whether a group holds any live lock, i.e. consumes
 * orderly (RocketMQ's `isLockAllExpired`). Replies `{ locked }`.
 */
export const GROUP_HOLDS_LIVE_LOCK = "GROUP_HOLDS_LIVE_LOCK";

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
  if (typeof e.clientId !== "string" || e.clientId.length === 0)
    throw new MQError("INVALID_PARAMETER", "LOCK_BATCH_MQ / UNLOCK_BATCH_MQ need a clientId.");
  if (!Array.isArray(e.mqSet))
    throw new MQError("INVALID_PARAMETER", "LOCK_BATCH_MQ / UNLOCK_BATCH_MQ need an mqSet array of { topic, brokerName, queueId }.");
  const mqs = e.mqSet.filter(
    (q): q is MessageQueue => !!q && typeof q.topic === "string" && typeof q.brokerName === "string" && Number.isInteger(q.queueId),
  );
  return { group: e.consumerGroup, clientId: e.clientId, mqs };
}

/** The `locks` actor. */
export const locksMachine = setup({
  types: {
    context: {} as LocksContext,
    events: {} as LocksEvent,
    input: {} as LocksInput,
  },
  actions: {
    answer: ({ context, event }) => {
      const reply = event.reply;
      try {
        if (event.type === "LOCK_BATCH_MQ") {
          const { group, clientId, mqs } = lockArgs(event as Partial<LockBatchRequest>);
          const out: LockBatchReply = { lockOKMQSet: context.table.tryLockBatch(group, mqs, clientId) };
          reply?.ok(out);
        } else if (event.type === "UNLOCK_BATCH_MQ") {
          const { group, clientId, mqs } = lockArgs(event as Partial<LockBatchRequest>);
          context.table.unlockBatch(group, mqs, clientId);
          reply?.ok({});
        } else if (event.type === GROUP_HOLDS_LIVE_LOCK) {
          reply?.ok({ locked: !context.table.isLockAllExpired(String((event as { consumerGroup?: unknown }).consumerGroup)) });
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
  context: ({ input }) => {
    const maxLive = (input.ctx.config as LockTuning).lockMaxLiveTimeMs;
    return { ctx: input.ctx, table: new LockTable(maxLive ? { lockMaxLiveTimeMs: maxLive } : {}) };
  },
  initial: "serving",
  states: {
    serving: {
      on: { "*": { actions: "answer" } },
    },
  },
});
