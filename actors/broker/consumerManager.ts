/**
 * Consumer group membership on the broker (RocketMQ's `ConsumerManager`, `ConsumerGroupInfo` and
 * `ClientHousekeepingService`): HEART_BEAT registers a client id with its groups, models and
 * subscriptions; members silent for 120 s are dropped by a scan every 10 s; a change of membership
 * or subscriptions sends NOTIFY_CONSUMER_IDS_CHANGED one-way to every member of the group (not
 * for broadcasting groups) so they rebalance at once.
 *
 * One difference from RocketMQ: a broker here has no connection-close event, so the expiry scan
 * (and UNREGISTER_CLIENT) is where a member leaves; both notify the survivors, which RocketMQ does
 * on its connection-close path, so a killed consumer's queues move within the scan period plus
 * the expiry rather than at the next 20 s rebalance after it.
 */
import { fromCallback, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import {
  CLIENT_ACTOR,
  CLUSTERING_GROUP_MAX_LENGTH,
  type ConsumeFromWhere,
  type ConsumerConnectionEntry,
  type ConsumerConnectionReply,
  type ConsumerData,
  type ConsumeType,
  checkRetryTopicFits,
  type GetConsumerConnectionListRequest,
  type GetConsumerListRequest,
  type HeartbeatRequest,
  type MessageModel,
  MQError,
  PERM_READ_WRITE,
  RETRY_GROUP_TOPIC_PREFIX,
  type SubscriptionData,
  shownValue,
  type UnregisterClientRequest,
} from "../../transport/protocol.ts";
import type { Origin, Ref, Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { checkGroupName } from "./subscriptionGroupManager.ts";

/** A consumer silent this long is removed (`channelExpiredTimeout`). */
export const DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS = 120_000;
/** How often silent consumers are looked for (`ClientHousekeepingService`). */
export const DEFAULT_CLIENT_SCAN_INTERVAL_MS = 10_000;

/** Broker options this part reads (passed through `Broker.start` options). */
export interface ConsumerTuning {
  /** @default 120000 */
  channelExpiredTimeoutMs?: number;
  /** @default 10000 */
  clientScanIntervalMs?: number;
}

/** What a heartbeat says of its client (RocketMQ's `ClientChannelInfo`); absent from older clients' heartbeats. */
export interface ClientInfo {
  clientAddr?: string;
  language?: string;
  version?: string;
}

/** One member of a group. */
export interface ClientChannel extends ClientInfo {
  clientId: string;
  /** monotonic ms of its last heartbeat (expiry) */
  lastUpdateTimestamp: number;
  /** wall-clock ms of its last heartbeat (shown by GET_CONSUMER_CONNECTION_LIST) */
  lastHeartbeatAt: number;
  /** the client's `client` actor, reached over the connection its heartbeat came in on */
  notifyRef?: Ref;
}

/** One consumer group's members and subscriptions (`ConsumerGroupInfo`). */
export interface ConsumerGroupInfo {
  groupName: string;
  consumeType: ConsumeType;
  messageModel: MessageModel;
  consumeFromWhere: ConsumeFromWhere;
  clients: Map<string, ClientChannel>;
  subscriptions: Map<string, SubscriptionData>;
}

function validSubscription(s: unknown): s is SubscriptionData {
  if (!s || typeof s !== "object") return false;
  const d = s as SubscriptionData;
  return typeof d.topic === "string" && typeof d.subString === "string" && Array.isArray(d.codeSet) && Array.isArray(d.tagsSet);
}

/** The broker's consumer table. */
export class ConsumerTable {
  private readonly groups = new Map<string, ConsumerGroupInfo>();
  private readonly leftListeners = new Set<(group: string, clientId: string) => void>();

  /**
   * Hears every member that leaves a group (UNREGISTER_CLIENT or heartbeat expiry); the offsets
   * side uses it to hand the member's queues over at once. Returns the unsubscribe function.
   */
  onMemberLeft(listener: (group: string, clientId: string) => void): () => void {
    this.leftListeners.add(listener);
    return () => this.leftListeners.delete(listener);
  }

  private memberLeft(group: string, clientId: string): void {
    for (const l of this.leftListeners) l(group, clientId);
  }

  group(name: string): ConsumerGroupInfo | undefined {
    return this.groups.get(name);
  }

  groupNames(): string[] {
    return [...this.groups.keys()];
  }

  /**
   * Registers (or refreshes) a client in a group and replaces the group's subscriptions with the
   * heartbeat's. Returns true when membership or subscriptions changed.
   */
  register(clientId: string, data: ConsumerData, notifyRef: Ref | undefined, now: number, info: ClientInfo = {}): boolean {
    let g = this.groups.get(data.groupName);
    if (!g) {
      g = {
        groupName: data.groupName,
        consumeType: data.consumeType,
        messageModel: data.messageModel,
        consumeFromWhere: data.consumeFromWhere,
        clients: new Map(),
        subscriptions: new Map(),
      };
      this.groups.set(data.groupName, g);
    }
    g.consumeType = data.consumeType ?? g.consumeType;
    g.messageModel = data.messageModel ?? g.messageModel;
    g.consumeFromWhere = data.consumeFromWhere ?? g.consumeFromWhere;
    let changed = false;
    const ch = g.clients.get(clientId);
    const wallNow = Date.now();
    if (!ch) {
      g.clients.set(clientId, {
        clientId,
        lastUpdateTimestamp: now,
        lastHeartbeatAt: wallNow,
        ...info,
        ...(notifyRef ? { notifyRef } : {}),
      });
      changed = true;
    } else {
      ch.lastUpdateTimestamp = now;
      ch.lastHeartbeatAt = wallNow;
      Object.assign(ch, info);
      if (notifyRef) ch.notifyRef = notifyRef;
    }
    const subs = Array.isArray(data.subscriptionDataSet) ? data.subscriptionDataSet.filter(validSubscription) : [];
    const seen = new Set<string>();
    for (const s of subs) {
      seen.add(s.topic);
      const old = g.subscriptions.get(s.topic);
      if (!old) {
        g.subscriptions.set(s.topic, s);
        changed = true;
      } else if ((s.subVersion ?? 0) > (old.subVersion ?? 0)) {
        if (old.subString !== s.subString || old.expressionType !== s.expressionType) changed = true;
        g.subscriptions.set(s.topic, s);
      }
    }
    for (const topic of [...g.subscriptions.keys()]) {
      if (!seen.has(topic)) {
        g.subscriptions.delete(topic);
        changed = true;
      }
    }
    return changed;
  }

  /** Removes a client from one group (or from all); returns the groups it left. */
  unregister(clientId: string, groupName?: string): ConsumerGroupInfo[] {
    const left: ConsumerGroupInfo[] = [];
    const names = groupName !== undefined ? [groupName] : [...this.groups.keys()];
    for (const name of names) {
      const g = this.groups.get(name);
      if (g?.clients.delete(clientId)) {
        left.push(g);
        if (g.clients.size === 0) this.groups.delete(name);
        this.memberLeft(name, clientId);
      }
    }
    return left;
  }

  /** Removes clients silent for more than `expiryMs`; returns the groups that lost members. */
  scanExpired(now: number, expiryMs: number): ConsumerGroupInfo[] {
    const changed: ConsumerGroupInfo[] = [];
    const gone: string[] = [];
    for (const [name, g] of this.groups) {
      let lost = false;
      for (const [id, ch] of g.clients) {
        if (now - ch.lastUpdateTimestamp > expiryMs) {
          g.clients.delete(id);
          lost = true;
          gone.push(id);
        }
      }
      if (lost) changed.push(g);
      if (g.clients.size === 0) this.groups.delete(name);
      for (const id of gone.splice(0)) this.memberLeft(name, id);
    }
    return changed;
  }
}

const tables = new WeakMap<BrokerContext, ConsumerTable>();

/** The consumer table of a broker, shared by the `consumers` actor and the pull processor. */
export function consumerTableOf(ctx: BrokerContext): ConsumerTable {
  let t = tables.get(ctx);
  if (!t) tables.set(ctx, (t = new ConsumerTable()));
  return t;
}

/**
 * Whether the latest heartbeat of the group's members said BROADCASTING: its online members', else
 * the model the group's config recorded (kept when the last member left, and across restarts).
 * Such a group's offsets are kept by each member, not by the broker.
 */
export function isBroadcastingGroup(ctx: BrokerContext, group: string): boolean {
  return (consumerTableOf(ctx).group(group)?.messageModel ?? ctx.groups.get(group)?.messageModel) === "BROADCASTING";
}

/** Sends NOTIFY_CONSUMER_IDS_CHANGED to every member that can be reached (clustering groups with notify enabled). */
export function notifyConsumerIdsChanged(ctx: BrokerContext, g: ConsumerGroupInfo): number {
  if (g.messageModel === "BROADCASTING") return 0;
  if (ctx.groups.get(g.groupName)?.notifyConsumerIdsChangedEnable === false) return 0;
  let sent = 0;
  for (const ch of g.clients.values()) {
    if (!ch.notifyRef) continue;
    try {
      ch.notifyRef.send({ type: "NOTIFY_CONSUMER_IDS_CHANGED", consumerGroup: g.groupName });
      sent++;
    } catch (e) {
      ctx.logger.debug({ err: (e as Error).message, clientId: ch.clientId }, "notify consumer ids changed failed");
    }
  }
  return sent;
}

// ---------------------------------------------------------------------------------------------
// The `consumers` actor

type Asked = { reply?: Replier; origin?: Origin };

export type ConsumersEvent =
  | ({ type: "HEART_BEAT" } & HeartbeatRequest & Asked)
  | ({ type: "UNREGISTER_CLIENT" } & UnregisterClientRequest & Asked)
  | ({ type: "GET_CONSUMER_LIST_BY_GROUP" } & GetConsumerListRequest & Asked)
  | ({ type: "GET_CONSUMER_CONNECTION_LIST" } & GetConsumerConnectionListRequest & Asked)
  | { type: "SCAN" }
  | ({ type: "SHUTDOWN" } & Asked)
  | ({ type: string } & Asked);

export interface ConsumersContext {
  ctx: BrokerContext;
  table: ConsumerTable;
  expiryMs: number;
}

export interface ConsumersInput {
  ctx: BrokerContext;
}

/** A heartbeat's client fields that are strings of a sane length; the others are left out (older clients send none). */
export function clientInfoOf(e: HeartbeatRequest): ClientInfo {
  const info: ClientInfo = {};
  for (const k of ["clientAddr", "language", "version"] as const) {
    const v = e[k];
    if (typeof v === "string" && v.length > 0 && v.length <= 256) info[k] = v;
  }
  return info;
}

/**
 * HEART_BEAT: registers the client in each of its groups. A group the broker refuses (a name it
 * cannot take, a clustering group too long for its retry topic) is left out and the others are
 * registered, as RocketMQ's ClientManageProcessor registers each group of a heartbeat on its own:
 * one bad group of a client instance must not take the groups of its other consumers off this
 * broker. The refusal is then the answer, naming the groups left out.
 */
function heartbeat(c: ConsumersContext, e: HeartbeatRequest & Asked): object {
  if (typeof e.clientID !== "string" || e.clientID.length === 0) throw new MQError("INVALID_PARAMETER", "HEART_BEAT needs a clientID.");
  const data = Array.isArray(e.consumerDataSet) ? e.consumerDataSet : [];
  const info = clientInfoOf(e);
  const notifyRef = e.origin?.ref(CLIENT_ACTOR);
  // monotonic: a wall clock step forward would expire every live member at the next scan
  const now = monotonicNow();
  let refusal: MQError | undefined;
  const refused: string[] = [];
  for (const cd of data) {
    if (!cd || typeof cd.groupName !== "string" || cd.groupName.length === 0) continue;
    try {
      registerGroup(c, e.clientID, cd, notifyRef, now, info);
    } catch (err) {
      if (!(err instanceof MQError)) throw err;
      refusal ??= err;
      refused.push(cd.groupName);
    }
  }
  if (refusal) {
    const shown = refused.slice(0, 5).map((g) => JSON.stringify(g.length > 40 ? `${g.slice(0, 40)}...` : g));
    throw new MQError(
      refusal.code,
      `${refusal.message} (${refused.length} group${refused.length === 1 ? "" : "s"} of this heartbeat refused: ${shown.join(", ")}` +
        `${refused.length > shown.length ? ", ..." : ""}; its other groups were registered.)`,
    );
  }
  return {};
}

/** The values a heartbeat's group may give (RocketMQ's enums: its broker cannot even read another). */
const CONSUMER_DATA_ENUMS = {
  messageModel: ["CLUSTERING", "BROADCASTING"],
  consumeType: ["CONSUME_PASSIVELY", "CONSUME_ACTIVELY"],
  consumeFromWhere: ["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"],
} as const;

/**
 * Refuses a group whose model, consume type or start is given but unknown (INVALID_PARAMETER): it
 * would be listed as such by the connection list and taken for a clustering group. One left out
 * keeps the group's.
 */
function checkConsumerData(cd: ConsumerData): void {
  for (const [field, allowed] of Object.entries(CONSUMER_DATA_ENUMS)) {
    const v = (cd as unknown as Record<string, unknown>)[field];
    if (v !== undefined && !(allowed as readonly unknown[]).includes(v))
      throw new MQError(
        "INVALID_PARAMETER",
        `Consumer group ${JSON.stringify(cd.groupName)} sent ${field} ${shownValue(v)}: use ${allowed.join(" or ")}.`,
      );
  }
}

/** Registers one group of a heartbeat; throws (registering nothing of it) when the broker refuses the group. */
function registerGroup(
  c: ConsumersContext,
  clientId: string,
  cd: ConsumerData,
  notifyRef: Ref | undefined,
  now: number,
  info: ClientInfo,
): void {
  const { ctx, table } = c;
  // whether or not the broker creates the group's config: an invalid name is never registered
  checkGroupName(cd.groupName);
  checkConsumerData(cd);
  // before anything registers: a clustering group's retry topic must be a valid topic name
  if (cd.messageModel !== "BROADCASTING") checkRetryTopicFits(cd.groupName);
  const cfg = ctx.groups.findOrAutoCreate(cd.groupName);
  if (cfg) ctx.groups.noteMessageModel(cd.groupName, cd.messageModel);
  // a broadcasting group too long for one does not use its retry topic
  if (cfg && cd.groupName.length <= CLUSTERING_GROUP_MAX_LENGTH)
    ctx.topics.createIfAbsent(RETRY_GROUP_TOPIC_PREFIX + cd.groupName, Math.max(1, cfg.retryQueueNums), PERM_READ_WRITE);
  const joined = !table.group(cd.groupName)?.clients.has(clientId);
  if (table.register(clientId, cd, notifyRef, now, info)) {
    const members = table.group(cd.groupName)?.clients.size;
    ctx.logger.info({ group: cd.groupName, clientId, members }, joined ? "consumer joined group" : "consumer group subscriptions changed");
    notifyConsumerIdsChanged(ctx, table.group(cd.groupName)!);
  }
}

function unregisterClient(c: ConsumersContext, e: UnregisterClientRequest): object {
  if (typeof e.clientID !== "string" || e.clientID.length === 0)
    throw new MQError("INVALID_PARAMETER", "UNREGISTER_CLIENT needs a clientID.");
  if (e.consumerGroup === undefined && e.producerGroup !== undefined) return {};
  for (const g of c.table.unregister(e.clientID, e.consumerGroup)) {
    c.ctx.logger.info({ group: g.groupName, clientId: e.clientID, members: g.clients.size }, "consumer left group");
    notifyConsumerIdsChanged(c.ctx, g);
  }
  return {};
}

function consumerList(c: ConsumersContext, e: GetConsumerListRequest): object {
  const g = typeof e.consumerGroup === "string" ? c.table.group(e.consumerGroup) : undefined;
  if (!g || g.clients.size === 0) {
    throw new MQError(
      "SYSTEM_ERROR",
      `no consumer for this group: ${String(e.consumerGroup)} has no live member on broker ${c.ctx.config.brokerName}.`,
    );
  }
  return { consumerIdList: [...g.clients.keys()] };
}

/**
 * GET_CONSUMER_CONNECTION_LIST (`mqadmin consumerConnection`): the group's live members with what
 * their heartbeats said, and the group's consume type, model, where it starts and subscriptions.
 * CONSUMER_NOT_ONLINE when no member of it is live here, as RocketMQ answers.
 */
export function consumerConnections(ctx: BrokerContext, group: unknown): ConsumerConnectionReply {
  if (typeof group !== "string" || group.length === 0)
    throw new MQError("INVALID_PARAMETER", "GET_CONSUMER_CONNECTION_LIST needs a consumerGroup.");
  const g = consumerTableOf(ctx).group(group);
  if (!g || g.clients.size === 0)
    throw new MQError(
      "CONSUMER_NOT_ONLINE",
      `the consumer group[${group}] not online: no member of it has a live heartbeat on broker ${ctx.config.brokerName}; start a consumer of the group (or check its name).`,
    );
  const connectionSet: ConsumerConnectionEntry[] = [...g.clients.values()]
    .map((ch) => ({
      clientId: ch.clientId,
      clientAddr: ch.clientAddr ?? "",
      language: ch.language ?? "",
      version: ch.version ?? "",
      lastUpdateTimestamp: ch.lastHeartbeatAt,
    }))
    .sort((a, b) => (a.clientId < b.clientId ? -1 : a.clientId > b.clientId ? 1 : 0));
  return {
    connectionSet,
    subscriptionTable: Object.fromEntries(g.subscriptions),
    consumeType: g.consumeType,
    messageModel: g.messageModel,
    consumeFromWhere: g.consumeFromWhere,
  };
}

/** Sends SCAN every interval while the actor runs. */
const scanTicker = fromCallback<{ type: string }, { intervalMs: number }>(({ sendBack, input }) => {
  const t = setInterval(() => sendBack({ type: "SCAN" }), input.intervalMs);
  t.unref?.();
  return () => clearInterval(t);
});

/** The `consumers` actor. */
export const consumersMachine = setup({
  types: {
    context: {} as ConsumersContext,
    events: {} as ConsumersEvent,
    input: {} as ConsumersInput,
  },
  actors: { scanTicker },
  actions: {
    answer: ({ context, event }) => {
      const reply = (event as Asked).reply;
      try {
        let fields: object;
        switch (event.type) {
          case "HEART_BEAT":
            fields = heartbeat(context, event as HeartbeatRequest & Asked);
            break;
          case "UNREGISTER_CLIENT":
            fields = unregisterClient(context, event as UnregisterClientRequest);
            break;
          case "GET_CONSUMER_LIST_BY_GROUP":
            fields = consumerList(context, event as GetConsumerListRequest);
            break;
          case "GET_CONSUMER_CONNECTION_LIST":
            fields = consumerConnections(context.ctx, (event as GetConsumerConnectionListRequest).consumerGroup);
            break;
          default:
            throw new MQError(
              "REQUEST_CODE_NOT_SUPPORTED",
              `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "consumers".`,
            );
        }
        reply?.ok(fields);
      } catch (e) {
        reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to handle ${event.type}: ${String(e)}`));
      }
    },
    scan: ({ context }) => {
      for (const g of context.table.scanExpired(monotonicNow(), context.expiryMs)) {
        context.ctx.logger.info({ group: g.groupName, members: g.clients.size }, "consumer left group: heartbeat timed out");
        notifyConsumerIdsChanged(context.ctx, g);
      }
    },
  },
}).createMachine({
  id: "consumers",
  context: ({ input }) => ({
    ctx: input.ctx,
    table: consumerTableOf(input.ctx),
    expiryMs: (input.ctx.config as ConsumerTuning).channelExpiredTimeoutMs ?? DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS,
  }),
  initial: "serving",
  states: {
    serving: {
      invoke: {
        src: "scanTicker",
        input: ({ context }) => ({
          intervalMs: (context.ctx.config as ConsumerTuning).clientScanIntervalMs ?? DEFAULT_CLIENT_SCAN_INTERVAL_MS,
        }),
      },
      on: {
        SCAN: { actions: "scan" },
        "*": { actions: "answer" },
      },
    },
  },
});
