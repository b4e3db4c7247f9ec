/**
 * The `namesrv` actor: answers route queries and keeps the broker registry, dropping brokers that
 * stopped registering (scan every 5 s, RocketMQ's `scanNotActiveBroker`).
 */
import { setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import {
  BROKER_ID_RULE,
  BROKER_NAME_PATTERN,
  checkNotReserved,
  checkTopicConfig,
  isBrokerId,
  isMQError,
  isTcpAddress,
  MAX_TIMER_MS,
  MQError,
  type RegisterBrokerRequest,
  shownValue,
  type TopicConfig,
  type UnregisterBrokerRequest,
} from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import { type ClusterConflict, RouteTable } from "./routeTable.ts";

/** How often expired brokers are looked for (RocketMQ's `scanNotActiveBrokerInterval`). */
export const DEFAULT_SCAN_INTERVAL_MS = 5_000;

interface Asked {
  reply?: Replier;
}

/** Events the `namesrv` actor handles; field shapes are in transport/protocol.ts. */
export type NamesrvEvent =
  | ({ type: "REGISTER_BROKER" } & Partial<RegisterBrokerRequest> & Asked)
  | ({ type: "UNREGISTER_BROKER" } & Partial<UnregisterBrokerRequest> & Asked)
  | ({ type: "GET_ROUTEINFO_BY_TOPIC"; topic?: unknown } & Asked)
  | ({ type: "GET_BROKER_CLUSTER_INFO" } & Asked)
  | ({ type: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER" } & Asked)
  | ({ type: "DELETE_TOPIC_IN_NAMESRV"; topic?: unknown; clusterName?: unknown } & Asked);

/** Checks one entry of a registering broker's topicConfigTable; throws MQError INVALID_PARAMETER. */
function checkRegisteredTopic(tc: unknown): void {
  if (typeof tc !== "object" || tc === null)
    throw new MQError("INVALID_PARAMETER", "Every topicConfigTable entry must be a topic config object.");
  try {
    checkTopicConfig(tc as TopicConfig);
  } catch (e) {
    // checkTopic answers MESSAGE_ILLEGAL for a bad name: here it is a bad request like the rest
    throw isMQError(e, "MESSAGE_ILLEGAL") ? new MQError("INVALID_PARAMETER", e.message) : e;
  }
}

export interface NamesrvInput {
  /** @default 5000 */
  scanIntervalMs?: number;
  /**
   * clock, for tests @default monotonicNow: registration times are only compared with each other, and
   * a wall clock step forward would drop every live broker at once
   */
  now?: () => number;
  /** called with the addresses of brokers dropped for silence */
  onExpired?: (addrs: string[]) => void;
  /** called when brokers of one name register in different clusters (see {@link ClusterConflict}) */
  onClusterConflict?: (c: ClusterConflict) => void;
}

export interface NamesrvContext {
  table: RouteTable;
  scanIntervalMs: number;
  now: () => number;
  onExpired?: (addrs: string[]) => void;
}

function answer(reply: Replier | undefined, fn: () => object | undefined): void {
  try {
    const fields = fn();
    reply?.ok(fields ?? {});
  } catch (e) {
    reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", String(e)));
  }
}

function requireString(v: unknown, name: string): string {
  if (typeof v !== "string" || v.length === 0)
    throw new MQError("INVALID_PARAMETER", `The request has no "${name}"; send it as a non-empty string.`);
  return v;
}

/** A broker or cluster name as brokers check theirs at start: clients and cluster info key tables by it. */
function requireName(v: unknown, name: "brokerName" | "clusterName"): string {
  if (typeof v !== "string" || !BROKER_NAME_PATTERN.test(v))
    throw new MQError(
      "INVALID_PARAMETER",
      `The request's ${name} ${JSON.stringify(v)} is not valid: send a non-empty string of letters, digits, '.', '_' and '-'.`,
    );
  try {
    checkNotReserved(v, name === "brokerName" ? "broker" : "cluster");
  } catch (e) {
    throw new MQError("INVALID_PARAMETER", `The request's ${name}: ${(e as Error).message}`);
  }
  return v;
}

/** Every client connects to what a broker registers: an address it cannot connect to fails their sends and admin calls. */
function requireAddress(v: unknown, name: string): string {
  if (typeof v !== "string" || !isTcpAddress(v))
    throw new MQError(
      "INVALID_PARAMETER",
      `The request's ${name} ${JSON.stringify(v)} is not tcp://host:port with a port from 1 to 65535 (e.g. tcp://10.0.0.2:10911).`,
    );
  return v;
}

/** The broker's own heartbeatTimeoutMs range: Infinity or a huge number and the broker would never expire. */
function requireHeartbeatTimeout(v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_TIMER_MS)
    throw new MQError(
      "INVALID_PARAMETER",
      `The request's heartbeatTimeoutMillis must be an integer number of ms from 1 to ${MAX_TIMER_MS}, not ${String(v)}; leave it out for 120000.`,
    );
  return v;
}

function requireBrokerId(v: unknown): number {
  if (!isBrokerId(v)) throw new MQError("INVALID_PARAMETER", `The request's brokerId must be ${BROKER_ID_RULE}, got ${shownValue(v)}.`);
  return v;
}

export const namesrvMachine = setup({
  types: {
    context: {} as NamesrvContext,
    events: {} as NamesrvEvent,
    input: {} as NamesrvInput | undefined,
  },
  delays: {
    scanInterval: ({ context }) => context.scanIntervalMs,
  },
  actions: {
    register: ({ context, event }) => {
      if (event.type !== "REGISTER_BROKER") return;
      answer(event.reply, () => {
        const topicConfigTable = event.topicConfigTable;
        if (topicConfigTable !== undefined && (typeof topicConfigTable !== "object" || topicConfigTable === null)) {
          throw new MQError("INVALID_PARAMETER", "topicConfigTable must be an object of topic configs.");
        }
        // what clients build routes from: a config with 10^9 queues would have them make 10^9 queues
        if (topicConfigTable) for (const tc of Object.values(topicConfigTable)) checkRegisteredTopic(tc);
        return context.table.register(
          {
            clusterName: requireName(event.clusterName, "clusterName"),
            brokerName: requireName(event.brokerName, "brokerName"),
            brokerAddr: requireAddress(event.brokerAddr, "brokerAddr"),
            brokerId: requireBrokerId(event.brokerId),
            haServerAddr: event.haServerAddr == null ? undefined : requireAddress(event.haServerAddr, "haServerAddr"),
            heartbeatTimeoutMillis:
              event.heartbeatTimeoutMillis == null ? undefined : requireHeartbeatTimeout(event.heartbeatTimeoutMillis),
            topicConfigTable,
            dataVersion: typeof event.dataVersion === "number" ? event.dataVersion : 0,
          },
          context.now(),
        );
      });
    },
    unregister: ({ context, event }) => {
      if (event.type !== "UNREGISTER_BROKER") return;
      answer(event.reply, () => {
        context.table.unregister({
          clusterName: requireName(event.clusterName, "clusterName"),
          brokerName: requireName(event.brokerName, "brokerName"),
          brokerAddr: requireAddress(event.brokerAddr, "brokerAddr"),
          brokerId: requireBrokerId(event.brokerId),
        });
        return {};
      });
    },
    getRoute: ({ context, event }) => {
      if (event.type !== "GET_ROUTEINFO_BY_TOPIC") return;
      answer(event.reply, () => context.table.getRoute(requireString(event.topic, "topic")));
    },
    clusterInfo: ({ context, event }) => answer(event.reply, () => context.table.clusterInfo()),
    topicList: ({ context, event }) => answer(event.reply, () => ({ topicList: context.table.topicList() })),
    deleteTopic: ({ context, event }) => {
      if (event.type !== "DELETE_TOPIC_IN_NAMESRV") return;
      answer(event.reply, () => {
        const topic = requireString(event.topic, "topic");
        const cluster = event.clusterName == null ? undefined : requireName(event.clusterName, "clusterName");
        // as RocketMQ's: SUCCESS whether or not the topic had a route (a retry after a partial failure succeeds)
        return { deleted: context.table.deleteTopic(topic, cluster) };
      });
    },
    unsupported: ({ event }) => {
      (event as Asked).reply?.fail(
        new MQError("REQUEST_CODE_NOT_SUPPORTED", `The name server does not handle ${(event as { type: string }).type}.`),
      );
    },
    scanNotActiveBrokers: ({ context }) => {
      const dropped = context.table.scanNotActiveBrokers(context.now());
      if (dropped.length > 0) context.onExpired?.(dropped);
    },
  },
}).createMachine({
  id: "namesrv",
  context: ({ input }) => ({
    table: new RouteTable({ onClusterConflict: input?.onClusterConflict }),
    scanIntervalMs: input?.scanIntervalMs ?? DEFAULT_SCAN_INTERVAL_MS,
    now: input?.now ?? monotonicNow,
    onExpired: input?.onExpired,
  }),
  initial: "serving",
  states: {
    serving: {
      after: { scanInterval: { target: "serving", reenter: true, actions: "scanNotActiveBrokers" } },
      on: {
        REGISTER_BROKER: { actions: "register" },
        UNREGISTER_BROKER: { actions: "unregister" },
        GET_ROUTEINFO_BY_TOPIC: { actions: "getRoute" },
        GET_BROKER_CLUSTER_INFO: { actions: "clusterInfo" },
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER: { actions: "topicList" },
        DELETE_TOPIC_IN_NAMESRV: { actions: "deleteTopic" },
        "*": { actions: "unsupported" },
      },
    },
  },
});
