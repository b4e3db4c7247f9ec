/**
 * The one mapping of fs errors to MQErrors for the store's files (segments, consume queues, index,
 * JSON config and checkpoint files): what went wrong and what the operator should do.
 */
import { MQError } from "../transport/protocol.ts";

/** Turns an fs error into an MQError that says what to do; `what` is the operation ("writing <file>"). An MQError is returned as it is. */
export function ioError(e: unknown, what: string): MQError {
  // already said what to do (a step of the operation failed in a store helper)
  if (e instanceof MQError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  const options = { cause: e };
  if (code === "ENOSPC" || code === "EDQUOT") {
    return new MQError("DISK_FULL", `The disk is full while ${what}: free space or delete old segment files, then retry.`, options);
  }
  if (code === "EMFILE" || code === "ENFILE") {
    return new MQError(
      "SYSTEM_ERROR",
      `Too many open files while ${what} (${code}): the broker keeps one file open per commit-log segment, consume-queue file and index file. Raise the open-file limit (\`ulimit -n\`, systemd LimitNOFILE, e.g. 65536), then retry.`,
      options,
    );
  }
  const detail = (e as Error)?.message ?? e;
  return new MQError("SYSTEM_ERROR", `I/O error while ${what}: ${detail}. Check the disk and the directory's permissions.`, options);
}
