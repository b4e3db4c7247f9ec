/**
 * A fixed-size segment file named by its 20-digit start offset, read and written with positional
 * `fs` calls (no mmap, no native addons). Commit-log, consume-queue and index files are segments.
 */
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { MQError } from "../transport/protocol.ts";
import { fsyncDir, removeQuietly } from "./durableDir.ts";
import { ioError } from "./ioError.ts";
import { storeFileClosed, storeFileOpened } from "./openFiles.ts";

/**
 * The file primitives segments use. Tests swap `writeSync` to simulate a full disk (ENOSPC)
 * without filling one, `readSync` to count what an open reads, `ftruncateSync` to make
 * {@link Segment.zeroFrom} fail, `fdatasync` to make {@link Segment.sync} fail and `rmSync` to make
 * {@link Segment.remove} fail (a file the process may not delete).
 */
export const segmentIo = {
  writeSync: fs.writeSync as (fd: number, buf: Uint8Array, off: number, len: number, pos: number) => number,
  readSync: fs.readSync as (fd: number, buf: Uint8Array, off: number, len: number, pos: number) => number,
  ftruncateSync: fs.ftruncateSync as (fd: number, len: number) => void,
  fdatasync: promisify(fs.fdatasync) as (fd: number) => Promise<void>,
  rmSync: fs.rmSync as (file: string, options: { force: boolean }) => void,
};

/** `00000000000000000000`-style name of a segment starting at `offset`. */
export function segmentName(offset: number): string {
  return String(offset).padStart(20, "0");
}

/** Segment files in `dir` (names of 20 digits), sorted by start offset. */
export function listSegmentFiles(dir: string): Array<{ start: number; file: string }> {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => /^\d{20}$/.test(n))
    .map((n) => ({ start: Number(n), file: path.join(dir, n) }))
    .sort((a, b) => a.start - b.start);
}

/** Size of `file` in bytes (for error messages), or -1 when it cannot be read. */
export function fileBytes(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return -1;
  }
}

/** One fixed-size file. */
export class Segment {
  /** fdatasyncs of this file on the pool: a close waits for them before it closes the descriptor */
  private syncing = 0;
  /** closed while an fdatasync ran: the descriptor is closed once the last one settles */
  private closing = false;
  /** deleted: the outcome of an fdatasync of it no longer matters */
  private removed = false;

  private constructor(
    readonly file: string,
    readonly start: number,
    readonly size: number,
    private fd: number,
  ) {}

  /**
   * Opens the segment file, creating a new one at its full size (sparse). An existing shorter file
   * is left as it is: a crash while one was created (before its ftruncate) or zeroed (between
   * {@link zeroFrom}'s truncates) leaves it so; reads past its end see zeros and writes extend it.
   * A longer one was written with a larger size and is refused with ILLEGAL_ARGUMENT (`longer`
   * says which setting to change), never cut to this size.
   */
  static open(file: string, start: number, size: number, longer?: (fileBytes: number) => string): Segment {
    let fd = -1;
    let exists = true;
    try {
      exists = fs.existsSync(file);
      fd = fs.openSync(file, exists ? "r+" : "w+");
      const has = exists ? fs.fstatSync(fd).size : 0;
      if (has > size) {
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          longer?.(has) ??
            `${file} holds ${has} bytes, more than the configured ${size}: open the store with the file size it was written with.`,
        );
      }
      if (!exists) {
        fs.ftruncateSync(fd, size);
        fsyncDir(path.dirname(file));
      }
    } catch (e) {
      if (fd >= 0) fs.closeSync(fd);
      // a file made here whose size or directory entry failed is removed: a retry finds none and
      // does both again, instead of taking it as one that existed
      if (!exists) removeQuietly(file);
      throw ioError(e, `opening ${file}`);
    }
    storeFileOpened();
    return new Segment(file, start, size, fd);
  }

  /** Writes `len` bytes of `buf` from `off` at file position `pos`; all or an MQError. */
  write(buf: Uint8Array, off: number, len: number, pos: number): void {
    let done = 0;
    try {
      while (done < len) {
        const n = segmentIo.writeSync(this.fd, buf, off + done, len - done, pos + done);
        if (n <= 0) throw Object.assign(new Error("short write"), { code: "EIO" });
        done += n;
      }
    } catch (e) {
      throw ioError(e, `writing ${this.file}`);
    }
  }

  /** Reads up to `len` bytes at `pos` into `into` (or a new buffer); returns the filled part. */
  read(pos: number, len: number, into?: Buffer, intoOff = 0): Buffer {
    const buf = into ?? Buffer.allocUnsafe(len);
    let done = 0;
    while (done < len) {
      const n = segmentIo.readSync(this.fd, buf, intoOff + done, len - done, pos + done);
      if (n <= 0) break;
      done += n;
    }
    if (done < len) buf.fill(0, intoOff + done, intoOff + len);
    return into ? buf.subarray(intoOff, intoOff + len) : buf;
  }

  /** fdatasync on the libuv pool, so appends can continue meanwhile. */
  async sync(): Promise<void> {
    this.syncing++;
    try {
      await segmentIo.fdatasync(this.fd);
    } catch (e) {
      if (!this.removed) throw ioError(e, `syncing ${this.file}`);
    } finally {
      if (--this.syncing === 0 && this.closing) this.close();
    }
  }

  syncNow(): void {
    try {
      fs.fdatasyncSync(this.fd);
    } catch (e) {
      throw ioError(e, `syncing ${this.file}`);
    }
  }

  /**
   * Zeroes everything from `pos` to the end, without writing the zeros (truncate, then re-extend).
   * A short file (see {@link open}) is not made longer than it was: a store opened with another
   * file size must not grow it before that size is refused elsewhere.
   */
  zeroFrom(pos: number): void {
    try {
      const len = Math.min(fs.fstatSync(this.fd).size, this.size);
      if (len <= pos) return;
      segmentIo.ftruncateSync(this.fd, pos);
      segmentIo.ftruncateSync(this.fd, len);
    } catch (e) {
      throw ioError(e, `truncating ${this.file}`);
    }
  }

  /** Modification time in ms. */
  mtimeMs(): number {
    return fs.fstatSync(this.fd).mtimeMs;
  }

  /**
   * Closes the descriptor, or once no fdatasync of it runs: closed under one queued on the pool, it
   * would fail that (EBADF, reported as a disk error, refusing the puts waiting for a flush of the
   * next segment) or sync whatever file was opened with the number meanwhile.
   */
  close(): void {
    this.closing = this.syncing > 0;
    if (this.closing) return;
    if (this.fd >= 0) {
      try {
        fs.closeSync(this.fd);
      } catch {
        /* already closed */
      }
      this.fd = -1;
      storeFileClosed();
    }
  }

  /** Closes and deletes the file. */
  remove(): void {
    this.removed = true;
    this.close();
    segmentIo.rmSync(this.file, { force: true });
  }
}
