/**
 * The directory `cluster up` keeps its processes' data, logs and cluster file in: made and probed
 * before anything starts (made with {@link mkdirs}, which fails where Node's recursive mkdir hung
 * on a path in /proc), and a file written in it says whether the processes will be able to write there.
 */
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { mkdirs } from "../../store/mkdirs.ts";
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
  try {
    mkdirs(abs);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw unusable(code === "EEXIST" || code === "ENOTDIR" ? "a file is in the way on its path" : "it cannot be made", e);
  }
  const probe = path.join(abs, `.write-check-${process.pid}`);
  try {
    writeFileSync(probe, "", { flag: "wx" });
  } catch (e) {
    throw unusable("it is not writable", e);
  }
  rmSync(probe, { force: true });
}
