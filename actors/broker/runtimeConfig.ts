/**
 * The broker's configuration at runtime (RocketMQ's `getBrokerConfig` / `updateBrokerConfig`):
 * GET_BROKER_CONFIG shows the options the broker runs with; UPDATE_BROKER_CONFIG changes the few
 * that may change while it runs ({@link SETTABLE_BROKER_CONFIG}: `brokerPermission`, to drain a
 * broker by making it read only) and writes them to `<storeDir>/config/broker.json`, which the next
 * start reads. An option given explicitly at start (`Broker.start({ brokerPermission })`,
 * `--broker-permission`) wins over the file for that run.
 */
import path from "node:path";
import { JsonFile } from "../../store/index.ts";
import { type BrokerConfigReply, MQError, Perm, shownValue } from "../../transport/protocol.ts";
import type { BrokerConfig, BrokerOptions } from "./brokerConfig.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { CONFIG_DIR, type ConfigLogger, loadEntries, readBrokerJson, tableOf } from "./configFile.ts";

export const BROKER_CONFIG_FILE = "broker.json";

/** One option UPDATE_BROKER_CONFIG may change. */
interface Settable {
  /** the values taken, as error messages and `--help` name them */
  readonly values: string;
  /** the value given (a number, or its text as the command line sends it), or undefined when it is not one of `values` */
  parse(v: unknown): number | undefined;
}

/** PermName values a broker can run with: read and write, read only (drain), write only. */
const BROKER_PERMISSIONS: readonly number[] = [Perm.READ | Perm.WRITE, Perm.READ, Perm.WRITE];

/** The options UPDATE_BROKER_CONFIG takes, by name. */
export const SETTABLE_BROKER_CONFIG = {
  brokerPermission: {
    values: "6 (read and write), 4 (read only: producers go to other brokers, consumers still read) or 2 (write only)",
    parse: (v) => {
      const n = typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v.trim()) : v;
      return typeof n === "number" && BROKER_PERMISSIONS.includes(n) ? n : undefined;
    },
  },
} as const satisfies Record<string, Settable>;
export type SettableBrokerConfigKey = keyof typeof SETTABLE_BROKER_CONFIG;
export type BrokerConfigUpdate = Partial<Record<SettableBrokerConfigKey, number>>;

const SETTABLE_KEYS = Object.keys(SETTABLE_BROKER_CONFIG) as SettableBrokerConfigKey[];

function isSettable(key: string): key is SettableBrokerConfigKey {
  return Object.hasOwn(SETTABLE_BROKER_CONFIG, key);
}

/** "brokerPermission: 6 (...), 4 (...)": every settable key with its values, for error messages. */
function settableList(): string {
  return SETTABLE_KEYS.map((k) => `${k}: ${SETTABLE_BROKER_CONFIG[k].values}`).join("; ");
}

/**
 * Checks an update (key to value); throws MQError INVALID_PARAMETER naming the settable keys and
 * their values for an unknown key or a value not taken. Nothing is applied when any is refused.
 */
export function parseBrokerConfigUpdate(properties: unknown): BrokerConfigUpdate {
  if (!properties || typeof properties !== "object" || Array.isArray(properties) || Object.keys(properties).length === 0)
    throw new MQError("INVALID_PARAMETER", `UPDATE_BROKER_CONFIG needs properties {key: value}; the settable keys are ${settableList()}.`);
  const out: BrokerConfigUpdate = {};
  for (const [key, raw] of Object.entries(properties)) {
    if (!isSettable(key))
      throw new MQError(
        "INVALID_PARAMETER",
        `${JSON.stringify(key)} cannot be changed on a running broker; the settable keys are ${settableList()}. Other options are set at start.`,
      );
    const v = SETTABLE_BROKER_CONFIG[key].parse(raw);
    if (v === undefined)
      throw new MQError("INVALID_PARAMETER", `${key} must be ${SETTABLE_BROKER_CONFIG[key].values}, not ${shownValue(raw)}.`);
    out[key] = v;
  }
  return out;
}

/** The settings UPDATE_BROKER_CONFIG made on one broker, as `broker.json` keeps them. */
export class RuntimeConfig {
  readonly file: string;

  private constructor(
    storeDir: string,
    private readonly stored: BrokerConfigUpdate,
  ) {
    this.file = path.join(storeDir, CONFIG_DIR, BROKER_CONFIG_FILE);
  }

  /**
   * Reads `broker.json` (if any) and applies each setting to `config`, except those `opts` gives
   * explicitly (a start option wins; the file keeps its value for later starts). An entry that is
   * not valid takes the `.bak`'s when that one is valid, else is skipped, with a warning either way (a
   * copy of the file is kept); a file that is not JSON is read from its `.bak`, else refuses the start
   * (MALFORMED), as the other config files.
   */
  static load(
    config: BrokerConfig,
    opts: BrokerOptions,
    logger?: ConfigLogger & { info(fields: object, msg: string): void },
  ): RuntimeConfig {
    const file = path.join(config.storeDir, CONFIG_DIR, BROKER_CONFIG_FILE);
    const table = tableOf(file, readBrokerJson(file, logger), "brokerConfig");
    const stored: BrokerConfigUpdate = {};
    loadEntries(
      file,
      table,
      "brokerConfig",
      (key) => ({ entry: `setting "${key}"`, fields: { key } }),
      (key, raw) => parseBrokerConfigUpdate({ [key]: raw }),
      (_key, update) => Object.assign(stored, update),
      "the broker runs with its start value",
      logger,
    );
    for (const key of SETTABLE_KEYS) {
      const v = stored[key];
      if (v === undefined) continue;
      if (opts[key] !== undefined) {
        if (opts[key] !== v)
          logger?.info(
            { file, key, stored: v, started: opts[key] },
            `${key} ${opts[key]} given at start wins over ${v} in ${BROKER_CONFIG_FILE}`,
          );
        continue;
      }
      config[key] = v;
    }
    return new RuntimeConfig(config.storeDir, stored);
  }

  /** Writes the file with the update (atomically: temp file, fsync, rename), then records it; throws when the write fails. */
  persist(update: BrokerConfigUpdate): void {
    const next = { ...this.stored, ...update };
    try {
      JsonFile.write(this.file, { brokerConfig: next });
    } catch (e) {
      throw new MQError(
        "SYSTEM_ERROR",
        `Writing ${this.file} failed (${(e as Error).message}): nothing was changed. Free space or fix the directory's permissions, then update again.`,
        { cause: e },
      );
    }
    Object.assign(this.stored, update);
  }
}

const runtimeConfigs = new WeakMap<BrokerContext, RuntimeConfig>();

/** Makes `rc` the runtime config of `ctx` (Broker.start, once the context exists). */
export function attachRuntimeConfig(ctx: BrokerContext, rc: RuntimeConfig): void {
  runtimeConfigs.set(ctx, rc);
}

function runtimeConfigOf(ctx: BrokerContext): RuntimeConfig {
  let rc = runtimeConfigs.get(ctx);
  if (!rc) {
    // a context built without Broker.start (tests): its settings as they are, the file read for the rest
    rc = RuntimeConfig.load({ ...ctx.config }, ctx.config, ctx.logger);
    runtimeConfigs.set(ctx, rc);
  }
  return rc;
}

/** GET_BROKER_CONFIG: every option with a plain value, and the keys UPDATE_BROKER_CONFIG takes. */
export function brokerConfigReply(ctx: BrokerContext): BrokerConfigReply {
  const brokerConfig: BrokerConfigReply["brokerConfig"] = {};
  for (const [k, v] of Object.entries(ctx.config).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") brokerConfig[k] = v;
    else if (Array.isArray(v) && v.every((x) => typeof x === "string")) brokerConfig[k] = [...v];
  }
  return { brokerName: ctx.config.brokerName, brokerAddr: ctx.brokerAddr, brokerConfig, settableKeys: [...SETTABLE_KEYS] };
}

/**
 * UPDATE_BROKER_CONFIG: checks every setting, applies them, writes `broker.json`, and, when the
 * permission changed, registers with every name server at once, so routes show it (a read-only
 * broker's topics are routed with perm 4: producers leave it, consumers keep reading it).
 * Resolves with the settings changed and their old values.
 */
export async function updateBrokerConfig(
  ctx: BrokerContext,
  properties: unknown,
): Promise<{ updated: BrokerConfigUpdate; previous: BrokerConfigUpdate }> {
  const update = parseBrokerConfigUpdate(properties);
  const rc = runtimeConfigOf(ctx);
  const previous: BrokerConfigUpdate = {};
  for (const key of SETTABLE_KEYS) if (update[key] !== undefined) previous[key] = ctx.config[key];
  // on disk first: a refused write changes nothing, and the answer says so
  rc.persist(update);
  Object.assign(ctx.config, update);
  ctx.logger.info({ updated: update, previous, file: rc.file }, "broker config updated");
  if (update.brokerPermission !== undefined && update.brokerPermission !== previous.brokerPermission) await ctx.registerNow();
  return { updated: update, previous };
}
