/**
 * Is a pid still the process we started? A pid alone may have been reused by an unrelated
 * process after ours died; `/proc/<pid>/cmdline` must still show our command with its ready file,
 * and `/proc/<pid>/stat` the start time recorded when it was spawned, before anything is signalled.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { isAlive, startTimeOf } from "../../store/storeLock.ts";

export { isAlive, startTimeOf };

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
 * True when `pid` runs the actormq command (`node [flags] .../actormq.mjs`, as the cluster spawns
 * it) with `--ready-file <readyFile>`, and, when `startTime` is known, started then. Merely naming
 * the file is not enough: any path under the default `./actormq-cluster` contains "actormq", and an
 * operator's `tail -f .../ready.json` may hold a reused pid. Without /proc (not Linux) only
 * liveness can be checked.
 */
export function isOurProcess(pid: number, readyFile: string, startTime?: string): boolean {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  const argv = cmdlineOf(pid);
  if (argv === null) return process.platform !== "linux" && isAlive(pid);
  // the script is node's first argument that is not a flag (ours are all `--flag=value`)
  const script = argv.slice(1).find((a) => !a.startsWith("-"));
  if (script === undefined || path.basename(script) !== "actormq.mjs") return false;
  const i = argv.indexOf("--ready-file");
  if (i < 0 || argv[i + 1] !== readyFile) return false;
  return startTime === undefined || startTimeOf(pid) === startTime;
}
