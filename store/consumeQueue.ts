/**
 * A consume queue: the per topic/queueId list of 20-byte entries (commit-log offset 8, size 4,
 * tag hash code 8) in fixed-size files named by their byte offset. Entry k of the queue is the
 * message with queue offset k. An all-zero entry is a hole (a record recovery could not read).
 */
import fs from "node:fs";
import path from "node:path";
import { readLong } from "../transport/messageRecord.ts";
import { Segment, listSegmentFiles, segmentName } from "./segment.ts";

/** Bytes per consume-queue entry. */
export const CQ_ENTRY_BYTES = 20;

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

  constructor(
    root: string,
    readonly topic: string,
    readonly queueId: number,
    readonly entriesPerFile: number,
  ) {
    this.dir = path.join(root, topic, String(queueId));
    this.fileBytes = entriesPerFile * CQ_ENTRY_BYTES;
    fs.mkdirSync(this.dir, { recursive: true });
    for (const { start, file } of listSegmentFiles(this.dir)) this.files.set(start, Segment.open(file, start, this.fileBytes));
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

  /** First queue offset of the file after the one holding `offset`. */
  nextFileOffset(offset: number): number {
    return (Math.floor(offset / this.entriesPerFile) + 1) * this.entriesPerFile;
  }

  /** Deletes files whose entries all point below `minPhy`; moves minOffset to the first entry at or above it. */
  deleteBelow(minPhy: number): void {
    const starts = [...this.files.keys()].sort((a, b) => a - b);
    for (const start of starts) {
      const first = start / CQ_ENTRY_BYTES;
      const lastOffset = Math.min(first + this.entriesPerFile, this.maxOffset) - 1;
      if (lastOffset < first) break;
      const f = this.files.get(start)!;
      const last = f.read((lastOffset - first) * CQ_ENTRY_BYTES, CQ_ENTRY_BYTES);
      const lastPhy = readLong(last, 0);
      if (lastOffset >= this.maxOffset - 1 || lastPhy >= minPhy) {
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
      f.remove();
      this.files.delete(start);
      this.minOffset = Math.max(this.minOffset, first + this.entriesPerFile);
    }
  }

  close(): void {
    for (const f of this.files.values()) f.close();
    this.files.clear();
  }
}
