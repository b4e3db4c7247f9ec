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
import { listSegmentFiles, Segment, segmentName } from "./segment.ts";

/** Bytes of one index entry on disk. */
export const INDEX_ENTRY_BYTES = 20;
/** Default hash-slot count (RocketMQ uses 5 000 000 per 420 MB file). */
export const DEFAULT_INDEX_SLOTS = 1 << 20;
/** Default entries per index file. */
export const DEFAULT_INDEX_ENTRIES_PER_FILE = 1_000_000;
/** Loading reads index files in chunks of this many bytes (a multiple of the entry size). */
const LOAD_CHUNK_BYTES = INDEX_ENTRY_BYTES * 16 * 1024;

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
  /** entries below this count are on disk */
  private syncedCount = 1;

  constructor(
    private readonly dir: string,
    private readonly entriesPerFile = DEFAULT_INDEX_ENTRIES_PER_FILE,
    slotCount = DEFAULT_INDEX_SLOTS,
  ) {
    this.slots = new Int32Array(slotCount);
    this.pending = Buffer.allocUnsafe(64 * 1024);
    fs.mkdirSync(dir, { recursive: true });
  }

  /** Drops every entry, and with `removeFiles` every file (recovery rebuilds the index from the commit log). */
  reset(removeFiles = true): void {
    for (const f of this.files) removeFiles ? f.remove() : f.close();
    if (removeFiles) for (const { file } of listSegmentFiles(this.dir)) fs.rmSync(file, { force: true });
    this.files = [];
    this.syncedCount = 1;
    this.slots.fill(0);
    this.count = 1;
    this.pendingLen = 0;
    this.pendingFirst = 1;
  }

  /** Entries held (the null entry excluded). */
  get entries(): number {
    return this.count - 1;
  }

  /** Commit-log offset of the newest entry, or -1. */
  get lastPhy(): number {
    return this.count > 1 ? this.phys[this.count - 1]! : -1;
  }

  /**
   * Loads the entries of the index files into memory. Entries are in commit-log order, so one
   * whose offset goes backwards, lies at or past `logEnd` or has no store time is damage;
   * "damaged" also when the files hold fewer than `expected` entries (missing or cut files).
   */
  load(expected: number, logEnd: number): "ok" | "damaged" {
    this.reset(false);
    const files = listSegmentFiles(this.dir);
    const fileBytes = this.entriesPerFile * INDEX_ENTRY_BYTES;
    let prevPhy = 0;
    let ended = false;
    for (let k = 0; k < files.length; k++) {
      const { start, file } = files[k]!;
      if (ended || start !== k * this.entriesPerFile) return this.damaged();
      const f = Segment.open(file, start, fileBytes);
      this.files.push(f);
      for (let pos = 0; pos < fileBytes && !ended; pos += LOAD_CHUNK_BYTES) {
        const chunk = f.read(pos, Math.min(LOAD_CHUNK_BYTES, fileBytes - pos));
        for (let e = 0; e + INDEX_ENTRY_BYTES <= chunk.length; e += INDEX_ENTRY_BYTES) {
          const hash = chunk.readInt32BE(e);
          const phy = readLong(chunk, e + 4);
          const ts = readLong(chunk, e + 12);
          if (hash === 0 && phy === 0 && ts === 0) {
            ended = true;
            break;
          }
          if (ended || phy < prevPhy || phy >= logEnd || !(ts > 0)) return this.damaged();
          prevPhy = phy;
          this.link(hash, phy, ts);
        }
      }
    }
    if (this.count - 1 < expected) return this.damaged();
    this.pendingFirst = this.count;
    this.syncedCount = this.count;
    return "ok";
  }

  private damaged(): "damaged" {
    this.reset(false);
    return "damaged";
  }

  /** Drops the entries that point at or past `phy` (they are dispatched again or were cut). */
  truncateFrom(phy: number): void {
    this.writePending();
    let i = this.count;
    while (i > 1 && this.phys[i - 1]! >= phy) i--;
    if (i === this.count) return;
    for (let j = this.count - 1; j >= i; j--) {
      const slot = (this.hashes[j]! & 0x7fffffff) % this.slots.length;
      if (this.slots[slot] === j) this.slots[slot] = this.prev[j]!;
    }
    const seq = i - 1;
    const keep: Segment[] = [];
    for (const f of this.files) {
      if (f.start > seq || (f.start === seq && seq > 0)) {
        f.remove();
        continue;
      }
      if (seq < f.start + this.entriesPerFile) f.zeroFrom((seq - f.start) * INDEX_ENTRY_BYTES);
      keep.push(f);
    }
    this.files = keep;
    this.count = i;
    this.pendingFirst = i;
    this.syncedCount = Math.min(this.syncedCount, i);
  }

  /** Flushes the files written since the last call. */
  async sync(): Promise<void> {
    this.writePending();
    const from = this.syncedCount - 1;
    const upTo = this.count - 1;
    if (upTo <= from) return;
    await Promise.all(this.files.filter((f) => f.start + this.entriesPerFile > from && f.start < upTo).map((f) => f.sync()));
    this.syncedCount = Math.max(this.syncedCount, upTo + 1);
  }

  /** Flushes every file now (close). */
  syncNow(): void {
    this.writePending();
    for (const f of this.files) f.syncNow();
    this.syncedCount = this.count;
  }

  private link(hash: number, phy: number, storeTimestamp: number): number {
    if (this.count === this.hashes.length) this.grow();
    const i = this.count++;
    const slot = (hash & 0x7fffffff) % this.slots.length;
    this.hashes[i] = hash;
    this.phys[i] = phy;
    this.times[i] = storeTimestamp;
    this.prev[i] = this.slots[slot]!;
    this.slots[slot] = i;
    return i;
  }

  /** Adds one entry for a key whose Java hash code is `hash`. */
  add(hash: number, phy: number, storeTimestamp: number): void {
    this.link(hash, phy, storeTimestamp);
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
