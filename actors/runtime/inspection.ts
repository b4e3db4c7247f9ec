/**
 * Inspection: turns xstate inspection events of hosted actors into {@link InspectionRecord}s for
 * local listeners and remote subscribers. The xstate observers are attached only while someone
 * listens, so inspection off costs nothing on the hot path.
 *
 * Attached, the cost is bounded per actor: each actor may emit {@link DEFAULT_INSPECTION_RECORDS_PER_SECOND}
 * records a second in full detail. Past that budget its events are only counted (never
 * summarised) and its latest snapshot is kept raw; every {@link INSPECTION_FLUSH_INTERVAL_MS} the
 * hub emits one `@inspect.dropped` event record with the count and the latest snapshot, so the
 * lit state is never stale by more than a flush interval while a busy actor costs a constant.
 */
import type { AnyActorRef, InspectionEvent, Subscription } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";

interface RecordBase {
  nodeId: string;
  /** hosted name; for child actors `${hostedName}/${childId}` */
  actorName: string;
  sessionId: string;
  time: number;
}
/** An actor was created (machine definition included the first time a machine is seen). */
export interface ActorRecord extends RecordBase {
  kind: "actor";
  parentSessionId?: string;
  machineId?: string;
  definition?: unknown;
}
/** An actor received an event (payload summarised: no bodies, Buffers as their length). */
export interface EventRecord extends RecordBase {
  kind: "event";
  type: string;
  sourceSessionId?: string;
  payload: unknown;
}
/** An actor's snapshot after an event. */
export interface SnapshotRecord extends RecordBase {
  kind: "snapshot";
  status: string;
  value?: unknown;
  context?: unknown;
  error?: string;
  eventType?: string;
}
/** A hosted actor failed and was restarted or stopped. */
export interface FailureRecord extends RecordBase {
  kind: "failure";
  action: "restart" | "stop";
  error: string;
  restarts: number;
}
export type InspectionRecord = ActorRecord | EventRecord | SnapshotRecord | FailureRecord;
export type InspectionListener = (r: InspectionRecord) => void;

/** Records per actor per second emitted in full detail; past it events are counted, snapshots coalesced. @default 100 */
export const DEFAULT_INSPECTION_RECORDS_PER_SECOND = 100;
/** How often counted-but-dropped events and coalesced snapshots are flushed. @default 250 */
export const INSPECTION_FLUSH_INTERVAL_MS = 250;
/**
 * Event type of the last record a node publishes when it closes (actor name {@link NODE_ACTOR_NAME}):
 * an inspector shows the process as gone at once instead of waiting for probes it may not be able to make.
 */
export const INSPECTION_NODE_CLOSED_EVENT = "@node.closed";
/** Actor name of records about the node itself. */
export const NODE_ACTOR_NAME = "(node)";
/**
 * Event type of the record (actor name {@link NODE_ACTOR_NAME}) a publisher sends every
 * {@link INSPECTION_HEARTBEAT_INTERVAL_MS} while an inspector is subscribed: a process that
 * nobody can probe (a client publishing on its own) and that dies without its farewell
 * ({@link INSPECTION_NODE_CLOSED_EVENT}) is shown as gone when its heartbeats stop.
 */
export const INSPECTION_HEARTBEAT_EVENT = "@node.heartbeat";
/** How often a subscribed publisher sends {@link INSPECTION_HEARTBEAT_EVENT}. @default 2000 */
export const INSPECTION_HEARTBEAT_INTERVAL_MS = 2000;
/** Event type of the record that reports events dropped by the per-actor budget (payload `{ events, sinceMs }`). */
export const INSPECTION_DROPPED_EVENT = "@inspect.dropped";

const MAX_DEPTH = 4;
const MAX_KEYS = 50;
const MAX_STRING = 512;
/**
 * Deepest state nesting a snapshot's value is sent with, a limit of its own (contexts are cut at
 * 4 levels): the inspector draws statecharts as deep, and lights a state only from a value that
 * reaches it. @default 12
 */
export const MAX_STATE_DEPTH = 12;

/** A JSON/msgpack-safe summary of a value: bytes become their length, refs their id, depth bounded by `maxDepth`. */
export function summarize(v: unknown, depth = 0, maxDepth = MAX_DEPTH): unknown {
  if (v === null || v === undefined) return v;
  switch (typeof v) {
    case "string":
      return v.length > MAX_STRING ? `${v.slice(0, MAX_STRING)}…(${v.length})` : v;
    case "number":
    case "boolean":
      return v;
    case "bigint":
      return v.toString();
    case "function":
    case "symbol":
      return undefined;
  }
  if (v instanceof Uint8Array) return { bytes: v.byteLength };
  if (depth >= maxDepth) return "…";
  const o = v as Record<string, unknown>;
  if (typeof o.send === "function" && typeof o.sessionId === "string") return { actor: o.id ?? o.sessionId };
  if (v instanceof Map) return { map: v.size };
  if (v instanceof Set) return { set: v.size };
  if (v instanceof Error) return { error: v.message };
  if (Array.isArray(v)) {
    const out = v.slice(0, MAX_KEYS).map((x) => summarize(x, depth + 1, maxDepth));
    if (v.length > MAX_KEYS) out.push(`…(${v.length})`);
    return out;
  }
  const out: Record<string, unknown> = {};
  let n = 0;
  for (const k in o) {
    if (k === "reply" || k === "origin") continue;
    if (n++ >= MAX_KEYS) {
      out["…"] = true;
      break;
    }
    const s = summarize(o[k], depth + 1, maxDepth);
    if (s !== undefined) out[k] = s;
  }
  return out;
}

const definitions = new WeakMap<object, unknown>();

interface StateNodeLike {
  always?: unknown[];
  states?: Record<string, StateNodeLike>;
}
interface DefinitionNode {
  transitions?: unknown[];
  states?: Record<string, DefinitionNode>;
}

/**
 * Appends each state's eventless (`always`) transitions, which xstate's toJSON() leaves out, to
 * its `transitions` (event type `""`), so they are drawn like the others.
 */
function addEventless(node: StateNodeLike | undefined, def: DefinitionNode | undefined): void {
  if (node === undefined || def === null || typeof def !== "object") return;
  if (Array.isArray(node.always) && node.always.length > 0) {
    const always = JSON.parse(JSON.stringify(node.always)) as unknown[];
    def.transitions = Array.isArray(def.transitions) ? [...def.transitions, ...always] : always;
  }
  if (node.states && def.states) for (const k of Object.keys(node.states)) addEventless(node.states[k], def.states[k]);
}

/** The machine definition of an actor's logic as plain JSON, computed once per machine. */
export function machineDefinition(logic: unknown): unknown {
  if (logic === null || typeof logic !== "object" || typeof (logic as { toJSON?: unknown }).toJSON !== "function") return undefined;
  let d = definitions.get(logic);
  if (d === undefined) {
    try {
      // toJSON() holds cycles/deep references; a JSON round-trip flattens it for msgpack
      d = JSON.parse(JSON.stringify((logic as { toJSON(): unknown }).toJSON()));
      addEventless((logic as { root?: StateNodeLike }).root, d as DefinitionNode);
    } catch {
      d = null;
    }
    definitions.set(logic, d);
  }
  return d ?? undefined;
}

interface Latest {
  actor: ActorRecord;
  logic: unknown;
  snapshot?: SnapshotRecord;
}

/** Per-actor budget: records left in the current one-second window, and what waits for a flush. */
interface Budget {
  windowStart: number;
  left: number;
  dropped: number;
  droppedSince: number;
  actor?: AnyActorRef;
  pending?: { snapshot: unknown; eventType: string | undefined };
  queued: boolean;
}

/** The inspection fan-out of one node. */
export class InspectionHub {
  private readonly listeners = new Set<InspectionListener>();
  private readonly attached = new Map<AnyActorRef, Subscription>();
  private readonly names = new Map<string, string>();
  private readonly latest = new Map<string, Latest>();
  /** machines whose definition went out to every listener there is (a new listener resets it) */
  private definitionSent = new WeakSet<object>();
  private readonly budgets = new Map<string, Budget>();
  private readonly overBudget: Budget[] = [];
  private flushTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly nodeId: string,
    private readonly roots: () => Iterable<{ name: string; actor: AnyActorRef }>,
    /** records per actor per second in full detail (see the module comment) */
    private readonly recordsPerSecond = DEFAULT_INSPECTION_RECORDS_PER_SECOND,
  ) {}

  /** Events counted but not emitted because an actor exceeded its budget (since attach). */
  droppedEvents = 0;

  get active(): boolean {
    return this.listeners.size > 0;
  }

  /** Adds a listener; returns its removal. The first listener attaches to every hosted actor. */
  add(listener: InspectionListener): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) for (const r of this.roots()) this.attach(r.name, r.actor);
    else {
      this.replay(listener);
      // the replay covers the actors running now; a machine whose actors all stopped earlier went
      // out to the earlier listeners only, so its next actor carries the definition again (to all)
      this.definitionSent = new WeakSet();
    }
    return () => {
      if (!this.listeners.delete(listener)) return;
      if (this.listeners.size === 0) this.detachAll();
    };
  }

  /** Called by the node when a hosted actor (re)starts. */
  attach(name: string, actor: AnyActorRef): void {
    if (!this.active || this.attached.has(actor)) return;
    this.names.set(actor.sessionId, name);
    this.emitActor(actor, undefined);
    this.emitSnapshot(actor, actor.getSnapshot(), undefined);
    this.announceChildren(actor);
    const inspecting = actor.system.inspect((ev: InspectionEvent) => this.onInspection(ev));
    // an instance that ends (stopped, done, failed: a restart is a new instance) is let go of, or a
    // long-lived node would keep every consumer ever closed on it; a microtask later, because xstate
    // tells observers of a done or failed actor before its inspection gets the last snapshot
    const detach = () => queueMicrotask(() => this.detach(actor));
    const ending = actor.subscribe({ complete: detach, error: detach });
    this.attached.set(actor, {
      unsubscribe: () => {
        inspecting.unsubscribe();
        ending.unsubscribe();
      },
    });
  }

  /** Stops inspecting `actor` (an instance that ended). */
  private detach(actor: AnyActorRef): void {
    const s = this.attached.get(actor);
    if (s === undefined) return;
    s.unsubscribe();
    this.attached.delete(actor);
  }

  /**
   * Announces the children `actor` already has: those invoked as it started were created before
   * any observer was there to see them.
   */
  private announceChildren(actor: AnyActorRef): void {
    const children = (actor.getSnapshot() as { children?: Record<string, AnyActorRef | undefined> } | undefined)?.children;
    if (!children) return;
    for (const child of Object.values(children)) {
      if (child === undefined) continue;
      this.emitActor(child, actor);
      this.emitSnapshot(child, child.getSnapshot(), undefined);
      this.announceChildren(child);
    }
  }

  /** Reports a supervision failure. */
  failure(name: string, sessionId: string, action: "restart" | "stop", error: unknown, restarts: number): void {
    if (!this.active) return;
    this.emit({
      nodeId: this.nodeId,
      actorName: name,
      sessionId,
      time: Date.now(),
      kind: "failure",
      action,
      error: error instanceof Error ? error.message : String(error),
      restarts,
    });
  }

  /** Sends the latest definition and snapshot of every known actor to `fn` (a new subscriber). */
  replay(fn: InspectionListener): void {
    for (const l of this.latest.values()) {
      const def = machineDefinition(l.logic);
      safeCall(fn, def === undefined ? l.actor : { ...l.actor, definition: def });
      if (l.snapshot) safeCall(fn, l.snapshot);
    }
  }

  private detachAll(): void {
    for (const s of this.attached.values()) s.unsubscribe();
    this.attached.clear();
    this.latest.clear();
    this.names.clear();
    this.budgets.clear();
    this.definitionSent = new WeakSet();
    this.overBudget.length = 0;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
  }

  /** Takes one record from the actor's budget; false when it is spent for this second. */
  private spend(sessionId: string): boolean {
    if (this.recordsPerSecond <= 0) return true;
    // the budget's window is a rate: a wall clock step must not end or stretch it
    const now = monotonicNow();
    let b = this.budgets.get(sessionId);
    if (b === undefined) {
      b = { windowStart: now, left: this.recordsPerSecond, dropped: 0, droppedSince: Date.now(), queued: false };
      this.budgets.set(sessionId, b);
    } else if (now - b.windowStart >= 1000) {
      b.windowStart = now;
      b.left = this.recordsPerSecond;
    }
    if (b.left > 0) {
      b.left--;
      return true;
    }
    return false;
  }

  private queueFlush(b: Budget): void {
    if (b.queued) return;
    b.queued = true;
    this.overBudget.push(b);
    if (this.flushTimer === null) {
      this.flushTimer = setTimeout(() => this.flush(), INSPECTION_FLUSH_INTERVAL_MS);
      this.flushTimer.unref();
    }
  }

  /** Emits the dropped counts and coalesced snapshots of actors that went over budget. */
  private flush(): void {
    this.flushTimer = null;
    const now = Date.now();
    const due = this.overBudget.splice(0);
    for (const b of due) {
      b.queued = false;
      const p = b.pending;
      const ref = b.actor;
      b.pending = undefined;
      if (ref === undefined) continue;
      if (b.dropped > 0) {
        this.emitOnly({
          nodeId: this.nodeId,
          actorName: this.nameOf(ref),
          sessionId: ref.sessionId,
          time: now,
          kind: "event",
          type: INSPECTION_DROPPED_EVENT,
          payload: { events: b.dropped, sinceMs: now - b.droppedSince },
        });
      }
      b.dropped = 0;
      b.droppedSince = now;
      if (p) this.emitSnapshot(ref, p.snapshot, p.eventType);
    }
  }

  private nameOf(ref: AnyActorRef): string {
    let n = this.names.get(ref.sessionId);
    if (n === undefined) {
      const parent = ref._parent as AnyActorRef | undefined;
      const base = parent ? this.nameOf(parent) : "?";
      n = `${base}/${ref.id}`;
      this.names.set(ref.sessionId, n);
    }
    return n;
  }

  /**
   * A direct handler (no macrostep) took `event` on an attached actor: the records its machine's
   * inspection would have given, the event and the snapshot after it (unchanged by such events).
   */
  directEvent(actor: AnyActorRef, event: { type: string }): void {
    if (!this.attached.has(actor)) return;
    this.onInspection({ type: "@xstate.event", actorRef: actor, rootId: actor.sessionId, event, sourceRef: undefined });
    this.onInspection({ type: "@xstate.snapshot", actorRef: actor, rootId: actor.sessionId, event, snapshot: actor.getSnapshot() });
  }

  private onInspection(ev: InspectionEvent): void {
    const ref = ev.actorRef as AnyActorRef;
    if (ev.type === "@xstate.actor") {
      if (ref._parent) this.emitActor(ref, ref._parent as AnyActorRef);
    } else if (ev.type === "@xstate.event") {
      const e = ev.event as { type: string };
      if (!this.spend(ref.sessionId)) {
        const b = this.budgets.get(ref.sessionId)!;
        if (b.dropped++ === 0) b.droppedSince = Date.now();
        this.droppedEvents++;
        b.actor = ref;
        this.queueFlush(b);
        return;
      }
      this.emit({
        nodeId: this.nodeId,
        actorName: this.nameOf(ref),
        sessionId: ref.sessionId,
        time: Date.now(),
        kind: "event",
        type: String(e.type),
        sourceSessionId: ev.sourceRef?.sessionId,
        payload: summarize(e),
      });
    } else if (ev.type === "@xstate.snapshot") {
      const eventType = (ev.event as { type?: string })?.type;
      const status = (ev.snapshot as { status?: string }).status;
      // final snapshots always go out at once: the actor leaves the tree
      if (status === "active" && !this.spend(ref.sessionId)) {
        const b = this.budgets.get(ref.sessionId)!;
        b.actor = ref;
        b.pending = { snapshot: ev.snapshot, eventType };
        this.queueFlush(b);
        return;
      }
      const b = this.budgets.get(ref.sessionId);
      if (b?.pending) b.pending = undefined;
      if (status !== "active") {
        this.budgets.delete(ref.sessionId);
        // a budget still queued for a flush must not name the actor again (its name goes with it)
        if (b) {
          b.actor = undefined;
          b.dropped = 0;
        }
      }
      this.emitSnapshot(ref, ev.snapshot, eventType);
    }
  }

  private emitActor(actor: AnyActorRef, parent: AnyActorRef | undefined): void {
    const logic = (actor as unknown as { logic?: unknown }).logic;
    const rec: ActorRecord = {
      nodeId: this.nodeId,
      actorName: this.nameOf(actor),
      sessionId: actor.sessionId,
      time: Date.now(),
      kind: "actor",
      parentSessionId: parent?.sessionId,
      machineId: (logic as { id?: string })?.id,
    };
    const prev = this.latest.get(actor.sessionId);
    this.latest.set(actor.sessionId, { actor: rec, logic, snapshot: prev?.snapshot });
    const first = logic !== null && typeof logic === "object" && !this.definitionSent.has(logic as object);
    if (first) {
      this.definitionSent.add(logic as object);
      const def = machineDefinition(logic);
      this.emitOnly(def === undefined ? rec : { ...rec, definition: def });
    } else this.emitOnly(rec);
  }

  private emitSnapshot(actor: AnyActorRef, snap: unknown, eventType: string | undefined): void {
    const s = snap as { status?: string; value?: unknown; context?: unknown; error?: unknown } | undefined;
    const rec: SnapshotRecord = {
      nodeId: this.nodeId,
      actorName: this.nameOf(actor),
      sessionId: actor.sessionId,
      time: Date.now(),
      kind: "snapshot",
      status: String(s?.status ?? "active"),
      value: summarize(s?.value, 0, MAX_STATE_DEPTH),
      context: summarize(s?.context),
      eventType,
    };
    if (s?.status === "error") rec.error = s.error instanceof Error ? s.error.message : String(s.error);
    const l = this.latest.get(actor.sessionId);
    const over = rec.status === "stopped" || rec.status === "done" || rec.status === "error";
    if (l) {
      if (over) this.latest.delete(actor.sessionId);
      else l.snapshot = rec;
    }
    this.emitOnly(rec);
    // an actor that is over sends nothing more: forget its name (each invoked promise is a new session)
    if (over) this.names.delete(actor.sessionId);
  }

  private emit(r: InspectionRecord): void {
    this.emitOnly(r);
  }

  private emitOnly(r: InspectionRecord): void {
    for (const l of this.listeners) safeCall(l, r);
  }
}

function safeCall(fn: InspectionListener, r: InspectionRecord): void {
  try {
    fn(r);
  } catch {
    // a listener's bug must not break the node
  }
}
