/**
 * `ClientInstance` (RocketMQ's `MQClientInstance`): what producers, consumers and admins of one
 * process share for one (name servers, instanceName): an ActorNode that does not listen, the
 * route cache with its periodic refresh, broker address lookup, heartbeats to every master, and
 * the `client` actor brokers reach back (NOTIFY_CONSUMER_IDS_CHANGED).
 *
 * Extension points for consumers:
 * - `addHeartbeatSource(fn)`: contributes consumer data to each HEART_BEAT (sent at once by
 *   `sendHeartbeatToAllBrokers()`, coalesced by `heartbeatSoon()`, and every `heartbeatBrokerIntervalMs`).
 * - `onRouteChange(fn)`: hears topics whose route changed (rebalance triggers).
 * - `onClientEvent(fn)`: hears events brokers send to the `client` actor.
 * - `addTopicInterest(topic)`: keeps a topic's route refreshed even before it is used.
 * - `addBrokerUser(fn)`: keeps the addresses of brokers a consumer still has queues on.
 */
import { createRequire } from "node:module";
import { hostname } from "node:os";
import { setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import type { CurveClientOptions } from "../../transport/curve.ts";
import { optionNamesOf } from "../../transport/optionNames.ts";
import {
  AUTO_CREATE_TOPIC_KEY_TOPIC,
  BrokerActor,
  CLIENT_ACTOR,
  CLIENT_LANGUAGE,
  type ClusterInfo,
  type ConsumerData,
  checkRange,
  type HeartbeatRequest,
  isMQError,
  MAX_TIMER_MS,
  MQError,
  NAMESRV_ACTOR,
  shownValue,
  type TopicRouteData,
} from "../../transport/protocol.ts";
import { checkTcpPort, PEER_EXPIRY_MS } from "../../transport/zmqNode.ts";
import { checkClientLogLevel, lazyClientLogger } from "../logger.ts";
import {
  ActorNode,
  askUnlessConnectionLost,
  CURVE_LINK_OPTION_NAMES,
  type CurveLinkOptions,
  curvePublicKeyOrFile,
  logActorFailures,
  type Ref,
  type Replier,
  resolveCurveLink,
  unlessConnectionLost,
  type WireEvent,
} from "../runtime/index.ts";
import { bornHostOfThisProcess } from "./bornHost.ts";
import { RouteCache, routeFromDefaultTopic, type TopicPublishInfo } from "./routeCache.ts";

/** This package's version, named in heartbeats (`mqadmin consumerConnection` shows it). */
export const CLIENT_VERSION: string = (createRequire(import.meta.url)("../../package.json") as { version: string }).version;

/** The instance's own log: its hosted actors' failures. */
const instanceLog = lazyClientLogger("client:instance");

/** How often routes are refreshed from the name servers (`pollNameServerInterval`). */
export const DEFAULT_POLL_NAMESERVER_INTERVAL_MS = 30_000;
/**
 * How often a wanted topic that has no route yet is asked for again. RocketMQ waits for the next
 * 30 s poll, so a consumer started before its topic exists idles that long; we ask every second
 * until the route appears (one small request per missing topic, nothing once all are known).
 */
export const MISSING_ROUTE_RETRY_MS = 1_000;
/** How often heartbeats go to every master (`heartbeatBrokerInterval`). */
export const DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS = 30_000;
/** Queues per broker assumed for a topic not created yet (`defaultTopicQueueNums`). */
export const DEFAULT_TOPIC_QUEUE_NUMS = 4;
export const DEFAULT_INSTANCE_NAME = "DEFAULT";
/**
 * Environment variable naming an inspector's collector endpoint (`actormq start` and `actormq
 * inspect` print it): when set, every client instance publishes its actors' inspection there.
 */
export const INSPECTOR_ENV = "ACTORMQ_INSPECTOR";
/**
 * Environment variable with the CURVE public key of that collector, when it is a CURVE server
 * (`actormq inspect` of a CURVE cluster prints it): the stream is then published over CURVE. Its
 * value is the key itself (40 Z85 characters) or, anything else, the path of a file holding it
 * alone (one key line; blank and `#` lines skipped), read as `--curve-server` reads its `.pub` file.
 */
export const INSPECTOR_KEY_ENV = "ACTORMQ_INSPECTOR_KEY";

/**
 * The collector's public key from {@link INSPECTOR_KEY_ENV} (the key, or a file holding it) when
 * {@link INSPECTOR_ENV} is set (undefined when either is unset or empty). Throws MQError
 * ILLEGAL_ARGUMENT, naming the variable, for a value that is neither a CURVE key nor a readable file
 * holding one alone, and for a secret key file (whose key it never quotes): a stream that could
 * never connect would fail silently.
 */
export function inspectorKeyFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = env[INSPECTOR_KEY_ENV];
  if (!env[INSPECTOR_ENV] || value === undefined || value === "") return undefined;
  const printed = `the public key \`actormq inspect\` prints next to ${INSPECTOR_ENV}`;
  return curvePublicKeyOrFile(value, {
    option: INSPECTOR_KEY_ENV,
    whose: "the collector's",
    err: (message) => new MQError("ILLEGAL_ARGUMENT", message),
    unreadable: `give ${printed}, or a file holding it`,
    file: `as \`actormq inspect\` prints it next to ${INSPECTOR_ENV}`,
    notSecret: () =>
      `give ${printed}, or a file holding it alone (the collector has a key pair of its own, new at every start of \`actormq inspect\`)`,
  });
}

/** Options shared by every client kind. */
export interface ClientInstanceOptions extends CurveLinkOptions {
  nameservers: string[];
  /** clients with different instance names get separate instances (and client ids). @default "DEFAULT" */
  instanceName?: string;
  /** @default 30000 */
  pollNameServerIntervalMs?: number;
  /** @default 30000 */
  heartbeatBrokerIntervalMs?: number;
  /** @default 3000 */
  requestTimeoutMs?: number;
}

/** The names {@link ClientInstanceOptions} may hold: every client's start takes them. */
export const CLIENT_INSTANCE_OPTION_NAMES = optionNamesOf<ClientInstanceOptions>()([
  "nameservers",
  "instanceName",
  "pollNameServerIntervalMs",
  "heartbeatBrokerIntervalMs",
  "requestTimeoutMs",
  ...CURVE_LINK_OPTION_NAMES,
]);

/**
 * Longest instance name, in UTF-8 bytes: a broadcasting consumer's offsets directory is named
 * `<host>@<instanceName>`, and with a host name of up to 64 bytes that stays within a file name's
 * 255 bytes (a longer one failed every offsets save with ENAMETOOLONG).
 */
export const INSTANCE_NAME_MAX_LENGTH = 128;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
const INSTANCE_NAME_REFUSED = /[@\u0000-\u001f\u007f]/;

/**
 * Refuses an instance name that is not a string of 1 to 128 bytes free of '@' and control
 * characters (ILLEGAL_ARGUMENT): it is the last part of the client id `host@pid@instanceName` that
 * brokers list the group's members by (split at '@'), is printed in log lines, and names
 * broadcasting's offsets directory. Spaces are allowed, as RocketMQ allows them.
 */
export function checkInstanceName(name: unknown): void {
  if (
    typeof name === "string" &&
    name.length > 0 &&
    Buffer.byteLength(name) <= INSTANCE_NAME_MAX_LENGTH &&
    !INSTANCE_NAME_REFUSED.test(name)
  )
    return;
  throw new MQError(
    "ILLEGAL_ARGUMENT",
    `instanceName ${shownValue(name)} is not valid: use 1-${INSTANCE_NAME_MAX_LENGTH} bytes (UTF-8) without '@' or control characters such as tabs and newlines (it ends the client id host@pid@instanceName).`,
  );
}

/** Contributes to each heartbeat. */
export type HeartbeatSource = () => { producerGroups?: string[]; consumerData?: ConsumerData[] };

/** Event a broker sent to this client's `client` actor (NOTIFY_CONSUMER_IDS_CHANGED, ...). */
export type ClientEvent = WireEvent & { reply?: Replier };

/** The `client` actor: forwards broker-initiated events to the instance's listeners. */
export const clientMachine = setup({
  types: {
    context: {} as { dispatch: (e: ClientEvent) => void },
    events: {} as ClientEvent,
    input: {} as { dispatch: (e: ClientEvent) => void },
  },
}).createMachine({
  id: "client",
  context: ({ input }) => ({ dispatch: input.dispatch }),
  on: {
    "*": { actions: ({ context, event }) => context.dispatch(event) },
  },
});

const registry = new Map<string, Promise<ClientInstance>>();

/** Clients share an instance when they name the same name servers and instance name, and use the same CURVE keys. */
function keyOf(nameservers: string[], instanceName: string, curve: CurveClientOptions | undefined): string {
  const base = `${[...nameservers].sort().join(",")}|${instanceName}`;
  return curve ? `${base}|curve ${curve.publicKey} ${JSON.stringify(curve.serverKeys)}` : base;
}

/** One process's shared client machinery for one (name servers, instance name). */
export class ClientInstance {
  readonly routes = new RouteCache();
  readonly clientId: string;
  private refs = 0;
  private nsIndex = Math.floor(Math.random() * 1024);
  /** name servers whose last ask got no answer */
  private readonly nsFailing = new Set<string>();
  /** wanted topics, counted: several consumers of one instance may want the same topic */
  private readonly interest = new Map<string, number>();
  private readonly heartbeatSources = new Set<HeartbeatSource>();
  private readonly routeListeners = new Set<(topic: string) => void>();
  private readonly brokerUsers = new Set<() => Iterable<string>>();
  private readonly clientEventListeners = new Set<(e: ClientEvent) => void>();
  private readonly inflightRoutes = new Map<string, Promise<TopicPublishInfo | undefined>>();
  /** broker addresses heartbeats no longer go to (see {@link ClientInstance.heartbeatGivenUp}) */
  private readonly heartbeatsStopped = new Set<string>();
  private routeTimer: NodeJS.Timeout | null = null;
  private missingRouteTimer: NodeJS.Timeout | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  /** heartbeatSoon's heartbeat not begun yet, and the one it sent that has not ended */
  private heartbeatQueued: Promise<void> | null = null;
  private heartbeatInFlight: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  /** its key in the registry of started instances */
  private registryKey = "";
  /** how long the last release lets queued one-way sends reach their sockets (see {@link release}) */
  private drainOnCloseMs = 0;

  private constructor(
    readonly node: ActorNode,
    readonly nameservers: string[],
    readonly instanceName: string,
    private readonly opts: Required<
      Pick<ClientInstanceOptions, "pollNameServerIntervalMs" | "heartbeatBrokerIntervalMs" | "requestTimeoutMs">
    >,
  ) {
    this.clientId = `${hostname()}@${process.pid}@${instanceName}`;
  }

  /**
   * The instance for these name servers and instance name, started on first use; every acquire
   * must be matched by one `release()`.
   */
  static async acquire(options: ClientInstanceOptions): Promise<ClientInstance> {
    // every Producer, PushConsumer, PullConsumer and Admin starts here
    checkClientLogLevel();
    const inspectorKey = inspectorKeyFromEnv();
    const nameservers = options?.nameservers;
    if (!Array.isArray(nameservers) || nameservers.length === 0 || nameservers.some((a) => typeof a !== "string" || a.length === 0)) {
      throw new MQError("ILLEGAL_ARGUMENT", "nameservers must be a non-empty array of name server addresses such as tcp://127.0.0.1:9876.");
    }
    for (const a of nameservers) checkTcpPort(a, "nameservers entry", true);
    // 0, NaN or a negative interval is setInterval's 1 ms: a heartbeat or route poll every millisecond
    for (const name of ["pollNameServerIntervalMs", "heartbeatBrokerIntervalMs", "requestTimeoutMs"] as const)
      if (options[name] !== undefined) checkRange(name, options[name], 1, MAX_TIMER_MS);
    if (options.instanceName !== undefined) checkInstanceName(options.instanceName);
    const instanceName = options.instanceName ?? DEFAULT_INSTANCE_NAME;
    const curve = resolveCurveLink(options);
    const key = keyOf(nameservers, instanceName, curve);
    for (;;) {
      const inst = await ClientInstance.shared(key, options, nameservers, instanceName, curve, inspectorKey);
      // the last holder may have released it while this acquire waited: that one is closing, start another
      if (inst.closing !== null) continue;
      inst.refs++;
      return inst;
    }
  }

  /** The registry's instance for `key`, started if there is none. */
  private static shared(
    key: string,
    options: ClientInstanceOptions,
    nameservers: string[],
    instanceName: string,
    curve: CurveClientOptions | undefined,
    /** the collector's public key, for a stream to ACTORMQ_INSPECTOR over CURVE */
    inspectorKey: string | undefined,
  ): Promise<ClientInstance> {
    let p = registry.get(key);
    if (!p) {
      p = (async () => {
        const node = await ActorNode.start({ listen: null, requestTimeoutMs: options.requestTimeoutMs, curveClient: curve });
        logActorFailures(node, instanceLog);
        const inst = new ClientInstance(node, [...nameservers], instanceName, {
          pollNameServerIntervalMs: options.pollNameServerIntervalMs ?? DEFAULT_POLL_NAMESERVER_INTERVAL_MS,
          heartbeatBrokerIntervalMs: options.heartbeatBrokerIntervalMs ?? DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS,
          requestTimeoutMs: options.requestTimeoutMs ?? 3000,
        });
        inst.registryKey = key;
        inst.start();
        const inspector = process.env[INSPECTOR_ENV];
        // inspection is a debugging aid: an unreachable or bad endpoint never stops the client (a
        // malformed key does, in acquire's checks); with the collector's key the stream is CURVE
        if (inspector)
          await node
            .publishInspection(inspector, inspectorKey === undefined ? {} : { curveServerKey: inspectorKey })
            .catch(() => undefined);
        return inst;
      })();
      registry.set(key, p);
      p.catch(() => registry.delete(key));
    }
    return p;
  }

  /**
   * Gives back one acquire; the last release closes the node and timers. `drainMs`: the releasing
   * client queued one-way sends it reported as handed over; the last release lets the node hand
   * what it still queues to its sockets, for at most the longest `drainMs` any release gave.
   */
  async release(drainMs = 0): Promise<void> {
    if (drainMs > this.drainOnCloseMs) this.drainOnCloseMs = drainMs;
    if (--this.refs > 0) return;
    registry.delete(this.registryKey);
    if (!this.closing) this.closing = this.doClose();
    await this.closing;
  }

  get closed(): boolean {
    return this.closing !== null;
  }

  private start(): void {
    this.node.spawn(CLIENT_ACTOR, clientMachine, {
      input: {
        dispatch: (e: ClientEvent) => {
          for (const l of this.clientEventListeners) l(e);
          e.reply?.ok({});
        },
      },
    });
    this.routeTimer = setInterval(() => void this.refreshAllRoutes(), this.opts.pollNameServerIntervalMs);
    this.routeTimer.unref();
    this.missingRouteTimer = setInterval(() => void this.refreshMissingRoutes(), MISSING_ROUTE_RETRY_MS);
    this.missingRouteTimer.unref();
    this.heartbeatTimer = setInterval(() => void this.sendHeartbeatToAllBrokers(), this.opts.heartbeatBrokerIntervalMs);
    this.heartbeatTimer.unref();
  }

  private async doClose(): Promise<void> {
    if (this.routeTimer) clearInterval(this.routeTimer);
    if (this.missingRouteTimer) clearInterval(this.missingRouteTimer);
    this.missingRouteTimer = null;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.routeTimer = this.heartbeatTimer = null;
    if (this.drainOnCloseMs > 0) await this.node.drainPeers(this.drainOnCloseMs);
    await this.node.close();
  }

  // -------------------------------------------------------------------------------------------
  // Name servers and routes

  /**
   * Asks the name servers, one at a time starting with the last one that answered, those whose
   * connection is refused or lost last; moves to the next on a transport failure (TIMEOUT,
   * SYSTEM_ERROR, SYSTEM_BUSY) and, while another is left to try, as soon as the connection to the
   * one asked is refused or lost. Answers such as TOPIC_NOT_EXIST are final, unless `notFoundAskOthers`:
   * then the others are asked too and the first that knows the topic answers; TOPIC_NOT_EXIST only
   * when none does. When none answers, the last failure's code with a message naming each name server.
   */
  async askNameserver<T = Record<string, unknown>>(
    event: WireEvent,
    timeoutMs = this.opts.requestTimeoutMs,
    notFoundAskOthers = false,
  ): Promise<T> {
    const n = this.nameservers.length;
    const lost = (idx: number) => (this.node.peerUnreachable(this.nameservers[idx]!) ? 1 : 0);
    const order = Array.from({ length: n }, (_, i) => (this.nsIndex + i) % n).sort((x, y) => lost(x) - lost(y));
    let last: MQError | undefined;
    let notFound: MQError | undefined;
    const failures: string[] = [];
    for (let i = 0; i < n; i++) {
      const idx = order[i]!;
      const addr = this.nameservers[idx]!;
      // confirming a TOPIC_NOT_EXIST (every first look-up of an auto-created topic does): a name
      // server whose last ask got no answer is not waited on again for it
      if (notFound && this.nsFailing.has(addr)) continue;
      try {
        const ask = this.node.ref(addr, NAMESRV_ACTOR).ask<T>(event, { timeoutMs });
        // the last one gets its whole timeout, unless another already answered TOPIC_NOT_EXIST
        const r = await (i < n - 1 || notFound ? unlessConnectionLost(this.node, addr, ask) : ask);
        this.nsIndex = idx;
        this.nsFailing.delete(addr);
        return r.fields;
      } catch (e) {
        if (notFoundAskOthers && isMQError(e, "TOPIC_NOT_EXIST") && !this.closing) {
          notFound ??= e;
          this.nsFailing.delete(addr);
          continue;
        }
        if (!isMQError(e, "TIMEOUT", "SYSTEM_ERROR", "SYSTEM_BUSY") || this.closing) throw e;
        last = e;
        this.nsFailing.add(addr);
        failures.push(`${addr}: ${e.message}`);
      }
    }
    // an answer, though not the one hoped for, beats no answer
    if (notFound) throw notFound;
    throw new MQError(
      last?.code ?? "NO_ROUTE",
      `No name server answered ${event.type} (${failures.join("; ")}); check that the name servers run at these addresses.`,
      { cause: last },
    );
  }

  /** The name servers whose last ask got no answer (in the order of the nameservers option). */
  nameserversNotAnswering(): string[] {
    return this.nameservers.filter((a) => this.nsFailing.has(a));
  }

  /**
   * Fetches a topic's route and caches it. An unknown topic falls back to the auto-create route
   * (TBW102) when `allowDefault` is set — a producer may send there and the broker creates the
   * topic. Returns undefined when neither exists; a real route already cached stays when the name
   * servers answer TOPIC_NOT_EXIST. Concurrent calls for a topic share one request.
   */
  updateRoute(topic: string, allowDefault = false): Promise<TopicPublishInfo | undefined> {
    const key = `${topic}\u0000${allowDefault}`;
    let p = this.inflightRoutes.get(key);
    if (!p) {
      p = this.fetchRoute(topic, allowDefault).finally(() => this.inflightRoutes.delete(key));
      this.inflightRoutes.set(key, p);
    }
    return p;
  }

  private async fetchRoute(topic: string, allowDefault: boolean): Promise<TopicPublishInfo | undefined> {
    let route: TopicRouteData;
    let provisional = false;
    // without a real route cached, one name server's TOPIC_NOT_EXIST is not final: it may have just
    // restarted, knowing no topic until each broker's next registration (up to 30 s), while another
    // name server knows the topic
    const askOthers = this.routes.route(topic) === undefined || this.routes.isProvisional(topic);
    try {
      route = await this.askNameserver<TopicRouteData>({ type: "GET_ROUTEINFO_BY_TOPIC", topic }, undefined, askOthers);
    } catch (e) {
      if (!isMQError(e, "TOPIC_NOT_EXIST")) throw e;
      // a real route once learned is kept, as RocketMQ's updateTopicRouteInfoFromNameServer keeps it: a
      // name server that just restarted knows no topic until each broker's next registration (up to 30 s)
      const known = this.routes.isProvisional(topic) ? undefined : this.routes.publishInfo(topic);
      if (known && (!allowDefault || known.queues.length > 0)) return known;
      if (!allowDefault) {
        if (this.routes.delete(topic)) this.routeChanged(topic);
        return undefined;
      }
      try {
        route = routeFromDefaultTopic(
          await this.askNameserver<TopicRouteData>({ type: "GET_ROUTEINFO_BY_TOPIC", topic: AUTO_CREATE_TOPIC_KEY_TOPIC }, undefined, true),
          DEFAULT_TOPIC_QUEUE_NUMS,
        );
        provisional = true;
      } catch (e2) {
        if (!isMQError(e2, "TOPIC_NOT_EXIST")) throw e2;
        if (known) return known;
        if (this.routes.delete(topic)) this.routeChanged(topic);
        return undefined;
      }
    }
    if (!Array.isArray(route?.queueDatas) || !Array.isArray(route?.brokerDatas)) {
      throw new MQError("MALFORMED", `The name server answered a malformed route for topic ${topic}.`);
    }
    // a name server names these brokers now: heartbeats go to them again
    if (this.heartbeatsStopped.size > 0)
      for (const bd of route.brokerDatas) for (const a of Object.values(bd?.brokerAddrs ?? {})) this.heartbeatsStopped.delete(a);
    if (this.routes.put(topic, route, provisional)) this.routeChanged(topic);
    return this.routes.publishInfo(topic);
  }

  /** Refreshes every cached or wanted topic's route (periodic; also callable). */
  async refreshAllRoutes(): Promise<void> {
    if (this.closing) return;
    const topics = new Set([...this.routes.topicNames(), ...this.interest.keys()]);
    await Promise.all([...topics].map((t) => this.updateRoute(t, this.routes.isProvisional(t)).catch(() => undefined)));
    const inUse = new Set<string>();
    for (const user of this.brokerUsers) for (const name of user()) inUse.add(name);
    this.routes.pruneBrokers(inUse);
  }

  /**
   * Keeps the addresses of the brokers `source` names (a consumer's held queues and those it is
   * letting go) when no route names them any more. Returns the function that removes it.
   */
  addBrokerUser(source: () => Iterable<string>): () => void {
    this.brokerUsers.add(source);
    return () => this.brokerUsers.delete(source);
  }

  /** Asks again for wanted topics that have no route yet (see {@link MISSING_ROUTE_RETRY_MS}). */
  private async refreshMissingRoutes(): Promise<void> {
    if (this.closing || this.interest.size === 0) return;
    const known = new Set(this.routes.topicNames());
    const missing = [...this.interest.keys()].filter((t) => !known.has(t));
    await Promise.all(missing.map((t) => this.updateRoute(t).catch(() => undefined)));
  }

  /** Keeps `topic`'s route refreshed. */
  addTopicInterest(topic: string): void {
    this.interest.set(topic, (this.interest.get(topic) ?? 0) + 1);
  }

  removeTopicInterest(topic: string): void {
    const n = (this.interest.get(topic) ?? 0) - 1;
    if (n > 0) this.interest.set(topic, n);
    else this.interest.delete(topic);
  }

  /** Hears topics whose route changed. Returns the unsubscribe function. */
  onRouteChange(listener: (topic: string) => void): () => void {
    this.routeListeners.add(listener);
    return () => this.routeListeners.delete(listener);
  }

  private routeChanged(topic: string): void {
    for (const l of this.routeListeners) l(topic);
  }

  /** Cluster info from the name servers. */
  clusterInfo(): Promise<ClusterInfo> {
    return this.askNameserver<ClusterInfo>({ type: "GET_BROKER_CLUSTER_INFO" });
  }

  // -------------------------------------------------------------------------------------------
  // Brokers

  /** A handle to an actor (default `broker`) on a broker name's master; NO_ROUTE when no route names it. */
  brokerRef(brokerName: string, actor: string = BrokerActor.BROKER): Ref {
    const addr = this.routes.masterAddress(brokerName);
    if (!addr)
      throw new MQError("NO_ROUTE", `No address known for broker ${brokerName}: its route is gone; refresh routes or check the broker.`);
    return this.node.ref(addr, actor);
  }

  /** True while the connection to a broker name's master is refused or lost (see {@link ActorNode.peerUnreachable}). */
  brokerUnreachable(brokerName: string): boolean {
    const addr = this.routes.masterAddress(brokerName);
    return addr !== undefined && this.node.peerUnreachable(addr);
  }

  /**
   * `ask` to a broker name's master, or a TIMEOUT once its connection fails again after `since`
   * ({@link unlessConnectionLost}): for a broker whose link reads lost, which may be gone or may
   * have restarted and wait only for ZeroMQ's next reconnect (at most a second away).
   */
  unlessBrokerRefused<R>(brokerName: string, ask: Promise<R>, since: number): Promise<R> {
    const addr = this.routes.masterAddress(brokerName);
    return addr === undefined ? ask : unlessConnectionLost(this.node, addr, ask, since);
  }

  /** A handle to an actor at a broker address. */
  refAt(address: string, actor: string = BrokerActor.BROKER): Ref {
    return this.node.ref(address, actor);
  }

  // -------------------------------------------------------------------------------------------
  // Heartbeats and broker-initiated events

  addHeartbeatSource(source: HeartbeatSource): () => void {
    this.heartbeatSources.add(source);
    return () => this.heartbeatSources.delete(source);
  }

  /**
   * Sends HEART_BEAT to every known master when some consumer contributes data; failures are ignored
   * (next period retries). Skips the brokers {@link ClientInstance.heartbeatGivenUp} gives up on;
   * tests pass a later `now` ({@link monotonicNow} ms).
   */
  async sendHeartbeatToAllBrokers(now = monotonicNow()): Promise<void> {
    if (this.closing) return;
    const hb: HeartbeatRequest = {
      clientID: this.clientId,
      producerDataSet: [],
      consumerDataSet: [],
      clientAddr: bornHostOfThisProcess(),
      language: CLIENT_LANGUAGE,
      version: CLIENT_VERSION,
    };
    for (const s of this.heartbeatSources) {
      const d = s();
      for (const g of d.producerGroups ?? []) hb.producerDataSet.push({ groupName: g });
      hb.consumerDataSet.push(...(d.consumerData ?? []));
    }
    if (hb.consumerDataSet.length === 0) return;
    // consumers heartbeat to slaves too, so a slave serving while its master is down knows the group (RocketMQ does the same)
    const inUse = new Set<string>();
    for (const user of this.brokerUsers) for (const name of user()) inUse.add(name);
    const masters: string[] = [];
    const known = new Set<string>();
    for (const [name, addrs] of this.routes.brokers())
      for (const a of Object.values(addrs)) {
        if (!a) continue;
        known.add(a);
        if (inUse.has(name) || !this.heartbeatGivenUp(a, now)) masters.push(a);
      }
    for (const a of this.heartbeatsStopped) if (!known.has(a)) this.heartbeatsStopped.delete(a);
    await Promise.all(
      // ref() throws at once for an address it cannot connect to (a route naming a bad port): that
      // broker is skipped like an unreachable one, the others still get the heartbeat. One whose
      // connection is lost is waited on until its next reconnect fails (at most a second away), not
      // for the whole timeout: a rebalance (and a closing consumer) waits for this heartbeat
      masters.map((addr) =>
        askUnlessConnectionLost(this.node, addr, BrokerActor.CONSUMERS, { type: "HEART_BEAT", ...hb }, {}, monotonicNow()).catch(
          () => undefined,
        ),
      ),
    );
  }

  /**
   * True when heartbeats stop going to `address`: unreachable for {@link PEER_EXPIRY_MS} (the caller
   * keeps them for brokers a consumer holds queues on). A topic's route is kept when the name
   * servers stop knowing the topic, as RocketMQ keeps it, so its brokers stay in the address book;
   * heartbeats to a dead one would keep its link, a socket, 3 fds and a reconnect every second, in
   * use for good, where unused the node closes it after PEER_EXPIRY_MS. Checked at each heartbeat
   * (every 30 s) rather than by dropping the kept route, which producers and consumers still read.
   * They resume once the link connects again, or once a name server's route names the address (a
   * broker back there after its link was closed).
   */
  private heartbeatGivenUp(address: string, now: number): boolean {
    const lostAt = this.node.peerLostAt(address);
    if (this.node.peerUnreachable(address)) {
      if (now - lostAt < PEER_EXPIRY_MS && !this.heartbeatsStopped.has(address)) return false;
      this.heartbeatsStopped.add(address);
      return true;
    }
    // a link lost once and connected again: a broker back at its address (0: none, or a new one)
    if (lostAt !== 0) this.heartbeatsStopped.delete(address);
    return this.heartbeatsStopped.has(address);
  }

  /**
   * A heartbeat to every broker that begins after this call, shared by every call until it begins:
   * the one after the heartbeat in flight, on a later tick. Routes of many topics change together
   * (a consumer's start, a broker joining or leaving, a producer sending to many new topics), and a
   * heartbeat carries every subscription: one each would be O(topics²) bytes for client and broker.
   */
  heartbeatSoon(): Promise<void> {
    if (this.heartbeatQueued) return this.heartbeatQueued;
    const queued = (async () => {
      await this.heartbeatInFlight;
      await new Promise<void>((r) => setImmediate(r));
      // a call from here on may follow a route this heartbeat does not include: it gets the next one
      this.heartbeatQueued = null;
      const run = this.sendHeartbeatToAllBrokers().catch(() => undefined);
      this.heartbeatInFlight = run;
      await run;
      if (this.heartbeatInFlight === run) this.heartbeatInFlight = null;
    })();
    this.heartbeatQueued = queued;
    return queued;
  }

  onClientEvent(listener: (e: ClientEvent) => void): () => void {
    this.clientEventListeners.add(listener);
    return () => this.clientEventListeners.delete(listener);
  }
}
