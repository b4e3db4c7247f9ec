/**
 * Supervision of hosted actors: an actor whose snapshot status becomes "error" (an action threw,
 * an invoked actor failed unhandled) is restarted with exponential backoff, or stopped, according
 * to its declared strategy; every failure is reported to the node.
 */
import { type AnyActorLogic, type AnyActorRef, createActor } from "xstate";

/** How a hosted actor's failures are handled. */
export type Supervision =
  | {
      strategy: "restart";
      /** restarts allowed before the actor is stopped and the failure escalated. @default 5 */
      maxRestarts?: number;
      /** delay before the first restart, doubled on each further one (capped at 30 s). @default 100 */
      backoffMs?: number;
    }
  | { strategy: "stop" };

export const DEFAULT_MAX_RESTARTS = 5;
export const DEFAULT_BACKOFF_MS = 100;
export const MAX_BACKOFF_MS = 30_000;

export function defaultSupervision(): Supervision {
  return { strategy: "restart", maxRestarts: DEFAULT_MAX_RESTARTS, backoffMs: DEFAULT_BACKOFF_MS };
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
  private timer: NodeJS.Timeout | null = null;

  constructor(
    readonly name: string,
    readonly logic: AnyActorLogic,
    readonly input: unknown,
    readonly supervision: Supervision,
    private readonly onStarted: (h: HostedActor) => void,
    private readonly onFailure: (h: HostedActor, error: unknown, action: "restart" | "stop", backoffMs: number) => void,
  ) {
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
    this.onStarted(this);
    this.actor.start();
  }

  private failed(actor: AnyActorRef, error: unknown): void {
    if (actor !== this.actor || this.status === "stopped") return;
    this.failures++;
    const s = this.supervision;
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

  /** Stops the actor and any pending restart. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.status = "stopped";
    this.actor.stop();
  }
}
