/**
 * The `store` actor: the one way into the MessageStore for appends. It bounds the puts in flight
 * (past the bound a put is answered SYSTEM_BUSY instead of queueing without limit) and lets the
 * store group-commit: puts that arrive together (in one tick, e.g. the requests of one frame)
 * are appended as one group, one commit-log write, one dispatch pass and one fdatasync.
 */
import { assign, setup } from "xstate";
import type { PutBatch, PutResult } from "../../store/index.ts";
import { MQError } from "../../transport/protocol.ts";
import type { DirectHandlers, Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";

export type StoreEvent =
  | { type: "PUT_GROUP"; batches: PutBatch[]; reply?: Replier }
  | { type: "PUT_DONE" }
  | { type: "SHUTDOWN"; reply?: Replier };

/** Puts in flight, counted outside the machine's events so a finished put costs no event. */
export interface PutCounter {
  inFlight: number;
  /** set while draining: the last put to finish sends PUT_DONE so the machine can close */
  draining: boolean;
}

/** One batch's outcome in a PUT_GROUP answer (`{ results: PutOutcome[] }`, in the batches' order). */
export type PutOutcome = { ok: true; result: PutResult } | { ok: false; error: MQError };

function storeFailure(e: unknown): MQError {
  return e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The store failed to append: ${String(e)}`);
}

/**
 * Appends a group gathered by the sender (BrokerContext.put: the puts of one tick) at once and
 * answers it with one reply when every batch has its outcome. Batches past the in-flight bound are
 * answered SYSTEM_BUSY.
 */
function appendGroupNow(
  ctx: BrokerContext,
  puts: PutCounter,
  maxInFlight: number,
  batches: PutBatch[],
  reply: Replier | undefined,
  self: { send(e: StoreEvent): void },
): void {
  const n = batches.length;
  const outcomes = new Array<PutOutcome>(n);
  const accepted = Math.max(0, Math.min(n, maxInFlight - puts.inFlight));
  for (let i = accepted; i < n; i++) {
    outcomes[i] = {
      ok: false,
      error: new MQError(
        "SYSTEM_BUSY",
        `The broker's store has ${puts.inFlight} puts in flight (bound ${maxInFlight}); retry a little later (a send to a queue the caller chose, as ordered messages are, must retry here; others may go to another broker).`,
      ),
    };
  }
  let open = accepted;
  if (open === 0) {
    reply?.ok({ results: outcomes });
    return;
  }
  puts.inFlight += accepted;
  // putMessagesGroup reports every failure as a rejected result, it does not throw
  const results = ctx.store.putMessagesGroup(accepted === n ? batches : batches.slice(0, accepted));
  const settled = (): void => {
    puts.inFlight--;
    if (--open === 0) reply?.ok({ results: outcomes });
    if (puts.draining && puts.inFlight === 0) self.send({ type: "PUT_DONE" });
  };
  for (let i = 0; i < accepted; i++) {
    results[i]!.then(
      (result) => {
        outcomes[i] = { ok: true, result };
        settled();
      },
      (e: unknown) => {
        outcomes[i] = { ok: false, error: storeFailure(e) };
        settled();
      },
    );
  }
}

/** PUT_GROUP while open: the group is appended at once. */
function startGroup(context: StoreContext, event: StoreEvent, self: { send(e: StoreEvent): void }): void {
  if (event.type !== "PUT_GROUP") return;
  appendGroupNow(context.ctx, context.puts, context.maxInFlight, event.batches, event.reply, self);
}

/** The puts the node may hand to {@link startGroup} without a macrostep (state `open` only runs it). */
export const storeDirect: DirectHandlers = { state: "open", handlers: { PUT_GROUP: startGroup } };

export interface StoreContext {
  ctx: BrokerContext;
  puts: PutCounter;
  maxInFlight: number;
  /** answered when the last put in flight completes (shutdown drains first) */
  drainWaiters: Replier[];
}

export interface StoreInput {
  ctx: BrokerContext;
}

export const storeMachine = setup({
  types: {
    context: {} as StoreContext,
    events: {} as StoreEvent,
    input: {} as StoreInput,
  },
  guards: {
    drained: ({ context }) => context.puts.inFlight === 0,
  },
  actions: {
    // the broker cannot tell a queue the producer picked from one the caller chose: an ordered send
    // must not be moved to another broker, and a producer already retries the others elsewhere
    rejectClosing: ({ context, event }) => {
      if (event.type === "PUT_GROUP")
        event.reply?.fail(
          new MQError(
            "SERVICE_NOT_AVAILABLE",
            `Broker ${context.ctx.config.brokerName} is shutting down: retry once it is back. A send to a queue the caller chose (a selector, for ordered messages) must wait for it; other sends may go to another broker.`,
          ),
        );
    },
    startGroup: ({ context, event, self }) => startGroup(context, event, self),
    markDraining: ({ context }) => {
      context.puts.draining = true;
    },
    queueDrainWaiter: assign({
      drainWaiters: ({ context, event }) =>
        event.type === "SHUTDOWN" && event.reply ? [...context.drainWaiters, event.reply] : context.drainWaiters,
    }),
    answerDrainWaiters: ({ context }) => {
      for (const r of context.drainWaiters) r.ok({});
    },
  },
}).createMachine({
  id: "store",
  context: ({ input }) => ({
    ctx: input.ctx,
    puts: { inFlight: 0, draining: false },
    maxInFlight: input.ctx.config.storeMaxInFlight,
    drainWaiters: [],
  }),
  initial: "open",
  states: {
    open: {
      on: {
        PUT_GROUP: { actions: "startGroup" },
        SHUTDOWN: { target: "draining", actions: ["markDraining", "queueDrainWaiter"] },
      },
    },
    draining: {
      always: { guard: "drained", target: "closed" },
      on: {
        PUT_GROUP: { actions: "rejectClosing" },
        // re-evaluates `drained` (the count itself changes outside the machine)
        PUT_DONE: {},
        SHUTDOWN: { actions: "queueDrainWaiter" },
      },
    },
    closed: {
      entry: "answerDrainWaiters",
      on: {
        PUT_GROUP: { actions: "rejectClosing" },
        SHUTDOWN: { actions: ({ event }) => event.type === "SHUTDOWN" && event.reply?.ok({}) },
      },
    },
  },
});
