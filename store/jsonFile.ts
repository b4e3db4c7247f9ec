/**
 * Atomic JSON files for the broker's state (topics, subscription groups, consumer and delay
 * offsets): write a temp file, fsync it, keep the previous version as `.bak`, rename the temp
 * file over the real one, fsync the directory. A crash between any two steps leaves either the
 * new file, or the old one, or the `.bak` that `read` falls back to.
 */
import fs from "node:fs";
import path from "node:path";
import { ioError } from "./ioError.ts";

function fsyncDir(dir: string): void {
  let fd = -1;
  try {
    fd = fs.openSync(dir, "r");
    fs.fsyncSync(fd);
  } catch {
    /* some file systems refuse directory fsync; the rename is still atomic */
  } finally {
    if (fd >= 0) fs.closeSync(fd);
  }
}

function tryRead(file: string): { ok: true; value: unknown } | { ok: false } {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    return { ok: false };
  }
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Atomic JSON file helpers. */
export const JsonFile = {
  /** Writes `value` as JSON to `file` atomically (temp, fsync, `.bak`, rename, fsync dir). */
  write(file: string, value: unknown): void {
    const dir = path.dirname(file);
    const tmp = `${file}.tmp`;
    const text = JSON.stringify(value, null, 2);
    try {
      fs.mkdirSync(dir, { recursive: true });
      const fd = fs.openSync(tmp, "w");
      try {
        fs.writeFileSync(fd, text);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      if (fs.existsSync(file) && tryRead(file).ok) fs.copyFileSync(file, `${file}.bak`);
      fs.renameSync(tmp, file);
      fsyncDir(dir);
    } catch (e) {
      throw ioError(e, `writing ${file}`);
    }
  },

  /**
   * Reads `file`; when it is missing or not valid JSON, the `.bak`, then a complete `.tmp`.
   * Returns undefined when none can be read.
   */
  read<T = unknown>(file: string): T | undefined {
    for (const f of [file, `${file}.bak`, `${file}.tmp`]) {
      const r = tryRead(f);
      if (r.ok) return r.value as T;
    }
    return undefined;
  },
};
