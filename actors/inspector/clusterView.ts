/**
 * Cluster view: brokers, topics and queues with their max offsets, consumer groups with per-queue
 * offsets, lag and assignment. Asked of the name servers and brokers over the wire with the same
 * admin requests RocketMQ's tools use; assignment is read from the rebalancers' inspected state.
 * Every part that cannot be read is reported in `errors`, never thrown.
 */

import {
  BrokerActor,
  type ClusterInfo,
  type ConsumeStatsReply,
  type SubscriptionGroupConfig,
  type TopicConfigTable,
} from "../../transport/protocol.ts";
import { type ConsumerProgressEntry, progressEntry } from "../client/admin.ts";
import type { ActorNode } from "../runtime/index.ts";

/** Queues asked for their max offset per broker, at most. @default 256 */
export const MAX_QUEUES_PER_BROKER = 256;
/** Timeout of each admin request. @default 2000 */
export const CLUSTER_REQUEST_TIMEOUT_MS = 2000;

export interface ClusterBroker {
  brokerName: string;
  brokerId: number;
  cluster: string;
  address: string;
  /** false when the broker did not answer */
  reachable: boolean;
}
export interface ClusterQueue {
  brokerName: string;
  queueId: number;
  maxOffset?: number;
}
export interface ClusterTopic {
  topic: string;
  queues: ClusterQueue[];
}
/** A queue of a group as `Admin.consumerProgress` reports it, and who holds it. */
export interface GroupQueue extends ConsumerProgressEntry {
  /** the process holding the queue, from its rebalancer's state */
  assignedTo?: string;
}
export interface ClusterGroup {
  group: string;
  queues: GroupQueue[];
}
export interface ClusterView {
  time: number;
  brokers: ClusterBroker[];
  topics: ClusterTopic[];
  groups: ClusterGroup[];
  errors: string[];
}

/** Produces the cluster view on demand. */
export type ClusterSource = () => Promise<ClusterView>;

/** A queue held by a process, found in a rebalancer's inspected context. */
export interface Assignment {
  nodeId: string;
  group?: string;
  topic: string;
  brokerName?: string;
  queueId: number;
}

/**
 * Queues a rebalancer's context lists (arrays of `{topic, queueId, brokerName?}` objects, nested up
 * to 3 levels); the group is read from a `group`/`consumerGroup` field when present.
 */
export function assignmentsFromContext(nodeId: string, context: unknown): Assignment[] {
  const out: Assignment[] = [];
  if (context === null || typeof context !== "object") return out;
  const c = context as Record<string, unknown>;
  const group = typeof c.group === "string" ? c.group : typeof c.consumerGroup === "string" ? c.consumerGroup : undefined;
  const seen = new Set<string>();
  const visit = (v: unknown, depth: number) => {
    if (v === null || typeof v !== "object" || depth > 3) return;
    if (Array.isArray(v)) {
      for (const x of v) {
        if (x !== null && typeof x === "object" && !Array.isArray(x)) {
          const q = x as Record<string, unknown>;
          if (typeof q.topic === "string" && typeof q.queueId === "number") {
            const key = `${q.topic}@${q.brokerName ?? ""}@${q.queueId}`;
            if (!seen.has(key)) {
              seen.add(key);
              out.push({
                nodeId,
                group,
                topic: q.topic,
                brokerName: typeof q.brokerName === "string" ? q.brokerName : undefined,
                queueId: q.queueId,
              });
            }
            continue;
          }
        }
        visit(x, depth + 1);
      }
      return;
    }
    for (const k in v as Record<string, unknown>) visit((v as Record<string, unknown>)[k], depth + 1);
  };
  visit(context, 0);
  return out;
}

/** The first `{topic, queueId, brokerName?}` object in `v` (nested up to 3 levels), e.g. a pull request's queue. */
export function queueIn(v: unknown, depth = 0): { topic: string; queueId: number; brokerName?: string } | undefined {
  if (v === null || typeof v !== "object" || depth > 3) return undefined;
  const o = v as Record<string, unknown>;
  if (!Array.isArray(v) && typeof o.topic === "string" && typeof o.queueId === "number") {
    return { topic: o.topic, queueId: o.queueId, brokerName: typeof o.brokerName === "string" ? o.brokerName : undefined };
  }
  for (const k in o) {
    const q = queueIn(o[k], depth + 1);
    if (q) return q;
  }
  return undefined;
}

/** Where the default source looks. */
export interface WireClusterSourceDeps {
  node: ActorNode;
  /** name server addresses known now */
  nameservers: () => string[];
  /** current assignments from inspected rebalancers */
  assignments: () => Assignment[];
}

/** The default {@link ClusterSource}: admin requests to name servers and master brokers. */
export function wireClusterSource(deps: WireClusterSourceDeps): ClusterSource {
  return async () => {
    const errors: string[] = [];
    const view: ClusterView = { time: Date.now(), brokers: [], topics: [], groups: [], errors };
    const ask = async <T>(address: string, actor: string, event: { type: string; [k: string]: unknown }): Promise<T | undefined> => {
      try {
        return (await deps.node.ref(address, actor).ask<T>(event, { timeoutMs: CLUSTER_REQUEST_TIMEOUT_MS })).fields;
      } catch (e) {
        errors.push(`${event.type} to ${address}: ${(e as Error).message}`);
        return undefined;
      }
    };
    const brokerTable = new Map<string, ClusterBroker>();
    for (const ns of deps.nameservers()) {
      const info = await ask<ClusterInfo>(ns, "namesrv", { type: "GET_BROKER_CLUSTER_INFO" });
      for (const bd of Object.values(info?.brokerAddrTable ?? {})) {
        for (const [id, address] of Object.entries(bd.brokerAddrs ?? {})) {
          brokerTable.set(`${bd.brokerName}:${id}`, {
            brokerName: bd.brokerName,
            brokerId: Number(id),
            cluster: bd.cluster,
            address,
            reachable: true,
          });
        }
      }
      if (info) break;
    }
    view.brokers = [...brokerTable.values()].sort((a, b) =>
      a.brokerName < b.brokerName ? -1 : a.brokerName > b.brokerName ? 1 : a.brokerId - b.brokerId,
    );
    const topics = new Map<string, ClusterTopic>();
    const groups = new Map<string, ClusterGroup>();
    for (const b of view.brokers.filter((x) => x.brokerId === 0)) {
      const tc = await ask<TopicConfigTable>(b.address, BrokerActor.BROKER, { type: "GET_ALL_TOPIC_CONFIG" });
      if (!tc) {
        b.reachable = false;
        continue;
      }
      let asked = 0;
      // asked together: one after the other, a broker that stopped answering held the view for a
      // request timeout per queue (up to MAX_QUEUES_PER_BROKER of them)
      const offsetAsks: Promise<void>[] = [];
      for (const cfg of Object.values(tc.topicConfigTable ?? {})) {
        let t = topics.get(cfg.topicName);
        if (!t) topics.set(cfg.topicName, (t = { topic: cfg.topicName, queues: [] }));
        for (let q = 0; q < cfg.readQueueNums; q++) {
          const queue: ClusterQueue = { brokerName: b.brokerName, queueId: q };
          if (asked++ < MAX_QUEUES_PER_BROKER)
            offsetAsks.push(
              ask<{ offset: number }>(b.address, BrokerActor.OFFSETS, { type: "GET_MAX_OFFSET", topic: cfg.topicName, queueId: q }).then(
                (r) => {
                  if (r && typeof r.offset === "number") queue.maxOffset = r.offset;
                },
              ),
            );
          t.queues.push(queue);
        }
      }
      await Promise.all(offsetAsks);
      const sg = await ask<{ subscriptionGroupTable: Record<string, Partial<SubscriptionGroupConfig>> }>(b.address, BrokerActor.BROKER, {
        type: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
      });
      for (const [group, cfg] of Object.entries(sg?.subscriptionGroupTable ?? {})) {
        // a broadcasting group's offsets are its members': the broker refuses its stats (no lag to show)
        if (cfg?.messageModel === "BROADCASTING") continue;
        const cs = await ask<ConsumeStatsReply>(b.address, BrokerActor.OFFSETS, { type: "GET_CONSUME_STATS", consumerGroup: group });
        if (!cs) continue;
        let g = groups.get(group);
        if (!g) groups.set(group, (g = { group, queues: [] }));
        for (const q of cs.offsetTable ?? []) g.queues.push(progressEntry(q));
      }
    }
    const assigned = deps.assignments();
    for (const g of groups.values()) {
      for (const q of g.queues) {
        const a = assigned.find(
          (x) =>
            (x.group === undefined || x.group === g.group) &&
            x.topic === q.topic &&
            x.queueId === q.queueId &&
            (x.brokerName === undefined || x.brokerName === q.brokerName),
        );
        if (a) q.assignedTo = a.nodeId;
      }
    }
    view.topics = [...topics.values()].sort((a, b) => (a.topic < b.topic ? -1 : 1));
    view.groups = [...groups.values()].filter((g) => g.queues.length > 0).sort((a, b) => (a.group < b.group ? -1 : 1));
    return view;
  };
}
