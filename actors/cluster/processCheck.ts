/**
 * Is a pid still the process we started? A pid alone may have been reused by an unrelated
 * process after ours died; `/proc/<pid>/cmdline` must still show our command and its data dir
 * before anything is signalled.
 */
import { readFileSync } from "node:fs";
import { isAlive } from "../../store/storeLock.ts";

export { isAlive };

/** The command line of a pid as its arguments, or null when no such process (or no /proc). */
export function cmdlineOf(pid: number): string[] | null {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return raw.split("\0").filter((s) => s.length > 0);
  } catch {
    return null;
  }
}

/**
 * True when `pid` runs the actormq command with `marker` (its data dir or store) among its
 * arguments. Without /proc (not Linux) only liveness can be checked.
 */
export function isOurProcess(pid: number, marker: string): boolean {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  const argv = cmdlineOf(pid);
  if (argv === null) return process.platform !== "linux" && isAlive(pid);
  return argv.some((a) => a.includes("actormq")) && argv.includes(marker);
}
