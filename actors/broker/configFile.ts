/**
 * One broker JSON config file under `<storeDir>/config/` (topics.json, subscriptionGroup.json):
 * loaded once, written atomically (store/jsonFile), writes coalesced so a burst of changes costs
 * one write and the last state always reaches disk. A file that is not JSON is loaded from its
 * `.bak` with a warning, or refuses the start when there is none (RocketMQ's ConfigManager.load
 * fails the broker's start then): an empty table would be written over the user's topics.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { JsonFile, type JsonFileDamage } from "../../store/index.ts";
import { MQError } from "../../transport/protocol.ts";

/** Directory under the store root that holds the broker's JSON config. */
export const CONFIG_DIR = "config";

/** Where a config file's problems are reported (the broker's pino logger). */
export interface ConfigLogger {
  warn(fields: object, msg: string): void;
  error(fields: object, msg: string): void;
}

/**
 * Reads one of the broker's JSON files (config, consumer and delay offsets), or null when it does
 * not exist; one missing while its `.bak` exists is loaded from the `.bak` with a warning. One that
 * is not valid JSON (or holds `null`) is copied aside and replaced by its `.bak` with a warning;
 * without a readable `.bak` this throws MALFORMED: starting with an empty table would lose what the
 * file held (topics, or every group's progress) without a word.
 */
export function readBrokerJson(file: string, logger?: ConfigLogger): unknown {
  let damage: JsonFileDamage | undefined;
  const value = JsonFile.read(file, (d) => (damage = d));
  if (damage && !damage.usedInstead) {
    throw new MQError(
      "MALFORMED",
      `${file} cannot be loaded (${damage.error}) and has no readable backup (.bak): fix the file, or remove it to start without its entries${damage.keptAs ? ` (a copy is kept as ${damage.keptAs})` : ""}.`,
    );
  }
  if (damage?.missing)
    logger?.warn(
      { file, loaded: damage.usedInstead },
      `${path.basename(file)} is missing: loaded its backup ${path.basename(damage.usedInstead!)} instead (changes made after that backup are missing); to start without its entries remove the backup too`,
    );
  else if (damage)
    logger?.warn(
      { file, error: damage.error, loaded: damage.usedInstead, keptAs: damage.keptAs },
      `${path.basename(file)} cannot be loaded: loaded its backup instead (changes made after that backup are missing); the file is kept as ${damage.keptAs ?? "(copy failed)"}`,
    );
  return value ?? null;
}

/**
 * The `field` table of a file read by {@link readBrokerJson} (`topicConfigTable`, `offsetTable`, ...):
 * {} when there is no file, MALFORMED when the JSON is something else (an edit that dropped the
 * wrapper would otherwise load as empty, and the next write would put an empty table over it).
 */
export function tableOf(file: string, stored: unknown, field: string): Record<string, unknown> {
  if (stored === null) return {};
  const table = typeof stored === "object" && !Array.isArray(stored) ? (stored as Record<string, unknown>)[field] : undefined;
  if (!table || typeof table !== "object" || Array.isArray(table))
    throw new MQError(
      "MALFORMED",
      `${file} has no "${field}" object ({"${field}": {...}}): fix the file, or remove it to start without its entries.`,
    );
  return table as Record<string, unknown>;
}

/**
 * The `field` table of `file`'s `.bak`, or undefined when it cannot be read or has none: where an
 * entry of the file is not valid, the backup's entry is the state it last had.
 */
export function backupTableOf(file: string, field: string): Record<string, unknown> | undefined {
  let stored: unknown;
  try {
    stored = JSON.parse(readFileSync(`${file}.bak`, "utf8"));
  } catch {
    return undefined;
  }
  const table = stored && typeof stored === "object" && !Array.isArray(stored) ? (stored as Record<string, unknown>)[field] : undefined;
  return table && typeof table === "object" && !Array.isArray(table) ? (table as Record<string, unknown>) : undefined;
}

/** An entry of a broker JSON file that was skipped on load, and why. */
export interface SkippedEntry {
  /** what the entry is, as the warning names it (`offset of Orders@cg queue 0`) */
  entry: string;
  error: string;
  /** more log fields naming it (`{ topic }`, `{ group }`) */
  fields?: object;
}

/**
 * Warns about each entry of `file` skipped on load and keeps a copy of the file as it is (the next
 * write leaves the entries out); `then` says what happens without the entry.
 */
export function warnSkipped(file: string, skipped: readonly SkippedEntry[], then: string, logger?: ConfigLogger): void {
  if (skipped.length === 0) return;
  const keptAs = JsonFile.keepCopy(file);
  for (const s of skipped)
    logger?.warn(
      { file, ...s.fields, entry: s.entry, error: s.error, keptAs },
      `${s.entry} in ${path.basename(file)} is not valid and was skipped: ${s.error} Fix it (a copy of the file is kept as ${keptAs ?? "(copy failed)"}); until then ${then}.`,
    );
}

/**
 * Warns about each entry of `file` that was not valid and was loaded from its `.bak` instead (with
 * the value taken, when given), keeping a copy of the file as {@link warnSkipped} does.
 */
export function warnLoadedFromBackup(file: string, loaded: readonly (SkippedEntry & { value?: unknown })[], logger?: ConfigLogger): void {
  if (loaded.length === 0) return;
  const keptAs = JsonFile.keepCopy(file);
  const name = path.basename(file);
  for (const s of loaded)
    logger?.warn(
      {
        file,
        ...s.fields,
        entry: s.entry,
        error: s.error,
        loaded: `${file}.bak`,
        ...(s.value === undefined ? {} : { value: s.value }),
        keptAs,
      },
      `${s.entry} in ${name} is not valid: ${s.error} It ${s.value === undefined ? "was loaded" : `loaded ${s.value}`} from its backup ${name}.bak instead (a copy of the file is kept as ${keptAs ?? "(copy failed)"}).`,
    );
}

/**
 * Reads each entry of a loaded config table with `parse` (which throws, its message for the
 * warning, when the entry is not valid) into `set`. An entry that is not valid takes the `.bak`'s
 * entry under its key when that one is valid (RocketMQ reads the `.bak` when the file does not
 * decode), with a warning; otherwise it is skipped with a warning ending with `then`.
 */
export function loadEntries<T>(
  file: string,
  table: Record<string, unknown>,
  field: string,
  what: (key: string) => Pick<SkippedEntry, "entry" | "fields">,
  parse: (key: string, value: unknown) => T,
  set: (key: string, value: T) => void,
  then: string,
  logger?: ConfigLogger,
): void {
  const skipped: (SkippedEntry & { key: string })[] = [];
  for (const [key, value] of Object.entries(table)) {
    try {
      set(key, parse(key, value));
    } catch (e) {
      skipped.push({ key, ...what(key), error: (e as Error).message });
    }
  }
  const bak = skipped.length > 0 ? backupTableOf(file, field) : undefined;
  const fromBak = skipped.filter((s) => {
    try {
      set(s.key, parse(s.key, bak?.[s.key]));
      return true;
    } catch {
      return false;
    }
  });
  warnLoadedFromBackup(file, fromBak, logger);
  warnSkipped(
    file,
    skipped.filter((s) => !fromBak.includes(s)),
    then,
    logger,
  );
}

/** A coalescing atomic writer for one config file. */
export class ConfigFile<T extends object> {
  readonly path: string;
  private writing: Promise<void> | null = null;
  /** A write loop has not finished yet (set before it starts, cleared by it). */
  private running = false;
  private dirty = false;

  constructor(
    storeDir: string,
    fileName: string,
    private readonly snapshot: () => T,
  ) {
    this.path = path.join(storeDir, CONFIG_DIR, fileName);
  }

  /**
   * The stored object, or null when the file does not exist yet. A file that is not valid JSON is
   * copied aside and replaced by its `.bak` with a warning; without a readable `.bak` this throws
   * MALFORMED rather than let the next write replace the file with an empty table.
   */
  async load(logger?: ConfigLogger): Promise<unknown> {
    return readBrokerJson(this.path, logger);
  }

  /**
   * The `field` table of a loaded file (`topicConfigTable`, ...): {} when there is no file, MALFORMED
   * when the JSON is something else (an edit that dropped the wrapper would otherwise load as empty).
   */
  tableOf(stored: unknown, field: string): Record<string, unknown> {
    return tableOf(this.path, stored, field);
  }

  /**
   * Schedules a write of the current state; resolves once a write that includes it is on disk.
   * A failed write rejects its callers and leaves the state dirty: the next persist (a later
   * change, or close) writes again.
   */
  persist(): Promise<void> {
    this.dirty = true;
    // `running` is cleared by the loop itself, in the microtask of its last check: a persist made
    // after that starts a new loop instead of getting the settled promise of one that will not
    // write its change
    if (!this.running) {
      this.running = true;
      this.writing = this.writeLoop();
    }
    return this.writing!;
  }

  private async writeLoop(): Promise<void> {
    try {
      while (this.dirty) {
        this.dirty = false;
        try {
          JsonFile.write(this.path, this.snapshot());
        } catch (e) {
          this.dirty = true;
          throw e;
        }
        // let changes made meanwhile join the next write instead of each costing one
        await Promise.resolve();
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * {@link persist} for a change nobody waits for (an auto-created topic or group): a failed write
   * (a full disk) is logged at error level, as nothing else would tell of it.
   */
  persistLater(logger: ConfigLogger | undefined): void {
    this.persist().catch((e: unknown) =>
      logger?.error(
        { file: this.path, err: (e as Error).message },
        `writing ${path.basename(this.path)} failed: the broker keeps the change in memory and the next change or close writes it again; free space or fix the directory's permissions`,
      ),
    );
  }

  /** Waits for pending writes; a failed one is not an error here (the next persist retries it). */
  async flush(): Promise<void> {
    while (this.running) await this.writing!.catch(() => {});
  }
}
