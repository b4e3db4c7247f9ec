/**
 * The `lock` file of a store directory: it names the pid that holds the store, so that a second
 * broker (in this or another process) cannot open the same directory while the first is alive.
 */
import fs from "node:fs";
import path from "node:path";
import { MQError } from "../transport/protocol.ts";

const heldHere = new Set<string>();

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
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
  let holder = NaN;
  try {
    holder = Number(fs.readFileSync(file, "utf8").trim());
  } catch {
    /* no lock file */
  }
  if (holder !== process.pid && alive(holder)) {
    throw new MQError(
      "STORE_LOCKED",
      `The store directory ${dir} is held by process ${holder}: stop that broker or use another directory.`,
    );
  }
  fs.writeFileSync(file, String(process.pid));
  heldHere.add(key);
  return () => {
    heldHere.delete(key);
    try {
      if (Number(fs.readFileSync(file, "utf8").trim()) === process.pid) fs.rmSync(file, { force: true });
    } catch {
      /* already gone */
    }
  };
}
