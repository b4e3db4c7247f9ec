/**
 * Recovery: walks the commit log record by record (size, magic, both CRCs, the record's own
 * physical offset) and hands every run of valid records to the dispatcher. A damaged record is
 * skipped by scanning forward to the next record whose magic code and CRC check out; whatever
 * follows the last valid record (a torn tail) is cut.
 */
import { int32BE, uint32BE } from "../transport/bigEndian.ts";
import {
  BLANK_MAGIC,
  CRC_RESERVED_BYTES,
  checkRecord,
  MAGIC_V1,
  RECORD_FIXED_BYTES,
  RecordOffset,
  readLong,
} from "../transport/messageRecord.ts";
import { type CommitLog, fillerBytes } from "./commitLog.ts";
import type { Segment } from "./segment.ts";

/** What a scan of the commit log found. */
export interface LogScanResult {
  /** end of the valid log: where the next append goes */
  end: number;
  /** valid records found */
  records: number;
  /** damaged regions skipped (a torn tail is not counted) */
  damagedRegions: number;
  /** bytes cut after the last valid record */
  cutBytes: number;
  /** start of the entry (record, filler or BLANK marker) that ends at `end`; -1 when the scan met none */
  lastEntry: number;
}

const MAGIC_BYTES = Buffer.from([0xda, 0xa3, 0x20, 0xa7]);
const DEFAULT_WINDOW = 16 * 1024 * 1024;

/**
 * The length the record header at `buf[start]` claims, or -1 when it is not the header of a record
 * at commit-log offset `phy`: its magic code, its own physical offset, and a length its body length
 * and the most a topic (255 bytes) and properties (a 16-bit length) can add allow. Checked before
 * reading a record longer than today's maxMessageBytes allows (one stored under a larger limit).
 */
export function recordHeadLength(buf: Buffer, start: number, phy: number): number {
  if (buf.length - start < RECORD_FIXED_BYTES) return -1;
  if (uint32BE(buf, start + RecordOffset.MAGIC) !== MAGIC_V1 || readLong(buf, start + RecordOffset.PHYSICAL_OFFSET) !== phy) return -1;
  const total = int32BE(buf, start + RecordOffset.TOTAL_SIZE);
  const bodyLen = int32BE(buf, start + RecordOffset.BODY_LENGTH);
  const least = RECORD_FIXED_BYTES + bodyLen + 1 + 1 + 2 + CRC_RESERVED_BYTES;
  if (bodyLen < 0 || total < least || total > least + 254 + 0xffff) return -1;
  return total;
}

/**
 * Scans the commit-log segments from index `fromSegment` on; `onRecords(buf, start, end, basePhy)`
 * receives runs of valid records in log order. Replica fillers are stepped over like records.
 * From physical offset `zerosEndFrom` on (the last segment, and not below what a checkpoint saw
 * flushed), a window of zeros where a record should start ends the scan: that is the unwritten
 * rest of the segment. Below it a damaged region is always scanned through for the next record.
 */
export function scanCommitLog(
  log: CommitLog,
  maxRecordBytes: number,
  onRecords: (buf: Buffer, start: number, end: number, basePhy: number) => void,
  fromSegment = 0,
  zerosEndFrom = log.segments[log.segments.length - 1]?.start ?? 0,
): LogScanResult {
  const result: LogScanResult = {
    end: log.segments[fromSegment]?.start ?? log.minOffset,
    records: 0,
    damagedRegions: 0,
    cutBytes: 0,
    lastEntry: -1,
  };
  const segBytes = log.segmentBytes;
  const window = Math.min(segBytes, Math.max(DEFAULT_WINDOW, 2 * maxRecordBytes));
  let pendingDamage = false;
  for (const seg of log.segments.slice(fromSegment)) {
    let winStart = 0;
    let win = seg.read(0, window);
    let pos = 0;
    let runStart = -1;
    const flushRun = () => {
      if (runStart >= 0 && pos > runStart) onRecords(win, runStart - winStart, pos - winStart, seg.start + runStart);
      runStart = -1;
    };
    const load = (at: number, len = window) => {
      winStart = at;
      win = seg.read(at, Math.min(Math.max(window, len), segBytes - at));
    };
    while (pos + 8 <= segBytes) {
      const need = Math.min(maxRecordBytes, segBytes - pos);
      if (pos + need > winStart + win.length) {
        flushRun();
        load(pos);
      }
      let rel = pos - winStart;
      let avail = win.length - rel;
      const total = win.readInt32BE(rel);
      // a record longer than the window has left (stored under a larger maxMessageBytes): read it whole
      if (total > avail && total <= segBytes - pos && recordHeadLength(win, rel, seg.start + pos) === total) {
        flushRun();
        load(pos, total);
        rel = 0;
        avail = win.length;
      }
      if (win.readUInt32BE(rel + 4) === BLANK_MAGIC && total === segBytes - pos) {
        flushRun();
        result.lastEntry = seg.start + pos;
        pos = segBytes;
        result.end = seg.start + segBytes;
        break;
      }
      const filler = fillerBytes(win, rel, avail);
      if (filler > 0 && pos + filler <= segBytes) {
        flushRun();
        result.lastEntry = seg.start + pos;
        pos += filler;
        result.end = seg.start + pos;
        continue;
      }
      const n = checkRecord(win, rel, avail);
      if (n > 0 && readLong(win, rel + RecordOffset.PHYSICAL_OFFSET) === seg.start + pos) {
        if (runStart < 0) runStart = pos;
        if (pendingDamage) {
          result.damagedRegions++;
          pendingDamage = false;
        }
        result.lastEntry = seg.start + pos;
        pos += n;
        result.records++;
        result.end = seg.start + pos;
        continue;
      }
      flushRun();
      // the written part of the segment ends here: do not scan the unwritten rest (up to a whole
      // segment of zeros, ~2 s per GiB) for records that cannot be there
      if (seg.start + pos >= zerosEndFrom && zeroWindow(seg, pos, segBytes, window)) break;
      const next = resync(seg, pos + 1, segBytes, maxRecordBytes, window);
      if (next < 0) break;
      pendingDamage = true;
      pos = next;
      load(pos);
    }
    flushRun();
    // a damaged blank marker or a damaged last record of a segment: the next segment goes on
    if (pos < segBytes) pendingDamage = true;
  }
  result.cutBytes = tornTailBytes(log, result.end, window);
  return result;
}

const ZERO_CHUNK_BYTES = 1024 * 1024;

/**
 * True when the `window` bytes from `pos` (or the rest of the segment) are all zeros: where a record
 * should start, that is the end of what was ever written (segments are sparse files). A damaged
 * region followed by more records is not this long (the same assumption as {@link tornTailBytes}).
 * Its buffers live for the call only: it runs where records stop (the log's end, a damaged spot),
 * not per record.
 */
function zeroWindow(seg: Segment, pos: number, segBytes: number, window: number): boolean {
  const end = Math.min(segBytes, pos + window);
  const size = Math.min(ZERO_CHUNK_BYTES, Math.max(0, end - pos));
  const zeros = Buffer.alloc(size);
  const chunk = Buffer.allocUnsafe(size);
  for (let at = pos; at < end; at += ZERO_CHUNK_BYTES) {
    const len = Math.min(ZERO_CHUNK_BYTES, end - at);
    if (!seg.read(at, len, chunk, 0).equals(zeros.subarray(0, len))) return false;
  }
  return true;
}

/**
 * Bytes written after the valid end that recovery cuts: the span up to the last non-zero byte
 * within one scan window of `end` (segments are sparse files, so the rest of an unfilled segment
 * reads as zeros and is not a cut), plus every byte of later segments.
 */
function tornTailBytes(log: CommitLog, end: number, window: number): number {
  let cut = 0;
  for (const seg of log.segments) {
    const segEnd = seg.start + log.segmentBytes;
    if (segEnd <= end) continue;
    const from = Math.max(0, end - seg.start);
    const tail = seg.read(from, Math.min(window, log.segmentBytes - from));
    let last = tail.length - 1;
    while (last >= 0 && tail[last] === 0) last--;
    cut += last + 1;
  }
  return cut;
}

/**
 * Position (within the segment) of the next valid record at or after `from` and before `limit`
 * (a segment-relative end, the segment size by default), or -1.
 */
export function resync(seg: Segment, from: number, segBytes: number, maxRecordBytes: number, window: number, limit = segBytes): number {
  let at = from;
  while (at + 8 <= limit) {
    const len = Math.min(window, limit - at);
    const win = seg.read(at, len);
    let i = win.indexOf(MAGIC_BYTES, 4);
    while (i >= 0) {
      const cand = i - 4;
      const avail = Math.min(maxRecordBytes, segBytes - (at + cand));
      let buf = win;
      let rel = cand;
      if (cand + avail > win.length) {
        buf = seg.read(at + cand, avail);
        rel = 0;
      }
      const n = checkRecord(buf, rel, Math.min(avail, buf.length - rel));
      if (n > 0 && readLong(buf, rel + RecordOffset.PHYSICAL_OFFSET) === seg.start + at + cand && buf.readUInt32BE(rel + 4) === MAGIC_V1) {
        return at + cand;
      }
      i = win.indexOf(MAGIC_BYTES, i + 1);
    }
    if (at + len >= limit) break;
    at += len - 7;
  }
  return -1;
}

/**
 * The first valid record in commit-log range [lo, hi) for which `match(buf, rel)` holds, found by
 * scanning for magic codes as recovery does; null when there is none. Used to find a record
 * again when the consume-queue entry pointing at it is damaged.
 */
export function findRecord(
  log: CommitLog,
  lo: number,
  hi: number,
  maxRecordBytes: number,
  match: (buf: Buffer, rel: number) => boolean,
): { phy: number; size: number } | null {
  const segBytes = log.segmentBytes;
  const window = Math.min(segBytes, Math.max(64 * 1024, 2 * maxRecordBytes));
  for (const seg of log.segments) {
    const segEnd = seg.start + segBytes;
    if (segEnd <= lo || seg.start >= hi) continue;
    const to = Math.min(hi, segEnd) - seg.start;
    let p = resync(seg, Math.max(lo, seg.start) - seg.start, segBytes, maxRecordBytes, window, to);
    while (p >= 0) {
      const head = seg.read(p, Math.min(maxRecordBytes, segBytes - p));
      const size = head.readInt32BE(0);
      if (match(head, 0)) return { phy: seg.start + p, size };
      p = resync(seg, p + 1, segBytes, maxRecordBytes, window, to);
    }
  }
  return null;
}
