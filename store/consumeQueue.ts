/**
 * A consume queue: the per topic/queueId list of 20-byte entries (commit-log offset 8, size 4,
 * tag hash code 8) in fixed-size files named by their byte offset. Entry k of the queue is the
 * message with queue offset k. An all-zero entry is a hole (a record recovery could not read).
 */
import fs from "node:fs";
import path from "node:path";
import { MIN_RECORD_BYTES, readLong, writeLong } from "../transport/messageRecord.ts";
import { MQError } from "../transport/protocol.ts";
import type { QueueMark } from "./checkpoint.ts";
import { mkdirDurable } from "./durableDir.ts";
import { fileBytes, listSegmentFiles, Segment, segmentName } from "./segment.ts";
import type { UndeletedFiles } from "./undeletedFiles.ts";

/** Bytes per consume-queue entry. */
export const CQ_ENTRY_BYTES = 20;
/** Recovery reads consume-queue files in chunks of this many bytes. */
const RECOVER_CHUNK_BYTES = 64 * 1024;
/** Files before the last that a consume queue without a checkpoint mark is checked from (RocketMQ: the 3rd-last file). */
const RECOVER_FILES_BACK = 2;

/** How recovery left a consume queue. */
export type QueueRecovery = "ok" | "behind";

/** Topic and queue-id directories under a consume-queue root. */
export function listConsumeQueues(root: string): Array<{ topic: string; queueId: number }> {
  const out: Array<{ topic: string; queueId: number }> = [];
  let topics: string[];
  try {
    topics = fs.readdirSync(root);
  } catch {
    return out;
  }
  for (const topic of topics) {
    let ids: string[];
    try {
      ids = fs.readdirSync(path.join(root, topic));
    } catch {
      continue;
    }
    for (const id of ids) if (/^\d{1,9}$/.test(id)) out.push({ topic, queueId: Number(id) });
  }
  return out;
}

/**
 * The files a write of `count` entries from `offset` opens (see openFiles.ts): those of its range
 * that `q` (undefined: a queue not made yet) has not open, less the ones an earlier batch of the
 * same put group, which ended at `offset`, opens already (`continues`).
 */
export function consumeQueueFilesToOpen(
  q: ConsumeQueue | undefined,
  entriesPerFile: number,
  offset: number,
  count: number,
  continues: boolean,
): number {
  const first = continues ? Math.floor((offset - 1) / entriesPerFile) + 1 : Math.floor(offset / entriesPerFile);
  const last = Math.floor((offset + count - 1) / entriesPerFile);
  let n = 0;
  for (let f = first; f <= last; f++) if (!q?.hasFile(f)) n++;
  return n;
}

/** The consume queue of one topic/queueId. */
export class ConsumeQueue {
  readonly dir: string;
  readonly fileBytes: number;
  private files = new Map<number, Segment>();
  /** lowest readable offset */
  minOffset = 0;
  /** next offset to be written (= number of entries, holes included) */
  maxOffset = 0;
  /** highest commit-log end this queue references */
  maxPhyEnd = 0;
  /** entries below this are on disk */
  private syncedOffset = 0;

  constructor(
    root: string,
    readonly topic: string,
    readonly queueId: number,
    readonly entriesPerFile: number,
  ) {
    this.dir = path.join(root, topic, String(queueId));
    this.fileBytes = entriesPerFile * CQ_ENTRY_BYTES;
    mkdirDurable(this.dir);
    // files of another consumeQueueEntries would map queue offsets to the wrong entries: refused
    const refuse = (file: string, entries: string) =>
      new MQError(
        "ILLEGAL_ARGUMENT",
        `Consume-queue file ${file} was written with ${entries} but consumeQueueEntries is ${entriesPerFile}: open the store with the consumeQueueEntries it was written with.`,
      );
    const found = listSegmentFiles(this.dir);
    // every name is checked before any file is opened
    for (const { start, file } of found)
      if (start % this.fileBytes !== 0) throw refuse(file, `${fileBytes(file) / CQ_ENTRY_BYTES} entries per file`);
    try {
      for (const { start, file } of found) {
        const f = Segment.open(file, start, this.fileBytes, (has) => refuse(file, `${has / CQ_ENTRY_BYTES} entries per file`).message);
        this.files.set(start, f);
      }
    } catch (e) {
      this.close();
      throw e;
    }
  }

  private file(offset: number, create: boolean): Segment | undefined {
    const start = Math.floor(offset / this.entriesPerFile) * this.fileBytes;
    let f = this.files.get(start);
    if (!f && create) {
      f = Segment.open(path.join(this.dir, segmentName(start)), start, this.fileBytes);
      this.files.set(start, f);
    }
    return f;
  }

  /** Whether the queue's file number `index` (entries from `index * entriesPerFile`) is open. */
  hasFile(index: number): boolean {
    return this.files.has(index * this.fileBytes);
  }

  /** Writes `count` entries from `buf` for queue offsets starting at `offset` (may span files). */
  put(offset: number, buf: Buffer, count: number): void {
    let done = 0;
    while (done < count) {
      const off = offset + done;
      const f = this.file(off, true)!;
      const inFile = off % this.entriesPerFile;
      const n = Math.min(count - done, this.entriesPerFile - inFile);
      f.write(buf, done * CQ_ENTRY_BYTES, n * CQ_ENTRY_BYTES, inFile * CQ_ENTRY_BYTES);
      done += n;
    }
    if (offset < this.syncedOffset) this.syncedOffset = offset;
    if (this.maxOffset === 0 && this.minOffset === 0 && offset > 0) this.minOffset = offset;
    if (offset + count > this.maxOffset) this.maxOffset = offset + count;
    const lastPos = (count - 1) * CQ_ENTRY_BYTES;
    const end = readLong(buf, lastPos) + buf.readInt32BE(lastPos + 8);
    if (end > this.maxPhyEnd) this.maxPhyEnd = end;
  }

  /**
   * Reads entries from `offset`, at most `max` and never past the end of its file or the queue.
   * Returns null when the file holding `offset` is gone.
   */
  read(offset: number, max: number): Buffer | null {
    const f = this.file(offset, false);
    if (!f) return null;
    const inFile = offset % this.entriesPerFile;
    const n = Math.max(0, Math.min(max, this.entriesPerFile - inFile, this.maxOffset - offset));
    return f.read(inFile * CQ_ENTRY_BYTES, n * CQ_ENTRY_BYTES);
  }

  /** An entry that can point at a record: size in range, within the log, not before `prevEnd`. */
  private static sane(phy: number, size: number, prevEnd: number, logEnd: number, maxRecordBytes: number): boolean {
    return size >= MIN_RECORD_BYTES && size <= maxRecordBytes && phy >= prevEnd && phy + size <= logEnd;
  }

  /**
   * Finds the queue's extent from its files. With a checkpoint `mark` and a clean shutdown
   * (`trustMark`), the mark's max offset is taken as is; otherwise entries are checked from the
   * mark (or from the 3rd-last file) forward, and the last one that could point at a record below
   * `logEnd` ends the queue. Anything written after the end is zeroed so that no later recovery
   * mistakes it for entries. "behind" when the files do not reach the mark (missing or cut).
   */
  recover(mark: QueueMark | undefined, trustMark: boolean, logEnd: number, maxRecordBytes: number): QueueRecovery {
    const starts = [...this.files.keys()].sort((a, b) => a - b);
    if (starts.length === 0) {
      this.minOffset = this.maxOffset = mark?.max ?? 0;
      return mark && mark.max > mark.min ? "behind" : "ok";
    }
    const firstOffset = starts[0]! / CQ_ENTRY_BYTES;
    let max = 0;
    let prevEnd = 0;
    if (mark && mark.max > 0) {
      const last = this.read0(mark.max - 1);
      if (!last || last.every((b) => b === 0)) return "behind";
      max = mark.max;
      const phy = readLong(last, 0);
      const size = last.readInt32BE(8);
      if (ConsumeQueue.sane(phy, size, 0, logEnd, maxRecordBytes)) prevEnd = phy + size;
    }
    if (!mark || !trustMark) {
      let from = mark ? mark.max : starts[Math.max(0, starts.length - 1 - RECOVER_FILES_BACK)]! / CQ_ENTRY_BYTES;
      if (!mark && from > 0) {
        const before = this.read0(from - 1);
        if (before) prevEnd = readLong(before, 0) + before.readInt32BE(8);
      }
      while (true) {
        const f = this.file(from, false);
        if (!f) {
          const later = starts.find((s) => s / CQ_ENTRY_BYTES > from);
          if (later === undefined) break;
          from = later / CQ_ENTRY_BYTES;
          continue;
        }
        const inFile = from % this.entriesPerFile;
        const n = Math.min(this.entriesPerFile - inFile, RECOVER_CHUNK_BYTES / CQ_ENTRY_BYTES);
        const chunk = f.read(inFile * CQ_ENTRY_BYTES, n * CQ_ENTRY_BYTES);
        let nonZero = false;
        for (let i = 0; i < n; i++) {
          const e = i * CQ_ENTRY_BYTES;
          const phy = readLong(chunk, e);
          const size = chunk.readInt32BE(e + 8);
          if (phy !== 0 || size !== 0) nonZero = true;
          if (ConsumeQueue.sane(phy, size, prevEnd, logEnd, maxRecordBytes)) {
            max = from + i + 1;
            prevEnd = phy + size;
          }
        }
        // a whole chunk of zeros after the end: nothing was written further on
        if (!nonZero && max <= from) break;
        from += n;
      }
    }
    this.maxOffset = max;
    this.minOffset = Math.min(max, Math.max(mark?.min ?? 0, firstOffset));
    this.maxPhyEnd = prevEnd;
    // the files before the last were flushed by an earlier checkpoint or close
    this.syncedOffset = max - (max % this.entriesPerFile);
    this.cutAfter(max);
    return "ok";
  }

  /**
   * Makes a queue that holds no entry start at `offset` (min = max): a rebuild from the log keeps
   * the offsets of a queue whose records all expired, so new messages never reuse offsets
   * consumers have committed past. A queue with entries is left as it is.
   */
  continueAt(offset: number): void {
    if (this.maxOffset === 0 && this.files.size === 0 && offset > 0) this.minOffset = this.maxOffset = offset;
  }

  /** The entry at `offset` from the files, ignoring maxOffset; null when its file is gone. */
  private read0(offset: number): Buffer | null {
    const f = this.file(offset, false);
    return f ? f.read((offset % this.entriesPerFile) * CQ_ENTRY_BYTES, CQ_ENTRY_BYTES) : null;
  }

  /** Zeroes every entry from `offset` on and deletes files that start after it. */
  private cutAfter(offset: number): void {
    for (const [start, f] of [...this.files]) {
      const first = start / CQ_ENTRY_BYTES;
      if (first >= offset) {
        f.remove();
        this.files.delete(start);
      } else if (offset < first + this.entriesPerFile) {
        f.zeroFrom((offset - first) * CQ_ENTRY_BYTES);
      }
    }
  }

  /** Drops trailing entries that point at or past `end` (the commit log was cut there). */
  truncateAbove(end: number): void {
    let k = this.maxOffset;
    while (k > this.minOffset) {
      const e = this.read0(k - 1);
      if (!e) break;
      const phy = readLong(e, 0);
      const size = e.readInt32BE(8);
      if (phy + size <= end && !(phy === 0 && size === 0)) break;
      k--;
    }
    if (k === this.maxOffset) return;
    this.maxOffset = k;
    this.cutAfter(k);
    const last = k > this.minOffset ? this.read0(k - 1) : null;
    this.maxPhyEnd = last ? readLong(last, 0) + last.readInt32BE(8) : 0;
  }

  /** Rewrites the commit-log offset and size of the entry at `offset`, keeping its tag code. */
  repairEntry(offset: number, phy: number, size: number): void {
    const f = this.file(offset, false);
    if (!f) return;
    const b = Buffer.alloc(12);
    writeLong(b, 0, phy);
    b.writeInt32BE(size, 8);
    f.write(b, 0, 12, (offset % this.entriesPerFile) * CQ_ENTRY_BYTES);
  }

  /** Flushes the files written since the last call. */
  async sync(): Promise<void> {
    const upTo = this.maxOffset;
    const from = this.syncedOffset;
    if (upTo <= from) return;
    const dirty: Array<Promise<void>> = [];
    for (const [start, f] of this.files) {
      const first = start / CQ_ENTRY_BYTES;
      if (first + this.entriesPerFile > from && first < upTo) dirty.push(f.sync());
    }
    await Promise.all(dirty);
    this.syncedOffset = Math.max(this.syncedOffset, upTo);
  }

  /** Flushes every file now (close). */
  syncNow(): void {
    for (const f of this.files.values()) f.syncNow();
    this.syncedOffset = this.maxOffset;
  }

  /** First queue offset of the file after the one holding `offset`. */
  nextFileOffset(offset: number): number {
    return (Math.floor(offset / this.entriesPerFile) + 1) * this.entriesPerFile;
  }

  /**
   * Deletes files whose entries all point below `minPhy`; moves minOffset to the first entry at or
   * above it. A file that cannot be deleted is dropped all the same and kept in `undeleted` (without
   * it, the error is thrown once the file is dropped).
   */
  deleteBelow(minPhy: number, undeleted?: UndeletedFiles): void {
    const starts = [...this.files.keys()].sort((a, b) => a - b);
    for (const start of starts) {
      const first = start / CQ_ENTRY_BYTES;
      const lastOffset = Math.min(first + this.entriesPerFile, this.maxOffset) - 1;
      if (lastOffset < first) break;
      const f = this.files.get(start)!;
      if (lastOffset >= this.maxOffset - 1 || this.lastPhyIn(f, lastOffset - first) >= minPhy) {
        const entries = f.read(0, (lastOffset - first + 1) * CQ_ENTRY_BYTES);
        for (let i = Math.max(0, this.minOffset - first); i <= lastOffset - first; i++) {
          const size = entries.readInt32BE(i * CQ_ENTRY_BYTES + 8);
          if (size > 0 && readLong(entries, i * CQ_ENTRY_BYTES) >= minPhy) {
            this.minOffset = Math.max(this.minOffset, first + i);
            return;
          }
        }
        this.minOffset = Math.max(this.minOffset, lastOffset + 1);
        return;
      }
      this.files.delete(start);
      this.minOffset = Math.max(this.minOffset, first + this.entriesPerFile);
      if (undeleted) undeleted.remove(f);
      else f.remove();
    }
  }

  /**
   * The commit-log offset the first entry points at: undefined when the queue has no entry, null
   * when that entry is a hole (all zeros: a record recovery could not read), which says nothing.
   */
  firstPhyOffset(): number | null | undefined {
    if (this.maxOffset <= this.minOffset) return undefined;
    const e = this.read(this.minOffset, 1);
    return e && e.length >= CQ_ENTRY_BYTES && e.readInt32BE(8) > 0 ? readLong(e, 0) : null;
  }

  /**
   * The commit-log offset of the last entry of `f` (its last index `lastIndex`) that points at a
   * record; -1 when none does. A hole or damaged entry there says nothing about the entries before
   * it, which may point at live records.
   */
  private lastPhyIn(f: Segment, lastIndex: number): number {
    const last = f.read(lastIndex * CQ_ENTRY_BYTES, CQ_ENTRY_BYTES);
    if (last.readInt32BE(8) > 0 && readLong(last, 0) >= 0) return readLong(last, 0);
    const entries = f.read(0, lastIndex * CQ_ENTRY_BYTES);
    for (let i = lastIndex - 1; i >= 0; i--) {
      const phy = readLong(entries, i * CQ_ENTRY_BYTES);
      if (entries.readInt32BE(i * CQ_ENTRY_BYTES + 8) > 0 && phy >= 0) return phy;
    }
    return -1;
  }

  close(): void {
    for (const f of this.files.values()) f.close();
    this.files.clear();
  }
}
