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
      on: { "*": { actions: "answer" } },
    },
  },
});
