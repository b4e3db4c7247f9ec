/**
 * The message index, in RocketMQ's IndexFile layout (reference §10.3): lookups by `topic#key`
 * (each KEYS entry) and `topic#UNIQ_KEY`. Files of one fixed size, named by their number:
 *
 *   header 40 B: beginTimestamp 8 | endTimestamp 8 | beginPhyOffset 8 | endPhyOffset 8 |
 *                hashSlotCount 4 (slots in use) | indexCount 4 (next entry; entry 0 is the null entry)
 *   hash slots:  slotCount x 4 B, the newest entry of each slot (0 = none)
 *   entries:     entriesPerFile x 20 B: keyHash 4 (|Java hashCode|, MIN_VALUE -> 0) | phyOffset 8 |
 *                timeDiff 4 (seconds since beginTimestamp) | previous entry of the same slot 4
 *
 * Only the file being written lives in memory (its slot table and the entries not yet written);
 * full files are read on lookup (one slot, then its chain), so memory stays the same however many
 * messages the store holds, and an open reads only the last file's entries (its slot table is
 * rebuilt from them, so a crash that tore it costs nothing). A full file's slot table and header
 * are written and synced before the next file starts. Files are numbered in order; deleting the
 * oldest leaves the rest with their numbers. Every hit is checked against the commit-log
 * record before it is served, so a damaged or stale entry can only make a lookup miss.
 */
import fs from "node:fs";
import path from "node:path";
import { putInt32BE, putInt64BE } from "../transport/bigEndian.ts";
import { readLong, writeLong } from "../transport/messageRecord.ts";
import { mkdirDurable } from "./durableDir.ts";
import { listSegmentFiles, Segment, segmentName } from "./segment.ts";
import type { UndeletedFiles } from "./undeletedFiles.ts";

/** Bytes of one index entry on disk. */
export const INDEX_ENTRY_BYTES = 20;
/** Bytes of an index file's header. */
export const INDEX_HEADER_BYTES = 40;
/** Default hash-slot count per file (RocketMQ uses 5 000 000 per 20 000 000 entries). */
export const DEFAULT_INDEX_SLOTS = 1 << 20;
/** Default entries per index file (entry 0 of each file is the null entry). */
export const DEFAULT_INDEX_ENTRIES_PER_FILE = 1_000_000;
/** An open reads the last file's entries this many at a time. */
const LOAD_CHUNK_ENTRIES = 16 * 1024;
const INT_MAX = 0x7fffffff;

/** One index file and its header fields. */
interface IndexFile {
  seg: Segment;
  beginTs: number;
  endTs: number;
  beginPhy: number;
  endPhy: number;
  slotsUsed: number;
  /** next entry (1 when empty) */
  count: number;
}

/** RocketMQ's key hash: |hashCode|, with Integer.MIN_VALUE as 0. */
function keyHashOf(hash: number): number {
  return hash === -0x80000000 ? 0 : Math.abs(hash);
}

/** The key index of a store. */
export class IndexService {
  private files: IndexFile[] = [];
  /** the slot table of the last file (the one written); `slotsOf` says which file it is */
  private readonly slots: Int32Array;
  private slotsOf: IndexFile | null = null;
  /** entries of the last file not yet written, from entry `pendingFirst` on */
  private pending: Buffer;
  private pendingLen = 0;
  private pendingFirst = 1;
  /** the last file's header is written with the next entries (its begin fields are new) */
  private headerDirty = false;
  /** files written since the last sync */
  private readonly unsynced = new Set<IndexFile>();
  private readonly header = Buffer.alloc(INDEX_HEADER_BYTES);
  private readonly fileBytes: number;

  constructor(
    private readonly dir: string,
    private readonly entriesPerFile = DEFAULT_INDEX_ENTRIES_PER_FILE,
    slotCount = DEFAULT_INDEX_SLOTS,
  ) {
    this.slots = new Int32Array(slotCount);
    this.pending = Buffer.allocUnsafe(64 * 1024);
    this.fileBytes = INDEX_HEADER_BYTES + slotCount * 4 + entriesPerFile * INDEX_ENTRY_BYTES;
    mkdirDurable(dir);
  }

  private entryPos(i: number): number {
    return INDEX_HEADER_BYTES + this.slots.length * 4 + i * INDEX_ENTRY_BYTES;
  }

  private get last(): IndexFile | undefined {
    return this.files[this.files.length - 1];
  }

  /** Drops every entry, and with `removeFiles` every file (recovery rebuilds the index from the commit log). */
  reset(removeFiles = true): void {
    for (const f of this.files) removeFiles ? f.seg.remove() : f.seg.close();
    if (removeFiles) for (const { file } of listSegmentFiles(this.dir)) fs.rmSync(file, { force: true });
    this.files = [];
    this.slotsOf = null;
    this.unsynced.clear();
    this.slots.fill(0);
    this.pendingLen = 0;
    this.pendingFirst = 1;
    this.headerDirty = false;
  }

  /** Entries held (the null entries excluded). */
  get entries(): number {
    let n = 0;
    for (const f of this.files) n += f.count - 1;
    return n;
  }

  /**
   * Opens the index files. Full files are taken from their headers (their offset ranges must rise
   * file by file and stay below `logEnd`); the last file's entries are read and its slot table
   * rebuilt: entries are in commit-log order, so one whose offset goes backwards or lies at or past
   * `logEnd` ends it. "damaged" when a file is missing, has another size or a bad header, or when
   * the files hold fewer than `expected` entries.
   */
  load(expected: number, logEnd: number): "ok" | "damaged" {
    this.reset(false);
    const found = listSegmentFiles(this.dir);
    const first = found[0]?.start ?? 0;
    let prevPhy = 0;
    for (let k = 0; k < found.length; k++) {
      const { start, file } = found[k]!;
      let size = -1;
      try {
        size = fs.statSync(file).size;
      } catch {
        /* gone */
      }
      if (start !== first + k || size !== this.fileBytes) return this.damaged();
      const seg = Segment.open(file, start, this.fileBytes);
      const h = seg.read(0, INDEX_HEADER_BYTES);
      const f: IndexFile = {
        seg,
        beginTs: readLong(h, 0),
        endTs: readLong(h, 8),
        beginPhy: readLong(h, 16),
        endPhy: readLong(h, 24),
        slotsUsed: h.readInt32BE(32),
        count: h.readInt32BE(36),
      };
      this.files.push(f);
      if (k < found.length - 1) {
        const sane = f.count === this.entriesPerFile && f.beginPhy >= prevPhy && f.endPhy >= f.beginPhy && f.endPhy < logEnd;
        if (!sane || !(f.beginTs > 0) || f.endTs < f.beginTs) return this.damaged();
        prevPhy = f.endPhy;
      } else if (!this.loadLast(f, prevPhy, logEnd)) {
        return this.damaged();
      }
    }
    if (this.entries < expected) return this.damaged();
    return "ok";
  }

  /** Reads the last file's entries and rebuilds its slot table and header fields; false when its header does not fit them. */
  private loadLast(f: IndexFile, prevPhy: number, logEnd: number): boolean {
    // the header is written with the first entries: it tells a first entry of all zeros (Integer.MIN_VALUE's
    // key hash at offset 0) from no entry
    const headerCount = f.count;
    let headerFits = true;
    this.adopt(f, this.entriesPerFile, (keyHash, phy, prev, i) => {
      const empty = keyHash === 0 && phy === 0 && !(i === 1 && headerCount > 1);
      if (empty || keyHash < 0 || phy < prevPhy || phy >= logEnd || prev < 0 || prev >= i) return false;
      if (i === 1 && (phy !== f.beginPhy || !(f.beginTs > 0))) return (headerFits = false);
      prevPhy = phy;
      return true;
    });
    this.headerDirty = true;
    return headerFits;
  }

  /**
   * Makes `f` the file written: keeps its entries from 1 while `keep(keyHash, phy, prev, i)` holds
   * (below `upTo`), rebuilds the slot table and end fields from them and zeroes what follows.
   * Returns whether entries were dropped.
   */
  private adopt(f: IndexFile, upTo: number, keep: (keyHash: number, phy: number, prev: number, i: number) => boolean): boolean {
    const before = f.count;
    this.slots.fill(0);
    f.slotsUsed = 0;
    f.count = 1;
    scan: for (let at = 1; at < upTo; at += LOAD_CHUNK_ENTRIES) {
      const n = Math.min(LOAD_CHUNK_ENTRIES, upTo - at);
      const chunk = f.seg.read(this.entryPos(at), n * INDEX_ENTRY_BYTES);
      for (let e = 0; e < n * INDEX_ENTRY_BYTES; e += INDEX_ENTRY_BYTES) {
        const keyHash = chunk.readInt32BE(e);
        const phy = readLong(chunk, e + 4);
        if (!keep(keyHash, phy, chunk.readInt32BE(e + 16), f.count)) break scan;
        const slot = keyHash % this.slots.length;
        if (this.slots[slot] === 0) f.slotsUsed++;
        this.slots[slot] = f.count++;
        f.endPhy = phy;
        f.endTs = f.beginTs + chunk.readInt32BE(e + 12) * 1000;
      }
    }
    if (f.count === 1) f.beginTs = f.endTs = f.beginPhy = f.endPhy = 0;
    // whatever lies past the last entry is zeroed, so a later open stops there too
    f.seg.zeroFrom(this.entryPos(f.count));
    this.pendingFirst = f.count;
    this.slotsOf = f;
    return f.count !== before;
  }

  private damaged(): "damaged" {
    this.reset(false);
    return "damaged";
  }

  /** Starts the next file (the last one is full, or there is none). */
  private startFile(): IndexFile {
    const full = this.last;
    if (full) this.finish(full);
    const no = full ? full.seg.start + 1 : 0;
    const seg = Segment.open(path.join(this.dir, segmentName(no)), no, this.fileBytes);
    const f: IndexFile = { seg, beginTs: 0, endTs: 0, beginPhy: 0, endPhy: 0, slotsUsed: 0, count: 1 };
    this.files.push(f);
    this.slots.fill(0);
    this.slotsOf = f;
    this.pendingFirst = 1;
    this.pendingLen = 0;
    return f;
  }

  /**
   * Writes a full file's entries, slot table and header: from now on it is read from the file only.
   * It stays among the unsynced files, synced by the next {@link sync} (the store's checkpoint, off
   * the event loop, before it counts these entries): an fdatasync of its megabytes here would stall
   * the put that filled it, as RocketMQ flushes a full index file on a thread of its own.
   */
  private finish(f: IndexFile): void {
    this.writePending();
    // the slot table is stored big-endian, as every other field
    const out = Buffer.allocUnsafe(this.slots.length * 4);
    for (let i = 0; i < this.slots.length; i++) out.writeInt32BE(this.slots[i]!, i * 4);
    f.seg.write(out, 0, out.length, INDEX_HEADER_BYTES);
    this.writeHeader(f);
  }

  private writeHeader(f: IndexFile): void {
    const h = this.header;
    writeLong(h, 0, f.beginTs);
    writeLong(h, 8, f.endTs);
    writeLong(h, 16, f.beginPhy);
    writeLong(h, 24, f.endPhy);
    h.writeInt32BE(f.slotsUsed, 32);
    h.writeInt32BE(f.count, 36);
    f.seg.write(h, 0, INDEX_HEADER_BYTES, 0);
    this.unsynced.add(f);
  }

  /** Adds one entry for a key whose Java hash code is `hash`. */
  add(hash: number, phy: number, storeTimestamp: number): void {
    let f = this.last;
    if (!f || f.count >= this.entriesPerFile) f = this.startFile();
    const keyHash = keyHashOf(hash);
    const slot = keyHash % this.slots.length;
    const i = f.count++;
    if (i === 1) {
      f.beginTs = storeTimestamp;
      f.beginPhy = phy;
      this.headerDirty = true;
    }
    f.endTs = storeTimestamp;
    f.endPhy = phy;
    const prev = this.slots[slot]!;
    if (prev === 0) f.slotsUsed++;
    this.slots[slot] = i;
    if (this.pendingLen + INDEX_ENTRY_BYTES > this.pending.length) {
      const bigger = Buffer.allocUnsafe(this.pending.length * 2);
      this.pending.copy(bigger, 0, 0, this.pendingLen);
      this.pending = bigger;
    }
    const p = this.pendingLen;
    const b = this.pending; // sized above for the whole entry
    putInt32BE(b, p, keyHash);
    putInt64BE(b, p + 4, phy);
    putInt32BE(b, p + 12, Math.min(INT_MAX, Math.max(0, Math.floor((storeTimestamp - f.beginTs) / 1000))));
    putInt32BE(b, p + 16, prev);
    this.pendingLen += INDEX_ENTRY_BYTES;
  }

  /** Writes the entries added since the last call in one write (and the header when the file just began). */
  writePending(): void {
    const f = this.last;
    if (!f || this.pendingLen === 0) return;
    // the header first: entries on disk always come with the begin fields they are relative to
    if (this.headerDirty) {
      this.writeHeader(f);
      this.headerDirty = false;
    }
    f.seg.write(this.pending, 0, this.pendingLen, this.entryPos(this.pendingFirst));
    this.pendingFirst += this.pendingLen / INDEX_ENTRY_BYTES;
    this.pendingLen = 0;
    this.unsynced.add(f);
  }

  /** The entry `i` of file `f`: from the unwritten entries or the file. */
  private entry(f: IndexFile, i: number): { buf: Buffer; at: number } {
    if (f === this.last && i >= this.pendingFirst) return { buf: this.pending, at: (i - this.pendingFirst) * INDEX_ENTRY_BYTES };
    return { buf: f.seg.read(this.entryPos(i), INDEX_ENTRY_BYTES), at: 0 };
  }

  /** Drops the entries that point at or past `phy` (they are dispatched again or were cut). */
  truncateFrom(phy: number): void {
    this.writePending();
    while (this.files.length > 0 && (this.last!.count === 1 || this.last!.beginPhy >= phy)) this.remove(this.files.pop()!);
    const f = this.last;
    if (!f) {
      this.slotsOf = null;
      return;
    }
    if (f === this.slotsOf && f.endPhy < phy) return;
    // the file that holds the cut becomes the one written
    if (this.adopt(f, f.count, (_keyHash, entryPhy) => entryPhy < phy)) this.writeHeader(f);
  }

  /** Flushes the files written since the last call (the last file's header with them). */
  async sync(): Promise<void> {
    this.writePending();
    const f = this.last;
    if (f && this.unsynced.has(f)) this.writeHeader(f);
    const files = [...this.unsynced];
    this.unsynced.clear();
    try {
      await Promise.all(files.map((x) => x.seg.sync()));
    } catch (e) {
      // synced again next time (files removed meanwhile excepted)
      for (const x of files) if (this.files.includes(x)) this.unsynced.add(x);
      throw e;
    }
  }

  /** Flushes every file now (close). */
  syncNow(): void {
    this.writePending();
    const f = this.last;
    if (f) this.writeHeader(f);
    for (const x of this.unsynced) x.seg.syncNow();
    this.unsynced.clear();
  }

  /** The newest entry of `slot` in file `f`. */
  private slotOf(f: IndexFile, slot: number): number {
    if (f === this.slotsOf) return this.slots[slot]!;
    return f.seg.read(INDEX_HEADER_BYTES + slot * 4, 4).readInt32BE(0);
  }

  /** Commit-log offsets of entries with this key hash and store time in [begin, end] (to the second), newest first. */
  lookup(hash: number, begin: number, end: number, max: number): number[] {
    const out: number[] = [];
    this.visit(hash, begin, end, max, (phy) => out.push(phy) < max);
    return out;
  }

  /**
   * Hands the commit-log offset of each entry with this key hash and store time in [begin, end]
   * (to the second) to `each`, newest first, until it returns false or `maxEntries` were handed
   * over. Entries of other keys with the same hash come too: the caller checks each record, and
   * keeps walking past those (a key whose hash another busy key shares is still found). A chain
   * is walked down to its first entry older than `begin`, not further.
   */
  visit(hash: number, begin: number, end: number, maxEntries: number, each: (phy: number) => boolean): void {
    const keyHash = keyHashOf(hash);
    const slot = keyHash % this.slots.length;
    let left = maxEntries;
    for (let k = this.files.length - 1; k >= 0 && left > 0; k--) {
      const f = this.files[k]!;
      // times are kept to the second: a file or entry within a second of the range may hold a match
      if (f.count <= 1 || f.endTs + 1000 < begin || f.beginTs > end) continue;
      let i = this.slotOf(f, slot);
      while (i > 0 && i < f.count && left > 0) {
        const { buf, at } = this.entry(f, i);
        const t = f.beginTs + buf.readInt32BE(at + 12) * 1000;
        // chains go back in store order: past the begin time only older entries follow (RocketMQ stops there too)
        if (t + 1000 <= begin) break;
        const prev = buf.readInt32BE(at + 16);
        if (buf.readInt32BE(at) === keyHash && t <= end) {
          left--;
          if (!each(readLong(buf, at + 4))) return;
        }
        if (prev >= i) break; // chains only go back: a damaged link ends the walk
        i = prev;
      }
    }
  }

  /**
   * Deletes index files whose entries all point below `minPhy` (never the one written). A file that
   * cannot be deleted is dropped all the same and kept in `undeleted`.
   */
  deleteBelow(minPhy: number, undeleted?: UndeletedFiles): void {
    while (this.files.length > 1 && this.files[0]!.endPhy < minPhy) this.remove(this.files.shift()!, undeleted);
  }

  private remove(f: IndexFile, undeleted?: UndeletedFiles): void {
    this.unsynced.delete(f);
    if (this.slotsOf === f) this.slotsOf = null;
    if (undeleted) undeleted.remove(f.seg);
    else f.seg.remove();
  }

  close(): void {
    this.writePending();
    for (const f of this.files) f.seg.close();
    this.files = [];
  }
}
