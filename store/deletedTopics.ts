/**
 * The topics deleted from a store (RocketMQ's `deleteTopics`) and, for each, the commit-log offset
 * at which it was deleted: the records of the topic below that offset are its old messages, which
 * the store no longer serves and which recovery and consume-queue rebuilds skip, so that a topic
 * created again under the same name starts empty. Kept in `deletedTopics.json` in the store's
 * directory, written atomically; an entry is dropped once the commit-log segments holding the old
 * records have expired (the offset is at or below the log's min offset).
 */
import fs from "node:fs";
import path from "node:path";
import { MQError } from "../transport/protocol.ts";
import { JsonFile } from "./jsonFile.ts";

/** The file, in the store's directory. */
export const DELETED_TOPICS_FILE = "deletedTopics.json";

/** The file's form: topic -> commit-log offset at its deletion. */
export interface DeletedTopicsFile {
  deletedTopics: Record<string, number>;
}

/** The deleted topics of one store, persisted. */
export class DeletedTopics {
  /** topic -> commit-log offset below which its records are old (read by the dispatcher for every topic it meets) */
  readonly below = new Map<string, number>();
  /** the highest offset in `below` (0 when empty) */
  private highest = 0;

  private constructor(readonly file: string) {}

  /**
   * Loads the file of `dir` (or its `.bak`). A file that exists but can be read in neither form is
   * MALFORMED: opening without it would serve the deleted topics' old messages again.
   */
  static load(dir: string): DeletedTopics {
    const d = new DeletedTopics(path.join(dir, DELETED_TOPICS_FILE));
    const stored = JsonFile.read<Partial<DeletedTopicsFile>>(d.file);
    if (stored === undefined) {
      if (fs.existsSync(d.file))
        throw new MQError(
          "MALFORMED",
          `${d.file} cannot be read (not JSON, and no readable ${DELETED_TOPICS_FILE}.bak): restore it, or remove it to open the store with the deleted topics' old messages served again.`,
        );
      return d;
    }
    // a table or an offset that cannot be used is refused too: skipped, the topic's old records
    // would be served again by the next consume-queue rebuild, and the next write would drop it
    const table = stored && typeof stored === "object" && !Array.isArray(stored) ? stored.deletedTopics : undefined;
    if (!table || typeof table !== "object" || Array.isArray(table))
      throw new MQError(
        "MALFORMED",
        `${d.file} has no "deletedTopics" object ({"deletedTopics": {"<topic>": <commit-log offset>}}): restore it (or its .bak), or remove both to open the store with the deleted topics' old messages served again.`,
      );
    for (const [topic, at] of Object.entries(table)) {
      if (!Number.isSafeInteger(at) || (at as number) < 0)
        throw new MQError(
          "MALFORMED",
          `${d.file}: the deletion offset of topic ${JSON.stringify(topic)} is ${JSON.stringify(at)}, not an integer >= 0 (the commit-log offset the topic was deleted at): restore the file (or its .bak), or remove the entry to serve that topic's old messages again.`,
        );
      d.below.set(topic, at as number);
    }
    d.noteHighest();
    return d;
  }

  get size(): number {
    return this.below.size;
  }

  /** The commit-log offset `topic` was deleted at, or undefined. */
  at(topic: string): number | undefined {
    return this.below.get(topic);
  }

  /** Whether the record of `topic` at commit-log offset `phy` is an old one of a deleted topic. */
  isOld(topic: string, phy: number): boolean {
    const at = this.below.get(topic);
    return at !== undefined && phy < at;
  }

  /**
   * Records the deletion of `topics` at commit-log offset `at` (a later deletion moves a topic's
   * up, never down), the table written first: a failed write throws and changes nothing, so the
   * table in memory (read by the dispatcher and the lookups) never holds a deletion the file does
   * not, and the topics are still served as before.
   */
  add(topics: Iterable<string>, at: number): void {
    const table = new Map(this.below);
    for (const topic of topics) table.set(topic, Math.max(at, table.get(topic) ?? 0));
    this.write(table);
    this.apply(table);
  }

  /**
   * Lowers every deletion offset above `end` to it, the table written first (a failed write
   * changes nothing); true when any was. Called before this store appends records of its own at
   * `end`: they are new, whatever topic they are of. A deletion can lie past the log's end when
   * the log lost its unflushed tail after the deletion was written (a store of an older version,
   * a flush that the disk did not keep), or on a store that was a slave and took its master's
   * offset, past its own end, and now appends its own records (a slave's copy of the master's log
   * up to that offset keeps it: those records are the old ones).
   */
  lowerTo(end: number): boolean {
    if (this.highest <= end) return false;
    const table = new Map(this.below);
    for (const [topic, at] of table) if (at > end) table.set(topic, end);
    this.write(table);
    this.apply(table);
    return true;
  }

  /**
   * Drops the entries whose old records are all gone (`minPhy`: the commit log's min offset); true
   * when any was. Dropped in memory before the caller's {@link save}, which is not made
   * all-or-nothing like {@link add}: a failed save leaves on disk entries that memory no longer
   * holds, which is harmless. Such an entry's offset is at or below the log's min offset, so no
   * record it covers is left to skip; after a restart it is what a crash between the segments'
   * deletion and the save leaves, and the next write of the table (a deletion, a lowering, the next
   * expiry that drops one) leaves it out. Only the reverse (memory without a deletion the disk
   * holds while its records remain, or with one the disk lacks) would serve or hide records wrongly.
   */
  expireBelow(minPhy: number): boolean {
    let n = 0;
    for (const [topic, at] of this.below)
      if (at <= minPhy) {
        this.below.delete(topic);
        n++;
      }
    this.noteHighest();
    return n > 0;
  }

  /** Writes the table atomically. */
  save(): void {
    this.write(this.below);
  }

  private write(table: Map<string, number>): void {
    JsonFile.write(this.file, { deletedTopics: Object.fromEntries(table) } satisfies DeletedTopicsFile);
  }

  /** Takes `table`, already written, into memory (into `below` itself: the dispatcher holds it). */
  private apply(table: Map<string, number>): void {
    for (const [topic, at] of table) this.below.set(topic, at);
    for (const topic of this.below.keys()) if (!table.has(topic)) this.below.delete(topic);
    this.noteHighest();
  }

  private noteHighest(): void {
    this.highest = 0;
    for (const at of this.below.values()) if (at > this.highest) this.highest = at;
  }

  /** The table, by topic. */
  toJSON(): Record<string, number> {
    return Object.fromEntries(this.below);
  }
}
