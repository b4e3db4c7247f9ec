/**
 * Atomic JSON files for the broker's state (topics, subscription groups, consumer and delay
 * offsets): write a temp file, fsync it, keep the previous version as `.bak`, rename the temp
 * file over the real one, fsync the directory. A crash between any two steps leaves either the
 * new file, or the old one, or the `.bak` that `read` falls back to. A file that exists but is
 * not JSON, or holds `null` (edited by hand, damaged), is copied to `<file>.corrupt-<its mtime>`
 * when read, so the next write does not destroy it, and reported to the caller.
 */
import fs from "node:fs";
import path from "node:path";
import { fsyncDir, fsyncDirAsync, mkdirDurable } from "./durableDir.ts";
import { ioError } from "./ioError.ts";

type ReadResult = { ok: true; value: unknown } | { ok: false; missing: boolean; error: string };

function tryRead(file: string): ReadResult {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    return readFailure(e);
  }
  return parsed(text);
}

async function tryReadAsync(file: string): Promise<ReadResult> {
  try {
    return parsed(await fs.promises.readFile(file, "utf8"));
  } catch (e) {
    return readFailure(e);
  }
}

function readFailure(e: unknown): ReadResult {
  const missing = (e as NodeJS.ErrnoException).code === "ENOENT";
  return { ok: false, missing, error: (e as Error).message };
}

function parsed(text: string): ReadResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, missing: false, error: `not valid JSON: ${(e as Error).message}` };
  }
  // null is no state this module writes (every caller stores an object): taken as "no file", the
  // caller would start with an empty table, ignore the .bak and let the next write replace both
  if (value === null) return { ok: false, missing: false, error: "the file holds null" };
  return { ok: true, value };
}

/**
 * What {@link JsonFile.read} found wrong with a file: it exists but could not be used, or it is
 * missing while its `.bak` exists (and was read instead).
 */
export interface JsonFileDamage {
  file: string;
  /** why it could not be used (the JSON parse error, or the read error) */
  error: string;
  /** the file does not exist: its `.bak` was read instead (`usedInstead`); nothing was copied */
  missing?: boolean;
  /** the copy kept of it; undefined when it could not be copied */
  keptAs?: string;
  /** the file read instead (`.bak` or a complete `.tmp`); undefined when none could be */
  usedInstead?: string;
}

/**
 * Copies `file` to `<file>.corrupt-<mtime>` unless that copy exists (a restart does not add one);
 * returns the copy's path, undefined when the file cannot be copied.
 */
function keepCopy(file: string): string | undefined {
  try {
    const stamp = fs.statSync(file).mtime.toISOString().replace(/[:.]/g, "-");
    const copy = `${file}.corrupt-${stamp}`;
    if (!fs.existsSync(copy)) fs.copyFileSync(file, copy);
    return copy;
  } catch {
    return undefined;
  }
}

/** Atomic JSON file helpers. */
export const JsonFile = {
  keepCopy,

  /**
   * Writes `value` as JSON to `file` atomically (temp, fsync, `.bak`, rename, fsync dir). A write
   * that fails before its rename removes its temp file: `read` takes a complete `.tmp` for a first
   * write stopped by a crash when the file is missing, and would so make a write its caller was
   * told failed (and did not apply) look done after a restart.
   */
  write(file: string, value: unknown): void {
    const dir = path.dirname(file);
    const tmp = `${file}.tmp`;
    const text = JSON.stringify(value, null, 2);
    // set once this write has opened (truncated) the temp file: one left by an earlier crash is not its own
    let ownTmp = false;
    try {
      mkdirDurable(dir);
      const fd = fs.openSync(tmp, "w");
      ownTmp = true;
      try {
        fs.writeFileSync(fd, text);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      if (tryRead(file).ok) fs.copyFileSync(file, `${file}.bak`);
      fs.renameSync(tmp, file);
      ownTmp = false;
      fsyncDir(dir);
    } catch (e) {
      if (ownTmp)
        try {
          fs.rmSync(tmp, { force: true });
        } catch {
          /* left: read only when the file is missing */
        }
      throw ioError(e, `writing ${file}`);
    }
  },

  /**
   * {@link write} with its file operations on libuv's thread pool, for periodic writes that must
   * not stall the event loop (two fsyncs take milliseconds). Two writes of one file must not
   * overlap (they share the temp file): the caller serializes them. `usable`: whether the file
   * written before holds what its reader takes (only such a file becomes the `.bak`; by default,
   * any JSON but null).
   */
  async writeAsync(file: string, value: unknown, usable: (previous: unknown) => boolean = () => true): Promise<void> {
    const dir = path.dirname(file);
    const tmp = `${file}.tmp`;
    const text = JSON.stringify(value, null, 2);
    let ownTmp = false;
    try {
      mkdirDurable(dir);
      const h = await fs.promises.open(tmp, "w");
      ownTmp = true;
      try {
        await h.writeFile(text);
        await h.sync();
      } finally {
        await h.close();
      }
      const previous = await tryReadAsync(file);
      if (previous.ok && usable(previous.value)) await fs.promises.copyFile(file, `${file}.bak`);
      await fs.promises.rename(tmp, file);
      ownTmp = false;
      await fsyncDirAsync(dir);
    } catch (e) {
      if (ownTmp) await fs.promises.rm(tmp, { force: true }).catch(() => {});
      throw ioError(e, `writing ${file}`);
    }
  },

  /**
   * Reads `file`; when it is missing, not valid JSON or `null`, the `.bak`, then a complete `.tmp`.
   * Returns undefined when none can be read. A `file` that exists but cannot be used is kept as
   * `<file>.corrupt-<mtime>` and reported to `onDamaged`. A missing `file` whose `.bak` was read
   * is reported too (`missing`): a write never leaves that, the file was removed. A missing file
   * with only a `.tmp` is a first write stopped before its rename, and is not reported.
   */
  read<T = unknown>(file: string, onDamaged?: (damage: JsonFileDamage) => void): T | undefined {
    const main = tryRead(file);
    if (main.ok) return main.value as T;
    const damage: JsonFileDamage | undefined = main.missing ? undefined : { file, error: main.error, keptAs: keepCopy(file) };
    for (const f of [`${file}.bak`, `${file}.tmp`]) {
      const r = tryRead(f);
      if (r.ok) {
        if (damage) onDamaged?.({ ...damage, usedInstead: f });
        else if (f.endsWith(".bak")) onDamaged?.({ file, error: main.error, missing: true, usedInstead: f });
        return r.value as T;
      }
    }
    if (damage) onDamaged?.(damage);
    return undefined;
  },
};
