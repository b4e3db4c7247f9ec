/**
 * The in-memory rules of a clustering consumer's offset store (RocketMQ
 * `RemoteBrokerOffsetStore` + `ControllableOffset`): monotonic updates, freezing after an
 * OFFSET_ILLEGAL correction, removal on queue release. Offsets are "next offset to consume".
 * Persisting to the broker is the offset-store actor's job.
 */
import { type MessageQueue, mqKey } from "../../transport/protocol.ts";

/** Where `readOffset` looks (RocketMQ `ReadOffsetType`). */
export type ReadOffsetType = "READ_FROM_MEMORY" | "READ_FROM_STORE" | "MEMORY_FIRST_THEN_STORE";

/** readOffset results that are not offsets. */
export const OFFSET_NOT_FOUND = -1;
/** the broker query failed for another reason than "not found" */
export const OFFSET_QUERY_FAILED = -2;

interface Entry {
  mq: MessageQueue;
  offset: number;
  /** false after updateAndFreeze: further updates are ignored until the entry is removed */
  allowToUpdate: boolean;
}

/** Offsets by message queue, with RocketMQ's update rules. */
export class OffsetTable {
  private readonly table = new Map<string, Entry>();

  /**
   * Sets the offset of `mq`. With `increaseOnly` a smaller value never rewinds it (a late
   * acknowledgement of an older batch). Ignored while the entry is frozen.
   */
  updateOffset(mq: MessageQueue, offset: number, increaseOnly: boolean): void {
    const key = mqKey(mq);
    const e = this.table.get(key);
    if (!e) {
      this.table.set(key, { mq, offset, allowToUpdate: true });
      return;
    }
    if (!e.allowToUpdate) return;
    e.offset = increaseOnly ? Math.max(e.offset, offset) : offset;
  }

  /** Sets the offset and freezes it (OFFSET_ILLEGAL: the broker's corrected offset must stick). */
  updateAndFreeze(mq: MessageQueue, offset: number): void {
    const key = mqKey(mq);
    const e = this.table.get(key);
    if (!e) this.table.set(key, { mq, offset, allowToUpdate: false });
    else {
      e.offset = offset;
      e.allowToUpdate = false;
    }
  }

  /** The offset held in memory, or -1. */
  readOffset(mq: MessageQueue): number {
    return this.table.get(mqKey(mq))?.offset ?? OFFSET_NOT_FOUND;
  }

  has(mq: MessageQueue): boolean {
    return this.table.has(mqKey(mq));
  }

  isFrozen(mq: MessageQueue): boolean {
    return this.table.get(mqKey(mq))?.allowToUpdate === false;
  }

  /** Drops the entry (and thus its freeze). */
  removeOffset(mq: MessageQueue): void {
    this.table.delete(mqKey(mq));
  }

  /** Drops entries of queues not in `held` (persistAll's housekeeping); returns what was dropped. */
  retainOnly(held: Iterable<MessageQueue>): MessageQueue[] {
    const keep = new Set<string>();
    for (const mq of held) keep.add(mqKey(mq));
    const dropped: MessageQueue[] = [];
    for (const [key, e] of this.table) {
      if (!keep.has(key)) {
        this.table.delete(key);
        dropped.push(e.mq);
      }
    }
    return dropped;
  }

  /** Snapshot of all entries (for persisting). */
  entries(): Array<{ mq: MessageQueue; offset: number }> {
    return [...this.table.values()].map((e) => ({ mq: e.mq, offset: e.offset }));
  }

  /** Offsets of one topic's queues (RocketMQ `cloneOffsetTable`). */
  cloneOffsetTable(topic: string): Map<string, number> {
    const out = new Map<string, number>();
    for (const [key, e] of this.table) if (e.mq.topic === topic) out.set(key, e.offset);
    return out;
  }

  get size(): number {
    return this.table.size;
  }
}
