/**
 * The `lock` file of a store directory: it names the pid that holds the store, so that a second
 * broker (in this or another process) cannot open the same directory while the first is alive.
 */
import fs from "node:fs";
import path from "node:path";
import { MQError } from "../transport/protocol.ts";

const heldHere = new Set<string>();

/** The fields of `/proc/<pid>/stat` after the command name (state first), or null without one. */
function procStat(pid: number): string[] | null {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return raw.slice(raw.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/** When the process started (clock ticks since boot), so a reused pid is told from the holder. */
function startTimeOf(pid: number): string | undefined {
  return procStat(pid)?.[19];
}

/**
 * True when `pid` is alive. A zombie counts as dead: a broker killed after its parent exited
 * stays one until its new parent reaps it, and where pid 1 never reaps (some containers) that
 * is forever.
 */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  const stat = procStat(pid);
  if (stat === null) return process.platform !== "linux";
  return stat[0] !== "Z";
}

/** The lock file names `pid` and, where /proc has it, the pid's start time. */
function holderAlive(lock: string): number | undefined {
  const [pidText, started] = lock.trim().split(" ");
  const pid = Number(pidText);
  if (!isAlive(pid)) return undefined;
  const now = started === undefined ? undefined : startTimeOf(pid);
  if (now !== undefined && now !== started) return undefined;
  return pid;
}

/** Takes the store lock or throws MQError STORE_LOCKED; returns the release function. */
export function acquireStoreLock(dir: string): () => void {
  const file = path.join(dir, "lock");
  const key = path.resolve(file);
  if (heldHere.has(key)) {
    throw new MQError(
      "STORE_LOCKED",
      `The store directory ${dir} is already open in this process: close the other store first or use another directory.`,
    );
  }
  let holder: number | undefined;
  try {
    holder = holderAlive(fs.readFileSync(file, "utf8"));
  } catch {
    /* no lock file */
  }
  if (holder !== undefined && holder !== process.pid) {
    throw new MQError(
      "STORE_LOCKED",
      `The store directory ${dir} is held by process ${holder}: stop that broker or use another directory.`,
    );
  }
  const started = startTimeOf(process.pid);
  fs.writeFileSync(file, started === undefined ? String(process.pid) : `${process.pid} ${started}`);
  heldHere.add(key);
  return () => {
    heldHere.delete(key);
    try {
      if (Number(fs.readFileSync(file, "utf8").trim().split(" ")[0]) === process.pid) fs.rmSync(file, { force: true });
    } catch {
      /* already gone */
    }
  };
}
