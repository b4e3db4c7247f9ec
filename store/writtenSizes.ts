/**
 * The file sizes a store was written with, recorded in `<store>/fileSizes.json` when it is created
 * and checked before any file is opened (RocketMQ's MappedFileQueue.load fails on a file whose
 * length is not the configured one). The files alone cannot always tell: a commit log of one
 * segment, or a queue of one file, shorter than the configured size was written with a smaller
 * size, or is a last file left short by a crash (see Segment.open), which is accepted and would be
 * grown to the new size.
 */
import fs from "node:fs";
import path from "node:path";
import { MQError } from "../transport/protocol.ts";
import { JsonFile } from "./jsonFile.ts";
import { listSegmentFiles } from "./segment.ts";

/** File under the store root that records the sizes. */
export const WRITTEN_SIZES_FILE = "fileSizes.json";

interface WrittenSizes {
  commitLogSegmentBytes?: number;
  consumeQueueEntries?: number;
}

function recorded(v: unknown): number | undefined {
  return Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : undefined;
}

/**
 * Refuses (ILLEGAL_ARGUMENT, naming the recorded value) a store opened with another commit-log
 * segment size or consumeQueueEntries. Returns what records the sizes once the store opened: all
 * of a new store; of a store from before the record (checked by its files alone), the segment size
 * once a commit-log file has exactly that size (files are created at their full size).
 */
export function checkWrittenSizes(dir: string, commitLogSegmentBytes: number, consumeQueueEntries: number): () => void {
  const file = path.join(dir, WRITTEN_SIZES_FILE);
  // a damaged record is as good as none: the files are still checked one by one
  const stored = JsonFile.read<WrittenSizes>(file);
  const had: WrittenSizes = {
    commitLogSegmentBytes: recorded(stored?.commitLogSegmentBytes),
    consumeQueueEntries: recorded(stored?.consumeQueueEntries),
  };
  if (had.commitLogSegmentBytes !== undefined && had.commitLogSegmentBytes !== commitLogSegmentBytes)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `The store in ${dir} was written with commitLogSegmentBytes=${had.commitLogSegmentBytes} (the broker's segmentBytes) but is opened with ${commitLogSegmentBytes}: open it with commitLogSegmentBytes=${had.commitLogSegmentBytes}; nothing was changed.`,
    );
  if (had.consumeQueueEntries !== undefined && had.consumeQueueEntries !== consumeQueueEntries)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `The store in ${dir} was written with consumeQueueEntries=${had.consumeQueueEntries} (${had.consumeQueueEntries} entries per consume-queue file) but is opened with ${consumeQueueEntries}: open it with consumeQueueEntries=${had.consumeQueueEntries}; nothing was changed.`,
    );
  if (had.commitLogSegmentBytes !== undefined && had.consumeQueueEntries !== undefined) return () => {};
  const logDir = path.join(dir, "commitlog");
  const isNew = listSegmentFiles(logDir).length === 0 && !fs.existsSync(path.join(dir, "consumequeue"));
  return () => {
    const next: WrittenSizes = { ...had };
    if (isNew) {
      next.commitLogSegmentBytes = commitLogSegmentBytes;
      next.consumeQueueEntries = consumeQueueEntries;
    } else if (next.commitLogSegmentBytes === undefined) {
      if (listSegmentFiles(logDir).some((s) => fs.statSync(s.file).size === commitLogSegmentBytes))
        next.commitLogSegmentBytes = commitLogSegmentBytes;
    }
    if (next.commitLogSegmentBytes !== had.commitLogSegmentBytes || next.consumeQueueEntries !== had.consumeQueueEntries)
      JsonFile.write(file, next);
  };
}
