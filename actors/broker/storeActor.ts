/**
 * The `store` actor: the one way into the MessageStore for appends. It bounds the puts in flight
 * (past the bound a put is answered SYSTEM_BUSY instead of queueing without limit) and lets the
 * store group-commit: puts that arrive together (in one tick, e.g. the requests of one frame)
 * are appended as one group, one commit-log write, one dispatch pass and one fdatasync.
 */
import { assign, setup } from "xstate";
import type { PutBatch } from "../../store/index.ts";
import { MQError } from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";

export type StoreEvent =
  | { type: "PUT_MESSAGES"; batch: PutBatch; reply?: Replier }
  | { type: "PUT_DONE" }
  | { type: "SHUTDOWN"; reply?: Replier };

/** Puts in flight, counted outside the machine's events so a finished put costs no event. */
export interface PutCounter {
  inFlight: number;
  /** set while draining: the last put to finish sends PUT_DONE so the machine can close */
  draining: boolean;
  /** puts of this tick, appended together in a microtask */
  waiting: PutBatch[];
  waitingReplies: Array<Replier | undefined>;
}

/** Appends the puts gathered this tick as one group and answers each. */
function appendWaiting(ctx: BrokerContext, puts: PutCounter, self: { send(e: StoreEvent): void }): void {
  const batches = puts.waiting;
  const replies = puts.waitingReplies;
  puts.waiting = [];
  puts.waitingReplies = [];
  let results: Array<Promise<unknown>>;
  try {
    results = ctx.store.putMessagesGroup(batches);
  } catch (e) {
    results = batches.map(() => Promise.reject(e));
  }
  for (let i = 0; i < results.length; i++) {
    const reply = replies[i];
    results[i]!.then(
      (result) => {
        puts.inFlight--;
        reply?.ok({ result });
        if (puts.draining && puts.inFlight === 0) self.send({ type: "PUT_DONE" });
      },
      (e: unknown) => {
        puts.inFlight--;
        reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The store failed to append: ${String(e)}`));
        if (puts.draining && puts.inFlight === 0) self.send({ type: "PUT_DONE" });
      },
    );
  }
}

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
    overBound: ({ context }) => context.puts.inFlight >= context.maxInFlight,
    drained: ({ context }) => context.puts.inFlight === 0,
  },
  actions: {
    rejectBusy: ({ context, event }) => {
      if (event.type !== "PUT_MESSAGES") return;
      event.reply?.fail(
        new MQError(
          "SYSTEM_BUSY",
          `The broker's store has ${context.puts.inFlight} puts in flight (bound ${context.maxInFlight}); retry a little later or on another broker.`,
        ),
      );
    },
    rejectClosing: ({ event }) => {
      if (event.type === "PUT_MESSAGES")
        event.reply?.fail(new MQError("SERVICE_NOT_AVAILABLE", "The broker is shutting down; send to another broker."));
    },
    startPut: ({ context, event, self }) => {
      if (event.type !== "PUT_MESSAGES") return;
      const puts = context.puts;
      puts.inFlight++;
      puts.waiting.push(event.batch);
      puts.waitingReplies.push(event.reply);
      // the first put of a tick schedules the group; a microtask, so an idle put waits for no timer
      if (puts.waiting.length === 1) queueMicrotask(() => appendWaiting(context.ctx, puts, self));
    },
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
    puts: { inFlight: 0, draining: false, waiting: [], waitingReplies: [] },
    maxInFlight: input.ctx.config.storeMaxInFlight,
    drainWaiters: [],
  }),
  initial: "open",
  states: {
    open: {
      on: {
        PUT_MESSAGES: [{ guard: "overBound", actions: "rejectBusy" }, { actions: "startPut" }],
        SHUTDOWN: { target: "draining", actions: ["markDraining", "queueDrainWaiter"] },
      },
    },
    draining: {
      always: { guard: "drained", target: "closed" },
      on: {
        PUT_MESSAGES: { actions: "rejectClosing" },
        // re-evaluates `drained` (the count itself changes outside the machine)
        PUT_DONE: {},
        SHUTDOWN: { actions: "queueDrainWaiter" },
      },
    },
    closed: {
      entry: "answerDrainWaiters",
      on: {
        PUT_MESSAGES: { actions: "rejectClosing" },
        SHUTDOWN: { actions: ({ event }) => event.type === "SHUTDOWN" && event.reply?.ok({}) },
      },
    },
  },
});
