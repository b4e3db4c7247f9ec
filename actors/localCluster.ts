/**
 * `startLocalCluster(...)`: a name server and brokers in this process, each broker with its own
 * store under `dir`, for tests, examples and `actormq start`. With `nameserver.curve` and
 * `broker.curve` every server uses CURVE (docs/security.md), and the brokers' links to the name
 * server and their master use the servers' public keys.
 */
import path from "node:path";
import { checkOptionNames, optionNamesOf } from "../transport/optionNames.ts";
import { MQError } from "../transport/protocol.ts";
import { BROKER_START_OPTION_NAMES, Broker, type BrokerStartOptions } from "./broker/broker.ts";
import { NameServer, type NameServerOptions } from "./nameserver/index.ts";
import { type CurveServerKey, resolveCurveServer } from "./runtime/index.ts";

/** Broker options the cluster sets for each broker itself. */
const PER_BROKER_OPTIONS = ["brokerName", "nameservers", "storeDir", "brokerId"] as const;
type PerBrokerOption = (typeof PER_BROKER_OPTIONS)[number];

/** `startLocalCluster`'s `broker`: options applied to every broker. */
export type LocalClusterBrokerOptions = Partial<Omit<BrokerStartOptions, PerBrokerOption>>;

/** The names `broker` may hold: every Broker.start option but those the cluster sets per broker. */
export const LOCAL_CLUSTER_BROKER_OPTION_NAMES = BROKER_START_OPTION_NAMES.filter(
  (n): n is Exclude<typeof n, PerBrokerOption> => !(PER_BROKER_OPTIONS as readonly string[]).includes(n),
);

/** `startLocalCluster`'s `nameserver`. */
export type LocalClusterNameServerOptions = Pick<NameServerOptions, "scanIntervalMs" | "logLevel" | "curve">;

/** The names `nameserver` may hold. */
export const LOCAL_CLUSTER_NAMESERVER_OPTION_NAMES = optionNamesOf<LocalClusterNameServerOptions>()([
  "scanIntervalMs",
  "logLevel",
  "curve",
]);

/** Options of `startLocalCluster`. */
export interface LocalClusterOptions {
  /** number of broker names (broker-a, broker-b, ...). @default 1 */
  brokers?: number;
  /** slaves per broker name (brokerId 1..n). @default 0 */
  slavesPerBroker?: number;
  /** root directory; broker stores go to `<dir>/<brokerName>[-s<id>]` */
  dir: string;
  /** name server endpoint. @default "tcp://127.0.0.1:*" */
  nameserverListen?: string;
  /** endpoint of the first broker (master of broker-a); the others bind `broker.listen`. @default `broker.listen` */
  brokerListen?: string;
  /**
   * any Broker.start option (but brokerName, brokerId, nameservers and storeDir; metricsListen with port
   * 0 when there is more than one broker),
   * applied to every broker. `listen`, the endpoint every broker but the one `brokerListen` names
   * binds, needs port `*` unless it is for one broker (default "tcp://127.0.0.1:*"). With `curve`
   * and no `curveServerKey`, a slave's link to its master uses the master's public key; see
   * `nameserver.curve`
   */
  broker?: LocalClusterBrokerOptions;
  /**
   * name server options. `curve`: CURVE on the name server, as NameServer.start's; unless
   * `broker.curveServerKey` is given, the brokers' links to it then use its public key (give the
   * brokers the same key pair as `broker.curve`, or admit their `broker.curveClient` keys in its
   * allow-list)
   */
  nameserver?: LocalClusterNameServerOptions;
}

/** The names {@link LocalClusterOptions} may hold; startLocalCluster refuses any other. */
export const LOCAL_CLUSTER_OPTION_NAMES = optionNamesOf<LocalClusterOptions>()([
  "brokers",
  "slavesPerBroker",
  "dir",
  "nameserverListen",
  "brokerListen",
  "broker",
  "nameserver",
]);

/** A running local cluster. */
export interface LocalCluster {
  nameservers: string[];
  nameServer: NameServer;
  brokers: Broker[];
  close(): Promise<void>;
}

const EPHEMERAL = "tcp://127.0.0.1:*";

/** Whether the port of an address to bind (after its last ':') picks a free one: `*` or 0. */
function anyPort(address: string): boolean {
  const port = address.slice(address.lastIndexOf(":") + 1);
  return port === "*" || Number(port) === 0;
}

/** The name of the i-th broker: broker-a, broker-b, ... */
export function localBrokerName(i: number): string {
  return `broker-${i < 26 ? String.fromCharCode(97 + i) : `n${i}`}`;
}

export async function startLocalCluster(opts: LocalClusterOptions): Promise<LocalCluster> {
  checkOptionNames("startLocalCluster", opts, LOCAL_CLUSTER_OPTION_NAMES);
  if (typeof opts.dir !== "string" || opts.dir.length === 0)
    throw new MQError("ILLEGAL_ARGUMENT", "startLocalCluster needs dir: the directory for the brokers' stores.");
  const count = opts.brokers ?? 1;
  const slaves = opts.slavesPerBroker ?? 0;
  if (!Number.isInteger(count) || count < 1) throw new MQError("ILLEGAL_ARGUMENT", "brokers must be an integer >= 1.");
  if (!Number.isInteger(slaves) || slaves < 0) throw new MQError("ILLEGAL_ARGUMENT", "slavesPerBroker must be an integer >= 0.");
  // spread into every broker's (name server's) options: a string or an array would spread as options "0", "1", ...
  if (opts.broker !== undefined) checkOptionNames("startLocalCluster's broker", opts.broker, LOCAL_CLUSTER_BROKER_OPTION_NAMES);
  if (opts.nameserver !== undefined)
    checkOptionNames("startLocalCluster's nameserver", opts.nameserver, LOCAL_CLUSTER_NAMESERVER_OPTION_NAMES);
  const sharedListen = opts.broker?.listen ?? EPHEMERAL;
  const firstListen = opts.brokerListen ?? sharedListen;
  for (const [name, endpoint] of [
    ["brokerListen", opts.brokerListen],
    ["broker.listen", opts.broker?.listen],
  ] as const)
    if (endpoint !== undefined && (typeof endpoint !== "string" || endpoint.length === 0))
      throw new MQError("ILLEGAL_ARGUMENT", `${name} must be a ZeroMQ endpoint such as tcp://127.0.0.1:*, got ${String(endpoint)}.`);
  // every broker but the first binds broker.listen: a fixed port would be taken by one of them only
  const total = count * (1 + slaves);
  const sharing = total - (opts.brokerListen !== undefined ? 1 : 0);
  if (sharing > 1 && (!sharedListen.startsWith("tcp://") || !anyPort(sharedListen)))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `broker.listen ${sharedListen} has a fixed port, but ${sharing} brokers bind it: use port * (tcp://host:*), and brokerListen for the first broker's fixed endpoint.`,
    );
  // every broker serves its metrics at broker.metricsListen: a fixed port suits one broker only
  const metricsListen = opts.broker?.metricsListen;
  if (typeof metricsListen === "string" && total > 1 && !anyPort(metricsListen))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `broker.metricsListen ${metricsListen} has a fixed port, but ${total} brokers serve metrics: use port 0 (each broker's broker.metrics.url says where it listens).`,
    );
  // checked before anything starts; the public keys of the brokers' links
  const nameserverKey = resolveCurveServer(opts.nameserver?.curve, "nameserver.curve")?.publicKey;
  const brokerKey = resolveCurveServer(opts.broker?.curve, "broker.curve")?.publicKey;
  const linkKeysGiven = opts.broker?.curveServerKey !== undefined && opts.broker.curveServerKey !== null;
  if (!linkKeysGiven && slaves > 0 && (nameserverKey === undefined) !== (brokerKey === undefined))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${nameserverKey ? "nameserver.curve" : "broker.curve"} with slavesPerBroker needs ${nameserverKey ? "broker.curve" : "nameserver.curve"} too: ` +
        "a slave links to the name server and to its master, and a broker's links use CURVE for all or none.",
    );
  const nameServer = await NameServer.start({ listen: opts.nameserverListen ?? EPHEMERAL, ...opts.nameserver });
  const nameservers = [nameServer.address];
  /** a broker's curveServerKey, unless given: the name server's key, and its master's for a slave */
  const linkKeys = (masterAddress?: string): { curveServerKey?: CurveServerKey } => {
    if (linkKeysGiven) return {};
    const keys: Record<string, string> = {};
    if (nameserverKey) keys[nameServer.address] = nameserverKey;
    if (masterAddress && brokerKey) keys[masterAddress] = brokerKey;
    const distinct = new Set(Object.values(keys));
    if (distinct.size === 0) return {};
    // one key pair for the cluster: one key for every address
    return { curveServerKey: distinct.size === 1 ? [...distinct][0]! : keys };
  };
  const brokers: Broker[] = [];
  const close = async () => {
    for (const b of [...brokers].reverse()) await b.close();
    await nameServer.close();
  };
  try {
    for (let i = 0; i < count; i++) {
      const brokerName = localBrokerName(i);
      const master = await Broker.start({
        ...opts.broker,
        ...linkKeys(),
        brokerName,
        brokerId: 0,
        listen: i === 0 ? firstListen : sharedListen,
        nameservers,
        storeDir: path.join(opts.dir, brokerName),
      });
      brokers.push(master);
      for (let s = 1; s <= slaves; s++) {
        brokers.push(
          await Broker.start({
            ...opts.broker,
            ...linkKeys(master.address),
            brokerName,
            brokerId: s,
            role: "SLAVE",
            masterAddress: master.address,
            listen: sharedListen,
            nameservers,
            storeDir: path.join(opts.dir, `${brokerName}-s${s}`),
          }),
        );
      }
    }
  } catch (e) {
    await close().catch(() => {});
    throw e;
  }
  return { nameservers, nameServer, brokers, close };
}
