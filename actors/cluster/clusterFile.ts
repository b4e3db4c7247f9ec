/**
 * The cluster file (`<dir>/cluster.json`): every process `cluster up` started, with its role,
 * host, addresses, pid, data dir, log file and the exact arguments it was started with, so
 * `status`, `down`, `kill` and `restart` act on exactly those processes. Hosts are named per
 * process; a file written by hand may place processes on other hosts (they are then reported,
 * never signalled, by this machine).
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { isBrokerId, MQError, shownValue } from "../../transport/protocol.ts";
import { shellArg } from "../../transport/shellArg.ts";

export const CLUSTER_FILE_NAME = "cluster.json";
/** The `cluster` commands' --dir when none is given. */
export const DEFAULT_CLUSTER_DIR = "./actormq-cluster";
export const CLUSTER_FILE_VERSION = 1;

export type ClusterRole = "nameserver" | "master" | "slave";

/** One process of the cluster. */
export interface ClusterProcess {
  /** unique within the cluster: namesrv-0, broker-a, broker-a-s1, ... */
  name: string;
  role: ClusterRole;
  /** host the process runs on ("localhost" = this machine) */
  host: string;
  brokerName?: string;
  brokerId?: number;
  /** endpoint it binds */
  listen: string;
  /** endpoint others use */
  address: string;
  /** "host:port" of its Prometheus endpoint (brokers) */
  metrics?: string;
  pid: number;
  /**
   * when `pid` started (`/proc/<pid>/stat` field 22), recorded at spawn: a reused pid running the
   * same command is still another process (absent from older files and without /proc)
   */
  startTime?: string;
  /** its data directory (brokers: the store) */
  dir: string;
  logFile: string;
  /** arguments after `node`, to restart it exactly */
  argv: string[];
}

/** The options of the `cluster up` that made a cluster: how to make the same one again. */
export interface ClusterUpFlags {
  nameservers: number;
  brokers: number;
  slaves: number;
  basePort?: number;
  bindHost: string;
  advertiseHost?: string;
  flush: "sync" | "async";
  logLevel?: string;
  /** every process's --curve-secret: a key file (docs/security.md) */
  curveSecretFile?: string;
  /** every process's --curve-allow */
  curveAllowFile?: string;
}

/** What `cluster up` uses for a flag not given. */
export const CLUSTER_UP_DEFAULTS = { nameservers: 1, brokers: 1, slaves: 0, bindHost: "127.0.0.1", flush: "sync" } as const;

/** `cluster up`'s flags with its defaults filled in: what it plans with and what the cluster file keeps. */
export function resolveUpFlags(opts: Partial<ClusterUpFlags>): ClusterUpFlags {
  const d = CLUSTER_UP_DEFAULTS;
  return {
    nameservers: opts.nameservers ?? d.nameservers,
    brokers: opts.brokers ?? d.brokers,
    slaves: opts.slaves ?? d.slaves,
    basePort: opts.basePort,
    bindHost: opts.bindHost ?? d.bindHost,
    advertiseHost: opts.advertiseHost,
    flush: opts.flush ?? d.flush,
    logLevel: opts.logLevel,
    ...(opts.curveSecretFile !== undefined ? { curveSecretFile: opts.curveSecretFile } : {}),
    ...(opts.curveAllowFile !== undefined ? { curveAllowFile: opts.curveAllowFile } : {}),
  };
}

export interface ClusterFile {
  version: number;
  createdAt: string;
  nameservers: string[];
  processes: ClusterProcess[];
  /** what `cluster up` was given (absent from files written before it was kept) */
  up?: ClusterUpFlags;
  /**
   * Set while `cluster up` runs: the file then names the processes spawned so far, so that an `up`
   * killed before it finished leaves them to `status` and `down` instead of running unnamed.
   */
  starting?: boolean;
}

export { shellArg };

/** ` --dir <dir>` for a hint naming a command that takes --dir, or "" for the default directory. */
export function dirArg(dir: string): string {
  return path.resolve(dir) === path.resolve(DEFAULT_CLUSTER_DIR) ? "" : ` --dir ${shellArg(dir)}`;
}

export function clusterFilePath(dir: string): string {
  return path.join(path.resolve(dir), CLUSTER_FILE_NAME);
}

/**
 * Reads and checks a cluster file; a missing or damaged one is an MQError saying what to do.
 * `flag` is the option the caller took `dir` from, named in the advice. @default "--dir"
 */
export function readClusterFile(dir: string, flag = "--dir"): ClusterFile {
  const file = clusterFilePath(dir);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `No cluster file at ${file}: start one with \`actormq cluster up --dir ${shellArg(dir)}\` or pass the right ${flag}.`,
    );
  }
  let cf: ClusterFile;
  try {
    cf = JSON.parse(text) as ClusterFile;
  } catch {
    throw new MQError("MALFORMED", `Cluster file ${file} is not valid JSON; fix or remove it.`);
  }
  if (cf?.version !== CLUSTER_FILE_VERSION || !Array.isArray(cf.processes) || !Array.isArray(cf.nameservers)) {
    throw new MQError("MALFORMED", `Cluster file ${file} is not a version ${CLUSTER_FILE_VERSION} actormq cluster file; fix or remove it.`);
  }
  for (const [i, p] of cf.processes.entries()) {
    const lacking =
      typeof p !== "object" || p === null
        ? "is not an object"
        : typeof p.name !== "string"
          ? "has no name (a string)"
          : typeof p.pid !== "number"
            ? "has no pid (a number)"
            : !Array.isArray(p.argv)
              ? "has no argv (an array)"
              : undefined;
    if (lacking !== undefined) {
      const what = typeof p?.name === "string" ? shownValue(p.name) : `number ${i + 1}`;
      throw new MQError("MALFORMED", `Cluster file ${file} has a malformed process entry: entry ${what} ${lacking}; fix or remove it.`);
    }
    // a broker's entry needs one (its name and role are shown with it); a name server's has none
    if ((p.brokerId !== undefined || p.role === "master" || p.role === "slave") && !isBrokerId(p.brokerId))
      throw new MQError(
        "MALFORMED",
        `Cluster file ${file} has a malformed process entry: ${shownValue(p.name)} (${shownValue(p.role)}) ` +
          `${p.brokerId === undefined ? "has no brokerId" : `has brokerId ${shownValue(p.brokerId)}, not a broker id`} ` +
          "(an integer >= 0: 0 for a master, 1, 2, ... for its slaves); fix or remove it.",
      );
  }
  return cf;
}

/** Writes atomically (temp file + rename). */
export function writeClusterFile(dir: string, cf: ClusterFile): void {
  const file = clusterFilePath(dir);
  writeFileSync(`${file}.tmp`, `${JSON.stringify(cf, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
}
