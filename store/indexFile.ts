/**
 * The message index: lookups by `topic#key` (each KEYS entry) and `topic#UNIQ_KEY`. Entries
 * (key hash 4, commit-log offset 8, store timestamp 8) are appended to files of fixed size; the
 * hash slots and per-slot chains (RocketMQ's IndexFile structure) live in memory and are rebuilt
 * from the files on start. Every hit is checked against the commit-log record before it is served,
 * so a damaged or stale entry can only make a lookup miss, never return a wrong message.
 */
import fs from "node:fs";
import path from "node:path";
import { readLong, writeLong } from "../transport/messageRecord.ts";
import { Segment, listSegmentFiles, segmentName } from "./segment.ts";

/** Bytes of one index entry on disk. */
export const INDEX_ENTRY_BYTES = 20;
/** Default hash-slot count (RocketMQ uses 5 000 000 per 420 MB file). */
export const DEFAULT_INDEX_SLOTS = 1 << 20;
/** Default entries per index file. */
export const DEFAULT_INDEX_ENTRIES_PER_FILE = 1_000_000;

/** The key index of a store. */
export class IndexService {
  private readonly slots: Int32Array;
  private hashes = new Int32Array(1024);
  private phys = new Float64Array(1024);
  private times = new Float64Array(1024);
  private prev = new Int32Array(1024);
  /** entries held (entry 0 is the "null" entry, as in RocketMQ) */
  private count = 1;
  private files: Segment[] = [];
  private pending: Buffer;
  private pendingLen = 0;
  private pendingFirst = 1;

  constructor(
    private readonly dir: string,
    private readonly entriesPerFile = DEFAULT_INDEX_ENTRIES_PER_FILE,
    slotCount = DEFAULT_INDEX_SLOTS,
  ) {
    this.slots = new Int32Array(slotCount);
    this.pending = Buffer.allocUnsafe(64 * 1024);
    fs.mkdirSync(dir, { recursive: true });
  }

  /** Drops every entry and file (recovery rebuilds the index from the commit log). */
  reset(): void {
    for (const f of this.files) f.remove();
    for (const { file } of listSegmentFiles(this.dir)) fs.rmSync(file, { force: true });
    this.files = [];
    this.slots.fill(0);
    this.count = 1;
    this.pendingLen = 0;
    this.pendingFirst = 1;
  }

  /** Adds one entry for a key whose Java hash code is `hash`. */
  add(hash: number, phy: number, storeTimestamp: number): void {
    if (this.count === this.hashes.length) this.grow();
    const i = this.count++;
    const slot = (hash & 0x7fffffff) % this.slots.length;
    this.hashes[i] = hash;
    this.phys[i] = phy;
    this.times[i] = storeTimestamp;
    this.prev[i] = this.slots[slot]!;
    this.slots[slot] = i;
    if (this.pendingLen + INDEX_ENTRY_BYTES > this.pending.length) {
      const bigger = Buffer.allocUnsafe(this.pending.length * 2);
      this.pending.copy(bigger, 0, 0, this.pendingLen);
      this.pending = bigger;
    }
    const p = this.pendingLen;
    this.pending.writeInt32BE(hash, p);
    writeLong(this.pending, p + 4, phy);
    writeLong(this.pending, p + 12, storeTimestamp);
    this.pendingLen += INDEX_ENTRY_BYTES;
  }

  private grow(): void {
    const n = this.hashes.length * 2;
    const h = new Int32Array(n);
    h.set(this.hashes);
    this.hashes = h;
    const p = new Float64Array(n);
    p.set(this.phys);
    this.phys = p;
    const t = new Float64Array(n);
    t.set(this.times);
    this.times = t;
    const v = new Int32Array(n);
    v.set(this.prev);
    this.prev = v;
  }

  /** Writes the entries added since the last call (one write per file touched). */
  writePending(): void {
    let done = 0;
    const total = this.pendingLen / INDEX_ENTRY_BYTES;
    while (done < total) {
      const seq = this.pendingFirst + done - 1;
      const fileStart = Math.floor(seq / this.entriesPerFile) * this.entriesPerFile;
      let f = this.files[this.files.length - 1];
      if (!f || f.start !== fileStart) {
        f = Segment.open(path.join(this.dir, segmentName(fileStart)), fileStart, this.entriesPerFile * INDEX_ENTRY_BYTES);
        this.files.push(f);
      }
      const n = Math.min(total - done, fileStart + this.entriesPerFile - seq);
      f.write(this.pending, done * INDEX_ENTRY_BYTES, n * INDEX_ENTRY_BYTES, (seq - fileStart) * INDEX_ENTRY_BYTES);
      done += n;
    }
    this.pendingFirst += total;
    this.pendingLen = 0;
  }

  /** Commit-log offsets of entries with this key hash and store time in [begin, end], newest first. */
  lookup(hash: number, begin: number, end: number, max: number): number[] {
    const out: number[] = [];
    let i = this.slots[(hash & 0x7fffffff) % this.slots.length]!;
    let guard = 0;
    while (i > 0 && out.length < max && guard++ < 1_000_000) {
      if (this.hashes[i] === hash && this.times[i]! >= begin && this.times[i]! <= end) out.push(this.phys[i]!);
      i = this.prev[i]!;
    }
    return out;
  }

  /** Deletes index files whose entries all point below `minPhy`. */
  deleteBelow(minPhy: number): void {
    while (this.files.length > 1) {
      const f = this.files[0]!;
      const last = f.read((this.entriesPerFile - 1) * INDEX_ENTRY_BYTES, INDEX_ENTRY_BYTES);
      if (readLong(last, 4) >= minPhy) break;
      f.remove();
      this.files.shift();
    }
  }

  close(): void {
    this.writePending();
    for (const f of this.files) f.close();
    this.files = [];
  }
}
