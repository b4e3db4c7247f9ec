/**
 * Statechart graph: turns a machine definition (the JSON of `machine.toJSON()`, as the runtime
 * sends it) into a flat list of states and transitions the layout and the page work from.
 * Pure functions: no layout, no DOM.
 */

import { MAX_STATE_DEPTH } from "../runtime/index.ts";

/** One state node of a machine. */
export interface ChartState {
  /** xstate state node id (`machine.parent.child`), used as `data-state` in the SVG */
  id: string;
  key: string;
  /** dot-joined keys from the machine root, matching a snapshot value's nesting */
  path: string;
  type: "atomic" | "compound" | "parallel" | "final" | "history";
  /** parent state id; undefined for top-level states */
  parent?: string;
  /** true when this state is its parent's initial state */
  initial: boolean;
  /** the actors invoked while in this state: their ids, or their `src` when xstate generated the id */
  invokes: string[];
}

/** One transition: an event moving from a source state to target states. */
export interface ChartTransition {
  id: string;
  source: string;
  targets: string[];
  /** the raw event type (`xstate.after.100.x` for delays) */
  event: string;
  /** a short label for the drawing (`after 100ms`, `done: fetch`) */
  label: string;
}

/** A machine's states and transitions. */
export interface StatechartGraph {
  machineId: string;
  states: ChartState[];
  transitions: ChartTransition[];
  /**
   * Set when the machine has more than {@link MAX_CHART_STATES} states or
   * {@link MAX_CHART_TRANSITIONS} transitions: it is not laid out (states and transitions are
   * then only the first ones found, the counts are at most one past the limits).
   */
  tooLarge?: { states: number; transitions: number };
}

/**
 * Most states and transitions laid out per machine. The layout runs on the inspector's event loop
 * (a broker's, under `actormq start`) and its time grows quickly with the edges: these bounds keep
 * one chart well under a second; actormq's own machines have at most 5 states and 9 transitions.
 */
export const MAX_CHART_STATES = 50;
export const MAX_CHART_TRANSITIONS = 80;

const STATE_TYPES = new Set(["atomic", "compound", "parallel", "final", "history"]);

interface RawNode {
  id?: unknown;
  key?: unknown;
  type?: unknown;
  initial?: unknown;
  states?: unknown;
  transitions?: unknown;
  invoke?: unknown;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** xstate names an invoke without an explicit id `<index>.<state id>` (`0.rebalancer.balancing`). */
const GENERATED_INVOKE_ID = /^\d+\.(?:.*\.)?([^.]+)$/;

/**
 * How an invoked actor is named in a drawing: its id when the machine gave one, else its `src`
 * (the generated id only repeats the state's name), else the state's key.
 */
function invokeName(id: string, src?: string): string {
  const m = GENERATED_INVOKE_ID.exec(id);
  if (!m) return id;
  return src ?? m[1]!;
}

/**
 * The short label of an event type as drawn on an edge. `invokeNames` maps invoke ids to their
 * drawn names so `xstate.done.actor.0.m.s` reads `done: <src>`.
 */
export function eventLabel(event: string, invokeNames?: ReadonlyMap<string, string>): string {
  let m = /^xstate\.after\.([^.]+)\./.exec(event);
  if (m) return /^\d+$/.test(m[1]!) ? `after ${m[1]}ms` : `after ${m[1]}`;
  m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(event);
  if (m) return `${m[1]}: ${invokeNames?.get(m[2]!) ?? invokeName(m[2]!)}`;
  if (event.startsWith("xstate.done.state.")) return "done";
  if (event === "") return "always";
  return event;
}

function targetIds(raw: unknown): string[] {
  if (!Array.isArray(raw)) return [];
  const out: string[] = [];
  for (const t of raw) if (typeof t === "string" && t.length > 0) out.push(t.startsWith("#") ? t.slice(1) : t);
  return out;
}

/**
 * Converts a machine definition into a {@link StatechartGraph}. Returns null when `def` is not a
 * machine definition (no id, no states object); unknown fields are ignored, transitions to
 * unknown states are dropped.
 */
export function definitionToGraph(def: unknown): StatechartGraph | null {
  if (!isObject(def) || typeof def.id !== "string" || !isObject(def.states)) return null;
  const machineId = def.id;
  const states: ChartState[] = [];
  const pending: { source: string; raw: unknown[] }[] = [];
  const invokeNames = new Map<string, string>();

  const visit = (node: RawNode, parent: ChartState | undefined, initialTargets: Set<string>, depth: number) => {
    if (!isObject(node.states) || depth > MAX_STATE_DEPTH) return;
    for (const [key, childRaw] of Object.entries(node.states)) {
      if (states.length > MAX_CHART_STATES) return;
      if (!isObject(childRaw)) continue;
      const child = childRaw as RawNode;
      const id = typeof child.id === "string" ? child.id : `${parent?.id ?? machineId}.${key}`;
      const type = typeof child.type === "string" && STATE_TYPES.has(child.type) ? (child.type as ChartState["type"]) : "atomic";
      const invokes: string[] = [];
      if (Array.isArray(child.invoke))
        for (const i of child.invoke) {
          if (!isObject(i) || typeof i.id !== "string") continue;
          const name = invokeName(i.id, typeof i.src === "string" ? i.src : undefined);
          invokes.push(name);
          invokeNames.set(i.id, name);
        }
      const s: ChartState = {
        id,
        key,
        path: parent ? `${parent.path}.${key}` : key,
        type,
        parent: parent?.id,
        initial: initialTargets.has(id),
        invokes,
      };
      states.push(s);
      if (Array.isArray(child.transitions)) pending.push({ source: id, raw: child.transitions });
      const init = isObject(child.initial) ? new Set(targetIds(child.initial.target)) : new Set<string>();
      visit(child, s, init, depth + 1);
    }
  };
  const rootInitial = isObject(def.initial) ? new Set(targetIds(def.initial.target)) : new Set<string>();
  visit(def as RawNode, undefined, rootInitial, 0);

  const known = new Set(states.map((s) => s.id));
  const transitions: ChartTransition[] = [];
  // root-level transitions (machine `on`) apply from every top-level state
  const rootSources = Array.isArray(def.transitions) ? states.filter((s) => s.parent === undefined).map((s) => s.id) : [];
  const addAll = (source: string, raw: unknown[]) => {
    for (const t of raw) {
      if (transitions.length > MAX_CHART_TRANSITIONS) return;
      if (!isObject(t)) continue;
      const event = typeof t.eventType === "string" ? t.eventType : "";
      const targets = targetIds(t.target).filter((x) => known.has(x));
      if (targets.length === 0) continue;
      transitions.push({ id: `t${transitions.length}`, source, targets, event, label: eventLabel(event, invokeNames) });
    }
  };
  for (const p of pending) addAll(p.source, p.raw);
  if (Array.isArray(def.transitions)) for (const s of rootSources) addAll(s, def.transitions);
  if (states.length > MAX_CHART_STATES || transitions.length > MAX_CHART_TRANSITIONS)
    return { machineId, states, transitions, tooLarge: { states: states.length, transitions: transitions.length } };
  return { machineId, states, transitions };
}

/**
 * The ids of the states a snapshot value is in (every level, not only the leaves): `"idle"`,
 * `{ running: "a" }` or a parallel `{ a: "x", b: { c: "y" } }`.
 */
export function activeStateIds(graph: StatechartGraph, value: unknown): string[] {
  const byPath = new Map(graph.states.map((s) => [s.path, s.id]));
  const out: string[] = [];
  const walk = (v: unknown, prefix: string) => {
    if (typeof v === "string") {
      const id = byPath.get(prefix ? `${prefix}.${v}` : v);
      if (id) out.push(id);
    } else if (isObject(v)) {
      for (const [k, sub] of Object.entries(v)) {
        const p = prefix ? `${prefix}.${k}` : k;
        const id = byPath.get(p);
        if (id) out.push(id);
        walk(sub, p);
      }
    }
  };
  walk(value, "");
  return out;
}
