/**
 * `cluster up|status|down|kill|restart`: a cluster of name servers, masters and slaves as
 * separate processes on this machine, described by `<dir>/cluster.json` (clusterFile.ts).
 * Every process gets its own ports, data dir and log file under `<dir>/<name>/`. A start that
 * fails part-way (or is aborted: Ctrl-C) stops every process it spawned, ready or not; `down`
 * signals only the pids the file names and only while they still are those processes.
 */
import { existsSync, readFileSync, renameSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { mkdirs } from "../../store/mkdirs.ts";
import { MQError } from "../../transport/protocol.ts";
import { BROKER_NODE_FLAGS } from "../broker/nodeFlags.ts";
import { localBrokerName } from "../localCluster.ts";
import { prepareClusterDir } from "./clusterDir.ts";
import {
  CLUSTER_FILE_VERSION,
  type ClusterFile,
  type ClusterProcess,
  clusterFilePath,
  dirArg,
  readClusterFile,
  resolveUpFlags,
  shellArg,
  writeClusterFile,
} from "./clusterFile.ts";
import { ACTORMQ_BIN, DEFAULT_READY_TIMEOUT_MS, DEFAULT_STOP_TIMEOUT_MS, isRunning, startProcess, stopPid } from "./clusterProcesses.ts";
import { isAlive } from "./processCheck.ts";

/** Options of {@link clusterUp}. */
export interface ClusterUpOptions {
  dir: string;
  /** @default 1 */
  nameservers?: number;
  /** masters (broker-a, broker-b, ...). @default 1 */
  brokers?: number;
  /** slaves per master. @default 0 */
  slaves?: number;
  /** first port; processes take consecutive ports (brokers two: service and metrics). @default any free ports */
  basePort?: number;
  /** address to bind. @default "127.0.0.1" */
  bindHost?: string;
  /** address others use, when it differs from bindHost. @default bindHost */
  advertiseHost?: string;
  /** @default "sync" */
  flush?: "sync" | "async";
  /** role of the masters. @default "ASYNC_MASTER" with no slaves, "SYNC_MASTER" with slaves */
  masterRole?: "ASYNC_MASTER" | "SYNC_MASTER";
  logLevel?: string;
  /**
   * a file holding the CURVE secret key every process uses (`--curve-secret`; brokers take its
   * public key as the name servers' and master's). @default none (plaintext)
   */
  curveSecretFile?: string;
  /** a file of the client public keys every process allows (`--curve-allow`) */
  curveAllowFile?: string;
  readyTimeoutMs?: number;
  /** called as each process becomes ready */
  onProgress?: (ready: number, total: number, p: ClusterProcess) => void;
  /** aborts the start (the command line's Ctrl-C): what was spawned is stopped, the cluster file left as it was */
  signal?: AbortSignal;
}

/** A process with whether it runs now. */
export type ClusterMemberStatus = ClusterProcess & { state: "running" | "dead" | "remote" };

function isLocalHost(h: string): boolean {
  return h === "localhost" || h === os.hostname();
}

function endpoint(host: string, port: number | "*"): string {
  return `tcp://${host}:${port}`;
}

function portOf(address: string): string {
  return /:(\d+)$/.exec(address)?.[1] ?? "*";
}

/** Replaces the value after `flag` in argv (or appends both). */
function setArg(argv: string[], flag: string, value: string): void {
  const i = argv.indexOf(flag);
  if (i >= 0) argv[i + 1] = value;
  else argv.push(flag, value);
}

/** A broker's process and store directory name: its broker name, `<name>-s<id>` for a slave. */
export function brokerDirName(brokerName: string, brokerId: number): string {
  return brokerId === 0 ? brokerName : `${brokerName}-s${brokerId}`;
}

/** Plans every process of the cluster without starting anything. */
export function planCluster(opts: ClusterUpOptions): ClusterProcess[] {
  const up = resolveUpFlags(opts);
  const { nameservers: nsCount, brokers: masters, slaves, flush } = up;
  for (const [name, v, min] of [
    ["--nameservers", nsCount, 1],
    ["--brokers", masters, 1],
    ["--slaves", slaves, 0],
  ] as const) {
    if (!Number.isInteger(v) || v < min || v > 64)
      throw new MQError("ILLEGAL_ARGUMENT", `${name} must be an integer between ${min} and 64.`);
  }
  // the top is what the cluster's ports leave (below), not a fixed bound
  if (opts.basePort !== undefined && (!Number.isInteger(opts.basePort) || opts.basePort < 1024)) {
    throw new MQError("ILLEGAL_ARGUMENT", "--base-port must be an integer from 1024 (below are privileged ports).");
  }
  if (opts.basePort !== undefined) {
    // refused here, not by the first process that cannot bind after dozens were started
    const needed = nsCount + masters * (1 + slaves) * 2;
    const last = opts.basePort + needed - 1;
    if (last > 65535)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `--base-port ${opts.basePort} needs ${needed} ports, up to ${last}, above 65535: use a --base-port of at most ${65536 - needed}.`,
      );
  }
  const dir = path.resolve(opts.dir);
  const bind = up.bindHost;
  const adv = opts.advertiseHost;
  let next = opts.basePort;
  const port = (): number | "*" => (next === undefined ? "*" : next++);
  const common = (p: ClusterProcess, argv: string[]): ClusterProcess => {
    p.argv = [
      ...(p.role === "nameserver" ? [] : BROKER_NODE_FLAGS),
      ACTORMQ_BIN,
      ...argv,
      "--ready-file",
      path.join(p.dir, "ready.json"),
      ...(opts.logLevel ? ["--log-level", opts.logLevel] : []),
      // files, not keys: argv is shown by ps and kept in cluster.json
      ...(up.curveSecretFile ? ["--curve-secret", path.resolve(up.curveSecretFile)] : []),
      ...(up.curveAllowFile ? ["--curve-allow", path.resolve(up.curveAllowFile)] : []),
    ];
    return p;
  };
  if (adv && opts.basePort === undefined)
    throw new MQError("ILLEGAL_ARGUMENT", "--advertise-host needs --base-port: advertised addresses must name fixed ports.");
  const out: ClusterProcess[] = [];
  for (let i = 0; i < nsCount; i++) {
    const name = `namesrv-${i}`;
    const listen = endpoint(bind, port());
    const p: ClusterProcess = {
      name,
      role: "nameserver",
      host: "localhost",
      listen,
      address: "",
      pid: 0,
      dir: path.join(dir, name),
      logFile: path.join(dir, name, `${name}.log`),
      argv: [],
    };
    out.push(common(p, ["nameserver", "--listen", listen, ...(adv ? ["--advertise", endpoint(adv, Number(portOf(listen)))] : [])]));
  }
  const masterRole = opts.masterRole ?? (slaves > 0 ? "SYNC_MASTER" : "ASYNC_MASTER");
  for (let m = 0; m < masters; m++) {
    const brokerName = localBrokerName(m);
    for (let s = 0; s <= slaves; s++) {
      const name = brokerDirName(brokerName, s);
      const listen = endpoint(bind, port());
      const mport = port();
      const metrics = `${bind}:${mport === "*" ? 0 : mport}`;
      const pdir = path.join(dir, name);
      const p: ClusterProcess = {
        name,
        role: s === 0 ? "master" : "slave",
        host: "localhost",
        brokerName,
        brokerId: s,
        listen,
        address: "",
        pid: 0,
        dir: pdir,
        logFile: path.join(pdir, `${name}.log`),
        argv: [],
      };
      out.push(
        common(p, [
          "broker",
          "--name",
          brokerName,
          "--broker-id",
          String(s),
          "--role",
          s === 0 ? masterRole : "SLAVE",
          "--store",
          path.join(pdir, "store"),
          "--listen",
          listen,
          "--flush",
          flush,
          "--metrics-listen",
          metrics,
          ...(adv ? ["--advertise", endpoint(adv, Number(portOf(listen)))] : []),
          // name servers and (for slaves) the master address are filled in once those are ready
        ]),
      );
    }
  }
  return out;
}

/**
 * Starts the cluster: name servers, then masters, then slaves, each waited for; writes the
 * cluster file. On any failure, or when `opts.signal` aborts, the processes still starting are
 * abandoned, every process spawned is stopped, the directory's cluster file put back as it was and
 * the (first) error rethrown. While it runs, the file (marked `starting`) names every process
 * spawned so far, written right after each spawn: if this process is killed outright, `status` and
 * `down` still find them (only a kill landing between a fork and that write could leave one
 * unnamed); the stopped cluster's file it replaces waits in `cluster.json.prev` for `down`.
 */
export async function clusterUp(opts: ClusterUpOptions): Promise<ClusterFile> {
  // before anything starts: an unusable directory failed at a process's first write, or hung
  prepareClusterDir(opts.dir);
  const dir = path.resolve(opts.dir);
  const file = clusterFilePath(dir);
  let previous: ClusterFile | undefined;
  if (existsSync(file)) {
    previous = readClusterFile(dir);
    const live = previous.processes.filter((p) => isLocalHost(p.host) && isRunning(p));
    if (live.length > 0) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `A cluster is already running from ${clusterFilePath(dir)} (${live.map((p) => `${p.name} pid ${p.pid}`).join(", ")}): run \`actormq cluster down --dir ${shellArg(opts.dir)}\` first or use another --dir.`,
      );
    }
  }
  const plan = planCluster(opts);
  for (const p of plan) mkdirs(p.dir);
  // a stopped cluster's file (the `cluster up` that starts it again, restart, inspect --cluster) is
  // kept until this start succeeds; an unfinished start's file has nothing to keep (and a file kept
  // aside by the start it was, killed outright, stays)
  if (previous && !previous.starting) renameSync(file, previousFileOf(file));
  // every spawned process, ready or not: processes of one step start in parallel, and one failing
  // must not leave the others running detached with no cluster file naming them
  const spawned: ClusterProcess[] = [];
  let ready = 0;
  const total = plan.length;
  const up = resolveUpFlags(opts);
  const cf: ClusterFile = { version: CLUSTER_FILE_VERSION, createdAt: new Date().toISOString(), nameservers: [], processes: plan, up };
  const timeout = opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const abandon = new AbortController();
  let failure: unknown;
  const onAbort = () => {
    failure ??= new MQError(
      "CLOSED",
      "cluster up was interrupted: the processes started so far were stopped and the cluster file is as it was.",
    );
    abandon.abort();
  };
  if (opts.signal?.aborted) onAbort();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  const launch = async (p: ClusterProcess) => {
    try {
      const info = await startProcess(p, timeout, {
        signal: abandon.signal,
        onSpawn: (pid, startTime) => {
          p.pid = pid;
          p.startTime = startTime;
          spawned.push(p);
          writeClusterFile(dir, { ...cf, starting: true, processes: spawned });
        },
      });
      p.pid = info.pid;
      p.address = info.address;
      if (info.metrics) p.metrics = info.metrics;
      // later restarts bind the same ports
      setArg(p.argv, "--listen", p.listen.replace(/:\*$/, `:${portOf(info.address)}`));
      p.listen = p.argv[p.argv.indexOf("--listen") + 1]!;
      if (info.metrics) setArg(p.argv, "--metrics-listen", info.metrics);
      opts.onProgress?.(++ready, total, p);
    } catch (e) {
      failure ??= e;
      abandon.abort();
    }
  };
  // all of a step settle (the others abandoned at the first failure) before the next or the cleanup
  const step = async (role: ClusterProcess["role"]) => {
    if (failure === undefined) await Promise.all(plan.filter((p) => p.role === role).map(launch));
    if (failure !== undefined) throw failure;
  };
  try {
    await step("nameserver");
    cf.nameservers = plan.filter((p) => p.role === "nameserver").map((p) => p.address);
    for (const p of plan) if (p.role !== "nameserver") setArg(p.argv, "--namesrv", cf.nameservers.join(","));
    await step("master");
    for (const p of plan.filter((x) => x.role === "slave")) {
      const master = plan.find((x) => x.role === "master" && x.brokerName === p.brokerName)!;
      setArg(p.argv, "--master-address", master.address);
    }
    await step("slave");
  } catch (e) {
    // brokers first, then the name servers they would otherwise try to unregister from
    const stop = (ps: ClusterProcess[]) => Promise.all(ps.filter(isRunning).map((p) => stopPid(p.pid, DEFAULT_STOP_TIMEOUT_MS)));
    await stop(spawned.filter((p) => p.role !== "nameserver"));
    await stop(spawned.filter((p) => p.role === "nameserver"));
    putBackPrevious(file);
    throw e;
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
  }
  writeClusterFile(dir, cf);
  rmSync(previousFileOf(file), { force: true });
  return cf;
}

/** Where `up` keeps the file of the stopped cluster it replaces until it has succeeded. */
function previousFileOf(file: string): string {
  return `${file}.prev`;
}

/**
 * Removes the file of an `up` that did not finish and puts back the one it replaced, if any. Both
 * a failed `up` and a `down` run while it starts call this: the second finds the file put back,
 * not a starting one, and leaves it.
 */
function putBackPrevious(file: string): void {
  const prev = previousFileOf(file);
  if (existsSync(prev)) renameSync(prev, file);
  else if (isStartingFile(file)) rmSync(file, { force: true });
}

/** Whether `file` is the file of an `up` still starting (or that stopped before it was done). */
function isStartingFile(file: string): boolean {
  try {
    return (JSON.parse(readFileSync(file, "utf8")) as { starting?: unknown }).starting === true;
  } catch {
    return false;
  }
}

/** Every process of the cluster file with its state (remote hosts are not checked). */
export function clusterStatus(dir: string): { file: ClusterFile; members: ClusterMemberStatus[] } {
  const file = readClusterFile(dir);
  const members = file.processes.map((p) => ({
    ...p,
    state: !isLocalHost(p.host) ? ("remote" as const) : isRunning(p) ? ("running" as const) : ("dead" as const),
  }));
  return { file, members };
}

/**
 * Stops the cluster's processes (slaves, masters, then name servers) with SIGTERM, SIGKILL past
 * the timeout. Only pids that still are the processes the file names are signalled.
 */
export async function clusterDown(
  dir: string,
  stopTimeoutMs = DEFAULT_STOP_TIMEOUT_MS,
): Promise<{ stopped: ClusterProcess[]; notRunning: ClusterProcess[] }> {
  const file = readClusterFile(dir);
  const order = { slave: 0, master: 1, nameserver: 2 } as const;
  const stopped: ClusterProcess[] = [];
  const notRunning: ClusterProcess[] = [];
  const groups = [0, 1, 2].map((o) => file.processes.filter((p) => order[p.role] === o && isLocalHost(p.host)));
  for (const g of groups) {
    await Promise.all(
      g.map(async (p) => {
        if (!isRunning(p)) {
          notRunning.push(p);
          return;
        }
        await stopPid(p.pid, stopTimeoutMs);
        stopped.push(p);
      }),
    );
  }
  // the file of an `up` that never finished names nothing to start again: gone with its processes,
  // and the stopped cluster's file that `up` replaced (if any) is back
  if (file.starting) putBackPrevious(clusterFilePath(dir));
  return { stopped, notRunning };
}

function member(file: ClusterFile, name: string): ClusterProcess {
  const p = file.processes.find((x) => x.name === name);
  if (!p)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `No process named "${name}" in the cluster; known: ${file.processes.map((x) => x.name).join(", ")}.`,
    );
  if (!isLocalHost(p.host)) throw new MQError("ILLEGAL_ARGUMENT", `${name} runs on ${p.host}, not on this machine: act on it there.`);
  return p;
}

/** SIGKILLs one process of the cluster (a fault drill: no clean shutdown). */
export async function clusterKill(dir: string, name: string): Promise<ClusterProcess> {
  const file = readClusterFile(dir);
  const p = member(file, name);
  if (!isRunning(p)) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${name} (pid ${p.pid}) is not running${isAlive(p.pid) ? " (the pid now belongs to another process)" : ""}; \`actormq cluster restart ${name}${dirArg(dir)}\` starts it again.`,
    );
  }
  await stopPid(p.pid, 0, "SIGKILL");
  return p;
}

/**
 * Stops one process if it runs, starts it again with the same arguments and ports, updates the
 * file. The new pid is written as soon as it is spawned, so a restart killed outright leaves it to
 * `status` and `down`; when `signal` aborts (the command line's Ctrl-C), the new process is stopped.
 */
export async function clusterRestart(
  dir: string,
  name: string,
  readyTimeoutMs = DEFAULT_READY_TIMEOUT_MS,
  signal?: AbortSignal,
): Promise<ClusterProcess> {
  const file = readClusterFile(dir);
  if (file.starting)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `cluster up did not finish in ${dir}, so ${name} may lack the addresses it was to be given: run \`actormq cluster down --dir ${shellArg(dir)}\`, then \`actormq cluster up --dir ${shellArg(dir)}\` again.`,
    );
  const p = member(file, name);
  const interrupted = () =>
    new MQError(
      "CLOSED",
      `cluster restart was interrupted: ${name} is stopped; \`actormq cluster restart ${name}${dirArg(dir)}\` starts it again.`,
    );
  if (isRunning(p)) await stopPid(p.pid);
  if (signal?.aborted) throw interrupted();
  let info: Awaited<ReturnType<typeof startProcess>>;
  try {
    info = await startProcess(p, readyTimeoutMs, {
      signal,
      onSpawn: (pid, startTime) => {
        p.pid = pid;
        p.startTime = startTime;
        writeClusterFile(dir, file);
      },
    });
  } catch (e) {
    throw signal?.aborted ? interrupted() : e;
  }
  p.pid = info.pid;
  p.address = info.address;
  if (info.metrics) p.metrics = info.metrics;
  writeClusterFile(dir, file);
  return p;
}
