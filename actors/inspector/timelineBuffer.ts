/**
 * The inspector's bounded record buffer: the most recent inspection records in arrival order,
 * each numbered (`seq`) so a page can ask for what it has not seen yet. Bounded both in records
 * and in (estimated) bytes, since one record may be up to a MiB: the oldest records are evicted
 * first; evictions are counted.
 */
import type { InspectionRecord } from "../runtime/index.ts";
import { estimateSize } from "./recordCheck.ts";

/** Records kept for the timeline. @default 20000 */
export const DEFAULT_TIMELINE_CAPACITY = 20_000;
/** Estimated bytes of the records kept for the timeline. @default 64 MiB */
export const DEFAULT_TIMELINE_BYTES = 64 * 1024 * 1024;

/** One buffered record with the fields the timeline filters on. */
export interface TimelineEntry {
  seq: number;
  record: InspectionRecord;
  /** topic named by an event's payload, if any */
  topic?: string;
  /** `topic@queueId` (or `@queueId`) named by an event's payload, if any */
  queue?: string;
}

const SEARCH_DEPTH = 3;

/** The topic and queue an event payload names (`topic`/`queueId` fields, nested up to 3 levels). */
export function topicAndQueue(payload: unknown): { topic?: string; queue?: string } {
  let topic: string | undefined;
  let queueId: number | undefined;
  const visit = (v: unknown, depth: number) => {
    if (v === null || typeof v !== "object" || depth > SEARCH_DEPTH || (topic !== undefined && queueId !== undefined)) return;
    if (Array.isArray(v)) {
      if (v.length > 0) visit(v[0], depth + 1);
      return;
    }
    const o = v as Record<string, unknown>;
    if (topic === undefined && typeof o.topic === "string") topic = o.topic;
    if (queueId === undefined && typeof o.queueId === "number") queueId = o.queueId;
    for (const k in o) if (o[k] !== null && typeof o[k] === "object") visit(o[k], depth + 1);
  };
  visit(payload, 0);
  const out: { topic?: string; queue?: string } = {};
  if (topic !== undefined) out.topic = topic;
  if (queueId !== undefined) out.queue = `${topic ?? ""}@${queueId}`;
  return out;
}

/** A ring of the latest {@link TimelineEntry}s. */
export class TimelineBuffer {
  private readonly ring: (TimelineEntry | undefined)[];
  /** estimated bytes of each slot's record */
  private readonly sizes: Float64Array;
  private head = 0;
  private count = 0;
  private nextSeq = 1;
  /** estimated bytes of the records held */
  bytes = 0;
  /** records pushed out by newer ones */
  evicted = 0;

  constructor(
    readonly capacity = DEFAULT_TIMELINE_CAPACITY,
    readonly maxBytes = DEFAULT_TIMELINE_BYTES,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`timeline capacity must be a positive integer, got ${capacity}`);
    if (!Number.isFinite(maxBytes) || maxBytes < 1) throw new RangeError(`timeline byte budget must be a positive number, got ${maxBytes}`);
    this.ring = new Array(capacity);
    this.sizes = new Float64Array(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** The seq the next record will get. */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /**
   * Appends a record of `size` estimated bytes (estimated here when not given); evicts the oldest
   * while the buffer is full in records or bytes. The newest record is always kept.
   */
  push(record: InspectionRecord, size = estimateSize(record, Number.POSITIVE_INFINITY)): TimelineEntry {
    const entry: TimelineEntry = { seq: this.nextSeq++, record };
    if (record.kind === "event") Object.assign(entry, topicAndQueue(record.payload));
    while (this.count > 0 && (this.count === this.capacity || this.bytes + size > this.maxBytes)) {
      this.bytes -= this.sizes[this.head]!;
      this.ring[this.head] = undefined;
      this.head = (this.head + 1) % this.capacity;
      this.count--;
      this.evicted++;
    }
    const i = (this.head + this.count) % this.capacity;
    this.count++;
    this.ring[i] = entry;
    this.sizes[i] = size;
    this.bytes += size;
    return entry;
  }

  /** Entries with `seq > after`, oldest first, at most `limit` (the newest ones when cut). */
  since(after = 0, limit = this.capacity): TimelineEntry[] {
    const out: TimelineEntry[] = [];
    const first = this.count === 0 ? this.nextSeq : this.ring[this.head]!.seq;
    // both may come from a query string: a fraction would index between the ring's slots
    const start = Math.max(0, Math.floor(after) + 1 - first, this.count - Math.floor(limit));
    for (let k = start; k < this.count; k++) out.push(this.ring[(this.head + k) % this.capacity]!);
    return out;
  }
}
