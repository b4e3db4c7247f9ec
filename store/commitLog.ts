/**
 * The commit log: one append-only log for all topics in fixed-size segments. A record that does
 * not fit the rest of a segment leaves a BLANK marker there and goes to the next segment. Puts
 * that wait for durability share fdatasyncs (group commit).
 */
import path from "node:path";
import { crc32 } from "node:zlib";
import { BLANK_MAGIC, BLANK_MARKER_BYTES } from "../transport/messageRecord.ts";
import { MQError } from "../transport/protocol.ts";
import { mkdirDurable } from "./durableDir.ts";
import { fileBytes, listSegmentFiles, Segment, segmentName } from "./segment.ts";
import type { UndeletedFiles } from "./undeletedFiles.ts";

/**
 * Magic code of a replica filler: a range of a replica's log standing for master bytes that were
 * damaged and skipped. Layout: total size 4 | FILLER_MAGIC 4 | CRC32 of those 8 bytes 4, then
 * zeros up to the total size. Readers step over it like a record that holds no message.
 */
export const FILLER_MAGIC = 0xf1113a9e;
/** Bytes of a filler header (total size, magic, header CRC). */
export const FILLER_HEADER_BYTES = 12;

/** Writes a filler header for `total` bytes at `pos`. */
export function writeFillerHeader(buf: Buffer, pos: number, total: number): void {
  buf.writeInt32BE(total, pos);
  buf.writeUInt32BE(FILLER_MAGIC, pos + 4);
  buf.writeUInt32BE(crc32(buf.subarray(pos, pos + 8)) >>> 0, pos + 8);
}

/** The size of the filler at `pos` (`avail` bytes readable from there), or -1 when there is none. */
export function fillerBytes(buf: Buffer, pos: number, avail: number): number {
  if (avail < FILLER_HEADER_BYTES || buf.readUInt32BE(pos + 4) !== FILLER_MAGIC) return -1;
  const total = buf.readInt32BE(pos);
  if (total < FILLER_HEADER_BYTES || buf.readUInt32BE(pos + 8) !== crc32(buf.subarray(pos, pos + 8)) >>> 0) return -1;
  return total;
}

interface FlushWaiter {
  target: number;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/** The commit log of one store directory. */
export class CommitLog {
  readonly dir: string;
  readonly segmentBytes: number;
  /** segments in offset order; the last one is written */
  segments: Segment[] = [];
  /** next physical offset to write (= max offset) */
  writeOffset = 0;
  /** everything below is on disk */
  flushedOffset = 0;
  /** told of each failed fdatasync: the segment file and the commit-log range [from, to) it was to make durable */
  onSyncError: (error: MQError, file: string, from: number, to: number) => void = () => {};
  private waiters: FlushWaiter[] = [];
  private syncing = false;
  /** the running syncLoop: close waits for it, so no fdatasync queued on the pool meets a closed descriptor */
  private syncRun: Promise<void> = Promise.resolve();
  /** where a failed append left bytes it could not clear (see {@link append}); -1: none */
  private dirtyFrom = -1;
  private blank = Buffer.alloc(BLANK_MARKER_BYTES);

  constructor(dir: string, segmentBytes: number) {
    this.dir = dir;
    this.segmentBytes = segmentBytes;
    mkdirDurable(dir);
    const longer = (file: string) => (has: number) =>
      `Commit-log file ${file} holds ${has} bytes but commitLogSegmentBytes is ${segmentBytes}: the store was written with commitLogSegmentBytes=${has}; open it with that.`;
    const found = listSegmentFiles(dir);
    // every name is checked before any file is opened
    for (const { start, file } of found) {
      if (start % segmentBytes !== 0) {
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `Commit-log file ${file} does not start at a multiple of commitLogSegmentBytes=${segmentBytes}: open the store with the segment size it was written with (the file holds ${fileBytes(file)} bytes).`,
        );
      }
    }
    try {
      for (const { start, file } of found) this.segments.push(Segment.open(file, start, segmentBytes, longer(file)));
    } catch (e) {
      this.close();
      throw e;
    }
  }

  /** Lowest physical offset still on disk. */
  get minOffset(): number {
    return this.segments[0]?.start ?? this.writeOffset;
  }

  /** The segment holding physical offset `phy`, or undefined. */
  segmentFor(phy: number): Segment | undefined {
    const first = this.segments[0];
    if (!first) return undefined;
    const i = Math.floor((phy - first.start) / this.segmentBytes);
    const s = this.segments[i];
    if (s && phy >= s.start && phy < s.start + this.segmentBytes) return s;
    // a missing file in the middle breaks the arithmetic; fall back to a search
    return this.segments.find((x) => phy >= x.start && phy < x.start + this.segmentBytes);
  }

  /**
   * Ranges [from, to) of the log between its first and last segment whose files are missing (deleted
   * by hand, lost by the file system): their records are gone (RocketMQ's checkSelf logs such a gap).
   */
  missingRanges(): Array<{ from: number; to: number }> {
    const out: Array<{ from: number; to: number }> = [];
    for (let i = 1; i < this.segments.length; i++) {
      const end = this.segments[i - 1]!.start + this.segmentBytes;
      if (this.segments[i]!.start > end) out.push({ from: end, to: this.segments[i]!.start });
    }
    return out;
  }

  /**
   * Where a run of `len` record bytes will go: the current offset, or the start of a new segment
   * after a BLANK marker when the run plus a marker does not fit what is left.
   */
  reserve(len: number): number {
    if (this.dirtyFrom >= 0) this.clearDirtyTail();
    if (len + BLANK_MARKER_BYTES > this.segmentBytes) {
      throw new MQError(
        "MESSAGE_ILLEGAL",
        `A put of ${len} bytes cannot fit a commit-log segment of ${this.segmentBytes} bytes: send fewer or smaller messages per batch.`,
      );
    }
    const inSeg = this.writeOffset % this.segmentBytes;
    const seg = this.segmentFor(this.writeOffset);
    if (seg && inSeg + len + BLANK_MARKER_BYTES <= this.segmentBytes) return this.writeOffset;
    if (seg && inSeg !== 0) {
      const rest = this.segmentBytes - inSeg;
      this.blank.writeInt32BE(rest, 0);
      this.blank.writeUInt32BE(BLANK_MAGIC, 4);
      seg.write(this.blank, 0, BLANK_MARKER_BYTES, inSeg);
      this.writeOffset += rest;
    }
    if (!this.segmentFor(this.writeOffset)) this.addSegment(this.writeOffset);
    return this.writeOffset;
  }

  /** Ends the current segment with a BLANK marker (a replica mirroring its master's roll-over). */
  rollToNextSegment(): void {
    if (this.writeOffset % this.segmentBytes === 0) return;
    this.reserve(this.segmentBytes - BLANK_MARKER_BYTES);
  }

  private addSegment(start: number): Segment {
    const s = Segment.open(path.join(this.dir, segmentName(start)), start, this.segmentBytes);
    this.segments.push(s);
    return s;
  }

  /** Writes `len` bytes at the reserved offset `phy` (= writeOffset) in one write and advances. */
  append(buf: Buffer, len: number, phy: number): void {
    const seg = this.segmentFor(phy);
    if (!seg || phy !== this.writeOffset) throw new MQError("SYSTEM_ERROR", "commit-log append at an unreserved offset");
    if (this.dirtyFrom >= 0) this.clearDirtyTail();
    try {
      seg.write(buf, 0, len, phy - seg.start);
    } catch (e) {
      // The whole records of a partly written batch carry valid CRCs: left there, a later put
      // would overwrite only some of them and recovery would take the rest for acknowledged
      // records (with the queue offsets of later puts). Zeros are written, or, when that fails
      // too, the rest of the segment is cut away (needs no space); else appends wait for that.
      try {
        seg.write(Buffer.alloc(len), 0, len, phy - seg.start);
      } catch {
        this.dirtyFrom = phy;
        try {
          this.clearDirtyTail();
        } catch {
          /* left to the next put or the close, which try again */
        }
      }
      throw e;
    }
    this.writeOffset = phy + len;
  }

  /**
   * Cuts away what a failed append left past the write offset, if anything; throws (retriable)
   * while it cannot. Close calls it too: a refused put's whole records left there would be
   * recovered as stored messages after a restart.
   */
  clearDirtyTail(): void {
    if (this.dirtyFrom < 0) return;
    const seg = this.segmentFor(this.dirtyFrom);
    try {
      seg?.zeroFrom(this.dirtyFrom - seg.start);
    } catch (e) {
      throw new MQError(
        "SYSTEM_ERROR",
        `The commit log still holds part of a refused put at ${this.dirtyFrom} that could not be cleared (${(e as Error).message}): puts resume once it can be; check the disk.`,
        { cause: e },
      );
    }
    this.dirtyFrom = -1;
  }

  /**
   * Writes a filler of `total` bytes at the write offset (a replica standing in for a damaged
   * range of its master's log): header, then zeros.
   */
  appendFiller(total: number): void {
    if (this.dirtyFrom >= 0) this.clearDirtyTail();
    const phy = this.writeOffset;
    const seg = this.segmentFor(phy);
    if (!seg || phy - seg.start + total > this.segmentBytes) {
      throw new MQError(
        "MALFORMED",
        `A replicated filler of ${total} bytes at ${phy} does not fit its segment: master and replica need the same commitLogSegmentBytes.`,
      );
    }
    const chunk = Buffer.alloc(Math.min(total, 1024 * 1024));
    writeFillerHeader(chunk, 0, total);
    let done = 0;
    while (done < total) {
      const n = Math.min(chunk.length, total - done);
      seg.write(chunk, 0, n, phy - seg.start + done);
      if (done === 0) chunk.fill(0, 0, FILLER_HEADER_BYTES);
      done += n;
    }
    this.writeOffset = phy + total;
  }

  /** Reads `len` bytes at `phy` (within one segment); null when that segment is gone. */
  read(phy: number, len: number, into?: Buffer, intoOff = 0): Buffer | null {
    const seg = this.segmentFor(phy);
    if (!seg || phy - seg.start + len > this.segmentBytes) return null;
    return seg.read(phy - seg.start, len, into, intoOff);
  }

  /** Resolves once every byte below `target` is on disk; puts waiting together share fdatasyncs. */
  waitFlushed(target: number): Promise<void> {
    if (target <= this.flushedOffset) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ target, resolve, reject });
      if (!this.syncing) this.syncRun = this.syncLoop();
    });
  }

  /** Starts a flush of everything written so far (async flush mode's flusher calls this). */
  flushSoon(): void {
    if (!this.syncing && this.flushedOffset < this.writeOffset) this.syncRun = this.syncLoop();
  }

  /** Resolves once no fdatasync of this log is running or queued (errors are the loop's to report). */
  syncsSettled(): Promise<void> {
    return this.syncRun;
  }

  private async syncLoop(): Promise<void> {
    this.syncing = true;
    try {
      while (this.flushedOffset < this.writeOffset) {
        const target = this.writeOffset;
        const from = this.flushedOffset;
        const dirty = this.segments.filter((s) => s.start + this.segmentBytes > from && s.start < target);
        try {
          await Promise.all(
            dirty.map((s) =>
              s.sync().catch((e: MQError) => {
                this.onSyncError(e, s.file, Math.max(from, s.start), Math.min(target, s.start + this.segmentBytes));
                throw e;
              }),
            ),
          );
        } catch (e) {
          const w = this.waiters;
          this.waiters = [];
          for (const x of w) x.reject(e);
          return;
        }
        this.flushedOffset = Math.max(this.flushedOffset, target);
        if (this.waiters.length) {
          const keep: FlushWaiter[] = [];
          for (const w of this.waiters) w.target <= this.flushedOffset ? w.resolve() : keep.push(w);
          this.waiters = keep;
        }
      }
    } finally {
      this.syncing = false;
    }
  }

  /**
   * Synchronous flush of everything written so far (close, recovery, a topic deletion). `report`:
   * a failed fdatasync is told to `onSyncError` before it is thrown (a deletion makes the log
   * durable up to its offset this way first, and fails with it).
   */
  flushNow(report = false): void {
    const from = this.flushedOffset;
    const target = this.writeOffset;
    for (const s of this.segments) {
      if (s.start + this.segmentBytes <= from) continue;
      try {
        s.syncNow();
      } catch (e) {
        if (report) this.onSyncError(e as MQError, s.file, Math.max(from, s.start), Math.min(target, s.start + this.segmentBytes));
        throw e;
      }
    }
    this.flushedOffset = target;
  }

  /** Sets the end of the log after recovery: zeroes the rest of its segment, deletes later segments. */
  truncateTo(end: number): void {
    const keep: Segment[] = [];
    for (const s of this.segments) {
      if (s.start > end) {
        s.remove();
        continue;
      }
      if (end - s.start < this.segmentBytes) s.zeroFrom(end - s.start);
      keep.push(s);
    }
    this.segments = keep;
    this.writeOffset = end;
    this.flushedOffset = end;
    if (!this.segmentFor(end)) this.addSegment(end - (end % this.segmentBytes));
  }

  /** Replaces the (empty) segments of a log that holds no bytes with one beginning at `start`. */
  beginEmptyAt(start: number): void {
    for (const s of this.segments) s.remove();
    this.segments = [];
    this.writeOffset = start;
    this.flushedOffset = start;
    this.addSegment(start);
  }

  /**
   * Deletes whole segments (oldest first, at most `max`) for which `expired(segment)` holds, never
   * the one being written. A segment whose file cannot be deleted is dropped all the same and its
   * file kept in `undeleted` (without it, the error is thrown once the segment is dropped).
   */
  deleteSegments(expired: (s: Segment) => boolean, max = Number.POSITIVE_INFINITY, undeleted?: UndeletedFiles): number {
    let n = 0;
    while (this.segments.length > 1 && n < max) {
      const s = this.segments[0]!;
      if (s.start + this.segmentBytes > this.writeOffset || !expired(s)) break;
      // dropped first: a closed segment left listed would fail every later read and clean-up
      this.segments.shift();
      n++;
      if (undeleted) undeleted.remove(s);
      else s.remove();
    }
    return n;
  }

  /**
   * At open, before recovery: drops the segments that end before a missing range (a gap) ending at
   * or below `below`, the lowest offset the store still refers to. Such segments are files a
   * clean-up dropped but could not delete (see UndeletedFiles): read again they would move the
   * log's start back and report the gap as lost records. Files that still cannot be deleted are
   * kept in `undeleted`, deleted again at the next clean-up. Only segments `dropped` says a
   * clean-up could have dropped are taken.
   */
  dropLeftoversBelow(below: number, undeleted: UndeletedFiles, dropped: (s: Segment) => boolean = () => true): void {
    let n = 0;
    for (let i = 1; i < this.segments.length; i++) {
      const s = this.segments[i]!;
      if (s.start > below || !dropped(this.segments[i - 1]!)) break;
      if (s.start > this.segments[i - 1]!.start + this.segmentBytes) n = i;
    }
    for (const s of this.segments.splice(0, n)) undeleted.remove(s);
  }

  /** Rejects the puts still waiting for a flush, but resolves those a last flushNow covered. */
  close(): void {
    for (const w of this.waiters) {
      if (w.target <= this.flushedOffset) w.resolve();
      else w.reject(new MQError("CLOSED", "The store was closed before the put was flushed."));
    }
    this.waiters = [];
    for (const s of this.segments) s.close();
    this.segments = [];
  }
}
