/** Options of {@link Inspector.start} and their defaults. */

import { networkInterfaces } from "node:os";
import { optionNamesOf } from "../../transport/optionNames.ts";
import { checkBoolean, isPortText, MQError, shownValue } from "../../transport/protocol.ts";
import { type ActorNode, CURVE_LINK_OPTION_NAMES, type CurveLinkOptions } from "../runtime/index.ts";
import type { ClusterSource } from "./clusterView.ts";
import { DEFAULT_MAX_RECORD_BYTES } from "./recordCheck.ts";
import { DEFAULT_TIMELINE_BYTES, DEFAULT_TIMELINE_CAPACITY } from "./timelineBuffer.ts";

/** Loopback HTTP address with an ephemeral port. */
export const DEFAULT_INSPECTOR_LISTEN = "127.0.0.1:0";
/** How often collected processes are probed for liveness. @default 1000 */
export const DEFAULT_PROBE_INTERVAL_MS = 1000;
/** Shortest probe interval accepted. */
export const MIN_PROBE_INTERVAL_MS = 10;
/** Failed probes in a row after which a process is shown as gone. @default 2 */
export const DEFAULT_PROBE_FAILURES_BEFORE_GONE = 2;
/** Heartbeat intervals without a word from a publishing process after which it is shown as gone. @default 3 */
export const DEFAULT_HEARTBEATS_MISSED_BEFORE_GONE = 3;
/** With collectOnFirstView, how long collecting outlives the last page view. @default 60000 */
export const DEFAULT_COLLECT_IDLE_MS = 60_000;
/** Pause between pushes of new records to open pages (one write per page per tick). @default 50 */
export const DEFAULT_PUSH_INTERVAL_MS = 50;

export interface InspectorOptions extends CurveLinkOptions {
  /** `host:port` for the web page. Non-loopback hosts need `allowRemote: true`. @default "127.0.0.1:0" */
  listen?: string;
  /** Serve the page on a non-loopback address (anyone who reaches it sees actor states). @default false */
  allowRemote?: boolean;
  /**
   * Node addresses (`tcp://host:port`, the ROUTER of a name server, broker or listening client)
   * asked to publish their inspection streams here (INSPECT_SUBSCRIBE) and probed for liveness;
   * an address that never answered is listed as unreachable. Anything else is refused (ILLEGAL_ARGUMENT).
   * Processes that do not listen publish themselves: `node.publishInspection(inspector.collectorEndpoint)`.
   */
  collect?: string[];
  /** Nodes of this process, inspected directly (no encoding, no sockets). */
  nodes?: ActorNode[];
  /** ZeroMQ endpoint the collector's SUB binds. @default "tcp://127.0.0.1:*" */
  collectorBind?: string;
  /**
   * The collector endpoint nodes are asked to publish to (and `inspector.collectorEndpoint`),
   * `tcp://host:port` with port `*` for the bound one: the address processes on other hosts reach
   * this one at, e.g. `tcp://10.0.0.5:*` with `collectorBind: "tcp://0.0.0.0:*"`. @default the bound endpoint
   */
  collectorAdvertise?: string;
  /** @default 20000 records */
  capacity?: number;
  /** Estimated bytes of the records the timeline keeps; the oldest go first past it. @default 64 MiB */
  capacityBytes?: number;
  /** Inspection records larger than this (estimated bytes) are dropped and counted. @default 1 MiB */
  maxRecordBytes?: number;
  /** How often `collect` addresses are probed, in ms (at least 10). @default 1000 */
  probeIntervalMs?: number;
  /** Where the cluster view's data comes from; by default asked of the collected name servers and brokers. */
  cluster?: ClusterSource;
  /**
   * Serve at once but start collecting only when the page (or its `/api/state`) is first requested: an
   * inspector that nobody opens costs nothing (how `actormq start` runs it). @default false
   */
  collectOnFirstView?: boolean;
  /**
   * With `collectOnFirstView`: stop collecting (the processes stop publishing) once no page has
   * been open and `/api/state` not requested for this long; the next view starts again. @default 60000
   */
  collectIdleMs?: number;
}

/** The names {@link InspectorOptions} may hold; Inspector.start refuses any other. */
export const INSPECTOR_OPTION_NAMES = optionNamesOf<InspectorOptions>()([
  ...CURVE_LINK_OPTION_NAMES,
  "listen",
  "allowRemote",
  "collect",
  "nodes",
  "collectorBind",
  "collectorAdvertise",
  "capacity",
  "capacityBytes",
  "maxRecordBytes",
  "probeIntervalMs",
  "cluster",
  "collectOnFirstView",
  "collectIdleMs",
]);

/** Defaults spread under the user's options. */
export function defaultInspectorOptions(): Required<
  Omit<InspectorOptions, "cluster" | "collectorAdvertise" | "curveServerKey" | "curveClient">
> {
  return {
    listen: DEFAULT_INSPECTOR_LISTEN,
    allowRemote: false,
    collect: [],
    nodes: [],
    collectorBind: "tcp://127.0.0.1:*",
    capacity: DEFAULT_TIMELINE_CAPACITY,
    capacityBytes: DEFAULT_TIMELINE_BYTES,
    maxRecordBytes: DEFAULT_MAX_RECORD_BYTES,
    probeIntervalMs: DEFAULT_PROBE_INTERVAL_MS,
    collectOnFirstView: false,
    collectIdleMs: DEFAULT_COLLECT_IDLE_MS,
  };
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** Splits `host:port` and refuses non-loopback hosts unless allowed. */
export function parseListen(listen: string, allowRemote: boolean): { host: string; port: number } {
  // "false" is truthy: it would serve on every interface
  checkBoolean("allowRemote", allowRemote);
  if (typeof listen !== "string")
    throw new MQError("ILLEGAL_ARGUMENT", `Bad inspector listen address ${shownValue(listen)}: use a host:port string, e.g. 127.0.0.1:0.`);
  const m = /^(\[[^\]]+\]|[^:]+|[0-9a-fA-F:]+):(\d{1,5})$/.exec(listen.replace(/^https?:\/\//, ""));
  if (!m) throw new MQError("ILLEGAL_ARGUMENT", `Bad inspector listen address "${listen}": use host:port, e.g. 127.0.0.1:0.`);
  const host = m[1]!.replace(/^\[|\]$/g, "");
  const port = Number(m[2]);
  if (port > 65535) throw new MQError("ILLEGAL_ARGUMENT", `Bad port in inspector listen address "${listen}": use 0..65535.`);
  if (!allowRemote && !LOOPBACK.has(host) && !LOOPBACK.has(m[1]!)) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `The inspector serves on loopback only; "${host}" is not loopback. Pass allowRemote: true (CLI: actormq inspect --allow-remote, actormq start --inspector-allow-remote) to serve on it deliberately.`,
    );
  }
  return { host, port };
}

const COLLECT_ADDRESS = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):(\d{1,5})$/;

/** Refuses a `collect` address that is not `tcp://host:port` (a node's ROUTER endpoint). */
export function checkCollectAddress(address: string): void {
  const m = typeof address === "string" ? COLLECT_ADDRESS.exec(address) : null;
  if (!m || !isPortText(m[2]!, 1))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `Bad collect address "${address}": use tcp://host:port, the endpoint a name server, broker or listening client serves on (e.g. tcp://127.0.0.1:9876).`,
    );
}

/** Hosts of a collector endpoint that a process on another host cannot connect to. */
const NOT_FROM_ELSEWHERE = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]|0\.0\.0\.0|\[::\]|\*)$/;

/** The host of a `tcp://host:port` endpoint ("" for anything else). */
function endpointHost(endpoint: string): string {
  return /^tcp:\/\/(\[[^\]]*\]|[^:/]+):/.exec(endpoint)?.[1] ?? "";
}

/** This host's interface addresses, as endpoint hosts (IPv6 bracketed). */
function ownHosts(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces()))
    for (const i of list ?? []) out.add(i.family === "IPv6" ? `[${i.address}]` : i.address);
  return out;
}

/**
 * One line saying that nodes on other hosts among `collect` (neither loopback nor one of this
 * host's addresses) would be asked to publish to a collector endpoint they cannot reach (loopback,
 * or a wildcard bind such as 0.0.0.0), with what to pass instead; undefined otherwise.
 */
export function collectorReachWarning(collect: string[], collectorEndpoint: string, own = ownHosts()): string | undefined {
  if (!NOT_FROM_ELSEWHERE.test(endpointHost(collectorEndpoint))) return undefined;
  const elsewhere = collect.filter((a) => {
    const host = endpointHost(a);
    return !/^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/.test(host) && !own.has(host);
  });
  if (elsewhere.length === 0) return undefined;
  return `nodes at ${elsewhere.join(", ")} are asked to publish to ${collectorEndpoint}, which a process on another host cannot reach: pass --collector-advertise tcp://<this host's address>:* (with --collector-bind tcp://0.0.0.0:* or that address).`;
}

/** True for host names that mean this machine. */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.has(host);
}
