/**
 * The `lock` file of a store directory: it names the pid that holds the store, so that a second
 * broker (in this or another process) cannot open the same directory while the first is alive.
 */
import fs from "node:fs";
import path from "node:path";
import { MQError } from "../transport/protocol.ts";
import { ioError } from "./ioError.ts";

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

/**
 * When the process started (clock ticks since boot, field 22 of `/proc/<pid>/stat`), so a reused
 * pid is told from the process it named; undefined without /proc.
 */
export function startTimeOf(pid: number): string | undefined {
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

/** Gives up after this many lost races for one lock (each needs another process to act in between). */
const MAX_ATTEMPTS = 16;

/**
 * Creates `file` holding `content` only if no such file exists, atomically: the content is written
 * to a temp file first and hard-linked into place, so no reader ever sees the file empty.
 */
function createExclusive(file: string, content: string): boolean {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, content);
  try {
    fs.linkSync(tmp, file);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw e;
    // no hard links on this filesystem (some network and FUSE ones): an exclusive create, whose
    // content follows its name (an empty lock counts as being written, see `holderOf`)
    try {
      const fd = fs.openSync(file, "wx");
      try {
        fs.writeSync(fd, content);
      } finally {
        fs.closeSync(fd);
      }
      return true;
    } catch (e2) {
      if ((e2 as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw e2;
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** The file's content, or null when it does not exist; any other error is thrown. */
function readOrNull(file: string): string | null {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (e) {
    // a lock that cannot be read (a directory, no permission) is no contender: retrying would end
    // in "being opened by another process" after every attempt
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
}

/**
 * The live holder of a lock file with this content, or undefined when it is stale. An empty file
 * younger than a few seconds is a contender between its exclusive create and its write.
 */
function holderOf(file: string, content: string): number | undefined {
  if (content === "") {
    try {
      if (Date.now() - fs.statSync(file).mtimeMs < 5000) return -1;
    } catch {
      /* gone since read */
    }
    return undefined;
  }
  const holder = holderAlive(content);
  // our own pid in a lock we do not hold is a previous life's (a restarted container's pid 1)
  return holder === process.pid ? undefined : holder;
}

/**
 * Makes `file` hold `mine` for this process, or returns the live holder it lost to. A stale lock
 * is replaced under a guard file taken the same way (recursively, so a contender killed while it
 * held the guard is taken over too): with the guard held, only this process may replace the lock,
 * and it does so only while the lock still holds the stale content it judged.
 */
function claim(file: string, mine: string, depth = 0): number | undefined {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (createExclusive(file, mine)) return undefined;
    const stale = readOrNull(file);
    if (stale === null) continue; // released since: create it again
    const holder = holderOf(file, stale);
    if (holder !== undefined) return holder;
    if (depth >= 8) return -1;
    const guard = `${file}.takeover`;
    const guardHolder = claim(guard, mine, depth + 1);
    if (guardHolder !== undefined) return guardHolder; // another contender is taking it over now
    try {
      if (readOrNull(file) !== stale) continue; // taken over (or released) since we read it
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, mine);
      fs.renameSync(tmp, file);
      return undefined;
    } finally {
      fs.rmSync(guard, { force: true });
    }
  }
  return -1;
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
  const started = startTimeOf(process.pid);
  let holder: number | undefined;
  try {
    holder = claim(file, started === undefined ? String(process.pid) : `${process.pid} ${started}`);
  } catch (e) {
    // a read-only store directory, or a lock that is not a file
    throw ioError(e, `taking the store lock ${file}`);
  }
  if (holder !== undefined) {
    throw new MQError(
      "STORE_LOCKED",
      holder > 0
        ? `The store directory ${dir} is held by process ${holder}: stop that broker or use another directory.`
        : `The store directory ${dir} is being opened by another process: stop that broker or use another directory.`,
    );
  }
  heldHere.add(key);
  return () => {
    heldHere.delete(key);
    try {
      if (Number(readOrNull(file)?.trim().split(" ")[0]) === process.pid) fs.rmSync(file, { force: true });
    } catch {
      /* already gone */
    }
  };
}
