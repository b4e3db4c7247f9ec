/**
 * The broker's consumer group table (RocketMQ's `SubscriptionGroupManager`): per-group consume
 * switches and retry settings, auto-created on first use, persisted to
 * `<storeDir>/config/subscriptionGroup.json`.
 */
import {
  checkNotReserved,
  isGroupName,
  isInt32,
  type MessageModel,
  MQError,
  SUBSCRIPTION_GROUP_BOOLEAN_FIELDS,
  SUBSCRIPTION_GROUP_INT_RANGES,
  type SubscriptionGroupConfig,
  shownValue,
  type UpdateSubscriptionGroupRequest,
} from "../../transport/protocol.ts";
import { ConfigFile, type ConfigLogger, loadEntries } from "./configFile.ts";

export const SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json";

/** RocketMQ's `SubscriptionGroupConfig` defaults. */
export function defaultSubscriptionGroupConfig(groupName: string): SubscriptionGroupConfig {
  return {
    groupName,
    consumeEnable: true,
    consumeFromMinEnable: true,
    consumeBroadcastEnable: true,
    consumeMessageOrderly: false,
    retryQueueNums: 1,
    retryMaxTimes: 16,
    brokerId: 0,
    whichBrokerWhenConsumeSlowly: 1,
    notifyConsumerIdsChangedEnable: true,
    consumeTimeoutMinute: 15,
  };
}

interface Stored {
  subscriptionGroupTable: Record<string, SubscriptionGroupConfig>;
  dataVersion: number;
}

/**
 * Checks a group name (same characters as topics). `__proto__` is refused: the table travels and
 * is persisted as an object keyed by group name, where that key would set the prototype.
 */
export function checkGroupName(group: unknown): asserts group is string {
  if (!isGroupName(group)) {
    throw new MQError("INVALID_PARAMETER", `Group "${String(group)}" is not valid: use 1-255 letters, digits, '%', '|', '_' or '-'.`);
  }
  checkNotReserved(group, "consumer group");
}

/**
 * Checks a whole group config (admin updates, subscriptionGroup.json entries); throws MQError
 * INVALID_PARAMETER. A value the broker cannot use would fail later and elsewhere: retryQueueNums
 * 2000 makes every heartbeat of the group fail creating its retry topic.
 */
export function checkSubscriptionGroupConfig(cfg: SubscriptionGroupConfig): void {
  checkGroupName(cfg.groupName);
  for (const k of SUBSCRIPTION_GROUP_BOOLEAN_FIELDS)
    if (typeof cfg[k] !== "boolean")
      throw new MQError("INVALID_PARAMETER", `${k} of group "${cfg.groupName}" must be true or false, not ${shownValue(cfg[k])}.`);
  for (const [k, min, max] of SUBSCRIPTION_GROUP_INT_RANGES) {
    const v = cfg[k];
    if (!isInt32(v) || v < min || v > max)
      throw new MQError(
        "INVALID_PARAMETER",
        `${k} of group "${cfg.groupName}" must be an integer from ${min} to ${max}, not ${shownValue(v)}.`,
      );
  }
  if (cfg.messageModel !== undefined && !isMessageModel(cfg.messageModel))
    throw new MQError(
      "INVALID_PARAMETER",
      `messageModel of group "${cfg.groupName}" must be "CLUSTERING" or "BROADCASTING", not ${shownValue(cfg.messageModel)}.`,
    );
}

function isMessageModel(v: unknown): v is MessageModel {
  return v === "CLUSTERING" || v === "BROADCASTING";
}

/** Subscription group configs of one broker, persisted. */
export class SubscriptionGroupManager {
  private readonly table = new Map<string, SubscriptionGroupConfig>();
  private version = 0;
  private readonly file: ConfigFile<Stored>;

  private constructor(
    private readonly autoCreate: boolean,
    storeDir: string,
    private readonly logger?: ConfigLogger,
  ) {
    this.file = new ConfigFile(storeDir, SUBSCRIPTION_GROUP_FILE, () => ({
      subscriptionGroupTable: this.all(),
      dataVersion: this.version,
    }));
  }

  /** Loads `subscriptionGroup.json` (if any); `logger` hears about skipped entries, a file loaded from its backup and failed writes of auto-created groups. */
  static async load(opts: {
    storeDir: string;
    autoCreateSubscriptionGroup: boolean;
    logger?: ConfigLogger;
  }): Promise<SubscriptionGroupManager> {
    const m = new SubscriptionGroupManager(opts.autoCreateSubscriptionGroup, opts.storeDir, opts.logger);
    const stored = (await m.file.load(opts.logger)) as Partial<Stored> | null;
    const table = m.file.tableOf(stored, "subscriptionGroupTable") as Record<string, SubscriptionGroupConfig>;
    if (stored) {
      // as topics.json: an entry damaged by hand is skipped rather than stopping the broker (or every
      // heartbeat of the group), but said so, and the file kept as it is: the next write leaves it
      // out; one the .bak holds valid is loaded from it
      loadEntries(
        m.file.path,
        table,
        "subscriptionGroupTable",
        (name) => ({ entry: `group "${name}"`, fields: { group: name } }),
        (name, cfg) => {
          if (!cfg || typeof cfg !== "object") throw new Error("It is not an object.");
          const full = { ...defaultSubscriptionGroupConfig(name), ...cfg, groupName: name };
          checkSubscriptionGroupConfig(full);
          return full;
        },
        (name, full) => m.table.set(name, full),
        "the broker does not have the group's settings (or update them again)",
        opts.logger,
      );
      m.version = typeof stored.dataVersion === "number" ? stored.dataVersion : 0;
    }
    return m;
  }

  get(group: string): SubscriptionGroupConfig | undefined {
    return this.table.get(group);
  }

  /** The group's config, created with defaults when unknown and auto-creation is on; else undefined. */
  findOrAutoCreate(group: string): SubscriptionGroupConfig | undefined {
    const found = this.table.get(group);
    if (found || !this.autoCreate) return found;
    checkGroupName(group);
    const cfg = defaultSubscriptionGroupConfig(group);
    this.table.set(group, cfg);
    this.version++;
    // retried by the next change or close
    this.file.persistLater(this.logger);
    return cfg;
  }

  /**
   * Records the model of a heartbeat of a known group's members; the latest wins, so a group
   * restarted in the other model takes it. Written when it changed: a broadcasting group whose
   * members are all gone is still known as one (its offsets are theirs, a reset of them is
   * refused), after a restart too.
   */
  noteMessageModel(group: string, model: unknown): void {
    const cfg = this.table.get(group);
    if (!cfg || !isMessageModel(model) || cfg.messageModel === model) return;
    cfg.messageModel = model;
    this.version++;
    // retried by the next change or close
    this.file.persistLater(this.logger);
  }

  /**
   * {@link findOrAutoCreate}, or MQError SUBSCRIPTION_GROUP_NOT_EXIST saying what to do; `broker`
   * and `consequence` (", so ...") complete the message.
   */
  findOrAutoCreateOrThrow(group: string, broker: string, consequence = ""): SubscriptionGroupConfig {
    const cfg = this.findOrAutoCreate(group);
    if (cfg) return cfg;
    throw new MQError(
      "SUBSCRIPTION_GROUP_NOT_EXIST",
      `Subscription group ${group} does not exist on broker ${broker}${consequence}: check the consumer's group name, then create the ` +
        `group on this broker (admin.updateSubscriptionGroup, \`actormq group update ${group} --consume-enable true --brokers ${broker}\`) or start the broker with autoCreateSubscriptionGroup.`,
    );
  }

  /**
   * Creates or updates a group (fields not given keep their value or default); resolves when on
   * disk. A config the broker could not use is refused (INVALID_PARAMETER) and nothing changes.
   */
  async createOrUpdate(req: UpdateSubscriptionGroupRequest): Promise<SubscriptionGroupConfig> {
    checkGroupName(req.groupName);
    const cfg = { ...defaultSubscriptionGroupConfig(req.groupName), ...this.table.get(req.groupName), ...req };
    checkSubscriptionGroupConfig(cfg);
    this.table.set(req.groupName, cfg);
    this.version++;
    await this.file.persist();
    return cfg;
  }

  /**
   * Removes a group's config (RocketMQ's `deleteSubscriptionGroupConfig`); resolves when the file
   * is written. Returns whether the broker had the group.
   */
  async delete(group: string): Promise<boolean> {
    if (!this.table.delete(group)) return false;
    this.version++;
    await this.file.persist();
    return true;
  }

  all(): Record<string, SubscriptionGroupConfig> {
    const out: Record<string, SubscriptionGroupConfig> = {};
    for (const [k, v] of this.table) out[k] = { ...v };
    return out;
  }

  get dataVersion(): number {
    return this.version;
  }

  async close(): Promise<void> {
    await this.file.flush();
    await this.file.persist();
  }
}
