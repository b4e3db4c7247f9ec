/**
 * The broker's topic table (RocketMQ's `TopicConfigManager`): queue numbers and permissions per
 * topic, auto-creation on first send, persisted to `<storeDir>/config/topics.json`.
 */
import {
  AUTO_CREATE_TOPIC_KEY_TOPIC,
  checkTopicConfig,
  MQError,
  PERM_READ_WRITE,
  Perm,
  SCHEDULE_TOPIC,
  shownValue,
  type TopicConfig,
  type TopicConfigTable,
} from "../../transport/protocol.ts";
import { ConfigFile, type ConfigLogger, loadEntries } from "./configFile.ts";
import { DEFAULT_MAX_DELAY_LEVEL } from "./retryPolicy.ts";

export const TOPICS_FILE = "topics.json";
/** Queues of SCHEDULE_TOPIC_XXXX: one per delay level. */
export const SCHEDULE_TOPIC_QUEUE_NUMS = DEFAULT_MAX_DELAY_LEVEL;
export interface TopicConfigManagerOptions {
  storeDir: string;
  /** serve TBW102 so producers can send to unknown topics, and create them on first send */
  autoCreateTopic: boolean;
  /** queues of an auto-created topic */
  defaultQueueNums: number;
  /** hears about entries of topics.json that are skipped, a file loaded from its backup, and failed writes of auto-created topics */
  logger?: ConfigLogger;
}

/** Topic configs of one broker, persisted. Listeners hear every change (the registrar re-registers). */
export class TopicConfigManager {
  private readonly table = new Map<string, TopicConfig>();
  private version = 0;
  private readonly listeners = new Set<(tc: TopicConfig, deleted?: boolean) => void>();
  private readonly file: ConfigFile<TopicConfigTable>;

  private constructor(private readonly opts: TopicConfigManagerOptions) {
    this.file = new ConfigFile(opts.storeDir, TOPICS_FILE, () => ({ topicConfigTable: this.all(), dataVersion: this.version }));
  }

  /** Loads `topics.json` (if any) and adds the system topics. */
  static async load(opts: TopicConfigManagerOptions): Promise<TopicConfigManager> {
    const m = new TopicConfigManager(opts);
    const stored = (await m.file.load(opts.logger)) as Partial<TopicConfigTable> | null;
    const table = m.file.tableOf(stored, "topicConfigTable") as Record<string, TopicConfig>;
    if (stored) {
      // an entry damaged by hand is skipped rather than stopping the broker, but said so, and the
      // file kept as it is (the next write leaves it out); one the .bak holds valid is loaded from it:
      // skipped, the topic's messages could not be reached until it was made again
      loadEntries(
        m.file.path,
        table,
        "topicConfigTable",
        (key) => {
          const topicName = (table[key] as Partial<TopicConfig> | null)?.topicName;
          return {
            entry: `topic "${key}"`,
            fields: topicName === key || topicName === undefined ? { topic: key } : { topic: key, topicName },
          };
        },
        topicConfigEntry,
        (key, tc) => m.table.set(key, tc),
        "the broker does not have the topic (or create it again)",
        opts.logger,
      );
      m.version = typeof stored.dataVersion === "number" ? stored.dataVersion : 0;
    }
    if (opts.autoCreateTopic) {
      m.table.set(AUTO_CREATE_TOPIC_KEY_TOPIC, {
        topicName: AUTO_CREATE_TOPIC_KEY_TOPIC,
        readQueueNums: opts.defaultQueueNums,
        writeQueueNums: opts.defaultQueueNums,
        perm: Perm.INHERIT | PERM_READ_WRITE,
        order: false,
      });
    } else {
      m.table.delete(AUTO_CREATE_TOPIC_KEY_TOPIC);
    }
    if (!m.table.has(SCHEDULE_TOPIC)) {
      m.table.set(SCHEDULE_TOPIC, {
        topicName: SCHEDULE_TOPIC,
        readQueueNums: SCHEDULE_TOPIC_QUEUE_NUMS,
        writeQueueNums: SCHEDULE_TOPIC_QUEUE_NUMS,
        perm: PERM_READ_WRITE,
        order: false,
      });
    }
    return m;
  }

  get(topic: string): TopicConfig | undefined {
    return this.table.get(topic);
  }

  /** A copy of the whole table, by topic name. */
  all(): Record<string, TopicConfig> {
    const out: Record<string, TopicConfig> = {};
    for (const [k, v] of this.table) out[k] = { ...v };
    return out;
  }

  get dataVersion(): number {
    return this.version;
  }

  get autoCreateTopic(): boolean {
    return this.opts.autoCreateTopic;
  }

  /**
   * The queue counts of a create-or-update: a count not given keeps an existing topic's (RocketMQ
   * scales down by shrinking writeQueueNums first and readQueueNums once consumers drained the
   * rest; taken from the other count, the read queues shrank too and stranded their messages).
   * For a new topic a count not given is the other one given, else `dflt`.
   */
  queueNumsFor(
    topic: string,
    readQueueNums: number | undefined,
    writeQueueNums: number | undefined,
    dflt: number,
  ): { readQueueNums: number; writeQueueNums: number } {
    const found = this.table.get(topic);
    if (found) return { readQueueNums: readQueueNums ?? found.readQueueNums, writeQueueNums: writeQueueNums ?? found.writeQueueNums };
    return { readQueueNums: readQueueNums ?? writeQueueNums ?? dflt, writeQueueNums: writeQueueNums ?? readQueueNums ?? dflt };
  }

  /** Creates or replaces a topic's config; resolves when it is on disk. */
  async createOrUpdate(tc: TopicConfig): Promise<TopicConfig> {
    // read by truthiness, "false" made an ordered topic
    if (typeof tc.order !== "boolean")
      throw new MQError("INVALID_PARAMETER", `order of topic "${tc.topicName}" must be true or false, not ${shownValue(tc.order)}.`);
    const next: TopicConfig = {
      topicName: tc.topicName,
      readQueueNums: tc.readQueueNums,
      writeQueueNums: tc.writeQueueNums,
      perm: tc.perm,
      order: tc.order,
    };
    checkTopicConfig(next);
    this.table.set(next.topicName, next);
    this.changed(next);
    await this.file.persist();
    return next;
  }

  /**
   * The config of `topic`, created with the default queue numbers when it is unknown and
   * auto-creation is on (RocketMQ's `createTopicInSendMessageMethod`); undefined otherwise. The
   * config is usable at once; the file write follows.
   */
  getOrAutoCreate(topic: string): TopicConfig | undefined {
    const found = this.table.get(topic);
    if (found || !this.opts.autoCreateTopic) return found;
    return this.createIfAbsent(topic, this.opts.defaultQueueNums, PERM_READ_WRITE);
  }

  /** Creates a topic unless it exists (retry/DLQ topics, system topics); returns its config. */
  createIfAbsent(topic: string, queueNums: number, perm: number): TopicConfig {
    const found = this.table.get(topic);
    if (found) return found;
    const tc: TopicConfig = { topicName: topic, readQueueNums: queueNums, writeQueueNums: queueNums, perm, order: false };
    checkTopicConfig(tc);
    this.table.set(topic, tc);
    this.changed(tc);
    // the next change or close retries a failed write; the in-memory table stays authoritative
    this.file.persistLater(this.opts.logger);
    return tc;
  }

  /**
   * Removes a topic's config (RocketMQ's `deleteTopicConfig`); resolves when the file is written.
   * Returns the config removed, undefined when the broker had no such topic.
   */
  async delete(topic: string): Promise<TopicConfig | undefined> {
    const found = this.table.get(topic);
    if (!found) return undefined;
    this.table.delete(topic);
    this.changed(found, true);
    await this.file.persist();
    return found;
  }

  /** Hears every created, updated (and, with `deleted`, deleted) topic. Returns the unsubscribe function. */
  onChange(listener: (tc: TopicConfig, deleted?: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Writes the current table and waits for pending writes. */
  async close(): Promise<void> {
    await this.file.flush();
    await this.file.persist();
  }

  private changed(tc: TopicConfig, deleted = false): void {
    this.version++;
    for (const l of this.listeners) l(tc, deleted);
  }
}

/** A topics.json entry under `key` as a TopicConfig; throws (Error, its message for the warning) when it is not valid. */
function topicConfigEntry(key: string, tc: unknown): TopicConfig {
  if (!tc || typeof tc !== "object") throw new Error("It is not an object.");
  const c = tc as TopicConfig;
  checkTopicConfig(c);
  // read by truthiness, "false" made an ordered topic; no order is an unordered one
  if (c.order !== undefined && typeof c.order !== "boolean") throw new Error(`order must be true or false, not ${shownValue(c.order)}.`);
  // the table is keyed by its keys (as RocketMQ's and subscriptionGroup.json): an entry copied
  // under a new key with its old topicName would otherwise replace the topic it was copied from
  if (c.topicName !== key)
    throw new Error(`its topicName is "${c.topicName}", not its key "${key}" (an entry copied under a new key keeps the old name).`);
  return {
    topicName: c.topicName,
    readQueueNums: c.readQueueNums,
    writeQueueNums: c.writeQueueNums,
    perm: c.perm,
    order: c.order === true,
  };
}
