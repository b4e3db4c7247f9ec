/**
 * Starting and stopping the processes of a local cluster: each is `node bin/actormq.mjs
 * nameserver|broker ...` in its own session (it outlives the command that started it), with
 * stdout and stderr appended to its log file, and reports readiness by writing a ready file.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MQError } from "../../transport/protocol.ts";
import type { ClusterProcess } from "./clusterFile.ts";
import { isAlive, isOurProcess, startTimeOf } from "./processCheck.ts";

/** The package's command, run by every cluster process. */
export const ACTORMQ_BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../bin/actormq.mjs");
/** How long a process may take to serve. */
export const DEFAULT_READY_TIMEOUT_MS = 30_000;
/** How long a stopped process may take to exit after SIGTERM before it gets SIGKILL. */
export const DEFAULT_STOP_TIMEOUT_MS = 15_000;
const POLL_MS = 25;

/** Where a process writes `{pid,address,metrics}` once serving; it also marks the process as ours. */
export function readyFileOf(p: Pick<ClusterProcess, "dir">): string {
  return path.join(p.dir, "ready.json");
}

/** True when the process is alive and still the one the cluster file names. */
export function isRunning(p: ClusterProcess): boolean {
  return isOurProcess(p.pid, readyFileOf(p), p.startTime);
}

/**
 * What a process said last before it died: the last non-empty line of its log from byte `from` on
 * (where this run's output starts: every run appends), its message when it is JSON.
 */
export function lastLogLine(logFile: string, from = 0): string {
  try {
    const lines = readFileSync(logFile)
      .subarray(from)
      .toString("utf8")
      .split("\n")
      .filter((l) => l.trim().length > 0);
    const last = lines.at(-1) ?? "";
    try {
      const j = JSON.parse(last) as { msg?: string; err?: { message?: string } };
      return j.err?.message ?? j.msg ?? last;
    } catch {
      return last.replace(/^actormq:\s*/, "");
    }
  } catch {
    return "";
  }
}

export interface ReadyInfo {
  pid: number;
  address: string;
  metrics?: string;
}

/** Hooks of {@link startProcess}. */
export interface StartProcessHooks {
  /** called with the pid (and its start time, where /proc has it) as soon as the process is spawned, before it is ready */
  onSpawn?: (pid: number, startTime: string | undefined) => void;
  /** abandons the wait: the process is stopped and the start rejects */
  signal?: AbortSignal;
}

/**
 * Spawns `p.argv` detached with output to `p.logFile` and waits until its ready file appears.
 * If it exits first, stays silent past the timeout or `signal` aborts, it is stopped and an
 * MQError carries the reason (from its log when it exited).
 */
export async function startProcess(
  p: ClusterProcess,
  readyTimeoutMs = DEFAULT_READY_TIMEOUT_MS,
  hooks: StartProcessHooks = {},
): Promise<ReadyInfo> {
  const readyFile = readyFileOf(p);
  rmSync(readyFile, { force: true });
  // the log is appended to: what it holds now is a previous run's, never this one's reason
  const logStart = sizeOf(p.logFile);
  const fd = openSync(p.logFile, "a");
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, p.argv, { detached: true, stdio: ["ignore", fd, fd], cwd: p.dir, env: processEnv() });
  } finally {
    closeSync(fd);
  }
  /** how it ended: "exit code N" or "killed by SIGNAL" */
  let exited: string | undefined;
  let killed = false;
  child.once("exit", (code, sig) => {
    killed = sig !== null;
    exited = sig ? `killed by ${sig}` : `exit code ${code ?? 1}`;
  });
  child.once("error", () => {
    exited = exited ?? "exit code 1";
  });
  child.unref();
  // detached, it outlives us: whoever started it must know its pid before it is ready
  // (not reaped before our exit handler runs, so its /proc entry is still this child's)
  if (child.pid) hooks.onSpawn?.(child.pid, startTimeOf(child.pid));
  const t0 = Date.now();
  for (;;) {
    if (existsSync(readyFile)) {
      try {
        return JSON.parse(readFileSync(readyFile, "utf8")) as ReadyInfo;
      } catch {
        // written atomically, so a parse failure means a foreign file: keep waiting for ours
      }
    }
    if (exited !== undefined) {
      // a signal (an OOM kill, kill -9) is the reason even when the process logged something before it
      const line = lastLogLine(p.logFile, logStart);
      const why = killed ? `${exited}${line ? `, after logging: ${line}` : ""}` : line || exited;
      throw new MQError("SYSTEM_ERROR", `${p.name} failed to start: ${why} (log: ${p.logFile})`);
    }
    if (hooks.signal?.aborted) {
      if (child.pid && exited === undefined) await stopPid(child.pid, 2_000);
      throw new MQError("CLOSED", `${p.name} was stopped before it became ready.`);
    }
    if (Date.now() - t0 > readyTimeoutMs) {
      if (child.pid) await stopPid(child.pid, 2_000);
      throw new MQError("TIMEOUT", `${p.name} did not become ready within ${readyTimeoutMs} ms; see its log ${p.logFile}.`);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/**
 * The environment of a cluster process: ours without the CURVE flags' variables. Its CURVE settings
 * are the flags in its argv (kept in the cluster file); a shell's ACTORMQ_CURVE_SERVER or
 * ACTORMQ_CURVE_SECRET, set for its clients, would add to them, and a plaintext cluster's brokers
 * then link to its name servers over CURVE and never register.
 */
function processEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("ACTORMQ_CURVE_")) delete env[k];
  return env;
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** SIGTERM, then SIGKILL after `timeoutMs`; resolves when the pid is gone. */
export async function stopPid(pid: number, timeoutMs = DEFAULT_STOP_TIMEOUT_MS, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const t0 = Date.now();
  let killed = signal === "SIGKILL";
  while (isAlive(pid)) {
    if (!killed && Date.now() - t0 > timeoutMs) {
      killed = true;
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        return;
      }
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
