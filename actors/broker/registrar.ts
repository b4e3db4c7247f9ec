/**
 * The `registrar` actor: registers the broker and its topic configs with every name server at
 * start, every `registerIntervalMs` (30 s) and whenever a topic changes (RocketMQ's
 * `registerBrokerAll`); sooner after a round some name server did not take (from 1 s, doubling up to
 * the interval; RocketMQ waits the whole period) and as soon as a lost connection to a name server
 * is made again (a name server restarted between two rounds has forgotten the broker), and
 * unregisters on a clean shutdown so routes drop the broker at once. A topic whose every broker is
 * gone has no route left; clients keep their last one for it (as RocketMQ's do), so sends to it
 * time out on the old addresses rather than fail with NO_ROUTE.
 */
import { assign, fromCallback, fromPromise, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import { NAMESRV_ACTOR, PERM_READ_WRITE, type RegisterBrokerRequest, type UnregisterBrokerRequest } from "../../transport/protocol.ts";
import { type Replier, unlessConnectionLost } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";

/** Name server requests give up after this long (the next period retries). */
export const REGISTER_TIMEOUT_MS = 3_000;
/**
 * After a round some name server did not take, the next comes after this, doubling per failed round
 * up to `registerIntervalMs`: a name server that is down fails at once (its connection is refused),
 * and one that just came back, or (re)started after the broker, would otherwise wait up to 30 s to
 * learn the broker's routes, while clients that ask it find no route or a partial one.
 */
export const REGISTER_RETRY_FIRST_MS = 1_000;

export type RegistrarEvent =
  | { type: "REGISTER_NOW"; reply?: Replier }
  | { type: "TOPIC_CHANGED" }
  | { type: "NAMESRV_BACK"; nameserver: string }
  | { type: "SHUTDOWN"; reply?: Replier };

export interface RegistrarContext {
  ctx: BrokerContext;
  /** answered when the registration in progress completes */
  waiters: Replier[];
  /** answered after the next registration (asked while one was in progress) */
  nextWaiters: Replier[];
  again: boolean;
  shutdownWaiters: Replier[];
  /** rounds in a row that some name server did not take (0: the last one reached every name server) */
  failedRounds: number;
}

export interface RegistrarInput {
  ctx: BrokerContext;
}

/** The REGISTER_BROKER fields for this broker now. */
export function registerRequest(ctx: BrokerContext): RegisterBrokerRequest {
  const c = ctx.config;
  const topicConfigTable = ctx.topics.all();
  // a broker that refuses reads or writes registers each topic with perm & brokerPermission (RocketMQ's
  // registerBrokerAll), so routes send no producer or consumer there; `all()` hands out copies
  if ((c.brokerPermission & PERM_READ_WRITE) !== PERM_READ_WRITE) {
    for (const tc of Object.values(topicConfigTable)) tc.perm &= c.brokerPermission;
  }
  return {
    clusterName: c.clusterName,
    brokerName: c.brokerName,
    brokerAddr: ctx.brokerAddr,
    brokerId: c.brokerId,
    heartbeatTimeoutMillis: c.heartbeatTimeoutMs,
    topicConfigTable,
    dataVersion: ctx.topics.dataVersion,
  };
}

/** Name servers each broker's last registration reached. */
const registeredNameservers = new WeakMap<BrokerContext, Set<string>>();

function registeredWith(ctx: BrokerContext): Set<string> {
  const known = registeredNameservers.get(ctx);
  if (known) return known;
  const s = new Set<string>();
  registeredNameservers.set(ctx, s);
  return s;
}

/**
 * Asks every name server at once; one whose connection reads refused or lost fails then, not after
 * REGISTER_TIMEOUT_MS: a name server that is down would otherwise hold up start, createTopic and close.
 */
async function askAll(
  ctx: BrokerContext,
  event: { type: string } & object,
  what: string,
  nameservers: readonly string[] = ctx.config.nameservers,
  goodbye = false,
): Promise<number> {
  // A goodbye fails fast only on a connection that fails while it waits, not on one lost before: a
  // broker resumed after a pause (SIGSTOP, a frozen VM) and stopped at once finds its links still
  // marked lost until ZeroMQ reconnects, and its routes would stay on the name servers for 120 s.
  // Served however late for the same reason: the pause makes its requests look long delayed.
  const since = goodbye ? monotonicNow() : undefined;
  const results = await Promise.allSettled(
    nameservers.map((ns) =>
      unlessConnectionLost(
        ctx.node,
        ns,
        ctx.node.ref(ns, NAMESRV_ACTOR).ask({ ...event }, { timeoutMs: REGISTER_TIMEOUT_MS, serveLate: goodbye }),
        since,
      ),
    ),
  );
  let ok = 0;
  const registered = event.type === "REGISTER_BROKER" ? registeredWith(ctx) : undefined;
  results.forEach((r, i) => {
    const ns = nameservers[i]!;
    // logged once per name server, and again after a failure: not every 30 s
    if (r.status === "fulfilled" && registered && !registered.has(ns)) {
      registered.add(ns);
      ctx.logger.info({ nameserver: ns }, "registered with name server");
    } else if (r.status === "rejected") registered?.delete(ns);
    if (r.status === "fulfilled") ok++;
    else ctx.logger.warn({ nameserver: ns, err: (r.reason as Error)?.message }, `${what} failed`);
  });
  return ok;
}

function answerAll(rs: Replier[]): void {
  for (const r of rs) r.ok({});
}

export const registrarMachine = setup({
  types: {
    context: {} as RegistrarContext,
    events: {} as RegistrarEvent,
    input: {} as RegistrarInput,
  },
  actors: {
    registerAll: fromPromise<number, { ctx: BrokerContext }>(({ input }) =>
      askAll(input.ctx, { type: "REGISTER_BROKER", ...registerRequest(input.ctx) }, "register broker"),
    ),
    unregisterAll: fromPromise<number, { ctx: BrokerContext }>(({ input }) => {
      const c = input.ctx.config;
      const req: UnregisterBrokerRequest = {
        clusterName: c.clusterName,
        brokerName: c.brokerName,
        brokerAddr: input.ctx.brokerAddr,
        brokerId: c.brokerId,
      };
      return askAll(input.ctx, { type: "UNREGISTER_BROKER", ...req }, "unregister broker", undefined, true);
    }),
    topicChanges: fromCallback<RegistrarEvent, { ctx: BrokerContext }>(({ sendBack, input }) =>
      input.ctx.topics.onChange(() => sendBack({ type: "TOPIC_CHANGED" })),
    ),
    // a name server closed gracefully and started again between two rounds never fails one, so the
    // failed-round retries never start: without this it would route nothing of the broker for up to 30 s
    nameserverReconnects: fromCallback<RegistrarEvent, { ctx: BrokerContext }>(({ sendBack, input }) => {
      const stops = input.ctx.config.nameservers.map((ns) =>
        input.ctx.node.onPeerReconnect(ns, () => sendBack({ type: "NAMESRV_BACK", nameserver: ns })),
      );
      return () => {
        for (const stop of stops) stop();
      };
    }),
  },
  delays: {
    registerInterval: ({ context }) =>
      context.failedRounds === 0
        ? context.ctx.config.registerIntervalMs
        : Math.min(context.ctx.config.registerIntervalMs, REGISTER_RETRY_FIRST_MS * 2 ** Math.min(context.failedRounds - 1, 30)),
  },
  guards: {
    again: ({ context }) => context.again,
  },
  actions: {
    addWaiter: assign({
      waiters: ({ context, event }) => (event.type === "REGISTER_NOW" && event.reply ? [...context.waiters, event.reply] : context.waiters),
    }),
    addNextWaiter: assign({
      nextWaiters: ({ context, event }) =>
        event.type === "REGISTER_NOW" && event.reply ? [...context.nextWaiters, event.reply] : context.nextWaiters,
      again: true,
    }),
    markAgain: assign({ again: true }),
    countRound: assign({
      failedRounds: ({ context, event }) => {
        const ok = (event as { output?: unknown }).output;
        return typeof ok === "number" && ok >= context.ctx.config.nameservers.length ? 0 : context.failedRounds + 1;
      },
    }),
    promoteNext: assign({ waiters: ({ context }) => context.nextWaiters, nextWaiters: [], again: false }),
    answerWaiters: assign({
      waiters: ({ context }) => {
        answerAll(context.waiters);
        return [];
      },
    }),
    addShutdownWaiter: assign({
      shutdownWaiters: ({ context, event }) =>
        event.type === "SHUTDOWN" && event.reply ? [...context.shutdownWaiters, event.reply] : context.shutdownWaiters,
    }),
    answerShutdown: ({ context }) => {
      answerAll(context.waiters);
      answerAll(context.nextWaiters);
      answerAll(context.shutdownWaiters);
    },
    answerLate: ({ event }) => {
      if (event.type === "REGISTER_NOW" || event.type === "SHUTDOWN") event.reply?.ok({});
    },
    // only the name server that came back: the others have the broker, and a name server that
    // flaps would otherwise send every broker's topics to all of them at each reconnect
    registerWithReturned: ({ context, event }) => {
      if (event.type !== "NAMESRV_BACK") return;
      const ctx = context.ctx;
      void Promise.resolve()
        .then(() => askAll(ctx, { type: "REGISTER_BROKER", ...registerRequest(ctx) }, "register broker", [event.nameserver]))
        .catch((e: unknown) => ctx.logger.error({ err: e, nameserver: event.nameserver }, "registration failed"));
    },
    logError: ({ context, event }) => {
      context.ctx.logger.error({ err: (event as { error?: unknown }).error }, "registration failed");
    },
  },
}).createMachine({
  id: "registrar",
  context: ({ input }) => ({ ctx: input.ctx, waiters: [], nextWaiters: [], again: false, shutdownWaiters: [], failedRounds: 0 }),
  initial: "running",
  states: {
    running: {
      invoke: [
        { src: "topicChanges", input: ({ context }) => ({ ctx: context.ctx }) },
        { src: "nameserverReconnects", input: ({ context }) => ({ ctx: context.ctx }) },
      ],
      initial: "registering",
      on: {
        SHUTDOWN: { target: "unregistering", actions: "addShutdownWaiter" },
      },
      states: {
        idle: {
          always: { guard: "again", target: "registering", actions: "promoteNext" },
          after: { registerInterval: "registering" },
          on: {
            REGISTER_NOW: { target: "registering", actions: "addWaiter" },
            TOPIC_CHANGED: "registering",
            NAMESRV_BACK: { actions: "registerWithReturned" },
          },
        },
        registering: {
          invoke: {
            src: "registerAll",
            input: ({ context }) => ({ ctx: context.ctx }),
            onDone: { target: "idle", actions: ["countRound", "answerWaiters"] },
            onError: { target: "idle", actions: ["logError", "countRound", "answerWaiters"] },
          },
          on: {
            // the round in progress carries the topics as they are unless one changed since it began
            // (Broker.start asks during the first round): waiting for another would double the wait
            REGISTER_NOW: [{ guard: "again", actions: "addNextWaiter" }, { actions: "addWaiter" }],
            TOPIC_CHANGED: { actions: "markAgain" },
            // the round in progress may have found it still down
            NAMESRV_BACK: { actions: "registerWithReturned" },
          },
        },
      },
    },
    unregistering: {
      invoke: {
        src: "unregisterAll",
        input: ({ context }) => ({ ctx: context.ctx }),
        onDone: "stopped",
        onError: "stopped",
      },
      on: { REGISTER_NOW: { actions: "answerLate" }, SHUTDOWN: { actions: "addShutdownWaiter" } },
    },
    stopped: {
      entry: "answerShutdown",
      on: { REGISTER_NOW: { actions: "answerLate" }, SHUTDOWN: { actions: "answerLate" } },
    },
  },
});
