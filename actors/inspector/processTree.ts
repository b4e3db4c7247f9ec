/**
 * The process tree: what the inspector knows about each process (node) and its actors, built
 * from inspection records. Keeps the last state of every actor, also after its process is gone,
 * and the machine definitions needed to draw statecharts.
 */
import { monotonicNow } from "../../transport/clock.ts";
import { INSPECTION_HEARTBEAT_EVENT, INSPECTION_NODE_CLOSED_EVENT, type InspectionRecord } from "../runtime/index.ts";
import { type Assignment, assignmentsFromContext, queueIn } from "./clusterView.ts";

/** Actors remembered per process; stopped ones are forgotten first. @default 2000 */
export const DEFAULT_MAX_ACTORS_PER_NODE = 2000;
/** Gone processes remembered (with their actors' last states); the longest gone are forgotten first. @default 200 */
export const DEFAULT_MAX_GONE_PROCESSES = 200;
/** Machine definitions remembered. @default 1000 */
export const DEFAULT_MAX_DEFINITIONS = 1000;

const REBALANCER = /rebalanc/i;
// a push consumer's pull service (`<group>/pull`) and a pull consumer's (`<group>/pull-loop`)
const PULLER = /\/pull(Service|-loop)?$/i;
/** A queue counts as held by the process that pulled it within this window. */
export const PULL_ASSIGNMENT_WINDOW_MS = 60_000;

/** What a process is, judged by the actors it hosts. */
export type NodeRole = "nameserver" | "broker" | "client";

/** One actor as the page lists it. */
export interface ActorView {
  /** `${nodeId}|${actorName}`: stable across restarts of the actor */
  key: string;
  nodeId: string;
  actorName: string;
  sessionId: string;
  machineId?: string;
  /** true when a statechart can be drawn for it */
  hasChart: boolean;
  status: string;
  value?: unknown;
  lastEventType?: string;
  lastTime: number;
  events: number;
  failures: number;
  lastError?: string;
}

/** One process. */
export interface NodeView {
  nodeId: string;
  role: NodeRole;
  address?: string;
  status: "alive" | "gone";
  lastSeen: number;
  goneAt?: number;
  records: number;
  actors: ActorView[];
}

interface NodeState {
  nodeId: string;
  address?: string;
  status: "alive" | "gone";
  lastSeen: number;
  /** when last heard from, on the tree's clock: what the silence check compares */
  heardAt: number;
  goneAt?: number;
  records: number;
  /** sends heartbeats: shown as gone when they stop (see {@link ProcessTree.markSilentGone}) */
  heartbeats: boolean;
  actors: Map<string, ActorView>;
  bySession: Map<string, ActorView>;
}

/** The role of a process from its hosted actor names. */
export function roleOf(actorNames: Iterable<string>): NodeRole {
  let role: NodeRole = "client";
  for (const n of actorNames) {
    if (n === "namesrv") return "nameserver";
    if (n === "broker" || n === "store") role = "broker";
  }
  return role;
}

export class ProcessTree {
  private readonly nodes = new Map<string, NodeState>();
  private readonly definitions = new Map<string, unknown>();
  /** latest context of each rebalancer, by `${nodeId}|${actorName}` (the cluster view's assignment) */
  private readonly rebalancerContexts = new Map<string, { nodeId: string; context: unknown }>();
  /**
   * `${group}@${topic}@${brokerName}@${queueId}` -> the process that pulled it last, from pull actors'
   * events; keyed by group too, as every group consuming a topic pulls the same queues
   */
  private readonly pulledBy = new Map<string, Assignment & { time: number }>();
  /** ids of the gone processes, longest gone first */
  private readonly gone = new Set<string>();

  constructor(
    private readonly maxActorsPerNode = DEFAULT_MAX_ACTORS_PER_NODE,
    private readonly maxGoneProcesses = DEFAULT_MAX_GONE_PROCESSES,
    /** the clock of `heardAt` and {@link markSilentGone}: monotonic, so a wall clock step does not delay a silence */
    private readonly clock: () => number = monotonicNow,
  ) {}

  /** Updates the tree with one (checked) record; false for a liveness signal, which is not for the timeline. */
  apply(r: InspectionRecord): boolean {
    // a closing node's farewell: gone now, its actors' last states kept (no probe needed)
    if (r.kind === "event" && r.type === INSPECTION_NODE_CLOSED_EVENT) {
      this.markGone(r.nodeId);
      return true;
    }
    const n = this.node(r.nodeId);
    n.lastSeen = Date.now();
    n.heardAt = this.clock();
    if (n.status === "gone") {
      n.status = "alive";
      n.goneAt = undefined;
      this.gone.delete(n.nodeId);
    }
    // a liveness signal only: not a record of the process's actors
    if (r.kind === "event" && r.type === INSPECTION_HEARTBEAT_EVENT) {
      n.heartbeats = true;
      return false;
    }
    n.records++;
    let a = n.bySession.get(r.sessionId);
    if (r.kind === "actor") {
      if (r.definition !== undefined && r.machineId) this.remember(r.nodeId, r.machineId, r.definition);
      const prev = n.actors.get(r.actorName);
      if (prev) n.bySession.delete(prev.sessionId);
      a = {
        key: `${r.nodeId}|${r.actorName}`,
        nodeId: r.nodeId,
        actorName: r.actorName,
        sessionId: r.sessionId,
        machineId: r.machineId,
        hasChart: r.machineId !== undefined && this.definition(r.nodeId, r.machineId) !== undefined,
        status: "active",
        lastTime: r.time,
        events: prev?.events ?? 0,
        failures: prev?.failures ?? 0,
        lastError: prev?.lastError,
      };
      n.actors.set(r.actorName, a);
      n.bySession.set(r.sessionId, a);
      this.trim(n);
      return true;
    }
    if (a === undefined) a = n.actors.get(r.actorName);
    if (a === undefined) return true;
    a.lastTime = r.time;
    if (r.kind === "event") {
      a.events++;
      a.lastEventType = r.type;
      if (PULLER.test(r.actorName)) {
        const q = queueIn(r.payload);
        if (q) {
          const group = r.actorName.includes("/") ? r.actorName.slice(0, r.actorName.lastIndexOf("/")) : undefined;
          this.pulledBy.set(`${group ?? ""}@${q.topic}@${q.brokerName ?? ""}@${q.queueId}`, {
            nodeId: r.nodeId,
            group,
            ...q,
            time: r.time,
          });
        }
      }
    } else if (r.kind === "snapshot") {
      if (a.sessionId === r.sessionId) {
        a.status = r.status;
        if (r.value !== undefined) a.value = r.value;
        if (r.error) a.lastError = r.error;
        if (REBALANCER.test(r.actorName) && r.context !== undefined)
          this.rebalancerContexts.set(a.key, { nodeId: r.nodeId, context: r.context });
      }
    } else if (r.kind === "failure") {
      a.failures++;
      a.lastError = r.error;
      if (r.action === "stop") a.status = "stopped";
    }
    return true;
  }

  /** Records a process's address (from a probe). */
  setAddress(nodeId: string, address: string): void {
    this.node(nodeId).address = address;
  }

  /** Marks a process as gone: it stays listed with the last state of its actors. */
  markGone(nodeId: string): void {
    const n = this.nodes.get(nodeId);
    if (n && n.status !== "gone") {
      n.status = "gone";
      n.goneAt = Date.now();
      this.gone.add(nodeId);
      // short-lived processes (one per client run) come and go: keep the most recently gone
      for (const id of this.gone) {
        if (this.gone.size <= this.maxGoneProcesses) break;
        this.forget(id);
      }
    }
  }

  /**
   * Marks as gone every alive process that sends heartbeats and was last heard from (any record,
   * or a probe answer) before `time` (on the tree's clock, {@link monotonicNow} unless given): a process that died without its
   * farewell (kill -9).
   */
  markSilentGone(time: number): void {
    for (const n of this.nodes.values()) if (n.heartbeats && n.status === "alive" && n.heardAt < time) this.markGone(n.nodeId);
  }

  /** Drops everything known about a process. */
  private forget(nodeId: string): void {
    this.nodes.delete(nodeId);
    this.gone.delete(nodeId);
    for (const [k, c] of this.rebalancerContexts) if (c.nodeId === nodeId) this.rebalancerContexts.delete(k);
    for (const [k, a] of this.pulledBy) if (a.nodeId === nodeId) this.pulledBy.delete(k);
    const own = `${nodeId}\u0000`;
    for (const k of this.definitions.keys()) if (k.startsWith(own)) this.definitions.delete(k);
  }

  /** Marks a process alive again (answered a probe). */
  markAlive(nodeId: string): void {
    const n = this.node(nodeId);
    n.status = "alive";
    n.goneAt = undefined;
    n.lastSeen = Date.now();
    n.heardAt = this.clock();
    this.gone.delete(nodeId);
  }

  has(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  /** The machine definition for a machine id, preferring the one sent by `nodeId`. */
  definition(nodeId: string, machineId: string): unknown {
    return this.definitions.get(`${nodeId}\u0000${machineId}`) ?? this.definitions.get(machineId);
  }

  /** Every known definition keyed by machine id (for export). */
  allDefinitions(): Map<string, unknown> {
    const out = new Map<string, unknown>();
    for (const [k, v] of this.definitions) if (!k.includes("\u0000")) out.set(k, v);
    return out;
  }

  /** Queues held by each process: from its rebalancers' latest contexts and its pull actors' recent events (alive processes only). */
  assignments(): Assignment[] {
    const out: Assignment[] = [];
    for (const { nodeId, context } of this.rebalancerContexts.values()) {
      if (this.nodes.get(nodeId)?.status === "alive") out.push(...assignmentsFromContext(nodeId, context));
    }
    const since = Date.now() - PULL_ASSIGNMENT_WINDOW_MS;
    for (const [k, a] of this.pulledBy) {
      if (a.time < since) this.pulledBy.delete(k);
      else if (this.nodes.get(a.nodeId)?.status === "alive") out.push(a);
    }
    return out;
  }

  /** A plain copy of the tree, processes sorted by role then id, actors by name. */
  view(): NodeView[] {
    const order: Record<NodeRole, number> = { nameserver: 0, broker: 1, client: 2 };
    const out: NodeView[] = [];
    for (const n of this.nodes.values()) {
      const actors = [...n.actors.values()].map((a) => ({
        ...a,
        hasChart: a.machineId !== undefined && this.definition(n.nodeId, a.machineId) !== undefined,
      }));
      actors.sort((x, y) => (x.actorName < y.actorName ? -1 : x.actorName > y.actorName ? 1 : 0));
      out.push({
        nodeId: n.nodeId,
        role: roleOf(n.actors.keys()),
        address: n.address,
        status: n.status,
        lastSeen: n.lastSeen,
        goneAt: n.goneAt,
        records: n.records,
        actors,
      });
    }
    out.sort((x, y) => order[x.role] - order[y.role] || (x.nodeId < y.nodeId ? -1 : 1));
    return out;
  }

  private node(nodeId: string): NodeState {
    let n = this.nodes.get(nodeId);
    if (!n)
      this.nodes.set(
        nodeId,
        (n = {
          nodeId,
          status: "alive",
          lastSeen: Date.now(),
          heardAt: this.clock(),
          records: 0,
          heartbeats: false,
          actors: new Map(),
          bySession: new Map(),
        }),
      );
    return n;
  }

  private remember(nodeId: string, machineId: string, def: unknown): void {
    if (this.definitions.size >= 2 * DEFAULT_MAX_DEFINITIONS) {
      const oldest = this.definitions.keys().next().value;
      if (oldest !== undefined) this.definitions.delete(oldest);
    }
    this.definitions.set(`${nodeId}\u0000${machineId}`, def);
    this.definitions.set(machineId, def);
  }

  private trim(n: NodeState): void {
    if (n.actors.size <= this.maxActorsPerNode) return;
    for (const pass of [true, false]) {
      for (const [name, a] of n.actors) {
        if (n.actors.size <= this.maxActorsPerNode) return;
        if (pass && a.status === "active") continue;
        n.actors.delete(name);
        n.bySession.delete(a.sessionId);
      }
    }
  }
}
