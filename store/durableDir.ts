/**
 * Directory entries that survive a power loss. fdatasync of a file makes its bytes durable, not
 * its name: a segment created just before an acknowledged, fdatasync'ed write could vanish with
 * its directory entry. So a new file's directory, and the parent of every directory created, is
 * fsync'ed once, when it is created (a segment roll, a queue's first message; never per message).
 */
import fs from "node:fs";
import path from "node:path";
import { MQError } from "../transport/protocol.ts";
import { ioError } from "./ioError.ts";
import { mkdirs } from "./mkdirs.ts";

/**
 * Codes of file systems that do not support a directory fsync (or opening a directory for one);
 * what was written there still survives a process crash. Any other error (EIO, ENOSPC) is thrown.
 */
const DIR_FSYNC_UNSUPPORTED = new Set(["EINVAL", "ENOTSUP", "EOPNOTSUPP", "EISDIR", "EPERM", "EBADF"]);

/**
 * Errors opening a directory that leave it unsynced: a directory the process may write in but not
 * read (mode -wx, not root) cannot be opened for an fsync; as on a file system without one, what was
 * written still survives a crash.
 */
function skipsOpen(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException).code ?? "";
  return code === "EACCES" || DIR_FSYNC_UNSUPPORTED.has(code);
}

function skipsSync(e: unknown): boolean {
  return DIR_FSYNC_UNSUPPORTED.has((e as NodeJS.ErrnoException).code ?? "");
}

/** The primitives; tests swap them to see which directories are synced. */
export const dirIo = {
  fsync(dir: string): void {
    let fd = -1;
    try {
      fd = fs.openSync(dir, "r");
    } catch (e) {
      if (skipsOpen(e)) return;
      throw e;
    }
    try {
      fs.fsyncSync(fd);
    } catch (e) {
      if (!skipsSync(e)) throw e;
    } finally {
      if (fd >= 0) fs.closeSync(fd);
    }
  },
  /** {@link fsync} on libuv's thread pool, for writes that must not stall the event loop */
  async fsyncAsync(dir: string): Promise<void> {
    let h: fs.promises.FileHandle;
    try {
      h = await fs.promises.open(dir, "r");
    } catch (e) {
      if (skipsOpen(e)) return;
      throw e;
    }
    try {
      await h.sync();
    } catch (e) {
      if (!skipsSync(e)) throw e;
    } finally {
      await h.close();
    }
  },
};

/** fsync of `dir`, so the files created or renamed in it keep their names after a power loss. */
export function fsyncDir(dir: string): void {
  dirIo.fsync(dir);
}

/** {@link fsyncDir} off the event loop. */
export function fsyncDirAsync(dir: string): Promise<void> {
  return dirIo.fsyncAsync(dir);
}

/**
 * `mkdir -p dir`, then fsync of the parent of each directory it created (nothing when it existed).
 * When an fsync fails, the directories it created are removed again, so that a retry creates them
 * and syncs their parents again instead of finding them there.
 */
export function mkdirDurable(dir: string): void {
  let first: string | undefined;
  try {
    first = mkdirs(dir);
  } catch (e) {
    // mkdirs found or made the parent: a file system that takes no new directories there (/proc)
    if ((e as NodeJS.ErrnoException).code === "ENOENT")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `The directory ${dir} cannot be made (${(e as Error).message}): its file system takes no new directories there, as /proc and /sys do. Choose a directory on a disk.`,
        { cause: e },
      );
    // a file where the directory should be (EEXIST, ENOTDIR), a read-only parent
    throw ioError(e, `creating the directory ${dir}`);
  }
  if (first === undefined) return;
  const top = path.dirname(first);
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    try {
      fsyncDir(d);
    } catch (e) {
      removeQuietly(first);
      throw ioError(e, `syncing the directory ${d}`);
    }
    if (d === top || d === path.dirname(d)) break;
  }
}

/**
 * Removes what a failed creation made (a file, or a new directory and what was made in it) while
 * the error being handled is the one to throw; one left behind is taken for an existing one later.
 */
export function removeQuietly(made: string): void {
  try {
    fs.rmSync(made, { recursive: true, force: true });
  } catch {
    /* the creation's own error is the one reported */
  }
}
