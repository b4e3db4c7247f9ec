/**
 * Files of segments the store dropped (expired, or deleted under disk pressure) whose deletion
 * failed (EPERM, EACCES, EROFS, EIO). As RocketMQ's MappedFile.destroy, such a segment is closed and
 * dropped all the same: the store never reads it again, and the deletion of the files after it
 * goes on. Its file is deleted again at every later clean-up until that works, and each clean-up
 * that leaves one fails naming it, so it is reported.
 */
import { MQError } from "../transport/protocol.ts";
import { ioError } from "./ioError.ts";
import { type Segment, segmentIo } from "./segment.ts";

/** The files one store could not delete yet, with the error of the last try. */
export class UndeletedFiles {
  private readonly files = new Map<string, MQError>();

  /** How many files are waiting to be deleted again. */
  get size(): number {
    return this.files.size;
  }

  /** Closes and deletes `seg`, already dropped by its owner; a file that stays is kept to delete again. */
  remove(seg: Segment): void {
    try {
      seg.remove();
    } catch (e) {
      this.files.set(seg.file, ioError(e, `deleting ${seg.file}`));
    }
  }

  /** Deletes the kept files again; those that still fail stay kept. */
  retry(): void {
    for (const file of [...this.files.keys()]) {
      try {
        segmentIo.rmSync(file, { force: true });
        this.files.delete(file);
      } catch (e) {
        this.files.set(file, ioError(e, `deleting ${file}`));
      }
    }
  }

  /** Throws when files are still waiting to be deleted, naming the first and how many more. */
  throwIfAny(): void {
    const [first] = this.files.values();
    if (!first) return;
    const more = this.files.size > 1 ? ` (${this.files.size - 1} more such file(s) wait too)` : "";
    throw new MQError("SYSTEM_ERROR", `${first.message} The store no longer reads it; deleting it is retried at every clean-up${more}.`, {
      cause: first,
    });
  }
}
