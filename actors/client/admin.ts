/**
 * `Admin` (RocketMQ's `MQAdminExt`, the parts about topics and routes): create or update topics
 * on chosen brokers or every master, read routes, cluster info and topic lists. Consumption
 * queries (consumerProgress, resetOffsetByTimestamp, ...) are added next to these.
 */

import { monotonicNow } from "../../transport/clock.ts";
import { decodeRecords, isMessageIdText, type MessageExt, parseOffsetMsgId } from "../../transport/messageRecord.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import {
  BrokerActor,
  type BrokerConfigReply,
  type BrokerData,
  type BrokerRuntimeInfo,
  type ClusterInfo,
  type ConsumeFromWhere,
  type ConsumerConnectionEntry,
  type ConsumerConnectionReply,
  type ConsumeStatsReply,
  type ConsumeType,
  ConsumptionActorFor,
  checkBoolean,
  checkNotSystemTopic,
  checkRange,
  checkTopic,
  compareMessageQueue,
  DEFAULT_QUERY_MAX_NUM,
  type DeleteSubscriptionGroupReply,
  type DeleteSubscriptionGroupRequest,
  type DeleteTopicReply,
  type DeleteTopicRequest,
  DLQ_GROUP_TOPIC_PREFIX,
  type GetConsumerConnectionListRequest,
  type GetConsumeStatsRequest,
  isGroupName,
  isMQError,
  MASTER_ID,
  MAX_PERM,
  MAX_QUEUE_NUMS,
  MessageConst,
  type MessageModel,
  MQError,
  NAMESRV_ACTOR,
  QUERY_MESSAGE_ACTOR,
  type QueryMessageRequest,
  type QueueConsumeStats,
  type QueueTopicStats,
  RETRY_GROUP_TOPIC_PREFIX,
  type ResetOffsetRequest,
  SUBSCRIPTION_GROUP_BOOLEAN_FIELDS,
  SUBSCRIPTION_GROUP_INT_RANGES,
  type SubscriptionData,
  type SubscriptionGroupConfig,
  shownValue,
  TOPIC_MAX_LENGTH,
  type TopicConfig,
  type TopicRouteData,
  type TopicStatsReply,
  type UpdateBrokerConfigRequest,
  type UpdateSubscriptionGroupRequest,
  type UpdateTopicRequest,
  type ViewMessageRequest,
} from "../../transport/protocol.ts";
import { type Reply, unlessConnectionLost, type WireEvent } from "../runtime/index.ts";
import { CLIENT_INSTANCE_OPTION_NAMES, ClientInstance, type ClientInstanceOptions } from "./clientInstance.ts";

/** One queue's line of `Admin.consumerProgress`. */
export interface ConsumerProgressEntry {
  topic: string;
  brokerName: string;
  queueId: number;
  /** the queue's max offset on the broker */
  brokerOffset: number;
  /** the group's committed offset (0 when none, as RocketMQ: the broker clamps it) */
  consumerOffset: number;
  /** brokerOffset − consumerOffset */
  lag: number;
}

/** One queue's line of `Admin.examineTopicStats` (RocketMQ's `TopicOffset` with its queue), as the broker answers it. */
export type TopicStatsEntry = QueueTopicStats;

/** A queue of a consume-stats answer as a progress entry; lag = max offset − committed offset (none committed: all of it). */
export function progressEntry(q: QueueConsumeStats): ConsumerProgressEntry {
  const { topic, brokerName, queueId, brokerOffset, consumerOffset } = q;
  return { topic, brokerName, queueId, brokerOffset, consumerOffset, lag: Math.max(0, brokerOffset - Math.max(0, consumerOffset)) };
}

/**
 * `Admin.brokerStatus`: a broker's runtime figures as it answers GET_BROKER_RUNTIME_INFO (RocketMQ's
 * `mqadmin brokerStatus` table, its key names where it has one).
 */
export type BrokerStatus = BrokerRuntimeInfo;

/** A broker address as `brokerStatus` takes it: tcp://host:port, or host:port. */
const BROKER_ADDRESS = /^(?:tcp:\/\/)?(\[[^\]\s]+\]|[^\s:/[\]]+):(\d{1,5})$/;

/** A member of a group (`Admin.examineConsumerConnectionInfo`): what its heartbeats said, and the brokers that have it. */
export interface ConsumerConnectionInfo extends ConsumerConnectionEntry {
  /** names of the brokers it has a live heartbeat on */
  brokers: string[];
}

/** `Admin.examineConsumerConnectionInfo`: a group's live members, how it consumes and what it subscribes to (RocketMQ's `ConsumerConnection`). */
export interface ConsumerConnectionSummary {
  group: string;
  connections: ConsumerConnectionInfo[];
  consumeType: ConsumeType;
  messageModel: MessageModel;
  consumeFromWhere: ConsumeFromWhere;
  /** topic to the group's subscription */
  subscriptions: Record<string, SubscriptionData>;
}

/** A group of `Admin.groupList`: its config on each broker that knows it. */
export interface GroupListEntry {
  group: string;
  /** broker name to the group's config there */
  configs: Record<string, SubscriptionGroupConfig>;
}

/**
 * Options of `Admin.updateSubscriptionGroup`: the fields to change (others keep their value), and
 * where. A whole config read back (`groupList`, an update's result) may be given: its `messageModel`
 * is not sent (the broker records it from the members' heartbeats).
 */
export type UpdateSubscriptionGroupOptions = Partial<SubscriptionGroupConfig> & {
  groupName: string;
  /** broker names; default every live master */
  brokers?: string[];
};

/** Fields `Admin.updateSubscriptionGroup` passes on (the broker records `messageModel` itself). */
const SUBSCRIPTION_GROUP_FIELDS = [
  "consumeEnable",
  "consumeFromMinEnable",
  "consumeBroadcastEnable",
  "consumeMessageOrderly",
  "retryQueueNums",
  "retryMaxTimes",
  "brokerId",
  "whichBrokerWhenConsumeSlowly",
  "notifyConsumerIdsChangedEnable",
  "consumeTimeoutMinute",
] as const;

/**
 * Refuses a value the brokers would refuse (their checkSubscriptionGroupConfig's limits) with
 * ILLEGAL_ARGUMENT naming the field, before any broker is asked: refused by each broker it read
 * as their INVALID_PARAMETER after a round trip, and with none up as a broker or network failure.
 */
function checkSubscriptionGroupValues(opts: UpdateSubscriptionGroupOptions): void {
  for (const k of SUBSCRIPTION_GROUP_BOOLEAN_FIELDS) checkBoolean(k, opts[k]);
  for (const [k, min, max] of SUBSCRIPTION_GROUP_INT_RANGES) if (opts[k] !== undefined) checkRange(k, opts[k], min, max);
}

/** The names {@link UpdateSubscriptionGroupOptions} may hold; updateSubscriptionGroup refuses any other. */
export const UPDATE_SUBSCRIPTION_GROUP_OPTION_NAMES = optionNamesOf<UpdateSubscriptionGroupOptions>()([
  "groupName",
  "brokers",
  "messageModel",
  ...SUBSCRIPTION_GROUP_FIELDS,
]);

/** A broker name or address as given, trimmed; ILLEGAL_ARGUMENT when it is not a non-blank string. */
function checkBrokerArg(broker: unknown, what: string): string {
  if (typeof broker !== "string" || broker.trim().length === 0)
    throw new MQError("ILLEGAL_ARGUMENT", `${what} needs a broker name (such as broker-a) or address (tcp://host:port).`);
  return broker.trim();
}

/** Queues per broker when `Admin.createTopic` is given none (RocketMQ's `defaultTopicQueueNums` for admin creation). */
export const DEFAULT_ADMIN_QUEUE_NUMS = 8;
/** Broker-side topic creation waits for a re-registration, so it may take longer than a plain request. */
export const ADMIN_REQUEST_TIMEOUT_MS = 10_000;

export type AdminOptions = ClientInstanceOptions;

/** The names {@link AdminOptions} may hold; Admin.start refuses any other. */
export const ADMIN_OPTION_NAMES: readonly (keyof AdminOptions)[] = CLIENT_INSTANCE_OPTION_NAMES;

/** Options of `Admin.createTopic`. */
export interface AdminCreateTopicOptions {
  topic: string;
  /** broker names; default every live master of every cluster (a name with only slaves registered is skipped) */
  brokers?: string[];
  /**
   * Not given: an existing topic keeps its read queue count on each broker (shrink writeQueueNums
   * first, then readQueueNums once consumers drained the rest); a new one gets writeQueueNums,
   * else 8.
   */
  readQueueNums?: number;
  /** Not given: an existing topic keeps its write queue count; a new one gets readQueueNums, else 8. */
  writeQueueNums?: number;
  /** Not given: an existing topic keeps its perm on each broker; a new one gets 6 (read and write). */
  perm?: number;
  /** Not given: an existing topic stays as ordered or unordered as it is; a new one is unordered. */
  order?: boolean;
}

/** The names {@link AdminCreateTopicOptions} may hold; createTopic refuses any other. */
export const ADMIN_CREATE_TOPIC_OPTION_NAMES = optionNamesOf<AdminCreateTopicOptions>()([
  "topic",
  "brokers",
  "readQueueNums",
  "writeQueueNums",
  "perm",
  "order",
]);

/**
 * Refuses queue counts, a perm or an order the brokers would refuse (checkTopicConfig's ranges) with
 * ILLEGAL_ARGUMENT naming the option, before any broker is asked: refused by each broker, the error
 * read as brokers failing, to be run again once they are up.
 */
function checkCreateTopicValues(opts: AdminCreateTopicOptions): void {
  for (const name of ["readQueueNums", "writeQueueNums"] as const)
    if (opts[name] !== undefined) checkRange(name, opts[name], 0, MAX_QUEUE_NUMS);
  if (opts.perm !== undefined) checkRange("perm", opts.perm, 0, MAX_PERM);
  checkBoolean("order", opts.order);
}

/** Options of `Admin.deleteTopic`. */
export interface AdminDeleteTopicOptions {
  /** delete it from this cluster's brokers only (and its route to them); default every cluster */
  cluster?: string;
}

/** The names {@link AdminDeleteTopicOptions} may hold; deleteTopic refuses any other. */
export const ADMIN_DELETE_TOPIC_OPTION_NAMES = optionNamesOf<AdminDeleteTopicOptions>()(["cluster"]);

/** Options of `Admin.deleteSubscriptionGroup`: at most one of `cluster` and `broker`. */
export interface AdminDeleteGroupOptions {
  /** delete it from this cluster's brokers only; default every broker */
  cluster?: string;
  /** delete it from this broker name (its master and slaves) only */
  broker?: string;
  /** forget the group's consumer offsets too (RocketMQ's `cleanOffset`) @default false */
  cleanOffset?: boolean;
}

/** The names {@link AdminDeleteGroupOptions} may hold; deleteSubscriptionGroup refuses any other. */
export const ADMIN_DELETE_GROUP_OPTION_NAMES = optionNamesOf<AdminDeleteGroupOptions>()(["cluster", "broker", "cleanOffset"]);

/** What `Admin.deleteTopic` deleted. */
export interface DeleteTopicResult {
  topic: string;
  /** the broker addresses (masters, then slaves) the topic was deleted from */
  brokers: string[];
}

/** What `Admin.deleteSubscriptionGroup` deleted. */
export interface DeleteGroupResult {
  group: string;
  /** the broker addresses the group's config was deleted from */
  brokers: string[];
  /** topic@group offset entries forgotten, over every broker (with `cleanOffset`) */
  offsetsRemoved: number;
  /** the group's retry and dead-letter topics that were deleted too */
  topicsDeleted: string[];
}

/** A broker address the admin asks, with its broker name. */
interface BrokerAddr {
  brokerName: string;
  brokerId: number;
  addr: string;
}

/** Options of `Admin.queryMessageByKey`. */
export interface QueryMessageByKeyOptions {
  /** most messages returned (per broker and in all) @default 32 */
  maxNum?: number;
  /** store-time window, ms since the epoch @default 0 .. no end */
  beginTimestamp?: number;
  endTimestamp?: number;
}

/** The names {@link QueryMessageByKeyOptions} may hold; queryMessageByKey refuses any other. */
export const QUERY_MESSAGE_BY_KEY_OPTION_NAMES = optionNamesOf<QueryMessageByKeyOptions>()(["maxNum", "beginTimestamp", "endTimestamp"]);

/**
 * The replies of the brokers that know `group` (`settled[i]` is the answer of `brokers[i]`). A
 * broker that does not know it answers SUBSCRIPTION_GROUP_NOT_EXIST (it never served the group:
 * nothing to show or reset there); when none knows it, that is the error. Any other failure is
 * thrown, naming every broker that failed: an answer without their queues would be taken for the
 * whole of it.
 */
function knownGroupReplies<T>(
  group: string,
  settled: PromiseSettledResult<T>[],
  brokers: readonly LookupTarget[],
  what: string,
  consequence: string,
): T[] {
  const out: T[] = [];
  let unknown = 0;
  const failed: { broker: LookupTarget; reason: unknown }[] = [];
  settled.forEach((r, i) => {
    if (r.status === "fulfilled") out.push(r.value);
    else if (isMQError(r.reason, "SUBSCRIPTION_GROUP_NOT_EXIST")) unknown++;
    else failed.push({ broker: brokers[i]!, reason: r.reason });
  });
  // a broker's refusal is its answer (a broadcasting group's progress), not a broker that did not answer
  const refused = failed.find((f) => isMQError(f.reason, "NO_PERMISSION"));
  if (refused) throw refused.reason;
  if (failed.length > 0) throw brokersFailedError(failed, what, consequence);
  if (out.length === 0 && unknown > 0) {
    throw new MQError(
      "SUBSCRIPTION_GROUP_NOT_EXIST",
      `Consumer group ${group} does not exist on any master${isGroupName(group) ? "" : " (nor is it a valid group name)"}: a group exists once a consumer of it has started; list the groups that exist with \`actormq group list\` (Admin.groupList in code).`,
    );
  }
  return out;
}

/**
 * A group argument that is no string is refused before any broker is asked (the brokers' answer
 * would be about the request). A string that is no valid name is left to the brokers, which
 * know no such group: SUBSCRIPTION_GROUP_NOT_EXIST, saying it is not a valid name either.
 */
function checkGroupArgument(group: unknown, call: string): void {
  if (typeof group !== "string")
    throw new MQError("ILLEGAL_ARGUMENT", `${call} needs the consumer group's name (a string), got ${shownValue(group)}.`);
}

/** The error of a query some brokers did not answer: the first failure's code, naming every broker that failed. */
function brokersFailedError(failed: { broker: LookupTarget; reason: unknown }[], what: string, consequence: string): unknown {
  const first = failed[0]!.reason;
  if (!isMQError(first)) return first;
  return new MQError(
    first.code,
    `${failed.map(({ broker, reason }) => `Broker ${broker.brokerName} (${broker.addrs.join(", ")}) did not answer ${what} (${(reason as Error).message})`).join("; ")}: ${consequence}. ` +
      "A broker killed stays registered with the name servers for up to 120 s: start it (or a slave of it), or retry once it has left their table.",
    { cause: first },
  );
}

/**
 * The error of a change some brokers did not take (createTopic, updateSubscriptionGroup): the first
 * failure's code (a broker's refusal, or TIMEOUT for one that did not answer), naming each broker
 * that failed and why, and the brokers that took it (kept: the change is idempotent, so the same
 * call again finishes it). `what`: "Topic T was not created or updated"; `again`: "create".
 */
function changeFailedError(
  what: string,
  again: string,
  took: string[],
  failed: { brokerName: string; addr: string; reason: unknown }[],
): MQError {
  const first = failed[0]!.reason;
  const why = failed
    .map(
      ({ brokerName, addr, reason }) =>
        `${brokerName} (${addr}: ${isMQError(reason) ? `${reason.code} ${reason.message}` : String(reason)})`,
    )
    .join("; ");
  return new MQError(
    isMQError(first) ? first.code : "SYSTEM_ERROR",
    `${what} on ${failed.length === 1 ? "broker" : "brokers"} ${why}. ` +
      (took.length > 0 ? `It was on ${took.join(", ")}, which keep it. ` : "") +
      `Run the same ${again} again once the failed brokers are up (a killed master stays registered with the name servers for up to 120 s), ` +
      "or leave them out with brokers (CLI --brokers).",
    { cause: first },
  );
}

/**
 * Asks each target and awaits every answer, one failing must not hide which others took the change;
 * a master killed while still registered fails as soon as its connection does, not at the timeout.
 * Throws {@link changeFailedError} when any failed.
 */
async function askEveryMaster<T>(
  instance: ClientInstance,
  targets: { brokerName: string; addr: string }[],
  event: { type: string; [k: string]: unknown },
  what: string,
  again: string,
): Promise<T[]> {
  const settled = await Promise.allSettled(
    targets.map(({ addr }) => {
      const since = monotonicNow();
      const ask = instance.refAt(addr, BrokerActor.BROKER).ask<T>(event, { timeoutMs: ADMIN_REQUEST_TIMEOUT_MS });
      return unlessConnectionLost(instance.node, addr, ask, since);
    }),
  );
  const took: string[] = [];
  const failed: { brokerName: string; addr: string; reason: unknown }[] = [];
  settled.forEach((r, i) => {
    const t = targets[i]!;
    if (r.status === "fulfilled") took.push(`${t.brokerName} (${t.addr})`);
    else failed.push({ ...t, reason: r.reason });
  });
  // every broker refused the request itself (a value it does not take): its answer says what to fix,
  // while "run it again once the brokers are up" would not
  if (took.length === 0 && failed.every((f) => isMQError(f.reason, "INVALID_PARAMETER"))) throw failed[0]!.reason;
  if (failed.length > 0) throw changeFailedError(what, again, took, failed);
  return settled.map((r) => (r as PromiseFulfilledResult<Reply<T>>).value.fields);
}

/**
 * Whether a record is a message of `topic`: stored under it, or under another topic for it (a delayed
 * one's REAL_TOPIC; a retry or dead letter's RETRY_TOPIC, which a retry also carries beside its
 * REAL_TOPIC `%RETRY%<group>` from the delay levels it went through).
 */
function isMessageOfTopic(m: MessageExt, topic: string): boolean {
  return m.topic === topic || m.properties[MessageConst.REAL_TOPIC] === topic || m.properties[MessageConst.RETRY_TOPIC] === topic;
}

/** NO_ROUTE when no live master is registered: nothing to create, show or reset. */
function noMasterError(knownBrokers: string[]): MQError {
  return new MQError(
    "NO_ROUTE",
    knownBrokers.length === 0
      ? "No broker is registered with the name servers: start a broker first."
      : `No broker has a live master registered with the name servers (known brokers: ${knownBrokers.join(", ")}); start their masters first.`,
  );
}

export class Admin {
  /** set by the first close(); later calls return it, so none resolves before the sockets are released */
  private closing: Promise<void> | null = null;

  protected constructor(readonly instance: ClientInstance) {}

  static async start(opts: AdminOptions): Promise<Admin> {
    checkOptionNames("Admin.start", opts, ADMIN_OPTION_NAMES);
    return new Admin(await ClientInstance.acquire(opts));
  }

  /**
   * Creates or updates a topic on the named brokers (default: every master). Queue numbers are
   * per broker; a count not given keeps an existing topic's on each broker (see the options).
   * Resolves once every broker stored it and re-registered with its name servers, so
   * a route query right after sees the topic. Every broker is asked whatever the others answer; when
   * any fails (a refusal, a timeout, a registered master whose connection is refused or lost, which
   * fails at once) the error names each failed broker and the ones that created it, which keep it.
   */
  async createTopic(opts: AdminCreateTopicOptions): Promise<TopicConfig[]> {
    this.checkOpen();
    checkOptionNames("Admin.createTopic", opts, ADMIN_CREATE_TOPIC_OPTION_NAMES);
    checkTopic(opts.topic, "createTopic");
    checkNotSystemTopic(opts.topic);
    checkCreateTopicValues(opts);
    const targets = await this.masterTargets(opts.brokers, "create the topic");
    const answers = await askEveryMaster<{ topicConfig: TopicConfig }>(
      this.instance,
      targets,
      {
        type: "UPDATE_AND_CREATE_TOPIC",
        topicName: opts.topic,
        // a count not given is merged by each broker: an existing topic keeps its own
        readQueueNums: opts.readQueueNums,
        writeQueueNums: opts.writeQueueNums,
        defaultQueueNums: DEFAULT_ADMIN_QUEUE_NUMS,
        // likewise perm and order: not given, an existing topic keeps its own (a new one: 6, unordered)
        perm: opts.perm,
        order: opts.order,
      } satisfies UpdateTopicRequest & { type: string },
      `Topic ${opts.topic} was not created or updated`,
      "create",
    ).finally(() => this.instance.updateRoute(opts.topic).catch(() => undefined));
    return answers.map((a) => a.topicConfig);
  }

  /**
   * Addresses of the masters named (default every live master: a broker name whose master is down,
   * only slaves registered, is skipped, as RocketMQ's fetchMasterAddrByClusterName skips it);
   * ILLEGAL_ARGUMENT for a list that names no broker or holds no name, NO_ROUTE for a name without a
   * live master. A name given twice is one broker (asked twice, it was counted twice).
   */
  private async masterTargets(brokers: string[] | undefined, what: string): Promise<{ brokerName: string; addr: string }[]> {
    if (brokers !== undefined && (!Array.isArray(brokers) || brokers.length === 0))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `brokers (CLI --brokers) names no broker: give broker names such as broker-a, or leave it out to ${what} on every master.`,
      );
    const notName = brokers?.find((b) => typeof b !== "string" || b === "");
    if (notName !== undefined)
      throw new MQError("ILLEGAL_ARGUMENT", `brokers takes broker names such as broker-a, not ${shownValue(notName)}.`);
    const info = await this.clusterInfo();
    const masterOf = (name: string) => info.brokerAddrTable[name]?.brokerAddrs[String(MASTER_ID)];
    const names = brokers ? [...new Set(brokers)] : Object.keys(info.brokerAddrTable).filter(masterOf).sort();
    if (names.length === 0) throw noMasterError(Object.keys(info.brokerAddrTable));
    return names.map((brokerName) => {
      const addr = masterOf(brokerName);
      if (!addr)
        throw new MQError(
          "NO_ROUTE",
          `Broker ${brokerName} has no live master registered with the name servers; known brokers: ${Object.keys(info.brokerAddrTable).join(", ") || "none"}.`,
        );
      return { brokerName, addr };
    });
  }

  /** A topic's route from the name servers; MQError TOPIC_NOT_EXIST when none serves it. */
  async topicRoute(topic: string): Promise<TopicRouteData> {
    this.checkOpen();
    // as a client without the route cached: one that just restarted knows no topic until each
    // broker registers again (up to 30 s), while another may know it
    return this.instance.askNameserver<TopicRouteData>({ type: "GET_ROUTEINFO_BY_TOPIC", topic }, undefined, true);
  }

  /**
   * The route of a topic a message is looked up in: TOPIC_NOT_EXIST says to check the name, as a
   * lookup creates nothing (the name server's text says to create the topic).
   */
  private async lookupRoute(topic: string): Promise<TopicRouteData> {
    try {
      return await this.topicRoute(topic);
    } catch (e) {
      if (!isMQError(e, "TOPIC_NOT_EXIST")) throw e;
      throw new MQError(
        "TOPIC_NOT_EXIST",
        `No broker serves topic ${topic}, so none holds its messages: check the topic's name (\`actormq topic list\`) and the name server addresses.`,
        { cause: e },
      );
    }
  }

  /** Every broker and cluster known to the name servers. */
  async clusterInfo(): Promise<ClusterInfo> {
    this.checkOpen();
    return this.instance.clusterInfo();
  }

  /** Names of all topics the name servers know. */
  async topicList(): Promise<string[]> {
    this.checkOpen();
    return (await this.instance.askNameserver<{ topicList: string[] }>({ type: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER" })).topicList;
  }

  /** A broker's topic configs by broker address. */
  async brokerTopicConfigs(brokerAddr: string): Promise<Record<string, TopicConfig>> {
    this.checkOpen();
    const r = await this.instance
      .refAt(brokerAddr)
      .ask<{ topicConfigTable: Record<string, TopicConfig> }>({ type: "GET_ALL_TOPIC_CONFIG" });
    return r.fields.topicConfigTable;
  }

  /**
   * RocketMQ's deleteTopic (`mqadmin deleteTopic`): deletes `topic` from every master and slave
   * (of `cluster`, when given) that has it, masters first, each slave at its master's commit-log
   * offset (the messages stay in the commit log until their segments expire, served to no one),
   * then its route from every name server. The topic's consumer offsets go with it, so a topic
   * created again under the name starts empty and is consumed from its start. TOPIC_NOT_EXIST when
   * no broker has it and no name server routes it; system topics are refused (INVALID_PARAMETER),
   * retry and dead-letter topics too (deleteSubscriptionGroup deletes them with their group). A
   * broker or name server that fails is named in the error, after the others are done: run the
   * deletion again once they are back.
   */
  async deleteTopic(topic: string, opts: AdminDeleteTopicOptions = {}): Promise<DeleteTopicResult> {
    this.checkOpen();
    checkOptionNames("Admin.deleteTopic", opts, ADMIN_DELETE_TOPIC_OPTION_NAMES);
    checkTopic(topic, "deleteTopic");
    checkNotSystemTopic(topic);
    for (const [prefix, what] of [
      [RETRY_GROUP_TOPIC_PREFIX, "retry"],
      [DLQ_GROUP_TOPIC_PREFIX, "dead-letter"],
    ] as const)
      if (topic.startsWith(prefix))
        throw new MQError(
          "INVALID_PARAMETER",
          `The topic "${topic}" is the ${what} topic of consumer group ${topic.slice(prefix.length)}: delete the group (Admin.deleteSubscriptionGroup, \`actormq group delete\`), which deletes its retry and dead-letter topics.`,
        );
    return this.deleteTopicEverywhere(topic, opts.cluster);
  }

  /** The deletion of {@link deleteTopic}, retry and DLQ topics allowed; TOPIC_NOT_EXIST when nothing had it. */
  private async deleteTopicEverywhere(topic: string, cluster: string | undefined): Promise<DeleteTopicResult> {
    const addrs = await this.brokerAddrs(cluster, undefined);
    const failed: string[] = [];
    const failure = (b: BrokerAddr, e: unknown) =>
      failed.push(`${b.brokerName}${b.brokerId === MASTER_ID ? "" : ` (slave ${b.brokerId})`} at ${b.addr}: ${(e as Error).message}`);
    // which of them have it: a slave left out of the deletion would serve its old messages
    const has = await Promise.allSettled(addrs.map((b) => this.brokerTopicConfigs(b.addr)));
    const holders: BrokerAddr[] = [];
    has.forEach((r, i) => {
      if (r.status === "rejected") failure(addrs[i]!, r.reason);
      else if (Object.hasOwn(r.value, topic)) holders.push(addrs[i]!);
    });
    const routed = await this.topicRoute(topic).then(
      () => true,
      (e: unknown) => {
        if (isMQError(e, "TOPIC_NOT_EXIST")) return false;
        throw e;
      },
    );
    if (holders.length === 0 && failed.length === 0 && !routed)
      throw new MQError(
        "TOPIC_NOT_EXIST",
        `Topic ${topic} does not exist on any broker${cluster === undefined ? "" : ` of cluster ${cluster}`}: nothing to delete; list the topics that exist with \`actormq topic list\` (Admin.topicList in code).`,
      );
    const deleted: string[] = [];
    const ask = (b: BrokerAddr, req: DeleteTopicRequest) =>
      this.instance
        .refAt(b.addr, BrokerActor.BROKER)
        .ask<DeleteTopicReply>({ type: "DELETE_TOPIC_IN_BROKER", ...req }, { timeoutMs: ADMIN_REQUEST_TIMEOUT_MS });
    const masters = holders.filter((b) => b.brokerId === MASTER_ID);
    const deletedAt = new Map<string, number>();
    await Promise.all(
      masters.map((b) =>
        ask(b, { topic }).then(
          (r) => {
            deleted.push(b.addr);
            deletedAt.set(b.brokerName, r.fields.deletedAt);
          },
          (e: unknown) => failure(b, e),
        ),
      ),
    );
    // a slave deletes at its master's offset; one whose master did not delete it (down, failed)
    // is left for the next run, as its old messages would otherwise be counted from its own end
    const slaves = holders.filter((b) => b.brokerId !== MASTER_ID);
    await Promise.all(
      slaves.map((b) => {
        const at = deletedAt.get(b.brokerName);
        // the master does not have the topic (it was deleted there before): the slave's own end
        const masterHas = masters.some((m) => m.brokerName === b.brokerName);
        if (at === undefined && masterHas) {
          failed.push(`${b.brokerName} (slave ${b.brokerId}) at ${b.addr}: skipped, its master did not delete it`);
          return undefined;
        }
        return ask(b, at === undefined ? { topic } : { topic, deletedAt: at }).then(
          () => {
            deleted.push(b.addr);
          },
          (e: unknown) => failure(b, e),
        );
      }),
    );
    await Promise.all(
      this.instance.nameservers.map((ns) =>
        this.instance.node
          .ref(ns, NAMESRV_ACTOR)
          .ask({ type: "DELETE_TOPIC_IN_NAMESRV", topic, ...(cluster === undefined ? {} : { clusterName: cluster }) })
          .catch((e: unknown) => failed.push(`name server ${ns}: ${(e as Error).message}`)),
      ),
    );
    await this.instance.updateRoute(topic).catch(() => undefined);
    if (failed.length > 0)
      throw new MQError(
        "SYSTEM_ERROR",
        `Topic ${topic} was deleted from ${deleted.length > 0 ? deleted.join(", ") : "no broker"}, but not from ${failed.join("; ")}. ` +
          "Run the deletion again once they are back (a slave is deleted after its master).",
      );
    return { topic, brokers: deleted };
  }

  /**
   * RocketMQ's deleteSubscriptionGroup (`mqadmin deleteSubGroup`): deletes the group's config from
   * every master and slave (of `cluster`, or of the broker name `broker`, when given), with
   * `cleanOffset` its consumer offsets too, then its retry and dead-letter topics, as mqadmin does.
   * SUBSCRIPTION_GROUP_NOT_EXIST when no broker asked has the group. Members still running make the
   * group again (auto-created) with their next heartbeat: stop them first. A broker that fails is
   * named in the error, after the others are done.
   */
  async deleteSubscriptionGroup(group: string, opts: AdminDeleteGroupOptions = {}): Promise<DeleteGroupResult> {
    this.checkOpen();
    checkOptionNames("Admin.deleteSubscriptionGroup", opts, ADMIN_DELETE_GROUP_OPTION_NAMES);
    if (!isGroupName(group))
      throw new MQError(
        "INVALID_PARAMETER",
        `Group ${JSON.stringify(group)} is not valid: use 1-255 letters, digits, '%', '|', '_' or '-'.`,
      );
    if (opts.cluster !== undefined && opts.broker !== undefined)
      throw new MQError("ILLEGAL_ARGUMENT", "Give a cluster or a broker to delete the group from, not both.");
    const addrs = await this.brokerAddrs(opts.cluster, opts.broker);
    const req: DeleteSubscriptionGroupRequest = { groupName: group, cleanOffset: opts.cleanOffset === true };
    const settled = await Promise.allSettled(
      addrs.map((b) =>
        this.instance
          .refAt(b.addr, BrokerActor.BROKER)
          .ask<DeleteSubscriptionGroupReply>({ type: "DELETE_SUBSCRIPTIONGROUP", ...req }, { timeoutMs: ADMIN_REQUEST_TIMEOUT_MS }),
      ),
    );
    const brokers: string[] = [];
    const failed: string[] = [];
    let offsetsRemoved = 0;
    settled.forEach((r, i) => {
      const b = addrs[i]!;
      if (r.status === "rejected") failed.push(`${b.brokerName} at ${b.addr}: ${(r.reason as Error).message}`);
      else if (r.value.fields.existed || r.value.fields.offsetsRemoved > 0) {
        brokers.push(b.addr);
        offsetsRemoved += r.value.fields.offsetsRemoved;
      }
    });
    if (brokers.length === 0 && failed.length === 0)
      throw new MQError(
        "SUBSCRIPTION_GROUP_NOT_EXIST",
        `Consumer group ${group} does not exist on any broker${opts.broker ? ` named ${opts.broker}` : opts.cluster ? ` of cluster ${opts.cluster}` : ""}: nothing to delete; list the groups that exist with \`actormq group list\` (Admin.groupList in code).`,
      );
    const topicsDeleted: string[] = [];
    // with a broker given, the name servers keep the topics' routes of the other brokers
    if (opts.broker === undefined)
      for (const t of [RETRY_GROUP_TOPIC_PREFIX + group, DLQ_GROUP_TOPIC_PREFIX + group]) {
        // a broadcasting group's name may be too long for one (it has none)
        if (t.length > TOPIC_MAX_LENGTH) continue;
        try {
          await this.deleteTopicEverywhere(t, opts.cluster);
          topicsDeleted.push(t);
        } catch (e) {
          if (!isMQError(e, "TOPIC_NOT_EXIST")) failed.push(`topic ${t}: ${(e as Error).message}`);
        }
      }
    if (failed.length > 0)
      throw new MQError(
        "SYSTEM_ERROR",
        `Consumer group ${group} was deleted from ${brokers.length > 0 ? brokers.join(", ") : "no broker"}, but not from ${failed.join("; ")}. Run the deletion again once they are back.`,
      );
    return { group, brokers, offsetsRemoved, topicsDeleted };
  }

  /**
   * Every registered address (masters first, then slaves by id) of the brokers of `cluster`, or of
   * the broker name `broker`, or of every broker. An unknown cluster or broker is ILLEGAL_ARGUMENT
   * naming the known ones; none registered is NO_ROUTE.
   */
  private async brokerAddrs(cluster: string | undefined, broker: string | undefined): Promise<BrokerAddr[]> {
    const info = await this.clusterInfo();
    let names = Object.keys(info.brokerAddrTable);
    if (names.length === 0) throw noMasterError([]);
    if (cluster !== undefined) {
      const inCluster = info.clusterAddrTable[cluster];
      if (!inCluster)
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `No cluster ${cluster} is registered with the name servers; known clusters: ${Object.keys(info.clusterAddrTable).sort().join(", ")}.`,
        );
      names = inCluster;
    }
    if (broker !== undefined) {
      if (!info.brokerAddrTable[broker])
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `No broker ${broker} is registered with the name servers; known brokers: ${names.sort().join(", ")}.`,
        );
      names = [broker];
    }
    const out: BrokerAddr[] = [];
    for (const name of [...names].sort())
      for (const [id, addr] of Object.entries(info.brokerAddrTable[name]?.brokerAddrs ?? {}))
        if (addr) out.push({ brokerName: name, brokerId: Number(id), addr });
    return out.sort((a, b) => a.brokerId - b.brokerId || (a.brokerName < b.brokerName ? -1 : 1));
  }

  /**
   * RocketMQ's examineTopicStats (`mqadmin topicStatus`): per write queue of `topic` on every broker
   * serving it, the min and max offset and the store time of its last message. A broker whose
   * master is down is read from its lowest-id slave. TOPIC_NOT_EXIST when no broker serves the
   * topic; a broker that does not answer fails the call, naming it (a table without its queues
   * would read as a topic without them).
   */
  async examineTopicStats(topic: string): Promise<TopicStatsEntry[]> {
    this.checkOpen();
    checkTopic(topic, "examineTopicStats");
    const route = await this.topicRoute(topic);
    const targets = lookupTargets(route.brokerDatas);
    if (targets.length === 0) throw noMasterError(route.brokerDatas.map((b) => b.brokerName));
    const settled = await Promise.allSettled(
      targets.map((t) => this.askBroker<TopicStatsReply>(t, BrokerActor.BROKER, { type: "GET_TOPIC_STATS_INFO", topic })),
    );
    const out: TopicStatsEntry[] = [];
    const failed: { broker: LookupTarget; reason: unknown }[] = [];
    settled.forEach((r, i) => {
      if (r.status === "fulfilled") out.push(...(r.value.fields.offsetTable ?? []));
      else failed.push({ broker: targets[i]!, reason: r.reason });
    });
    if (failed.length > 0)
      throw brokersFailedError(
        failed,
        "GET_TOPIC_STATS_INFO",
        `the offsets of ${topic} there are unknown, and a table without its queues would read as a topic without them`,
      );
    return out.sort(compareMessageQueue);
  }

  /**
   * RocketMQ's `mqadmin brokerStatus`: the runtime figures of one broker, given by address
   * (`tcp://host:port` or `host:port`, asked as it is, registered or not) or by broker name (its
   * master, as the name servers list it). ILLEGAL_ARGUMENT for a name no name server knows, naming
   * the brokers they know; NO_ROUTE for a name whose master is not registered, naming its slaves'
   * addresses; TIMEOUT naming the address when the broker does not answer (refused or lost
   * connections fail at once).
   */
  async brokerStatus(broker: string): Promise<BrokerStatus> {
    this.checkOpen();
    if (typeof broker !== "string" || broker.trim().length === 0)
      throw new MQError("ILLEGAL_ARGUMENT", "brokerStatus needs a broker name (such as broker-a) or address (tcp://host:port).");
    return this.askBrokerAt<BrokerRuntimeInfo>(await this.brokerAddressOf(broker.trim()), { type: "GET_BROKER_RUNTIME_INFO" });
  }

  /**
   * An ask of the broker at `addr` as brokerStatus, brokerConfig and updateBrokerConfig make it:
   * a refused or lost connection fails at once, and a failure names the address (an address
   * given by hand may be a slave's, a name server's, or wrong). The broker's refusal of what it
   * was asked (INVALID_PARAMETER: a key or value it does not take) is its answer, passed on as is.
   */
  private async askBrokerAt<T>(addr: string, event: { type: string; [k: string]: unknown }, timeoutMs?: number): Promise<T> {
    const since = monotonicNow();
    try {
      const ask = this.instance.refAt(addr, BrokerActor.BROKER).ask<T>(event, timeoutMs === undefined ? undefined : { timeoutMs });
      return (await unlessConnectionLost(this.instance.node, addr, ask, since)).fields;
    } catch (e) {
      if (!isMQError(e) || e.code === "INVALID_PARAMETER") throw e;
      throw new MQError(
        e.code,
        `The broker at ${addr} did not answer ${event.type} (${e.message}): check that it runs and that the address is its listen (or advertised) address.`,
        { cause: e },
      );
    }
  }

  /** The address `brokerStatus` asks: an address as given, a broker name's master from the name servers. */
  private async brokerAddressOf(broker: string): Promise<string> {
    const m = BROKER_ADDRESS.exec(broker);
    if (m && Number(m[2]) >= 1 && Number(m[2]) <= 65535) return broker.startsWith("tcp://") ? broker : `tcp://${broker}`;
    if (broker.includes(":") || broker.includes("/"))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `"${broker}" is neither a broker name nor an address: give a broker name such as broker-a or tcp://host:port.`,
      );
    const info = await this.clusterInfo();
    const bd = info.brokerAddrTable[broker];
    const describe = (d: BrokerData) =>
      `${d.brokerName} (${Object.entries(d.brokerAddrs)
        .sort(([a], [b]) => Number(a) - Number(b))
        .map(([id, a]) => `${id === String(MASTER_ID) ? "master" : `slave ${id}`} ${a}`)
        .join(", ")})`;
    const known = () =>
      Object.values(info.brokerAddrTable)
        .sort((a, b) => (a.brokerName < b.brokerName ? -1 : a.brokerName > b.brokerName ? 1 : 0))
        .map(describe)
        .join("; ");
    if (!bd)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        Object.keys(info.brokerAddrTable).length === 0
          ? `No broker named ${broker} is registered with the name servers, and none is: start a broker first, or give its address (tcp://host:port).`
          : `No broker named ${broker} is registered with the name servers; they know ${known()}. Give one of these names, or a broker address.`,
      );
    const master = bd.brokerAddrs[String(MASTER_ID)];
    if (master) return master;
    throw new MQError(
      "NO_ROUTE",
      `Broker ${describe(bd)} has no master registered with the name servers: start its master, or give a slave's address to see that slave.`,
    );
  }

  // -------------------------------------------------------------------------------------------
  // Consumer groups and broker config (groupList, examineConsumerConnectionInfo,
  // updateSubscriptionGroup, brokerConfig, updateBrokerConfig)

  /**
   * The consumer groups the brokers know (their subscription group configs, every registered
   * broker asked: a master, else its slave), by name, each with its config per broker. A broker
   * that does not answer fails the call, naming it (a list without its groups would read as complete).
   */
  async groupList(): Promise<GroupListEntry[]> {
    this.checkOpen();
    const targets = await this.everyBroker();
    const settled = await Promise.allSettled(
      targets.map((t) =>
        this.askBroker<{ subscriptionGroupTable: Record<string, SubscriptionGroupConfig> }>(t, BrokerActor.BROKER, {
          type: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        }),
      ),
    );
    const byGroup = new Map<string, Record<string, SubscriptionGroupConfig>>();
    const failed: { broker: LookupTarget; reason: unknown }[] = [];
    settled.forEach((r, i) => {
      if (r.status === "rejected") {
        failed.push({ broker: targets[i]!, reason: r.reason });
        return;
      }
      for (const [name, cfg] of Object.entries(r.value.fields.subscriptionGroupTable ?? {})) {
        let configs = byGroup.get(name);
        if (!configs) byGroup.set(name, (configs = {}));
        configs[targets[i]!.brokerName] = cfg;
      }
    });
    if (failed.length > 0)
      throw brokersFailedError(
        failed,
        "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        "its groups are unknown, and a list without them would read as complete",
      );
    return [...byGroup.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([group, configs]) => ({ group, configs }));
  }

  /**
   * RocketMQ's examineConsumerConnectionInfo (`mqadmin consumerConnection`): the group's live
   * members as every broker knows them (client id, address, language, version, last heartbeat,
   * the brokers that have it), the group's consume type, model, where it starts and its
   * subscriptions. MQError CONSUMER_NOT_ONLINE when no broker has a live member of it; a broker
   * that does not answer is left out when another one answered (members heartbeat to every broker).
   */
  async examineConsumerConnectionInfo(group: string): Promise<ConsumerConnectionSummary> {
    this.checkOpen();
    if (!isGroupName(group))
      throw new MQError("ILLEGAL_ARGUMENT", `Group "${String(group)}" is not valid: use 1-255 letters, digits, '%', '|', '_' or '-'.`);
    const targets = await this.everyBroker();
    const settled = await Promise.allSettled(
      targets.map((t) =>
        this.askBroker<ConsumerConnectionReply>(t, ConsumptionActorFor.GET_CONSUMER_CONNECTION_LIST, {
          type: "GET_CONSUMER_CONNECTION_LIST",
          consumerGroup: group,
        } satisfies GetConsumerConnectionListRequest & { type: string }),
      ),
    );
    const byClient = new Map<string, ConsumerConnectionInfo>();
    let first: ConsumerConnectionReply | undefined;
    const subscriptions: Record<string, SubscriptionData> = {};
    const failed: { broker: LookupTarget; reason: unknown }[] = [];
    settled.forEach((r, i) => {
      const brokerName = targets[i]!.brokerName;
      if (r.status === "rejected") {
        if (!isMQError(r.reason, "CONSUMER_NOT_ONLINE")) failed.push({ broker: targets[i]!, reason: r.reason });
        return;
      }
      const f = r.value.fields;
      first ??= f;
      for (const [topic, sd] of Object.entries(f.subscriptionTable ?? {})) subscriptions[topic] ??= sd;
      for (const c of f.connectionSet ?? []) {
        const known = byClient.get(c.clientId);
        if (!known) byClient.set(c.clientId, { ...c, brokers: [brokerName] });
        else {
          known.brokers.push(brokerName);
          if (c.lastUpdateTimestamp > known.lastUpdateTimestamp) Object.assign(known, { ...c, brokers: known.brokers });
        }
      }
    });
    if (!first) {
      if (failed.length > 0) throw brokersFailedError(failed, "GET_CONSUMER_CONNECTION_LIST", `the members of ${group} there are unknown`);
      throw new MQError(
        "CONSUMER_NOT_ONLINE",
        `Consumer group ${group} has no live member on any broker: start a consumer of it (or check the name; groups known to the brokers: actormq group list).`,
      );
    }
    return {
      group,
      connections: [...byClient.values()].sort((a, b) => (a.clientId < b.clientId ? -1 : a.clientId > b.clientId ? 1 : 0)),
      consumeType: first.consumeType,
      messageModel: first.messageModel,
      consumeFromWhere: first.consumeFromWhere,
      subscriptions,
    };
  }

  /**
   * RocketMQ's updateSubGroup: creates or updates a consumer group's config on the named brokers
   * (default every live master); fields not given keep their value. `consumeEnable: false` stops
   * the group's pulls (NO_PERMISSION; its consumers retry every 3 s) until it is set true again.
   * Resolves with the config each broker now has, by broker name. A value out of a field's range is
   * refused with ILLEGAL_ARGUMENT before any broker is asked.
   */
  async updateSubscriptionGroup(opts: UpdateSubscriptionGroupOptions): Promise<{ brokerName: string; config: SubscriptionGroupConfig }[]> {
    this.checkOpen();
    checkOptionNames("Admin.updateSubscriptionGroup", opts, UPDATE_SUBSCRIPTION_GROUP_OPTION_NAMES);
    // checkOptionNames refused anything but an options object
    if (!isGroupName(opts.groupName))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `updateSubscriptionGroup needs { groupName, ...fields }: groupName ${JSON.stringify(opts.groupName)} is not a valid group name (1-255 letters, digits, '%', '|', '_' or '-').`,
      );
    checkSubscriptionGroupValues(opts);
    const req: UpdateSubscriptionGroupRequest = { groupName: opts.groupName };
    for (const k of SUBSCRIPTION_GROUP_FIELDS) if (opts[k] !== undefined) (req as Record<string, unknown>)[k] = opts[k];
    const targets = await this.masterTargets(opts.brokers, "update the group");
    const answers = await askEveryMaster<{ subscriptionGroupConfig: SubscriptionGroupConfig }>(
      this.instance,
      targets,
      { type: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", ...req },
      `Group ${opts.groupName} was not updated`,
      "update",
    );
    return answers.map((a, i) => ({ brokerName: targets[i]!.brokerName, config: a.subscriptionGroupConfig }));
  }

  /**
   * RocketMQ's getBrokerConfig: the options a broker runs with and the keys
   * {@link updateBrokerConfig} may change. `broker` as {@link brokerStatus} takes it: a broker name
   * (its master is asked; ILLEGAL_ARGUMENT for a name no name server knows, NO_ROUTE for one without a
   * registered master) or an address (tcp://host:port or host:port, a slave's too).
   */
  async brokerConfig(broker: string): Promise<BrokerConfigReply> {
    this.checkOpen();
    return this.askBrokerAt<BrokerConfigReply>(await this.brokerAddressOf(checkBrokerArg(broker, "brokerConfig")), {
      type: "GET_BROKER_CONFIG",
    });
  }

  /**
   * RocketMQ's updateBrokerConfig: changes settings of a running broker (name or address, as
   * {@link brokerConfig}) and keeps them in its `config/broker.json` for later starts. Only the
   * keys GET_BROKER_CONFIG lists as settable are taken (`brokerPermission`: 6, 4 to drain the
   * broker, 2); anything else is refused with INVALID_PARAMETER naming them, and nothing changes.
   * A new permission is registered with the name servers before this resolves.
   */
  async updateBrokerConfig(
    broker: string,
    properties: Record<string, string | number | boolean>,
  ): Promise<{ updated: Record<string, number>; previous: Record<string, number> }> {
    this.checkOpen();
    return this.askBrokerAt<{ updated: Record<string, number>; previous: Record<string, number> }>(
      await this.brokerAddressOf(checkBrokerArg(broker, "updateBrokerConfig")),
      { type: "UPDATE_BROKER_CONFIG", properties } satisfies UpdateBrokerConfigRequest & { type: string },
      ADMIN_REQUEST_TIMEOUT_MS,
    );
  }

  // -------------------------------------------------------------------------------------------
  // Consumption queries (consumerProgress, resetOffsetByTimestamp)

  /**
   * A consumer group's progress: per queue (of its topics and retry topic, on every broker) the
   * broker's max offset, the group's committed offset and the lag between them. A broker whose
   * master is down is read from its lowest-id slave (as RocketMQ's selectBrokerAddr): its offsets
   * are the ones the slave last copied. Errors as {@link examineConsumeStats} (NO_PERMISSION for a
   * broadcasting group).
   */
  async consumerProgress(group: string): Promise<ConsumerProgressEntry[]> {
    return (await this.examineConsumeStats(group)).offsetTable;
  }

  /**
   * RocketMQ's examineConsumeStats: the per-queue progress of {@link consumerProgress} and the
   * group's consume TPS, the messages per second its pulls took over the last minute (summed
   * over the brokers asked). MQError SUBSCRIPTION_GROUP_NOT_EXIST when no broker asked knows the
   * group, NO_ROUTE when no broker is registered, NO_PERMISSION for a group whose members consume
   * in broadcasting mode (online or not): each keeps its offsets in its own offsets.json, so the
   * brokers have no progress of it to show. A broker that does not answer fails it with its
   * error's code and a message naming the broker (an answer without its queues would hide their lag).
   */
  async examineConsumeStats(group: string): Promise<{ offsetTable: ConsumerProgressEntry[]; consumeTps: number }> {
    this.checkOpen();
    checkGroupArgument(group, "examineConsumeStats");
    // a broker whose master is down is asked on its slave, which has the copied offsets: left
    // out, its queues and their lag vanished from the answer; no broker to ask is not a group
    // without progress
    const targets = await this.everyBroker();
    // the brokers whose masters the group's members heartbeated hold its retry topic (created at
    // the heartbeat, RocketMQ's examineConsumeStats asks only them): their queues are the group's,
    // so one of them not answering fails the call; another broker (say of another cluster on these
    // name servers) that does not answer has none of the group's queues to hide
    const retryBrokers = await this.topicRoute(RETRY_GROUP_TOPIC_PREFIX + group).then(
      (r) => new Set(r.brokerDatas.map((bd) => bd.brokerName)),
      (e: unknown) => {
        if (isMQError(e, "TOPIC_NOT_EXIST")) return undefined;
        throw e;
      },
    );
    const settled = (
      await Promise.allSettled(
        targets.map((t) =>
          this.askBroker<ConsumeStatsReply>(t, ConsumptionActorFor.GET_CONSUME_STATS, {
            type: "GET_CONSUME_STATS",
            consumerGroup: group,
          } satisfies GetConsumeStatsRequest & {
            type: string;
          }),
        ),
      )
    ).map((r, i): PromiseSettledResult<Reply<ConsumeStatsReply>> => {
      if (r.status === "fulfilled" || retryBrokers === undefined || retryBrokers.has(targets[i]!.brokerName)) return r;
      if (isMQError(r.reason, "NO_PERMISSION", "SUBSCRIPTION_GROUP_NOT_EXIST")) return r;
      return { status: "rejected", reason: new MQError("SUBSCRIPTION_GROUP_NOT_EXIST", "not on the group's retry route") };
    });
    const replies = knownGroupReplies(
      group,
      settled,
      targets,
      "GET_CONSUME_STATS",
      `the progress of ${group} there is unknown, and an answer without its queues would hide their lag`,
    );
    const out: ConsumerProgressEntry[] = [];
    let consumeTps = 0;
    for (const r of replies) {
      if (Number.isFinite(r.fields.consumeTps)) consumeTps += r.fields.consumeTps;
      for (const q of r.fields.offsetTable ?? []) out.push(progressEntry(q));
    }
    return { offsetTable: out.sort(compareMessageQueue), consumeTps };
  }

  /**
   * Moves a group's offsets of a topic, on every master serving it, to the first message stored
   * at or after `timestamp` (server side: the next pull of each queue starts there).
   * Returns the new offset per queue. A master that does not know the group resets nothing; when
   * none does, MQError SUBSCRIPTION_GROUP_NOT_EXIST (as RocketMQ refuses it: no offsets are made
   * for a mistyped group); NO_ROUTE when none of the topic's brokers has a live master, and
   * SERVICE_NOT_AVAILABLE, resetting nothing, when some has none (a slave cannot reset offsets).
   */
  async resetOffsetByTimestamp(
    group: string,
    topic: string,
    timestamp: number | Date,
  ): Promise<{ topic: string; brokerName: string; queueId: number; offset: number }[]> {
    this.checkOpen();
    checkGroupArgument(group, "resetOffsetByTimestamp");
    checkTopic(topic, "resetOffsetByTimestamp");
    const ms = timestamp instanceof Date ? timestamp.getTime() : timestamp;
    // checked before any broker is asked: a string would reach them as is, NaN or a fraction too
    if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `resetOffsetByTimestamp needs a time in ms since the epoch (an integer >= 0, such as Date.parse("2025-01-31T12:00:00Z")) or a valid Date, got ${timestamp instanceof Date ? "an invalid Date" : shownValue(timestamp)}.`,
      );
    const route = await this.topicRoute(topic);
    const masterless = route.brokerDatas
      .filter((bd) => !bd.brokerAddrs[String(MASTER_ID)])
      .map((bd) => bd.brokerName)
      .sort();
    if (masterless.length === route.brokerDatas.length) throw noMasterError(masterless);
    // checked before any reset: skipping them, the reset half-succeeded and said nothing
    if (masterless.length > 0)
      throw new MQError(
        "SERVICE_NOT_AVAILABLE",
        `${masterless.length === 1 ? "Broker" : "Brokers"} ${masterless.join(", ")} serving ${topic} ${masterless.length === 1 ? "has" : "have"} no live master registered with the name servers, and a slave cannot reset offsets: nothing was reset. Start the master(s), then reset again.`,
      );
    const out: { topic: string; brokerName: string; queueId: number; offset: number }[] = [];
    const masters = route.brokerDatas.map((bd) => ({ brokerName: bd.brokerName, addrs: [bd.brokerAddrs[String(MASTER_ID)]!] }));
    await this.checkMastersAnswer(masters, topic);
    const settled = await Promise.allSettled(
      masters.map(async ({ brokerName, addrs }) => {
        const r = await this.instance
          .refAt(addrs[0]!, ConsumptionActorFor.INVOKE_BROKER_TO_RESET_OFFSET)
          .ask<{ offsetTable: { queueId: number; offset: number }[] }>({
            type: "INVOKE_BROKER_TO_RESET_OFFSET",
            topic,
            group,
            timestamp: ms,
            isForce: true,
          } satisfies ResetOffsetRequest & { type: string });
        for (const e of r.fields.offsetTable ?? []) out.push({ topic, brokerName, queueId: e.queueId, offset: e.offset });
      }),
    );
    knownGroupReplies(
      group,
      settled,
      masters,
      "INVOKE_BROKER_TO_RESET_OFFSET",
      "its queues may not have been reset (the other brokers' were); reset again once it answers",
    );
    return out.sort(compareMessageQueue);
  }

  /**
   * SERVICE_NOT_AVAILABLE, before anything is reset, when a master registered for `topic` does not
   * answer: one killed stays registered for up to 120 s, and resetting the others first left the
   * group half reset. A master whose connection is lost fails at once.
   */
  private async checkMastersAnswer(masters: readonly LookupTarget[], topic: string): Promise<void> {
    const node = this.instance.node;
    const settled = await Promise.allSettled(
      masters.map(({ addrs }) => {
        const since = monotonicNow();
        return unlessConnectionLost(node, addrs[0]!, this.instance.refAt(addrs[0]!).ask({ type: "GET_BROKER_RUNTIME_INFO" }), since);
      }),
    );
    const down: string[] = [];
    settled.forEach((r, i) => {
      if (r.status === "rejected")
        down.push(`${masters[i]!.brokerName} (${masters[i]!.addrs[0]}: ${(r.reason as Error)?.message ?? r.reason})`);
    });
    if (down.length === 0) return;
    throw new MQError(
      "SERVICE_NOT_AVAILABLE",
      `The master of ${down.join(", ")} serving ${topic} does not answer, and a slave cannot reset offsets: nothing was reset. Start the master, then reset again (one killed stays registered with the name servers for up to 120 s).`,
    );
  }

  // -------------------------------------------------------------------------------------------
  // Message lookup (queryMessageByKey, viewMessage): QUERY_MESSAGE / VIEW_MESSAGE_BY_ID

  /**
   * Messages of `topic` whose keys include `key`, from every broker serving the topic, newest
   * first. An empty array when none matches; MQError when no broker could be asked.
   */
  async queryMessageByKey(topic: string, key: string, opts: QueryMessageByKeyOptions = {}): Promise<MessageExt[]> {
    this.checkOpen();
    checkOptionNames("Admin.queryMessageByKey", opts, QUERY_MESSAGE_BY_KEY_OPTION_NAMES);
    checkTopic(topic, "queryMessageByKey");
    if (typeof key !== "string" || key.length === 0) throw new MQError("ILLEGAL_ARGUMENT", "queryMessageByKey needs a non-empty key.");
    checkQueryKeyOptions(key, opts);
    const maxNum = opts.maxNum ?? DEFAULT_QUERY_MAX_NUM;
    const route = await this.lookupRoute(topic);
    const found = await this.queryBrokers(lookupTargets(route.brokerDatas), {
      topic,
      key,
      maxNum,
      beginTimestamp: opts.beginTimestamp,
      endTimestamp: opts.endTimestamp,
    });
    return found.sort((a, b) => b.storeTimestamp - a.storeTimestamp || b.commitLogOffset - a.commitLogOffset).slice(0, maxNum);
  }

  /**
   * One message by id: an offset msg id (SendResult.offsetMsgId) is read at its commit-log
   * offset; a UNIQ_KEY (SendResult.msgId) is looked up in the index of every master. With `topic`,
   * only the brokers serving it are asked and only a message of it is returned (MQError
   * TOPIC_NOT_EXIST when no broker serves it, as queryMessageByKey); without, every topic. Null
   * when no broker has it; ILLEGAL_ARGUMENT for an `msgId` that is not an id (32 hex characters).
   */
  async viewMessage(msgId: string, topic?: string): Promise<MessageExt | null> {
    this.checkOpen();
    if (!isMessageIdText(msgId))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `viewMessage: ${shownValue(msgId)} is not a message id: an id is 32 hex characters, either the offset msg id ` +
          "(SendResult.offsetMsgId) or the unique key id (SendResult.msgId, MessageExt.msgId, what `actormq send` prints).",
      );
    if (topic !== undefined) checkTopic(topic, "viewMessage");
    const targets = topic !== undefined ? lookupTargets((await this.lookupRoute(topic)).brokerDatas) : await this.everyBroker();
    const byOffset = await this.viewByOffsetId(targets, msgId);
    // the record of a delayed message is stored in SCHEDULE_TOPIC_XXXX and a redelivered one in
    // %RETRY%group (their offset ids name those records): they are of the topic they carry
    if (byOffset && (topic === undefined || isMessageOfTopic(byOffset, topic))) return byOffset;
    // producers write UNIQ_KEYs in upper case: a lower-case id (hex all the same) names the same message
    const key = msgId.toUpperCase();
    const byUniq = await this.queryBrokers(targets, { key, uniqKey: true, maxNum: 1, ...(topic ? { topic } : {}) });
    if (byUniq[0] || topic === undefined) return byUniq[0] ?? null;
    // a delayed message not yet delivered is indexed under SCHEDULE_TOPIC_XXXX only: looked for in every topic
    const anywhere = await this.queryBrokers(targets, { key, uniqKey: true, maxNum: 1 });
    return anywhere.find((m) => isMessageOfTopic(m, topic)) ?? null;
  }

  /** Every registered broker (lookupTargets: asked on its master, else a slave); NO_ROUTE when there is none. */
  private async everyBroker(): Promise<LookupTarget[]> {
    const info = await this.clusterInfo();
    const targets = lookupTargets(Object.values(info.brokerAddrTable));
    if (targets.length === 0) throw noMasterError(Object.keys(info.brokerAddrTable));
    return targets;
  }

  /**
   * VIEW_MESSAGE_BY_ID at the id's offset; keeps the record whose own offset id is `msgId`. The id
   * names its broker's address (reference §10.1), and only that broker is asked, as RocketMQ's
   * viewMessage does: another broker down does not fail the lookup. An id naming no registered
   * address (a broker advertised by host name, or since moved) is asked of every broker; it fails
   * only when every one of them did.
   */
  private async viewByOffsetId(targets: LookupTarget[], msgId: string): Promise<MessageExt | null> {
    const { storeHost, commitLogOffset } = parseOffsetMsgId(msgId);
    if (!Number.isSafeInteger(commitLogOffset) || commitLogOffset < 0) return null;
    const wanted = msgId.toUpperCase();
    const view = async (t: LookupTarget): Promise<MessageExt | null> => {
      try {
        const r = await this.askBroker(t, QUERY_MESSAGE_ACTOR, {
          type: "VIEW_MESSAGE_BY_ID",
          offset: commitLogOffset,
        } satisfies ViewMessageRequest & { type: string });
        return r.body ? (decodeRecords(r.body, t.brokerName).find((m) => m.offsetMsgId === wanted) ?? null) : null;
      } catch (e) {
        if (isMQError(e, "QUERY_NOT_FOUND", "INVALID_PARAMETER")) return null;
        throw e;
      }
    };
    // a slave's records carry its master's address: the broker name is what the id names
    const owner = targets.find((t) => t.addrs.includes(`tcp://${storeHost}`));
    if (owner)
      return view(owner).catch((e: unknown) => {
        if (!isMQError(e)) throw e;
        throw new MQError(
          e.code,
          `Broker ${owner.brokerName} (${owner.addrs.join(", ")}), which holds message ${msgId}, did not answer VIEW_MESSAGE_BY_ID (${e.message}). Retry once it or a slave of it is up.`,
          { cause: e },
        );
      });
    const settled = await Promise.allSettled(targets.map(view));
    for (const s of settled) if (s.status === "fulfilled" && s.value) return s.value;
    const failed = settled.find((s) => s.status === "rejected");
    if (failed && settled.every((s) => s.status === "rejected")) throw failed.reason;
    return null;
  }

  /**
   * `event` to `actor` on a broker: its master, else its lowest-id slave, as RocketMQ's
   * selectBrokerAddr. A master killed stays registered for up to 120 s, so, as consumers do
   * (findBrokerAddressInSubscribe), one whose connection reads lost is asked after its slaves, and
   * one that does not answer (TIMEOUT, given up as soon as its connection fails) is followed by the
   * next address; the last one's answer or error is the result.
   */
  private async askBroker<T = Record<string, unknown>>(t: LookupTarget, actor: string, event: WireEvent): Promise<Reply<T>> {
    const node = this.instance.node;
    const addrs = t.addrs.some((a) => node.peerUnreachable(a))
      ? [...t.addrs.filter((a) => !node.peerUnreachable(a)), ...t.addrs.filter((a) => node.peerUnreachable(a))]
      : t.addrs;
    for (let i = 0; ; i++) {
      const since = monotonicNow();
      const ask = this.instance.refAt(addrs[i]!, actor).ask<T>(event);
      if (i === addrs.length - 1) return ask;
      try {
        return await unlessConnectionLost(node, addrs[i]!, ask, since);
      } catch (e) {
        if (!isMQError(e, "TIMEOUT")) throw e;
      }
    }
  }

  /** QUERY_MESSAGE to each target; QUERY_NOT_FOUND counts as none; throws only when every broker failed otherwise. */
  private async queryBrokers(targets: LookupTarget[], req: QueryMessageRequest): Promise<MessageExt[]> {
    const settled = await Promise.allSettled(
      targets.map(async (t) => {
        try {
          const r = await this.askBroker(t, QUERY_MESSAGE_ACTOR, { type: "QUERY_MESSAGE", ...req });
          return r.body ? decodeRecords(r.body, t.brokerName) : [];
        } catch (e) {
          if (isMQError(e, "QUERY_NOT_FOUND")) return [];
          throw e;
        }
      }),
    );
    const out: MessageExt[] = [];
    let failure: unknown;
    for (const s of settled) {
      if (s.status === "fulfilled") out.push(...s.value);
      else failure ??= s.reason;
    }
    if (failure !== undefined && settled.every((s) => s.status === "rejected")) throw failure;
    return out;
  }

  close(): Promise<void> {
    this.closing ??= this.instance.release();
    return this.closing;
  }

  protected checkOpen(): void {
    if (this.closing) throw new MQError("CLOSED", "The admin client is closed; start a new one.");
  }
}

/**
 * queryMessageByKey's key and options, checked before any broker is asked: a key with a space
 * matches no message (keys are split at spaces when stored), and a bad option would come back as
 * the broker's INVALID_PARAMETER, or as no message for a window given backwards.
 */
function checkQueryKeyOptions(key: string, opts: QueryMessageByKeyOptions): void {
  const bad = (what: string) => new MQError("ILLEGAL_ARGUMENT", `queryMessageByKey: ${what}`);
  if (key.includes(" ")) {
    const parts = key.split(" ").filter((k) => k.length > 0);
    throw bad(
      `the key ${JSON.stringify(key)} contains a space, and no message has such a key: a message's keys are split at spaces when it is stored ` +
        `(keys ["order 42"] are found by "order" and by "42"). Query one of ${parts.map((k) => JSON.stringify(k)).join(", ") || "them"}.`,
    );
  }
  const { maxNum, beginTimestamp, endTimestamp } = opts;
  if (maxNum !== undefined && (typeof maxNum !== "number" || !Number.isSafeInteger(maxNum) || maxNum < 1))
    throw bad(`maxNum must be an integer >= 1, got ${shownValue(maxNum)}.`);
  for (const [name, v] of [
    ["beginTimestamp", beginTimestamp],
    ["endTimestamp", endTimestamp],
  ] as const) {
    if (v !== undefined && (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0))
      throw bad(
        `${name} must be a time in ms since the epoch (an integer >= 0, such as Date.parse("2025-01-31T12:00:00Z") or date.getTime()), got ${(v as unknown) instanceof Date ? "a Date" : shownValue(v)}.`,
      );
  }
  if (beginTimestamp !== undefined && endTimestamp !== undefined && beginTimestamp > endTimestamp)
    throw bad(`beginTimestamp ${beginTimestamp} is after endTimestamp ${endTimestamp}: no message lies in that window. Swap them.`);
}

/** A broker to ask for a lookup: its addresses, master first, then its slaves by id ({@link Admin.askBroker}). */
interface LookupTarget {
  brokerName: string;
  addrs: string[];
}

function lookupTargets(brokerDatas: BrokerData[]): LookupTarget[] {
  const out: LookupTarget[] = [];
  for (const bd of [...brokerDatas].sort((a, b) => (a.brokerName < b.brokerName ? -1 : a.brokerName > b.brokerName ? 1 : 0))) {
    const addrs = Object.keys(bd.brokerAddrs)
      .map(Number)
      .sort((a, b) => a - b)
      .map((id) => bd.brokerAddrs[String(id)])
      .filter((a): a is string => !!a);
    if (addrs.length > 0) out.push({ brokerName: bd.brokerName, addrs });
  }
  return out;
}
