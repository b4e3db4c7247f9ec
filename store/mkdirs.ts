/**
 * `mkdir -p` that fails instead of hanging. Node's recursive mkdir spins forever, deaf to signals,
 * on a path in /proc (each mkdir says ENOENT, and it makes the parent again): the missing levels
 * are found by walking up, then made one at a time, so the first that cannot be made fails with
 * its own fs error. Every place that makes a directory with its parents uses this.
 */
import fs from "node:fs";
import path from "node:path";

/**
 * Makes `dir` and its missing parents, each with `mode` (before the umask); returns the first one
 * made, in the form `dir` was given, or undefined when `dir` was there: as `mkdirSync(dir, {
 * recursive: true })` does. Throws the fs error of the level that failed: EEXIST when `dir` is a
 * file, ENOTDIR when a parent is, ENOENT (a path in /proc), EACCES, EROFS...
 */
export function mkdirs(dir: string, mode?: number): string | undefined {
  const options = mode === undefined ? undefined : { mode };
  const missing: string[] = [];
  for (let at = dir; ; ) {
    const st = fs.statSync(at, { throwIfNoEntry: false });
    if (st) {
      // a file in the way: making the level below it fails with the code a recursive mkdir gives
      if (!st.isDirectory()) fs.mkdirSync(missing[0] ?? dir, options);
      break;
    }
    missing.unshift(at);
    const parent = path.dirname(at);
    if (parent === at) break;
    at = parent;
  }
  let first: string | undefined;
  for (const d of missing) {
    try {
      fs.mkdirSync(d, options);
    } catch (e) {
      // made meanwhile by another process (two consumers' first offsets file): as good as made here
      if ((e as NodeJS.ErrnoException).code === "EEXIST" && fs.statSync(d, { throwIfNoEntry: false })?.isDirectory()) continue;
      throw e;
    }
    first ??= d;
  }
  return first;
}
