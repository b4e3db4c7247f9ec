/**
 * The store's share of the process's open-file limit. Every commit-log segment, consume-queue file
 * and index file keeps a descriptor; with none left, libzmq cannot accept a connection (a new
 * client times out while the I/O thread retries the accept in a loop, and nothing is logged), and
 * config files and the checkpoint cannot be written. So the store stops opening consume-queue
 * files while fewer than a reserve of descriptors would be left.
 */
import fs from "node:fs";
import { monotonicNow } from "../transport/clock.ts";

/** Descriptors kept for connections, config writes and the checkpoint (a quarter of a lower limit). */
export const OPEN_FILE_RESERVE = 128;
/** The process's other descriptors (sockets, pipes) are counted again at most this often, when a new file is asked for. */
const OTHERS_RECOUNT_MS = 1_000;

/** store files (segments) open in this process: counted, so /proc is not read per open */
let storeFiles = 0;
/** descriptors that are not store files, at the last count */
let others = 0;
let othersAt = Number.NEGATIVE_INFINITY;
let limit: number | null | undefined;

/** Counts a store file opened. */
export function storeFileOpened(): void {
  storeFiles++;
}

/** Counts a store file closed. */
export function storeFileClosed(): void {
  storeFiles--;
}

/** The soft open-file limit (`ulimit -n`), read once from /proc/self/limits; null where it cannot be read or is unlimited. */
export function openFileLimit(): number | null {
  if (limit === undefined) {
    try {
      const m = /^Max open files\s+(\d+)/m.exec(fs.readFileSync("/proc/self/limits", "utf8"));
      limit = m ? Number(m[1]) : null;
    } catch {
      limit = null;
    }
  }
  return limit;
}

/** The descriptors kept free under `lim`. */
export function openFileReserve(lim: number): number {
  return Math.min(OPEN_FILE_RESERVE, Math.floor(lim / 4));
}

/** Descriptors this process holds (all of them, not only the store's), or null where /proc/self/fd cannot be read. */
function descriptorsInUse(): number | null {
  try {
    // less the one the listing itself opens
    return fs.readdirSync("/proc/self/fd").length - 1;
  } catch {
    return null;
  }
}

/** What the process holds against its limit; null where either cannot be read. */
export interface OpenFileUse {
  /** descriptors in use */
  inUse: number;
  /** the soft open-file limit */
  limit: number;
  /** descriptors new consume-queue files leave free */
  reserve: number;
}

/** Descriptors in use now, counted (at store open: the broker warns when its queues already use most of the limit). */
export function openFileUse(): OpenFileUse | null {
  const lim = openFileLimit();
  const all = lim === null ? null : descriptorsInUse();
  if (lim === null || all === null) return null;
  others = Math.max(0, all - storeFiles);
  othersAt = monotonicNow();
  return { inUse: all, limit: lim, reserve: openFileReserve(lim) };
}

/**
 * Null when `n` more store files leave the reserve free; otherwise the use that refuses them. The
 * store's files are counted as they open and close; the others are counted again at most once a
 * second, only while new files are asked for. No limit known: always null.
 */
export function openFilesShort(n: number): OpenFileUse | null {
  const lim = openFileLimit();
  if (lim === null) return null;
  if (monotonicNow() - othersAt >= OTHERS_RECOUNT_MS && openFileUse() === null) return null;
  const use = { inUse: storeFiles + others, limit: lim, reserve: openFileReserve(lim) };
  return use.inUse + n > lim - use.reserve ? use : null;
}
