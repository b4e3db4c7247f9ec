/**
 * Inspection: turns xstate inspection events of hosted actors into {@link InspectionRecord}s for
 * local listeners and remote subscribers. The xstate observers are attached only while someone
 * listens, so inspection off costs nothing on the hot path.
 */
import type { AnyActorRef, InspectionEvent, Subscription } from "xstate";

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

const MAX_DEPTH = 4;
const MAX_KEYS = 50;
const MAX_STRING = 512;

/** A JSON/msgpack-safe summary of a value: bytes become their length, refs their id, depth bounded. */
export function summarize(v: unknown, depth = 0): unknown {
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
  if (depth >= MAX_DEPTH) return "…";
  const o = v as Record<string, unknown>;
  if (typeof o.send === "function" && typeof o.sessionId === "string") return { actor: o.id ?? o.sessionId };
  if (v instanceof Map) return { map: v.size };
  if (v instanceof Set) return { set: v.size };
  if (v instanceof Error) return { error: v.message };
  if (Array.isArray(v)) {
    const out = v.slice(0, MAX_KEYS).map((x) => summarize(x, depth + 1));
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
    const s = summarize(o[k], depth + 1);
    if (s !== undefined) out[k] = s;
  }
  return out;
}

const definitions = new WeakMap<object, unknown>();

/** The machine definition of an actor's logic as plain JSON, computed once per machine. */
export function machineDefinition(logic: unknown): unknown {
  if (logic === null || typeof logic !== "object" || typeof (logic as { toJSON?: unknown }).toJSON !== "function") return undefined;
  let d = definitions.get(logic);
  if (d === undefined) {
    try {
      // toJSON() holds cycles/deep references; a JSON round-trip flattens it for msgpack
      d = JSON.parse(JSON.stringify((logic as { toJSON(): unknown }).toJSON()));
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

/** The inspection fan-out of one node. */
export class InspectionHub {
  private readonly listeners = new Set<InspectionListener>();
  private readonly attached = new Map<AnyActorRef, Subscription>();
  private readonly names = new Map<string, string>();
  private readonly latest = new Map<string, Latest>();
  private readonly definitionSent = new WeakSet<object>();

  constructor(
    private readonly nodeId: string,
    private readonly roots: () => Iterable<{ name: string; actor: AnyActorRef }>,
  ) {}

  get active(): boolean {
    return this.listeners.size > 0;
  }

  /** Adds a listener; returns its removal. The first listener attaches to every hosted actor. */
  add(listener: InspectionListener): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) for (const r of this.roots()) this.attach(r.name, r.actor);
    else this.replay(listener);
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
    this.attached.set(actor, actor.system.inspect((ev: InspectionEvent) => this.onInspection(ev)));
  }

  /** Reports a supervision failure. */
  failure(name: string, sessionId: string, action: "restart" | "stop", error: unknown, restarts: number): void {
    if (!this.active) return;
    this.emit({ nodeId: this.nodeId, actorName: name, sessionId, time: Date.now(), kind: "failure", action, error: error instanceof Error ? error.message : String(error), restarts });
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

  private onInspection(ev: InspectionEvent): void {
    const ref = ev.actorRef as AnyActorRef;
    if (ev.type === "@xstate.actor") {
      if (ref._parent) this.emitActor(ref, ref._parent as AnyActorRef);
    } else if (ev.type === "@xstate.event") {
      const e = ev.event as { type: string };
      this.emit({ nodeId: this.nodeId, actorName: this.nameOf(ref), sessionId: ref.sessionId, time: Date.now(), kind: "event", type: String(e.type), sourceSessionId: ev.sourceRef?.sessionId, payload: summarize(e) });
    } else if (ev.type === "@xstate.snapshot") {
      this.emitSnapshot(ref, ev.snapshot, (ev.event as { type?: string })?.type);
    }
  }

  private emitActor(actor: AnyActorRef, parent: AnyActorRef | undefined): void {
    const logic = (actor as unknown as { logic?: unknown }).logic;
    const rec: ActorRecord = { nodeId: this.nodeId, actorName: this.nameOf(actor), sessionId: actor.sessionId, time: Date.now(), kind: "actor", parentSessionId: parent?.sessionId, machineId: (logic as { id?: string })?.id };
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
    const rec: SnapshotRecord = { nodeId: this.nodeId, actorName: this.nameOf(actor), sessionId: actor.sessionId, time: Date.now(), kind: "snapshot", status: String(s?.status ?? "active"), value: summarize(s?.value), context: summarize(s?.context), eventType };
    if (s?.status === "error") rec.error = s.error instanceof Error ? s.error.message : String(s.error);
    const l = this.latest.get(actor.sessionId);
    if (l) {
      if (rec.status === "stopped" || rec.status === "done" || rec.status === "error") this.latest.delete(actor.sessionId);
      else l.snapshot = rec;
    }
    this.emitOnly(rec);
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
