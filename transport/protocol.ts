/**
 * Wire vocabulary shared by brokers, name servers and clients: request codes, response codes,
 * error codes, the MQError type and the shapes that travel in request/reply fields.
 *
 * Names and numbers follow Apache RocketMQ (`RequestCode`, `ResponseCode`) so that a RocketMQ
 * user reads them without a glossary. Client code and broker code share only this file (and the
 * stored-record codec in `messageRecord.ts`).
 */

import { shellArg } from "./shellArg.ts";

/** Request codes, numbered as RocketMQ's `RequestCode`. The event `type` on the wire is the name. */
export const RequestCode = {
  SEND_MESSAGE: 10,
  PULL_MESSAGE: 11,
  QUERY_MESSAGE: 12,
  QUERY_CONSUMER_OFFSET: 14,
  UPDATE_CONSUMER_OFFSET: 15,
  UPDATE_AND_CREATE_TOPIC: 17,
  GET_ALL_TOPIC_CONFIG: 21,
  UPDATE_BROKER_CONFIG: 25,
  GET_BROKER_CONFIG: 26,
  GET_BROKER_RUNTIME_INFO: 28,
  SEARCH_OFFSET_BY_TIMESTAMP: 29,
  GET_MAX_OFFSET: 30,
  GET_MIN_OFFSET: 31,
  GET_EARLIEST_MSG_STORETIME: 32,
  VIEW_MESSAGE_BY_ID: 33,
  HEART_BEAT: 34,
  UNREGISTER_CLIENT: 35,
  CONSUMER_SEND_MSG_BACK: 36,
  GET_CONSUMER_LIST_BY_GROUP: 38,
  NOTIFY_CONSUMER_IDS_CHANGED: 40,
  LOCK_BATCH_MQ: 41,
  UNLOCK_BATCH_MQ: 42,
  GET_ALL_CONSUMER_OFFSET: 43,
  GET_ALL_DELAY_OFFSET: 45,
  REGISTER_BROKER: 103,
  UNREGISTER_BROKER: 104,
  GET_ROUTEINFO_BY_TOPIC: 105,
  GET_BROKER_CLUSTER_INFO: 106,
  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: 200,
  GET_ALL_SUBSCRIPTIONGROUP_CONFIG: 201,
  GET_TOPIC_STATS_INFO: 202,
  GET_CONSUMER_CONNECTION_LIST: 203,
  GET_ALL_TOPIC_LIST_FROM_NAMESERVER: 206,
  DELETE_SUBSCRIPTIONGROUP: 207,
  GET_CONSUME_STATS: 208,
  DELETE_TOPIC_IN_BROKER: 215,
  DELETE_TOPIC_IN_NAMESRV: 216,
  INVOKE_BROKER_TO_RESET_OFFSET: 222,
  SEND_BATCH_MESSAGE: 320,
  /** actormq: replication stream between master and slave (RocketMQ uses a raw HA socket). */
  HA_TRANSFER: 900,
  /** actormq: subscribe to a node's inspection stream (visual debugger). */
  INSPECT_SUBSCRIBE: 901,
  /** actormq: an event for a user-defined actor that has no RocketMQ code. */
  ACTOR_EVENT: 999,
} as const;
export type RequestCodeName = keyof typeof RequestCode;

/** Response codes, numbered as RocketMQ's `ResponseCode`. */
export const ResponseCode = {
  SUCCESS: 0,
  SYSTEM_ERROR: 1,
  SYSTEM_BUSY: 2,
  REQUEST_CODE_NOT_SUPPORTED: 3,
  FLUSH_DISK_TIMEOUT: 10,
  SLAVE_NOT_AVAILABLE: 11,
  FLUSH_SLAVE_TIMEOUT: 12,
  MESSAGE_ILLEGAL: 13,
  SERVICE_NOT_AVAILABLE: 14,
  VERSION_NOT_SUPPORTED: 15,
  NO_PERMISSION: 16,
  TOPIC_NOT_EXIST: 17,
  TOPIC_EXIST_ALREADY: 18,
  PULL_NOT_FOUND: 19,
  PULL_RETRY_IMMEDIATELY: 20,
  PULL_OFFSET_MOVED: 21,
  QUERY_NOT_FOUND: 22,
  SUBSCRIPTION_PARSE_FAILED: 23,
  SUBSCRIPTION_NOT_EXIST: 24,
  SUBSCRIPTION_NOT_LATEST: 25,
  SUBSCRIPTION_GROUP_NOT_EXIST: 26,
  FILTER_DATA_NOT_EXIST: 27,
  FILTER_DATA_NOT_LATEST: 28,
  INVALID_PARAMETER: 29,
  CONSUMER_NOT_ONLINE: 206,
  FLOW_CONTROL: 215,
} as const;
export type ResponseCodeName = keyof typeof ResponseCode;

/**
 * Error codes carried by {@link MQError}: RocketMQ's response-code names plus the client-side
 * conditions RocketMQ reports as exceptions. One table, `retriable` says whether trying again
 * (later, or on another broker) can succeed.
 */
export const ErrorCodes = {
  SYSTEM_ERROR: { retriable: true },
  SYSTEM_BUSY: { retriable: true },
  REQUEST_CODE_NOT_SUPPORTED: { retriable: false },
  FLUSH_DISK_TIMEOUT: { retriable: true },
  SLAVE_NOT_AVAILABLE: { retriable: true },
  FLUSH_SLAVE_TIMEOUT: { retriable: true },
  MESSAGE_ILLEGAL: { retriable: false },
  SERVICE_NOT_AVAILABLE: { retriable: true },
  NO_PERMISSION: { retriable: false },
  TOPIC_NOT_EXIST: { retriable: true },
  QUERY_NOT_FOUND: { retriable: false },
  SUBSCRIPTION_PARSE_FAILED: { retriable: false },
  SUBSCRIPTION_NOT_EXIST: { retriable: true },
  SUBSCRIPTION_NOT_LATEST: { retriable: true },
  SUBSCRIPTION_GROUP_NOT_EXIST: { retriable: false },
  INVALID_PARAMETER: { retriable: false },
  /** a consumer group with no live member on the broker asked */
  CONSUMER_NOT_ONLINE: { retriable: true },
  FLOW_CONTROL: { retriable: true },
  /** no answer within the request timeout (peer down, overloaded, or unreachable) */
  TIMEOUT: { retriable: true },
  /** no name server knows a route for the topic */
  NO_ROUTE: { retriable: true },
  /** a frame or file that cannot be decoded */
  MALFORMED: { retriable: false },
  /** the client, node or store was closed */
  CLOSED: { retriable: false },
  /** CURVE authentication failed */
  AUTH_FAILED: { retriable: false },
  /** bad option passed to a start function */
  ILLEGAL_ARGUMENT: { retriable: false },
  /** store is out of disk space or the OS refused a write */
  DISK_FULL: { retriable: true },
  /** a store directory is already held by another broker process */
  STORE_LOCKED: { retriable: false },
} as const satisfies Record<string, { retriable: boolean }>;
export type ErrorCode = keyof typeof ErrorCodes;

/**
 * The one error type of actormq. `code` is stable and machine-readable; `message` says what
 * happened and what to do. Across the wire travel `{code, message}`, never stack traces.
 */
export class MQError extends Error {
  override readonly name = "MQError";
  readonly code: ErrorCode;
  readonly retriable: boolean;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.retriable = ErrorCodes[code]?.retriable ?? false;
  }
  /** The shape sent over the wire. */
  toWire(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
  /** Rebuilds an error received over the wire; unknown codes become SYSTEM_ERROR. */
  static fromWire(w: { code?: unknown; message?: unknown }): MQError {
    // own keys only: "toString" or "constructor" off the wire are no codes
    const code = typeof w.code === "string" && Object.hasOwn(ErrorCodes, w.code) ? (w.code as ErrorCode) : "SYSTEM_ERROR";
    return new MQError(code, typeof w.message === "string" ? w.message : "remote error");
  }
}

/** True when `e` is an MQError with one of the given codes (or any code when none given). */
export function isMQError(e: unknown, ...codes: ErrorCode[]): e is MQError {
  return e instanceof MQError && (codes.length === 0 || codes.includes(e.code));
}

// ---------------------------------------------------------------------------------------------
// Shared constants (RocketMQ's names and values)

/** Permission bits (`PermName`). */
export const Perm = { INHERIT: 1, WRITE: 2, READ: 4, PRIORITY: 8 } as const;
export const PERM_READ_WRITE = Perm.READ | Perm.WRITE;
/** The largest PermName bit set: every bit of {@link Perm}. */
export const MAX_PERM = Perm.INHERIT | Perm.WRITE | Perm.READ | Perm.PRIORITY;

export const MASTER_ID = 0;
/**
 * What a broker id is, for error messages. RocketMQ's is a Java long; past 2^53 a number is not
 * exact (2^53 + 1 reads as 2^53), so two slaves could share one route entry.
 */
export const BROKER_ID_RULE = "an integer from 0 (the master) to 2^53-1 (9007199254740991; slaves 1, 2, ...)";

/** A broker id (BROKER_ID_RULE): a safe integer >= 0. */
export function isBrokerId(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}
export const DEFAULT_CLUSTER = "DefaultCluster";
export const RETRY_GROUP_TOPIC_PREFIX = "%RETRY%";
export const DLQ_GROUP_TOPIC_PREFIX = "%DLQ%";
export const SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";
/** Topic whose route every broker with autoCreateTopic serves, so unknown topics can be created on first send. */
export const AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102";
/**
 * Topics the broker manages itself: producers may not send to them, admins may not create or change
 * them. Besides TBW102 and the delay levels' topic, RocketMQ's others that refuse sends
 * (TopicValidator's NOT_ALLOWED_SEND_TOPIC_SET): the transaction topics, the self-test topic and the
 * offset-moved events (transactions are not built here: a message sent there would never be read).
 */
export const SYSTEM_TOPICS: ReadonlySet<string> = new Set([
  AUTO_CREATE_TOPIC_KEY_TOPIC,
  SCHEDULE_TOPIC,
  "RMQ_SYS_TRANS_HALF_TOPIC",
  "RMQ_SYS_TRANS_OP_HALF_TOPIC",
  "TRANS_CHECK_MAX_TIME_TOPIC",
  "SELF_TEST_TOPIC",
  "OFFSET_MOVED_EVENT",
]);
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Whether `text` is a decimal TCP port from `min` (0 to bind any, 1 to connect) to 65535. */
export function isPortText(text: string, min: number): boolean {
  return /^\d{1,5}$/.test(text) && Number(text) >= min && Number(text) <= 65535;
}
/** `tcp://host:port` (host a name, an IPv4 or a bracketed IPv6 address): what a node's ROUTER is reached at. */
const TCP_ADDRESS = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):(\d{1,5})$/;
/** Whether `text` is an address a node can connect to: `tcp://host:port` with a port from 1 to 65535. */
export function isTcpAddress(text: string): boolean {
  const m = TCP_ADDRESS.exec(text);
  return m !== null && isPortText(m[2]!, 1);
}
/** The longest delay a Node timer keeps (2^31 - 1 ms); a longer one fires after 1 ms, so timing options stop here. */
export const MAX_TIMER_MS = 2_147_483_647;
/** Largest Java int: the bound of options that are ints in RocketMQ (sizes, counts). */
export const INT32_MAX = 2_147_483_647;

/** Refuses an option that is not an integer in [min, max] (ILLEGAL_ARGUMENT, naming it). */
export function checkRange(name: string, v: unknown, min: number, max: number): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new MQError("ILLEGAL_ARGUMENT", `${name} must be an integer in [${min}, ${max}], got ${shownValue(v)}.`);
  }
}

/** How an option's value is shown in an error: a string quoted, so "false" does not read as false. */
export function shownValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  try {
    return String(v);
  } catch {
    // an object without a prototype (or a throwing toString) has no text: the error must still be built
    return `a value of type ${typeof v}`;
  }
}

/**
 * A field's value a peer sent, as a remark shows it: short (strings quoted and cut at 40
 * characters), never an object's own String().
 */
export function shownWireValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (typeof v === "number" || typeof v === "boolean" || v == null) return String(v);
  return `a value of type ${typeof v}`;
}

/** Refuses an option that is set but not true or false (ILLEGAL_ARGUMENT, naming it): "false" would read as true. */
export function checkBoolean(name: string, v: unknown): void {
  if (v !== undefined && typeof v !== "boolean")
    throw new MQError("ILLEGAL_ARGUMENT", `${name} must be true or false, got ${shownValue(v)}.`);
}
export const TOPIC_MAX_LENGTH = 127;
export const TOPIC_PATTERN = /^[%|a-zA-Z0-9_-]+$/;
/** Characters of broker and cluster names (brokers check theirs at start, name servers every registration). */
export const BROKER_NAME_PATTERN = /^[a-zA-Z0-9_.-]+$/;
/** Longest producer or consumer group name. */
export const GROUP_MAX_LENGTH = 255;

/**
 * Longest clustering consumer group: its retry topic `%RETRY%<group>` must be a valid topic name
 * (127 characters, what the store's records hold). Broadcasting groups have no retry topic.
 */
export const CLUSTERING_GROUP_MAX_LENGTH = TOPIC_MAX_LENGTH - RETRY_GROUP_TOPIC_PREFIX.length;

/** Refuses a clustering consumer group whose retry topic would be too long (ILLEGAL_ARGUMENT). */
export function checkRetryTopicFits(group: string): void {
  if (group.length <= CLUSTERING_GROUP_MAX_LENGTH) return;
  throw new MQError(
    "ILLEGAL_ARGUMENT",
    `The consumer group "${group.slice(0, 20)}..." is ${group.length} characters long: the group name is too long for its retry topic ` +
      `(${RETRY_GROUP_TOPIC_PREFIX}<group> must fit ${TOPIC_MAX_LENGTH} characters). Use a shorter name: at most ` +
      `${CLUSTERING_GROUP_MAX_LENGTH} characters for a clustering consumer.`,
  );
}

/**
 * The command that creates `topic` on every master, as the errors of a missing topic name it:
 * `actormq topic create <topic>`, the topic quoted for a POSIX shell when it needs it (`|` is a
 * pipe there) and after `--` when it starts with `-` (it would be read as a flag).
 */
export function topicCreateCommand(topic: string): string {
  return `actormq topic create ${topic.startsWith("-") ? "-- " : ""}${shellArg(topic)}`;
}

/** Whether `name` is a well-formed group name: 1-255 of the characters topic names use. */
export function isGroupName(name: unknown): name is string {
  return typeof name === "string" && name.length > 0 && name.length <= GROUP_MAX_LENGTH && TOPIC_PATTERN.test(name);
}

/** Message property names (`MessageConst`). */
export const MessageConst = {
  KEYS: "KEYS",
  TAGS: "TAGS",
  WAIT_STORE_MSG_OK: "WAIT",
  DELAY: "DELAY",
  RETRY_TOPIC: "RETRY_TOPIC",
  REAL_TOPIC: "REAL_TOPIC",
  REAL_QUEUE_ID: "REAL_QID",
  ORIGIN_MESSAGE_ID: "ORIGIN_MESSAGE_ID",
  UNIQ_KEY: "UNIQ_KEY",
  MAX_RECONSUME_TIMES: "MAX_RECONSUME_TIMES",
  /** a client's own retry copy: its reconsume times (the request header carries it; RocketMQ's PROPERTY_RECONSUME_TIME) */
  RECONSUME_TIME: "RECONSUME_TIME",
  CONSUME_START_TIME: "CONSUME_START_TIME",
  MIN_OFFSET: "MIN_OFFSET",
  MAX_OFFSET: "MAX_OFFSET",
  DELIVER_TIME: "__STARTDELIVERTIME",
} as const;

/** Pull request sysFlag bits (`PullSysFlag`). */
export const PullSysFlag = { COMMIT_OFFSET: 0x1, SUSPEND: 0x2, SUBSCRIPTION: 0x4, CLASS_FILTER: 0x8, LITE_PULL: 0x10 } as const;

/**
 * Whether `s` is well-formed UTF-16 (no unpaired surrogate), so UTF-8 carries it unchanged; encoding
 * replaces an unpaired surrogate with U+FFFD. A native scan (ES2024's isWellFormed): no allocation.
 */
export function isWellFormedText(s: string): boolean {
  return (s as unknown as { isWellFormed(): boolean }).isWellFormed();
}

/** Whether `v` is an integer a Java `int` holds (what the wire and the store keep as 32 bits). */
export function isInt32(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= -0x80000000 && v <= 0x7fffffff;
}

/**
 * Refuses a topic create or update of a system topic (RocketMQ's AdminBrokerProcessor: "conflict with
 * system topic"): a TBW102 without its INHERIT bit stops auto-creation, a SCHEDULE_TOPIC_XXXX with
 * fewer queues loses delay levels. Retry and DLQ topics stay configurable, as in RocketMQ.
 */
export function checkNotSystemTopic(topic: string): void {
  if (SYSTEM_TOPICS.has(topic))
    throw new MQError(
      "INVALID_PARAMETER",
      `The topic "${topic}" is conflict with system topic: the broker manages it; choose another name.`,
    );
}

/**
 * Validates a topic name by RocketMQ's rules; throws MQError MESSAGE_ILLEGAL. `what` names the call
 * the topic was given to ("createTopic", "subscribe"); without it the topic is a message's.
 */
export function checkTopic(topic: unknown, what?: string): asserts topic is string {
  const subject = what ? `${what}: the topic` : "The topic";
  if (typeof topic !== "string") {
    throw new MQError("MESSAGE_ILLEGAL", `${subject} must be a topic name (a string), got ${shownValue(topic)}.`);
  }
  if (topic.length === 0) {
    throw new MQError(
      "MESSAGE_ILLEGAL",
      what ? `${subject} is empty: name a topic.` : "The topic is empty: give every message a topic name.",
    );
  }
  if (topic.length > TOPIC_MAX_LENGTH) {
    throw new MQError(
      "MESSAGE_ILLEGAL",
      `${subject} "${topic.slice(0, 20)}..." is ${topic.length} characters long; at most ${TOPIC_MAX_LENGTH} are allowed.`,
    );
  }
  if (!TOPIC_PATTERN.test(topic)) {
    throw new MQError("MESSAGE_ILLEGAL", `${subject} "${topic}" has illegal characters; use only letters, digits, '%', '|', '_' and '-'.`);
  }
  checkNotReserved(topic, "topic");
}

/**
 * A name RocketMQ's pattern allows that actormq refuses for topics, consumer groups, brokers and
 * message properties: tables keyed by such names travel as msgpack maps decoded to objects (and
 * properties are decoded to one), where this key is the prototype, not an entry.
 */
const RESERVED_NAME = "__proto__";

/** Throws the MQError for a name that is {@link RESERVED_NAME} (MESSAGE_ILLEGAL for what a message carries). */
export function checkNotReserved(name: string, what: "topic" | "property" | "consumer group" | "broker" | "cluster"): void {
  if (name !== RESERVED_NAME) return;
  throw new MQError(
    what === "topic" || what === "property" ? "MESSAGE_ILLEGAL" : "ILLEGAL_ARGUMENT",
    `The ${what} name "${RESERVED_NAME}" is reserved (objects keyed by ${what} name cannot hold it): choose another name.`,
  );
}

// ---------------------------------------------------------------------------------------------
// Shapes that travel in request and reply fields

/** A queue of a topic on one broker (RocketMQ's `MessageQueue`). */
export interface MessageQueue {
  topic: string;
  brokerName: string;
  queueId: number;
}

/** Whether `q` has a MessageQueue's fields: string topic and brokerName, an integer queueId (callers judge their values). */
export function hasMessageQueueFields(q: unknown): q is MessageQueue {
  const m = q as MessageQueue | null;
  return (
    typeof m === "object" && m !== null && typeof m.topic === "string" && typeof m.brokerName === "string" && Number.isInteger(m.queueId)
  );
}

/** `topic@brokerName@queueId`: a stable string key for a MessageQueue. */
export function mqKey(mq: MessageQueue): string {
  return `${mq.topic}@${mq.brokerName}@${mq.queueId}`;
}

/** Sorts queues by topic, broker name, queue id (RocketMQ's `MessageQueue.compareTo`). */
export function compareMessageQueue(a: MessageQueue, b: MessageQueue): number {
  if (a.topic !== b.topic) return a.topic < b.topic ? -1 : 1;
  if (a.brokerName !== b.brokerName) return a.brokerName < b.brokerName ? -1 : 1;
  return a.queueId - b.queueId;
}

/** One topic's configuration on one broker (`TopicConfig`). */
export interface TopicConfig {
  topicName: string;
  readQueueNums: number;
  writeQueueNums: number;
  perm: number;
  order: boolean;
}

/** Largest queue count a topic may have on one broker. */
export const MAX_QUEUE_NUMS = 1024;

/** Checks a topic config's name, queue numbers and permission (broker configs, and what a broker registers with the name server); throws MQError INVALID_PARAMETER. */
export function checkTopicConfig(tc: TopicConfig): void {
  checkTopic(tc.topicName, "topic config");
  for (const k of ["readQueueNums", "writeQueueNums"] as const) {
    const v = tc[k];
    if (!Number.isInteger(v) || v < 0 || v > MAX_QUEUE_NUMS) {
      throw new MQError(
        "INVALID_PARAMETER",
        `${k} of topic "${tc.topicName}" must be an integer between 0 and ${MAX_QUEUE_NUMS}, not ${String(v)}.`,
      );
    }
  }
  if (!Number.isInteger(tc.perm) || tc.perm < 0 || tc.perm > MAX_PERM) {
    throw new MQError(
      "INVALID_PARAMETER",
      `perm of topic "${tc.topicName}" must be a PermName bit set (READ 4 | WRITE 2 | INHERIT 1), not ${String(tc.perm)}.`,
    );
  }
}

/** Route queue data: a topic's queues on one broker name (`QueueData`). */
export interface QueueData {
  brokerName: string;
  readQueueNums: number;
  writeQueueNums: number;
  perm: number;
}

/** Route broker data: addresses by broker id (`BrokerData`). */
export interface BrokerData {
  cluster: string;
  brokerName: string;
  /** brokerId (as string key, as in RocketMQ's JSON) to address */
  brokerAddrs: Record<string, string>;
}

/** A topic's route (`TopicRouteData`). */
export interface TopicRouteData {
  orderTopicConf?: string;
  queueDatas: QueueData[];
  brokerDatas: BrokerData[];
}

/** A consumer's subscription to one topic as it travels in heartbeats (`SubscriptionData`). */
export interface SubscriptionData {
  topic: string;
  subString: string;
  expressionType: "TAG" | "SQL92";
  tagsSet: string[];
  codeSet: number[];
  subVersion: number;
}

export type MessageModel = "CLUSTERING" | "BROADCASTING";
export type ConsumeType = "CONSUME_PASSIVELY" | "CONSUME_ACTIVELY";
export type ConsumeFromWhere = "CONSUME_FROM_LAST_OFFSET" | "CONSUME_FROM_FIRST_OFFSET" | "CONSUME_FROM_TIMESTAMP";

/** Send status as reported in SendResult. */
export type SendStatus = "SEND_OK" | "FLUSH_DISK_TIMEOUT" | "FLUSH_SLAVE_TIMEOUT" | "SLAVE_NOT_AVAILABLE";

// ---------------------------------------------------------------------------------------------
// Name server, broker registration, send path and topic administration (fields of the requests
// REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO,
// GET_ALL_TOPIC_LIST_FROM_NAMESERVER, SEND_MESSAGE, SEND_BATCH_MESSAGE, UPDATE_AND_CREATE_TOPIC,
// GET_ALL_TOPIC_CONFIG, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG)

/** The actor a name server node hosts. */
export const NAMESRV_ACTOR = "namesrv";

/** Actor names on a broker node (see docs/internals.md §6). */
export const BrokerActor = {
  BROKER: "broker",
  STORE: "store",
  PULL: "pull",
  HOLD: "hold",
  CONSUMERS: "consumers",
  OFFSETS: "offsets",
  LOCKS: "locks",
  SCHEDULER: "scheduler",
  SENDBACK: "sendback",
  REGISTRAR: "registrar",
  HA: "ha",
} as const;

/** Separator between keys in the KEYS property (RocketMQ's `MessageConst.KEY_SEPARATOR`). */
export const KEY_SEPARATOR = " ";

/** REGISTER_BROKER fields: a broker announces itself and its topics (every 30 s and on change). */
export interface RegisterBrokerRequest {
  clusterName: string;
  brokerName: string;
  brokerAddr: string;
  brokerId: number;
  haServerAddr?: string;
  /** how long the name server keeps the broker without a new registration; default 120 000 ms */
  heartbeatTimeoutMillis?: number;
  /** a master's topics; absent, the registration refreshes liveness only (RocketMQ's null topicConfigWrapper) */
  topicConfigTable?: Record<string, TopicConfig>;
  dataVersion: number;
}

/** REGISTER_BROKER reply fields. */
export interface RegisterBrokerReply {
  masterAddr?: string;
  haServerAddr?: string;
}

/** UNREGISTER_BROKER fields (a clean broker shutdown). */
export interface UnregisterBrokerRequest {
  clusterName: string;
  brokerName: string;
  brokerAddr: string;
  brokerId: number;
}

/** GET_ROUTEINFO_BY_TOPIC fields; the reply fields are a {@link TopicRouteData}. */
export interface GetRouteInfoRequest {
  topic: string;
}

/** GET_BROKER_CLUSTER_INFO reply fields (`ClusterInfo`). */
export interface ClusterInfo {
  /** broker name to its addresses by broker id */
  brokerAddrTable: Record<string, BrokerData>;
  /** cluster name to the broker names in it */
  clusterAddrTable: Record<string, string[]>;
}

/** GET_ALL_TOPIC_LIST_FROM_NAMESERVER reply fields. */
export interface TopicList {
  topicList: string[];
}

/**
 * SEND_MESSAGE / SEND_BATCH_MESSAGE fields (`SendMessageRequestHeader`). The frame body is the
 * message body (SEND_MESSAGE) or an `encodeMessageBatch` body (SEND_BATCH_MESSAGE).
 */
export interface SendMessageRequest {
  producerGroup: string;
  topic: string;
  /** queue to append to; -1 lets the broker choose */
  queueId: number;
  sysFlag: number;
  bornTimestamp: number;
  /** user flag (SEND_MESSAGE only; a batch carries one per message) */
  flag?: number;
  /** encoded properties (SEND_MESSAGE only; a batch carries them per message) */
  properties?: string;
  reconsumeTimes?: number;
  /** "ip:port" of the producer, when it knows one */
  bornHost?: string;
}

/** SEND_MESSAGE / SEND_BATCH_MESSAGE reply fields (`SendMessageResponseHeader` + status). */
export interface SendMessageReply {
  status: SendStatus;
  /** offset message id(s) of the stored message(s), comma-separated for a batch */
  msgId: string;
  queueId: number;
  /** queue offset of the (first) stored message */
  queueOffset: number;
  commitLogOffset: number;
  /** number of messages stored */
  count: number;
}

/** UPDATE_AND_CREATE_TOPIC fields. */
export interface UpdateTopicRequest {
  topicName: string;
  /** not given: an existing topic keeps its count; a new one takes writeQueueNums, else defaultQueueNums */
  readQueueNums?: number;
  /** not given: an existing topic keeps its count; a new one takes readQueueNums, else defaultQueueNums */
  writeQueueNums?: number;
  /** queues of a new topic given neither count @default the broker's defaultQueueNums */
  defaultQueueNums?: number;
  /** not given: an existing topic keeps its perm; a new one is 6 (read and write) */
  perm?: number;
  /** not given: an existing topic stays as it is; a new one is unordered */
  order?: boolean;
}

/** GET_ALL_TOPIC_CONFIG reply fields. */
export interface TopicConfigTable {
  topicConfigTable: Record<string, TopicConfig>;
  dataVersion: number;
  /** actormq: topics deleted from the broker's store, with the commit-log offset each was deleted at (slaves delete theirs there) */
  deletedTopics?: Record<string, number>;
}

/** DELETE_TOPIC_IN_BROKER fields (RocketMQ's `DeleteTopicRequestHeader`). */
export interface DeleteTopicRequest {
  topic: string;
  /** actormq, to a slave: the commit-log offset its master deleted the topic at (the reply's `deletedAt`) */
  deletedAt?: number;
}

/** DELETE_TOPIC_IN_BROKER reply fields. */
export interface DeleteTopicReply {
  /** whether the broker had the topic's config */
  existed: boolean;
  /** the commit-log offset the store deleted the topic at */
  deletedAt: number;
}

/** DELETE_SUBSCRIPTIONGROUP fields (RocketMQ's `DeleteSubscriptionGroupRequestHeader`). */
export interface DeleteSubscriptionGroupRequest {
  groupName: string;
  /** also forget the group's consumer offsets @default false */
  cleanOffset?: boolean;
}

/** DELETE_SUBSCRIPTIONGROUP reply fields. */
export interface DeleteSubscriptionGroupReply {
  /** whether the broker had the group's config */
  existed: boolean;
  /** how many topic@group offset entries were forgotten */
  offsetsRemoved: number;
}

/** The true-or-false fields of a {@link SubscriptionGroupConfig}. */
export const SUBSCRIPTION_GROUP_BOOLEAN_FIELDS = [
  "consumeEnable",
  "consumeFromMinEnable",
  "consumeBroadcastEnable",
  "consumeMessageOrderly",
  "notifyConsumerIdsChangedEnable",
] as const;

/**
 * The integer fields of a {@link SubscriptionGroupConfig} and their ranges, checked by the broker
 * and, before any broker is asked, by Admin.updateSubscriptionGroup (retryQueueNums is the queue
 * count of the group's retry topic).
 */
export const SUBSCRIPTION_GROUP_INT_RANGES: readonly (readonly [keyof SubscriptionGroupConfig, number, number])[] = [
  ["retryQueueNums", 0, MAX_QUEUE_NUMS],
  ["retryMaxTimes", -1, 0x7fffffff],
  ["brokerId", 0, 0x7fffffff],
  ["whichBrokerWhenConsumeSlowly", 0, 0x7fffffff],
  ["consumeTimeoutMinute", 0, 0x7fffffff],
];

/** A consumer group's settings on a broker (`SubscriptionGroupConfig`). */
export interface SubscriptionGroupConfig {
  groupName: string;
  consumeEnable: boolean;
  consumeFromMinEnable: boolean;
  consumeBroadcastEnable: boolean;
  consumeMessageOrderly: boolean;
  retryQueueNums: number;
  retryMaxTimes: number;
  brokerId: number;
  whichBrokerWhenConsumeSlowly: number;
  notifyConsumerIdsChangedEnable: boolean;
  consumeTimeoutMinute: number;
  /**
   * actormq: the model of the latest heartbeat of the group's members on this broker, recorded by
   * the broker (not set by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) and kept when they leave: a
   * broadcasting group's offsets are kept by its members, so its resets are refused with or
   * without members online. Absent until a member's heartbeat.
   */
  messageModel?: MessageModel;
}

/** UPDATE_AND_CREATE_SUBSCRIPTIONGROUP fields: a partial config, `groupName` required. */
export type UpdateSubscriptionGroupRequest = Partial<SubscriptionGroupConfig> & { groupName: string };

// ---------------------------------------------------------------------------------------------
// Consumption: pulls, membership, offsets, locks, send-back (fields of requests and replies)

/** Which broker actor serves each consumption request. */
export const ConsumptionActorFor = {
  PULL_MESSAGE: "pull",
  HEART_BEAT: "consumers",
  UNREGISTER_CLIENT: "consumers",
  GET_CONSUMER_LIST_BY_GROUP: "consumers",
  GET_CONSUMER_CONNECTION_LIST: "consumers",
  QUERY_CONSUMER_OFFSET: "offsets",
  UPDATE_CONSUMER_OFFSET: "offsets",
  GET_CONSUME_STATS: "offsets",
  INVOKE_BROKER_TO_RESET_OFFSET: "offsets",
  GET_MAX_OFFSET: "offsets",
  GET_MIN_OFFSET: "offsets",
  SEARCH_OFFSET_BY_TIMESTAMP: "offsets",
  GET_EARLIEST_MSG_STORETIME: "offsets",
  LOCK_BATCH_MQ: "locks",
  UNLOCK_BATCH_MQ: "locks",
  CONSUMER_SEND_MSG_BACK: "sendback",
} as const;

/** Name of the actor every client node hosts for broker-initiated events (NOTIFY_CONSUMER_IDS_CHANGED). */
export const CLIENT_ACTOR = "client";

/** PULL_MESSAGE fields (`PullMessageRequestHeader`). */
export interface PullMessageRequest {
  consumerGroup: string;
  topic: string;
  queueId: number;
  queueOffset: number;
  maxMsgNums: number;
  /** PullSysFlag bits */
  sysFlag: number;
  commitOffset: number;
  /** how long the broker may hold the pull when nothing is there (push consumer: 15 000) */
  suspendTimeoutMillis: number;
  /** subscription expression, sent when sysFlag has SUBSCRIPTION */
  subscription?: string;
  subVersion: number;
  expressionType?: "TAG" | "SQL92";
  /** byte cap of the answer */
  maxMsgBytes?: number;
  /** the puller's client id: the broker records who holds the queue (queue hand-over, internals §6.5) */
  clientId?: string;
  /**
   * CRC-check every record served, also those the broker appended since it started (which it
   * otherwise frames only, the consumer checking CRCs): sent after a record failed its check on
   * decode, so a record damaged in the broker's store is skipped and reported there, not served again.
   */
  verifyRecords?: boolean;
}

/** Pull answer status: a RocketMQ response-code name. Errors (TOPIC_NOT_EXIST, ...) come as MQError. */
export type PullResponseStatus = "SUCCESS" | "PULL_NOT_FOUND" | "PULL_RETRY_IMMEDIATELY" | "PULL_OFFSET_MOVED";

/** PULL_MESSAGE reply fields; the body holds the stored records of the messages found, concatenated. */
export interface PullMessageReply {
  status: PullResponseStatus;
  nextBeginOffset: number;
  minOffset: number;
  maxOffset: number;
  suggestWhichBrokerId: number;
  /** number of records in the body */
  messageCount?: number;
}

/** One consumer group's part of a heartbeat (`ConsumerData`). */
export interface ConsumerData {
  groupName: string;
  consumeType: ConsumeType;
  messageModel: MessageModel;
  consumeFromWhere: ConsumeFromWhere;
  subscriptionDataSet: SubscriptionData[];
}

/** HEART_BEAT fields (`HeartbeatData`). */
export interface HeartbeatRequest {
  clientID: string;
  producerDataSet: { groupName: string }[];
  consumerDataSet: ConsumerData[];
  /**
   * What RocketMQ's broker reads off the heartbeat's connection (`ClientChannelInfo`): the client's
   * address ("ip:0": a client does not listen), language and version. Optional: heartbeats of
   * versions without them are taken, and listed without them.
   */
  clientAddr?: string;
  /** @default "NODE" for actormq clients */
  language?: string;
  version?: string;
}

/** Language actormq clients name in their heartbeats (RocketMQ's `LanguageCode`). */
export const CLIENT_LANGUAGE = "NODE";

/** GET_CONSUMER_CONNECTION_LIST fields (`GetConsumerConnectionListRequestHeader`). */
export interface GetConsumerConnectionListRequest {
  consumerGroup: string;
}

/** One member of a group as the broker knows it (RocketMQ's `Connection`). */
export interface ConsumerConnectionEntry {
  clientId: string;
  /** "ip:0", or "" when the member's heartbeats do not say */
  clientAddr: string;
  /** "NODE", or "" when its heartbeats do not say */
  language: string;
  /** the client's version, or "" when its heartbeats do not say */
  version: string;
  /** wall-clock ms of its last heartbeat on this broker */
  lastUpdateTimestamp: number;
}

/** GET_CONSUMER_CONNECTION_LIST reply fields (`ConsumerConnection`). */
export interface ConsumerConnectionReply {
  connectionSet: ConsumerConnectionEntry[];
  /** topic to the group's subscription */
  subscriptionTable: Record<string, SubscriptionData>;
  consumeType: ConsumeType;
  messageModel: MessageModel;
  consumeFromWhere: ConsumeFromWhere;
}

/** GET_BROKER_CONFIG reply fields: the broker's running configuration and what UPDATE_BROKER_CONFIG may change. */
export interface BrokerConfigReply {
  brokerName: string;
  brokerAddr: string;
  /** option name to its value now (BrokerOptions' names) */
  brokerConfig: Record<string, string | number | boolean | string[]>;
  /** the keys UPDATE_BROKER_CONFIG takes */
  settableKeys: string[];
}

/** UPDATE_BROKER_CONFIG fields: key to new value (a number or its decimal text). */
export interface UpdateBrokerConfigRequest {
  properties: Record<string, string | number | boolean>;
}

/** UNREGISTER_CLIENT fields. */
export interface UnregisterClientRequest {
  clientID: string;
  producerGroup?: string;
  consumerGroup?: string;
}

/** GET_CONSUMER_LIST_BY_GROUP fields and reply. */
export interface GetConsumerListRequest {
  consumerGroup: string;
}
export interface GetConsumerListReply {
  consumerIdList: string[];
}

/** NOTIFY_CONSUMER_IDS_CHANGED fields (broker -> client actor {@link CLIENT_ACTOR}, one-way). */
export interface NotifyConsumerIdsChanged {
  consumerGroup: string;
}

/** QUERY_CONSUMER_OFFSET fields; reply `{ offset }` or MQError QUERY_NOT_FOUND. */
export interface QueryConsumerOffsetRequest {
  consumerGroup: string;
  topic: string;
  queueId: number;
  /** RocketMQ's setZeroIfNotFound (default true) */
  setZeroIfNotFound?: boolean;
  /** the asking client: with `waitRelease`, it takes the queue over (internals §6.5) */
  clientId?: string;
  /**
   * hand-over: when another live member of the group holds the queue, the answer waits until that
   * member released it (UPDATE_CONSUMER_OFFSET `release`), left the group, or the broker's
   * hand-over timeout (5 s) passed; the asker then holds the queue
   */
  waitRelease?: boolean;
}

/** UPDATE_CONSUMER_OFFSET fields (next offset to consume). */
export interface UpdateConsumerOffsetRequest {
  consumerGroup: string;
  topic: string;
  queueId: number;
  commitOffset: number;
  /** the committing client (needed with `release`) */
  clientId?: string;
  /** hand-over: this client let the queue go; `commitOffset` (when >= 0) is its final offset (internals §6.5) */
  release?: boolean;
}

/** GET_MAX_OFFSET / GET_MIN_OFFSET / GET_EARLIEST_MSG_STORETIME fields; reply `{ offset }` / `{ timestamp }`. */
export interface QueueOffsetRequest {
  topic: string;
  queueId: number;
}
/** SEARCH_OFFSET_BY_TIMESTAMP fields; reply `{ offset }`. */
export interface SearchOffsetRequest {
  topic: string;
  queueId: number;
  timestamp: number;
}

/** GET_CONSUME_STATS fields and reply (`ConsumeStats`). */
export interface GetConsumeStatsRequest {
  consumerGroup: string;
  topic?: string;
}
export interface QueueConsumeStats {
  topic: string;
  brokerName: string;
  queueId: number;
  brokerOffset: number;
  consumerOffset: number;
  lastTimestamp: number;
}
export interface ConsumeStatsReply {
  offsetTable: QueueConsumeStats[];
  consumeTps: number;
}
/** GET_TOPIC_STATS_INFO fields and reply (RocketMQ's `TopicStatsTable`): per write queue of the topic on one broker. */
export interface TopicStatsRequest {
  topic: string;
}
export interface QueueTopicStats {
  topic: string;
  brokerName: string;
  queueId: number;
  /** the queue's first readable offset (moves up when old commit-log files are deleted) */
  minOffset: number;
  /** the offset the next message will get */
  maxOffset: number;
  /** store time (ms) of the queue's last message, 0 when it has none (or it can no longer be read) */
  lastUpdateTimestamp: number;
}
export interface TopicStatsReply {
  offsetTable: QueueTopicStats[];
}
/** One slave of a master as GET_BROKER_RUNTIME_INFO shows it (RocketMQ's HAConnectionRuntimeInfo). */
export interface HaSlaveRuntimeInfo {
  slaveId: number;
  /** the address the slave replicates for */
  addr: string;
  /** the commit-log offset the slave last acknowledged */
  slaveAckOffset: number;
  /** the master's commit-log max offset less slaveAckOffset: bytes the slave has yet to copy */
  diff: number;
  /** diff below haMaxGapNotInSync: a SYNC_MASTER send can wait for this slave */
  inSync: boolean;
}
/**
 * GET_BROKER_RUNTIME_INFO reply (RocketMQ's runtime info KV table, `mqadmin brokerStatus`), with
 * RocketMQ's key names where it has one; numbers are numbers, not strings.
 */
export interface BrokerRuntimeInfo {
  brokerName: string;
  brokerId: number;
  clusterName: string;
  brokerAddr: string;
  /** "actormq <version>" */
  brokerVersionDesc: string;
  brokerVersion: string;
  role: "ASYNC_MASTER" | "SYNC_MASTER" | "SLAVE";
  /** "sync" or "async" */
  flush: "sync" | "async";
  /** RocketMQ's name of the flush mode: SYNC_FLUSH or ASYNC_FLUSH */
  flushDiskType: "SYNC_FLUSH" | "ASYNC_FLUSH";
  /** PermName bits: 6 read and write, 4 read only, 2 write only */
  brokerPermission: number;
  /** when the broker started (ms since the epoch) */
  bootTimestamp: number;
  /** time since the start, RocketMQ's "[ d days, h hours, m minutes, s seconds ]" */
  runtime: string;
  /** time since the start (ms) */
  uptimeMs: number;
  /** messages stored by sends since the start (RocketMQ: since the start too, without system topics) */
  msgPutTotalTodayNow: number;
  /** messages served to pulls since the start */
  msgGetTotalTodayNow: number;
  /** messages stored by sends per second over the last minute */
  putTps: number;
  /** messages served to pulls per second over the last minute */
  getTransferedTps: number;
  commitLogMinOffset: number;
  commitLogMaxOffset: number;
  /** used share (0–1) of the file system holding the store; -1 when it cannot be read */
  commitLogDiskRatio: number;
  /** store time of the commit log's first message; -1 when it holds none */
  earliestMessageTimeStamp: number;
  /** commit-log bytes not yet in the consume queues and index */
  dispatchBehindBytes: number;
  /** pulls held by long polling now */
  pullRequestsHeld: number;
  /** consumer groups with a live member here, and their members */
  consumerGroupsOnline: number;
  consumersOnline: number;
  /** producer groups that sent here in the last two minutes */
  producerGroupsOnline: number;
  /** connections to the broker's listening socket open now (clients, slaves, tools) */
  clientConnections: number;
  topicCount: number;
  /** reads that met a damaged record and skipped it, since the start */
  damagedRecordsSkipped: number;
  /** consume-queue entries rewritten after their record was found again */
  entriesRepaired: number;
  /** commit-log bytes replaced by a filler in replication reads */
  replicationBytesSkipped: number;
  /** failed fdatasyncs and checkpoints since the start */
  flushErrors: number;
  /** a master's connected slaves (empty on a slave, and on a master without any) */
  haSlaves: HaSlaveRuntimeInfo[];
  /** a slave's master; null while none is known (absent on a master) */
  masterAddr?: string | null;
  /** a slave replicating now (absent on a master) */
  haConnected?: boolean;
  /** the master's commit-log max offset at its last answer; -1 before one (absent on a master) */
  masterCommitLogMaxOffset?: number;
  /** bytes the slave has yet to copy, as of the master's last answer (absent on a master) */
  slaveFallBehindBytes?: number;
  /** the same as commitLogMinOffset / commitLogMaxOffset (the reply's first names) */
  minPhyOffset: number;
  maxPhyOffset: number;
}
/** INVOKE_BROKER_TO_RESET_OFFSET fields; reply `{ offsetTable: { queueId, offset }[] }`. */
export interface ResetOffsetRequest {
  topic: string;
  group: string;
  timestamp: number;
  isForce?: boolean;
}

/** LOCK_BATCH_MQ / UNLOCK_BATCH_MQ fields; lock reply `{ lockOKMQSet }`. */
export interface LockBatchRequest {
  consumerGroup: string;
  clientId: string;
  mqSet: MessageQueue[];
}
export interface LockBatchReply {
  lockOKMQSet: MessageQueue[];
}

/** CONSUMER_SEND_MSG_BACK fields (`ConsumerSendMsgBackRequestHeader`). */
export interface ConsumerSendMsgBackRequest {
  group: string;
  /** commit-log offset of the message to send back */
  offset: number;
  /** 0 = broker decides (3 + reconsumeTimes); -1 = straight to the DLQ */
  delayLevel: number;
  originMsgId: string;
  originTopic: string;
  maxReconsumeTimes: number;
  /**
   * The message's reconsumeTimes as the client counted it, when that is more than the stored
   * copy says: an orderly consumer retries in place, so the stored message still says 0. The
   * broker counts from the larger of the two. Absent (older clients, concurrent consumers): the
   * stored count.
   */
  reconsumeTimes?: number;
}

// ---------------------------------------------------------------------------------------------
// Replication (master/slave): HA_TRANSFER between a slave's `ha` actor and its master's

/**
 * HA_TRANSFER fields, slave -> master `ha` actor: "I hold the commit log up to `offset`; send me
 * what follows". Each request is also the slave's acknowledgement of `offset` and its heartbeat.
 * The master answers at once with bytes, or holds the request until new data or its hold time.
 */
export interface HaTransferRequest {
  /** the slave's brokerId */
  slaveId: number;
  /** the slave's broker address (for logs and runtime info) */
  slaveAddr: string;
  /** the slave's commit-log max offset (everything below is stored on the slave) */
  offset: number;
  /** the slave's commit log holds no bytes: it may begin at the master's oldest offset */
  empty?: boolean;
  /** the slave's broker name: a master serves only slaves of its own */
  brokerName?: string;
  /** the slave's commitLogSegmentBytes: a master serves only slaves with its own */
  segmentBytes?: number;
  /**
   * Where the slave's last commit-log entry (record, filler or BLANK marker) begins, and a CRC32
   * of it (`tailCrc`): the master serves the slave only when its own log holds the same entry there,
   * ending at `offset` (otherwise the logs differ, or `offset` is not where an entry begins).
   * Absent for an empty log; then `offset` must be where an entry of the master's log begins.
   */
  tailAt?: number;
  tailCrc?: number;
}
/** HA_TRANSFER reply fields; the body holds the stored commit-log bytes from `offset` (none when nothing new). */
export interface HaTransferReply {
  /** the commit-log offset the body starts at (the request's) */
  offset: number;
  /** the master's commit-log max offset when it answered */
  masterMaxOffset: number;
  /**
   * Set (with no body) when an empty slave asks for an offset older than the master's oldest
   * segment: the slave's commit log is to begin here, and it asks again from this offset.
   */
  startAt?: number;
  /** the master's topic and subscription-group config versions: a change makes the slave copy them */
  configVersion?: string;
}
/**
 * HA_LEAVE fields, slave -> master `ha` actor, sent by a slave that stops: the master forgets it at
 * once (RocketMQ's HAConnection ends with the slave's socket) and answers the sends waiting for it.
 * Reply `{}`. Without it (kill -9, an older slave) the master finds the slave gone after its hold.
 */
export interface HaLeaveRequest {
  slaveId: number;
  slaveAddr: string;
}

// ---------------------------------------------------------------------------------------------
// Message lookup: QUERY_MESSAGE (by key or UNIQ_KEY, over the store's index) and
// VIEW_MESSAGE_BY_ID (by commit-log offset), served by the broker actor `query`

/** The broker actor that answers QUERY_MESSAGE and VIEW_MESSAGE_BY_ID. */
export const QUERY_MESSAGE_ACTOR = "query";
/** Messages a key query returns when the caller names no maximum (RocketMQ's `defaultQueryMaxNum`). */
export const DEFAULT_QUERY_MAX_NUM = 32;
/** Most messages one broker returns for one key query (RocketMQ's `maxMsgsNumBatch`). */
export const MAX_QUERY_MAX_NUM = 64;

/**
 * QUERY_MESSAGE fields (`QueryMessageRequestHeader`). With `uniqKey` the key is a UNIQ_KEY (what
 * SendResult.msgId is); then `topic` may be left out and the broker looks in every topic it has.
 */
export interface QueryMessageRequest {
  topic?: string;
  key: string;
  /** @default 32, at most 64 */
  maxNum?: number;
  /** store-time window, ms since the epoch; @default 0 .. now */
  beginTimestamp?: number;
  endTimestamp?: number;
  /** RocketMQ's `_UNIQUE_KEY_QUERY`: look the key up as a UNIQ_KEY */
  uniqKey?: boolean;
}

/** QUERY_MESSAGE reply fields; the body holds the stored records, concatenated. None found: MQError QUERY_NOT_FOUND. */
export interface QueryMessageReply {
  /** number of records in the body */
  count: number;
}

/** VIEW_MESSAGE_BY_ID fields (`ViewMessageRequestHeader`): the commit-log offset an offset msg id carries. */
export interface ViewMessageRequest {
  offset: number;
}

/** VIEW_MESSAGE_BY_ID reply fields; the body is the one stored record. None there: MQError QUERY_NOT_FOUND. */
export interface ViewMessageReply {
  /** the record's commit-log offset (the request's) */
  offset: number;
}
