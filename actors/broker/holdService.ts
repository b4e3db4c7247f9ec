/**
 * Long polling (RocketMQ's `PullRequestHoldService`, reference §9): pulls that found nothing wait
 * here under `topic@queueId`. The store's arrival notice (one per dispatched batch and queue)
 * re-executes the waiting pulls whose filter the new messages can match, within milliseconds of
 * the write; every 5 s the queues are rechecked against the store; a pull is answered
 * PULL_NOT_FOUND at its own deadline (RocketMQ only looks every 5 s; here a timer is armed for
 * the earliest deadline). Re-execution runs the pull processor with `brokerAllowSuspend = false`,
 * so a pull is never held twice. Under short polling (`longPolling: false`) a pull waits
 * `shortPollingTimeMills` and arrivals are not listened to. At close, every waiting pull is
 * answered PULL_NOT_FOUND, and so is a pull handed over after it.
 */
import { assign, fromCallback, sendTo, setup } from "xstate";
import { tagMatches } from "../../filter/index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import type { DirectHandlers, Replier } from "../runtime/index.ts";
import type { ArrivalEvent, BrokerContext } from "./brokerContext.ts";
import {
  answerPull,
  type HeldPull,
  notFoundReply,
  type PullOutcome,
  type PullServices,
  processPull,
  pullError,
  pullServicesOf,
} from "./pullProcessor.ts";
import { timerDelay } from "./timerDelay.ts";

/** How often held pulls are rechecked against the store under long polling. */
export const DEFAULT_HOLD_CHECK_INTERVAL_MS = 5_000;

/** Broker options this part reads (passed through `Broker.start` options). */
export interface HoldTuning {
  /** @default 5000 (long polling) or shortPollingTimeMills (short polling) */
  holdCheckIntervalMs?: number;
}

/** Held pulls by `topic@queueId` (RocketMQ's `ManyPullRequest` table). */
export class PullHoldTable {
  private readonly byKey = new Map<string, HeldPull[]>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(h: HeldPull): void {
    let list = this.byKey.get(h.key);
    if (!list) this.byKey.set(h.key, (list = []));
    list.push(h);
    this.count++;
  }

  keys(): IterableIterator<string> {
    return this.byKey.keys();
  }

  /** Removes and returns the pulls of `key` that `pick` selects. */
  take(key: string, pick: (h: HeldPull) => boolean): HeldPull[] {
    const list = this.byKey.get(key);
    if (!list) return [];
    const taken: HeldPull[] = [];
    const kept: HeldPull[] = [];
    for (const h of list) (pick(h) ? taken : kept).push(h);
    if (taken.length === 0) return taken;
    this.count -= taken.length;
    if (kept.length === 0) this.byKey.delete(key);
    else this.byKey.set(key, kept);
    return taken;
  }

  /** Removes and returns every held pull. */
  drain(): HeldPull[] {
    const all: HeldPull[] = [];
    for (const list of this.byKey.values()) all.push(...list);
    this.byKey.clear();
    this.count = 0;
    return all;
  }

  /** The earliest deadline, or Infinity. */
  earliestDeadline(): number {
    let min = Infinity;
    for (const list of this.byKey.values()) for (const h of list) if (h.deadline < min) min = h.deadline;
    return min;
  }
}

/** True when a message announced by `a` can match the held pull's subscription. */
export function arrivalMatches(h: HeldPull, a: ArrivalEvent): boolean {
  if (a.maxOffset <= h.req.queueOffset) return false;
  // a run of several messages is announced by its first one: let the pull itself filter them
  if (a.count > 1) return true;
  const f = h.filter;
  if (!tagMatches(f.sub, a.tagsCode)) return false;
  if (f.predicate && a.properties) {
    try {
      return f.predicate(a.properties);
    } catch {
      return true;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The `hold` actor

export type HoldEvent =
  | { type: "HOLD_PULL"; held: HeldPull }
  | { type: "ARRIVAL"; arrival: ArrivalEvent }
  | { type: "CHECK" }
  | { type: "EXPIRE" }
  | { type: "SHUTDOWN"; reply?: Replier };

export interface HoldContext {
  services: PullServices;
  table: PullHoldTable;
  /** the deadline the expiry timer is armed for (Infinity: none) */
  armedAt: number;
}

export interface HoldInput {
  ctx: BrokerContext;
}

/** Re-executes held pulls and answers them. */
function reexecute(s: PullServices, pulls: HeldPull[]): void {
  for (const h of pulls) {
    let outcome: PullOutcome;
    try {
      outcome = processPull(s, h.req, false);
    } catch (e) {
      h.reply.fail(pullError(s, e));
      continue;
    }
    answerPull(s, h.req, h.reply, outcome);
  }
}

/** Answers a pull PULL_NOT_FOUND at its own offset, without reading the queue again. */
function answerNotFound(s: PullServices, h: HeldPull): void {
  try {
    h.reply.ok(notFoundReply(s.ctx, h.req));
  } catch (e) {
    h.reply.fail(pullError(s, e));
  }
}

/** Re-executes the held pulls of an arrival's queue that its messages can match. */
export function wakeOnArrival(s: PullServices, table: PullHoldTable, a: ArrivalEvent): void {
  if (table.size === 0) return;
  const taken = table.take(`${a.topic}@${a.queueId}`, (h) => arrivalMatches(h, a));
  if (taken.length > 0) reexecute(s, taken);
}

/**
 * Arrival notices, periodic checks and the deadline timer. Arrivals are handled right here, without
 * an event per put through the hold machine (only while it is `holding`, since this callback actor
 * lives in that state): the held pulls they wake are re-executed in a microtask, i.e. in the same
 * tick, once every request of the frame being handled is in, so puts that arrived together are
 * answered by one pull instead of the first one and a round trip later the rest. Checks and
 * deadlines are events to the machine.
 */
const holdTicker = fromCallback<
  { type: "ARM"; at: number },
  { ctx: BrokerContext; listen: boolean; checkMs: number; services: PullServices; table: PullHoldTable }
>(({ sendBack, receive, input }) => {
  const { services, table } = input;
  let pending: ArrivalEvent[] = [];
  let stopped = false;
  const wake = () => {
    const arrivals = pending;
    pending = [];
    if (stopped) return;
    for (const a of arrivals) wakeOnArrival(services, table, a);
  };
  const off = input.listen
    ? input.ctx.onArrival((arrival) => {
        if (table.size === 0) return;
        if (pending.length === 0) queueMicrotask(wake);
        pending.push(arrival);
      })
    : () => {};
  const check = setInterval(() => sendBack({ type: "CHECK" }), input.checkMs);
  check.unref?.();
  let timer: NodeJS.Timeout | undefined;
  receive((e) => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (e.at !== Infinity) {
      timer = setTimeout(() => sendBack({ type: "EXPIRE" }), timerDelay(e.at - monotonicNow()));
      timer.unref?.();
    }
  });
  return () => {
    stopped = true;
    off();
    clearInterval(check);
    if (timer) clearTimeout(timer);
  };
});

/** A held pull due before the expiry timer fires: the timer must be re-armed (machine path). */
function earlierThanArmed(context: HoldContext, event: HoldEvent): boolean {
  return event.type === "HOLD_PULL" && event.held.deadline < context.armedAt;
}

/**
 * HOLD_PULL the node may hand over without a macrostep: the pull goes into the table, as the
 * machine's second transition does; one due before the armed timer goes to the machine.
 */
export const holdDirect: DirectHandlers = {
  state: "holding",
  handlers: {
    HOLD_PULL: (context: HoldContext, event: HoldEvent) => {
      if (event.type !== "HOLD_PULL" || earlierThanArmed(context, event)) return false;
      context.table.add(event.held);
      return true;
    },
  },
};

/** The `hold` actor. */
export const holdMachine = setup({
  types: {
    context: {} as HoldContext,
    events: {} as HoldEvent,
    input: {} as HoldInput,
  },
  actors: { holdTicker },
  actions: {
    hold: ({ context, event }) => {
      if (event.type === "HOLD_PULL") context.table.add(event.held);
    },
    onArrival: ({ context, event }) => {
      if (event.type === "ARRIVAL") wakeOnArrival(context.services, context.table, event.arrival);
    },
    check: ({ context }) => {
      const s = context.services;
      const now = monotonicNow();
      for (const key of [...context.table.keys()]) {
        let maxOffset = -1;
        const taken = context.table.take(key, (h) => {
          if (maxOffset < 0) maxOffset = s.ctx.store.getMaxOffset(h.req.topic, h.req.queueId);
          return maxOffset > h.req.queueOffset || now >= h.deadline;
        });
        if (taken.length > 0) reexecute(s, taken);
      }
    },
    expire: ({ context }) => {
      const now = monotonicNow();
      for (const key of [...context.table.keys()]) {
        const taken = context.table.take(key, (h) => now >= h.deadline);
        if (taken.length > 0) reexecute(context.services, taken);
      }
    },
    // a pull that found nothing after SHUTDOWN (the node still serves until it closes): not held
    answerNow: ({ context, event }) => {
      if (event.type === "HOLD_PULL") answerNotFound(context.services, event.held);
    },
    rememberDeadline: assign({ armedAt: ({ context }) => context.table.earliestDeadline() }),
    armTimer: sendTo("ticker", ({ context }) => ({ type: "ARM" as const, at: context.armedAt })),
    answerAll: ({ context, event }) => {
      const s = context.services;
      const held = context.table.drain();
      for (const h of held) answerNotFound(s, h);
      // the broker lets these answers leave before it closes the node (ZmqNode.flushReplies)
      if (event.type === "SHUTDOWN") event.reply?.ok({});
    },
  },
  guards: {
    earlierThanArmed: ({ context, event }) => earlierThanArmed(context, event),
  },
}).createMachine({
  id: "hold",
  context: ({ input }) => ({ services: pullServicesOf(input.ctx), table: new PullHoldTable(), armedAt: Infinity }),
  initial: "holding",
  states: {
    holding: {
      invoke: {
        id: "ticker",
        src: "holdTicker",
        input: ({ context }) => {
          const s = context.services;
          const checkMs =
            (s.ctx.config as HoldTuning).holdCheckIntervalMs ?? (s.longPolling ? DEFAULT_HOLD_CHECK_INTERVAL_MS : s.shortPollingMs);
          return { ctx: s.ctx, listen: s.longPolling, checkMs, services: s, table: context.table };
        },
      },
      on: {
        HOLD_PULL: [{ guard: "earlierThanArmed", actions: ["hold", "rememberDeadline", "armTimer"] }, { actions: "hold" }],
        ARRIVAL: { actions: "onArrival" },
        CHECK: { actions: "check" },
        EXPIRE: { actions: ["expire", "rememberDeadline", "armTimer"] },
        SHUTDOWN: { target: "closed", actions: "answerAll" },
      },
    },
    closed: {
      on: {
        HOLD_PULL: { actions: "answerNow" },
        SHUTDOWN: { actions: "answerAll" },
      },
    },
  },
});
