/**
 * Supervision of hosted actors: an actor whose snapshot status becomes "error" (an action threw,
 * an invoked actor failed unhandled) is restarted with exponential backoff, or stopped, according
 * to its declared strategy; every failure is reported to the node.
 */
import { type AnyActorLogic, type AnyActorRef, createActor } from "xstate";
import { checkRange, MAX_TIMER_MS, MQError, shownValue } from "../../transport/protocol.ts";
import { type HandledTypes, handledTypes, type LocalOnlyTypes } from "./remoteEvents.ts";

/**
 * Handlers a machine's flat state runs for some events as targetless transitions whose only
 * effect is one action (no assign, no raise, no state change). The node calls them directly,
 * skipping xstate's macrostep, when that state is the actor's state (an inspector still gets the
 * event and snapshot records the machine would have given); the machine itself must run the same
 * handler for those events, so sending to the actor without the node does the same work.
 * The handler gets the context, the event and the actor ref (what the action's `self` would be);
 * it returns false, before doing anything, when the event needs the machine (a guard chose a
 * transition with more than the plain action): the node then sends it to the machine.
 */
export interface DirectHandlers {
  /** the (top-level, atomic) state whose transitions the handlers stand for */
  state: string;
  handlers: Record<string, DirectHandler>;
}

/** One direct handler; context and event types belong to each machine. */
export type DirectHandler = (context: any, event: any, self: AnyActorRef) => unknown;

/** How a hosted actor's failures are handled. */
export type Supervision =
  | {
      strategy: "restart";
      /** restarts allowed before the actor is stopped and the failure escalated. @default 5 */
      maxRestarts?: number;
      /** delay before the first restart, doubled on each further one (capped at 30 s). @default 100 */
      backoffMs?: number;
      /**
       * an instance that ran this long before failing had recovered: its failure counts as the first
       * again (restart count and backoff start over), so rare failures over a long uptime never add up
       * to `maxRestarts` (Erlang's restart intensity over a period, Akka's withinTimeRange). @default 60000
       */
      resetAfterMs?: number;
    }
  | { strategy: "stop" };

export const DEFAULT_MAX_RESTARTS = 5;
export const DEFAULT_BACKOFF_MS = 100;
export const MAX_BACKOFF_MS = 30_000;
export const DEFAULT_RESET_AFTER_MS = 60_000;

export function defaultSupervision(): Supervision {
  return { strategy: "restart", maxRestarts: DEFAULT_MAX_RESTARTS, backoffMs: DEFAULT_BACKOFF_MS, resetAfterMs: DEFAULT_RESET_AFTER_MS };
}

/**
 * Refuses supervision the supervisor cannot follow (MQError ILLEGAL_ARGUMENT): a strategy other than
 * "restart" or "stop" was taken as restart, a NaN maxRestarts restarted without end, a string
 * backoffMs gave NaN backoffs.
 */
export function checkSupervision(s: unknown): asserts s is Supervision {
  const strategy = s !== null && typeof s === "object" ? (s as { strategy?: unknown }).strategy : undefined;
  if (strategy !== "restart" && strategy !== "stop")
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `supervision must be { strategy: "restart", maxRestarts?, backoffMs?, resetAfterMs? } or { strategy: "stop" }, got ${
        s !== null && typeof s === "object" ? `strategy ${shownValue(strategy)}` : shownValue(s)
      }.`,
    );
  if (strategy === "stop") return;
  const { maxRestarts, backoffMs, resetAfterMs } = s as { maxRestarts?: unknown; backoffMs?: unknown; resetAfterMs?: unknown };
  if (maxRestarts !== undefined) checkRange("supervision.maxRestarts", maxRestarts, 0, Number.MAX_SAFE_INTEGER);
  if (backoffMs !== undefined) checkRange("supervision.backoffMs", backoffMs, 0, MAX_TIMER_MS);
  if (resetAfterMs !== undefined) checkRange("supervision.resetAfterMs", resetAfterMs, 1, Number.MAX_SAFE_INTEGER);
}

/** A failure report: what failed and what the supervisor did about it. */
export interface ActorFailure {
  nodeId: string;
  actorName: string;
  error: unknown;
  /** "restart": a new instance starts after `backoffMs`; "stop": the actor is gone (escalated). */
  action: "restart" | "stop";
  restarts: number;
  backoffMs: number;
}

export type HostedStatus = "running" | "restarting" | "stopped";

/** One named actor hosted by a node, with its supervisor state. */
export class HostedActor {
  actor: AnyActorRef;
  status: HostedStatus = "running";
  restarts = 0;
  failures = 0;
  /** the direct handlers by event type, and the state they apply in */
  readonly direct: { state: string; handlers: Map<string, DirectHandler> } | undefined;
  /** event types refused when they come from another process (remoteEvents.ts) */
  readonly localOnly: LocalOnlyTypes;
  /** the event types its machine handles; null: any (remoteEvents.ts) */
  readonly handled: HandledTypes | null;
  private timer: NodeJS.Timeout | null = null;
  /** when the current instance started (performance.now()) */
  private startedAt = 0;

  constructor(
    readonly name: string,
    readonly logic: AnyActorLogic,
    readonly input: unknown,
    readonly supervision: Supervision,
    direct: DirectHandlers | undefined,
    localOnly: LocalOnlyTypes,
    private readonly onStarted: (h: HostedActor) => void,
    private readonly onFailure: (h: HostedActor, error: unknown, action: "restart" | "stop", backoffMs: number) => void,
  ) {
    // a Map: event types come off the wire ("toString" must not find Object.prototype's)
    this.direct = direct && { state: direct.state, handlers: new Map(Object.entries(direct.handlers)) };
    this.localOnly = localOnly;
    this.handled = handledTypes(logic, this.direct?.handlers.keys());
    this.actor = this.create();
  }

  private create(): AnyActorRef {
    const actor = createActor(this.logic, { input: this.input, id: this.name });
    actor.subscribe({ error: (err: unknown) => this.failed(actor, err) });
    return actor;
  }

  /** Starts the current instance (and announces it, so inspection can attach first). */
  start(): void {
    this.status = "running";
    this.startedAt = performance.now();
    this.onStarted(this);
    this.actor.start();
  }

  private failed(actor: AnyActorRef, error: unknown): void {
    if (actor !== this.actor || this.status === "stopped") return;
    this.failures++;
    const s = this.supervision;
    if (s.strategy === "restart" && performance.now() - this.startedAt >= (s.resetAfterMs ?? DEFAULT_RESET_AFTER_MS)) this.restarts = 0;
    if (s.strategy === "stop" || this.restarts >= (s.maxRestarts ?? DEFAULT_MAX_RESTARTS)) {
      this.status = "stopped";
      this.onFailure(this, error, "stop", 0);
      return;
    }
    const backoff = Math.min(MAX_BACKOFF_MS, (s.backoffMs ?? DEFAULT_BACKOFF_MS) * 2 ** this.restarts);
    this.restarts++;
    this.status = "restarting";
    this.onFailure(this, error, "restart", backoff);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.status !== "restarting") return;
      this.actor = this.create();
      this.start();
    }, backoff);
  }

  /**
   * A direct handler threw: the instance fails as if its action had thrown in the machine
   * (stopped, then restarted or stopped for good by the supervision strategy).
   */
  failDirect(error: unknown): void {
    const actor = this.actor;
    actor.stop();
    this.failed(actor, error);
  }

  /** Stops the actor and any pending restart. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.status = "stopped";
    this.actor.stop();
  }
}

/**
 * Logs every failure of an actor `node` hosts at error, with the error and what supervision did:
 * a restarted or stopped actor (the broker's store service, a client's pull service) changes what
 * the process does, and the node's `actorFailure` event alone reached no log. `log` is called per
 * failure, so a client's logger made on first use is made only if something fails.
 */
export function logActorFailures(
  node: { on(event: "actorFailure", listener: (f: ActorFailure) => void): () => void },
  log: () => { error(obj: object, msg: string): void },
): () => void {
  return node.on("actorFailure", (f) =>
    log().error(
      { actor: f.actorName, node: f.nodeId, err: f.error, restarts: f.restarts, backoffMs: f.backoffMs },
      f.action === "restart"
        ? `actor ${f.actorName} failed; restarting it in ${f.backoffMs} ms from its initial state`
        : `actor ${f.actorName} failed and is stopped (its supervision gives up): restart the process`,
    ),
  );
}
