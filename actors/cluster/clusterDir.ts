/**
 * The directory `cluster up` keeps its processes' data, logs and cluster file in: made and probed
 * before anything starts. Node's recursive mkdir spins forever, deaf to signals, on a path in
 * /proc (each mkdir says ENOENT, and it makes the parent again): the directory is made one level
 * at a time, and a file written in it says whether the processes will be able to write there.
 */
import { mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { MQError } from "../../transport/protocol.ts";

/** Makes `dir` and its missing parents; ILLEGAL_ARGUMENT naming it when it is not a directory one can write in. */
export function prepareClusterDir(dir: string): void {
  const abs = path.resolve(dir);
  const unusable = (why: string, e?: unknown) =>
    new MQError(
      "ILLEGAL_ARGUMENT",
      `--dir ${dir} cannot hold the cluster: ${why}${e instanceof Error ? ` (${e.message})` : ""}. Give a directory you can write in, or one that can be made.`,
      e === undefined ? undefined : { cause: e },
    );
  const missing: string[] = [];
  let at = abs;
  for (;;) {
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(at, { throwIfNoEntry: false });
    } catch (e) {
      throw unusable(`${at} cannot be read`, e);
    }
    if (st) {
      if (!st.isDirectory()) throw unusable(`${at} is not a directory`);
      break;
    }
    missing.unshift(at);
    const parent = path.dirname(at);
    if (parent === at) break;
    at = parent;
  }
  for (const d of missing) {
    try {
      mkdirSync(d);
    } catch (e) {
      throw unusable(`${d} cannot be made`, e);
    }
  }
  const probe = path.join(abs, `.write-check-${process.pid}`);
  try {
    writeFileSync(probe, "", { flag: "wx" });
  } catch (e) {
    throw unusable("it is not writable", e);
  }
  rmSync(probe, { force: true });
}
