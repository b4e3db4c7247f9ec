/**
 * A fixed-size segment file named by its 20-digit start offset, read and written with positional
 * `fs` calls (no mmap, no native addons). Commit-log, consume-queue and index files are segments.
 */
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ioError } from "./ioError.ts";

const fdatasyncAsync = promisify(fs.fdatasync);

/**
 * The file primitives segments use. Tests swap `writeSync` to simulate a full disk (ENOSPC)
 * without filling one, and `readSync` to count what an open reads.
 */
export const segmentIo = {
  writeSync: fs.writeSync as (fd: number, buf: Uint8Array, off: number, len: number, pos: number) => number,
  readSync: fs.readSync as (fd: number, buf: Uint8Array, off: number, len: number, pos: number) => number,
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

/** One fixed-size file. */
export class Segment {
  private constructor(
    readonly file: string,
    readonly start: number,
    readonly size: number,
    private fd: number,
  ) {}

  /** Opens (creating and sizing when needed) the segment file. */
  static open(file: string, start: number, size: number): Segment {
    let fd: number;
    try {
      fd = fs.openSync(file, fs.existsSync(file) ? "r+" : "w+");
      if (fs.fstatSync(fd).size !== size) fs.ftruncateSync(fd, size);
    } catch (e) {
      throw ioError(e, `opening ${file}`);
    }
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
    try {
      await fdatasyncAsync(this.fd);
    } catch (e) {
      throw ioError(e, `syncing ${this.file}`);
    }
  }

  syncNow(): void {
    try {
      fs.fdatasyncSync(this.fd);
    } catch (e) {
      throw ioError(e, `syncing ${this.file}`);
    }
  }

  /** Zeroes everything from `pos` to the end, without writing the zeros (truncate, then re-extend). */
  zeroFrom(pos: number): void {
    try {
      fs.ftruncateSync(this.fd, pos);
      fs.ftruncateSync(this.fd, this.size);
    } catch (e) {
      throw ioError(e, `truncating ${this.file}`);
    }
  }

  /** Modification time in ms. */
  mtimeMs(): number {
    return fs.fstatSync(this.fd).mtimeMs;
  }

  close(): void {
    if (this.fd >= 0) {
      try {
        fs.closeSync(this.fd);
      } catch {
        /* already closed */
      }
      this.fd = -1;
    }
  }

  /** Closes and deletes the file. */
  remove(): void {
    this.close();
    fs.rmSync(this.file, { force: true });
  }
}
