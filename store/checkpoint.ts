/**
 * The store checkpoint (RocketMQ's StoreCheckpoint, reference §10.4): how far the commit log,
 * the consume queues and the index are known to be on disk. Recovery uses it to start checking
 * the log near its end instead of at its beginning. Written atomically as JSON (temp, fsync,
 * rename) by the periodic checkpoint task and at close.
 */
import fs from "node:fs";
import { TOPIC_PATTERN } from "../transport/protocol.ts";
import { JsonFile } from "./jsonFile.ts";

/** Store times within this margin of a checkpoint timestamp are rechecked (clock steps, batching). */
export const CHECKPOINT_TIME_MARGIN_MS = 3000;

/** The min and max offsets of one consume queue at checkpoint time. */
export interface QueueMark {
  min: number;
  max: number;
}

/** What the checkpoint file holds. */
export interface StoreCheckpoint {
  /** store time of the last commit-log record known to be flushed */
  physicMsgTimestamp: number;
  /** store time of the last record whose consume-queue entry is on disk */
  logicsMsgTimestamp: number;
  /** store time of the last record whose index entries are on disk */
  indexMsgTimestamp: number;
  /** commit-log bytes below this are flushed */
  flushedOffset: number;
  /** commit-log bytes below this are dispatched to consume queues and the index */
  confirmOffset: number;
  /** entries in the index files (the null entry excluded) */
  indexEntries: number;
  /** per topic, per queue id: the queue's min and max offsets */
  queues: Record<string, Record<string, QueueMark>>;
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/** A queue id as a consume queue's directory is named: an int32 >= 0 without leading zeros. */
const QUEUE_ID_KEY = /^(0|[1-9][0-9]{0,9})$/;

/**
 * Reads the checkpoint; null when it is missing or does not have the expected shape. `onDamaged`
 * hears why one that exists (or its `.bak`) could not be used: recovery then rebuilds consume
 * queues and index from the whole log, and says so rather than report the checkpoint as missing.
 */
export function readCheckpoint(file: string, onDamaged: (why: string) => void = () => {}): StoreCheckpoint | null {
  if (!fs.existsSync(file) && !fs.existsSync(`${file}.bak`)) return null;
  let v: unknown;
  let error: string | undefined;
  try {
    v = JsonFile.read(file, (d) => (error = d.error));
  } catch (e) {
    error = (e as Error).message;
  }
  const damaged = (what: string): null => {
    onDamaged(`checkpoint ${file} cannot be read (${what})`);
    return null;
  };
  const c = v as Partial<StoreCheckpoint> | null | undefined;
  if (!c || typeof c !== "object") return damaged(error ?? "neither it nor its .bak holds a JSON object");
  const counts = [c.physicMsgTimestamp, c.logicsMsgTimestamp, c.indexMsgTimestamp, c.flushedOffset, c.confirmOffset, c.indexEntries];
  if (!counts.every(isCount) || !c.queues || typeof c.queues !== "object") return damaged("a field is missing or not an integer >= 0");
  // the keys name consume-queue directories: "../x" or "abc" would make a queue outside the store or with id NaN
  for (const [topic, m] of Object.entries(c.queues)) {
    if (!TOPIC_PATTERN.test(topic)) return damaged(`a queue mark names ${JSON.stringify(topic)}, which is no topic name`);
    if (!m || typeof m !== "object") return damaged("a topic's queue marks are not an object");
    for (const [id, q] of Object.entries(m)) {
      if (!QUEUE_ID_KEY.test(id) || Number(id) > 0x7fffffff)
        return damaged(`a queue mark of ${topic} names queue ${JSON.stringify(id)}, which is no queue id`);
      if (!q || !isCount(q.min) || !isCount(q.max) || q.min > q.max) return damaged("a queue mark is not {min, max} with min <= max");
    }
  }
  return c as StoreCheckpoint;
}

/** Writes the checkpoint atomically, blocking (close). */
export function writeCheckpoint(file: string, c: StoreCheckpoint): void {
  JsonFile.write(file, c);
}

/**
 * Writes the checkpoint atomically off the event loop (temp file, fdatasync, rename). A write that
 * fails removes its temp file: a reader takes a complete `.tmp` when the checkpoint and its `.bak`
 * cannot be read, and one never made durable must not be taken for a checkpoint (nor fill a disk).
 */
export async function writeCheckpointAsync(file: string, c: StoreCheckpoint): Promise<void> {
  const tmp = `${file}.tmp`;
  const h = await fs.promises.open(tmp, "w");
  try {
    try {
      await h.writeFile(JSON.stringify(c));
      await h.datasync();
    } finally {
      await h.close();
    }
    await fs.promises.rename(tmp, file);
  } catch (e) {
    await fs.promises.rm(tmp, { force: true }).catch(() => {});
    throw e;
  }
}

/** The store time recovery may trust: everything stored before it is in consume queues and index. */
export function checkpointMinTimestamp(c: StoreCheckpoint): number {
  return Math.max(0, Math.min(c.physicMsgTimestamp, c.logicsMsgTimestamp, c.indexMsgTimestamp) - CHECKPOINT_TIME_MARGIN_MS);
}
