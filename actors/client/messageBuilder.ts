/**
 * From a user's message to what travels: validation (RocketMQ's `Validators.checkMessage`),
 * system properties (TAGS, KEYS, DELAY, UNIQ_KEY), body compression and the batch body of
 * `sendBatch`.
 */
import { deflateSync } from "node:zlib";
import {
  type BatchMessage,
  CRC_PROPERTY,
  checkSendProperties,
  createUniqId,
  encodeMessageBatch,
  encodeProperty,
  MessageSysFlag,
  NAME_VALUE_SEPARATOR,
  PROPERTY_SEPARATOR,
} from "../../transport/messageRecord.ts";
import {
  checkNotReserved,
  checkTopic,
  DEFAULT_MAX_MESSAGE_BYTES,
  isInt32,
  isWellFormedText,
  KEY_SEPARATOR,
  MessageConst,
  MQError,
  RETRY_GROUP_TOPIC_PREFIX,
  SYSTEM_TOPICS,
  shownValue,
} from "../../transport/protocol.ts";

/** A message as users give it to `Producer.send` (API.md). */
export interface Message {
  topic: string;
  body: Buffer | Uint8Array | string;
  tags?: string;
  keys?: string | string[];
  properties?: Record<string, string>;
  /** 1..18 (RocketMQ's delay levels); 0 or absent = deliver at once */
  delayLevel?: number;
  /** user flag stored with the message */
  flag?: number;
}

/** A validated message ready for the wire. */
export interface PreparedMessage {
  topic: string;
  body: Buffer;
  flag: number;
  /** encoded properties, UNIQ_KEY included */
  properties: string;
  uniqKey: string;
}

/** The property separators (\u0001, \u0002) may not appear in names, values, tags or keys, nor may unpaired surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the property separators are control characters
const SEPARATOR_CHARS = /[\u0001\u0002]/;

function unpairedSurrogate(what: string): MQError {
  return new MQError(
    "MESSAGE_ILLEGAL",
    `The ${what} contains an unpaired surrogate (half of a character such as an emoji, often left by cutting a string), which UTF-8 cannot carry: it would arrive as U+FFFD. Fix the text before sending it.`,
  );
}

function toBuffer(body: unknown): Buffer {
  if (typeof body === "string") {
    if (!isWellFormedText(body)) throw unpairedSurrogate("message body (a string)");
    return Buffer.from(body, "utf8");
  }
  if (Buffer.isBuffer(body)) return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new MQError("MESSAGE_ILLEGAL", "The message body must be a Buffer, a Uint8Array or a string.");
}

/**
 * Names the system sets (RocketMQ's `MessageConst.STRING_HASH_SET`, plus actormq's record CRC): a user
 * property so named would delay, re-route or re-key a message behind the API's back, or give it a
 * second UNIQ_KEY. `putUserProperty` refuses them; so does `send`.
 */
const SYSTEM_PROPERTY_NAMES: ReadonlySet<string> = new Set([
  ...Object.values(MessageConst),
  CRC_PROPERTY,
  "TRACE_ON",
  "MSG_REGION",
  "TRAN_MSG",
  "PGROUP",
  "BUYER_ID",
  "TRANSFER_FLAG",
  "CORRECTION_FLAG",
  "MQ2_FLAG",
  "TRAN_PREPARED_QUEUE_OFFSET",
  "TRANSACTION_CHECK_TIMES",
  "CHECK_IMMUNITY_TIME_IN_SECONDS",
  "INSTANCE_ID",
  "CORRELATION_ID",
  "REPLY_TO_CLIENT",
  "TTL",
  "ARRIVE_TIME",
  "PUSH_REPLY_TIME",
  "CLUSTER",
  "MSG_TYPE",
  "SHARDING_KEY",
]);

/** The dedicated field for the system names a user is most likely to reach for. */
const USE_FIELD: Readonly<Record<string, string>> = {
  [MessageConst.TAGS]: "tags",
  [MessageConst.KEYS]: "keys",
  [MessageConst.DELAY]: "delayLevel",
};

/** RocketMQ's `Message.putUserProperty` rules: a non-blank name that is not a system one, a non-blank value (blank as `StringUtils.isBlank`: whitespace only). */
function checkUserProperty(name: string, value: string): void {
  if (name.trim().length === 0) throw new MQError("MESSAGE_ILLEGAL", "A property name is empty: give every property a name.");
  if (SYSTEM_PROPERTY_NAMES.has(name)) {
    const field = USE_FIELD[name];
    throw new MQError(
      "MESSAGE_ILLEGAL",
      `The property name "${name}" is used by the system: ${field ? `set the message's ${field} instead` : "choose another name"} (forwarding a consumed message? copy its own properties, not the ones the system set).`,
    );
  }
  if (value.trim().length === 0)
    throw new MQError("MESSAGE_ILLEGAL", `Property "${name}" has a blank value: give it a value or leave the property out.`);
}

function checkPropertyText(what: string, s: string): void {
  if (SEPARATOR_CHARS.test(s))
    throw new MQError(
      "MESSAGE_ILLEGAL",
      `The ${what} "${s.replace(SEPARATOR_CHARS, "?")}" contains the reserved characters \\u0001 or \\u0002: remove them.`,
    );
  if (!isWellFormedText(s)) throw unpairedSurrogate(`${what} ${JSON.stringify(s)}`);
}

/**
 * Refuses a (non-empty) tag that no tag subscription can name: one that is blank, starts or ends
 * with a character Java's trim removes (up to U+0020), or contains "||". Subscriptions split on
 * "||" and trim each tag, so such a message would reach only "*" and SQL92 subscribers. (RocketMQ
 * 5's client refuses blank tags and any "|"; a single "|" is kept here, a subscription can name it.)
 */
function checkTagSelectable(tag: string): void {
  if (tag.charCodeAt(0) > 0x20 && tag.charCodeAt(tag.length - 1) > 0x20 && !tag.includes("||")) return;
  throw new MQError(
    "MESSAGE_ILLEGAL",
    `The tag ${JSON.stringify(tag)} is ${tag.includes("||") ? 'not one tag: it contains "||"' : "blank or padded with spaces or control characters"}, so no tag subscription could select it (subscriptions split on "||" and trim each tag): give the message a single tag without surrounding blanks, or put other labels in properties.`,
  );
}

/**
 * The encoded properties of one message (encodeProperties' form, built directly: no object per
 * message); throws MQError MESSAGE_ILLEGAL on bad fields.
 */
function buildProperties(msg: Message, uniqKey: string): string {
  let s = "";
  if (msg.properties !== undefined) {
    // an array would be stored as properties named "0", "1", ...
    if (typeof msg.properties !== "object" || msg.properties === null || Array.isArray(msg.properties))
      throw new MQError("MESSAGE_ILLEGAL", 'properties must be an object of string values, such as { region: "eu" }.');
    // its entries are not own properties: every one would be left out without a word
    if (msg.properties instanceof Map)
      throw new MQError(
        "MESSAGE_ILLEGAL",
        'properties must be a plain object of string values, such as { region: "eu" }, not a Map: pass Object.fromEntries(map).',
      );
    for (const [k, v] of Object.entries(msg.properties)) {
      if (typeof v !== "string") throw new MQError("MESSAGE_ILLEGAL", `Property "${k}" must be a string, not ${typeof v}.`);
      checkUserProperty(k, v);
      checkNotReserved(k, "property");
      checkPropertyText("property name", k);
      checkPropertyText("property value", v);
      s += encodeProperty(k, v);
    }
  }
  if (msg.tags !== undefined && msg.tags !== "") {
    if (typeof msg.tags !== "string") throw new MQError("MESSAGE_ILLEGAL", "tags must be a string.");
    checkPropertyText("tag", msg.tags);
    checkTagSelectable(msg.tags);
    s += encodeProperty(MessageConst.TAGS, msg.tags);
  }
  if (msg.keys !== undefined) {
    const keys = Array.isArray(msg.keys) ? msg.keys : [msg.keys];
    for (const k of keys) {
      if (typeof k !== "string") throw new MQError("MESSAGE_ILLEGAL", "keys must be a string or an array of strings.");
      checkPropertyText("key", k);
    }
    const joined = keys.filter((k) => k.length > 0).join(KEY_SEPARATOR);
    if (joined.length > 0) s += encodeProperty(MessageConst.KEYS, joined);
  }
  if (msg.delayLevel !== undefined && msg.delayLevel !== 0) {
    // an int in RocketMQ; past 2^53 String() writes an exponent ("1e+21") the broker reads as level 1
    if (!isInt32(msg.delayLevel) || msg.delayLevel < 0)
      throw new MQError(
        "MESSAGE_ILLEGAL",
        `delayLevel must be an integer from 0 to 2147483647 (1..18 with the default levels; a level past the broker's last waits as long as the last), not ${shownValue(msg.delayLevel)}.`,
      );
    s += encodeProperty(MessageConst.DELAY, String(msg.delayLevel));
  }
  return s + WAIT_AND_UNIQ_KEY + uniqKey + PROPERTY_SEPARATOR;
}

/** The two properties every message ends with; UNIQ_KEY's value follows. */
const WAIT_AND_UNIQ_KEY = `${encodeProperty(MessageConst.WAIT_STORE_MSG_OK, "true")}${MessageConst.UNIQ_KEY}${NAME_VALUE_SEPARATOR}`;

/**
 * RocketMQ's names (its Message setters) of fields named otherwise here. A field not known is not
 * sent, so a message given one of these would go without its delay, tag or key, unsaid.
 */
const ROCKETMQ_FIELD_NAMES = [
  ["delayTimeLevel", "delayLevel"],
  ["tag", "tags"],
  ["key", "keys"],
] as const;

function checkFieldNames(msg: object): void {
  for (const [theirs, ours] of ROCKETMQ_FIELD_NAMES)
    if ((msg as Record<string, unknown>)[theirs] !== undefined)
      throw new MQError("MESSAGE_ILLEGAL", `The message has a field ${theirs}, RocketMQ's name: here it is ${ours}. Rename it.`);
}

/**
 * Validates a message (topic name, non-empty body within `maxMessageBytes`, property text) and
 * prepares it for sending; throws MQError MESSAGE_ILLEGAL saying what to fix.
 */
export function prepareMessage(msg: Message, maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): PreparedMessage {
  if (typeof msg !== "object" || msg === null) throw new MQError("MESSAGE_ILLEGAL", "The message must be an object { topic, body, ... }.");
  checkTopic(msg.topic);
  // named loads (a keyed loop would be megamorphic on the send path); the names come from ROCKETMQ_FIELD_NAMES
  const their = msg as { delayTimeLevel?: unknown; tag?: unknown; key?: unknown };
  if (their.delayTimeLevel !== undefined || their.tag !== undefined || their.key !== undefined) checkFieldNames(msg);
  // RocketMQ's Validators.checkMessage: refused here, so no broker is asked (and none is marked failed)
  if (SYSTEM_TOPICS.has(msg.topic))
    throw new MQError(
      "NO_PERMISSION",
      `Sending message to topic ${msg.topic} is forbidden: the broker manages it; choose another topic name.`,
    );
  const body = toBuffer(msg.body);
  if (body.length === 0)
    throw new MQError("MESSAGE_ILLEGAL", `The message body for topic "${msg.topic}" is empty: send at least one byte.`);
  if (body.length > maxMessageBytes) {
    throw new MQError(
      "MESSAGE_ILLEGAL",
      `The message body is ${body.length} bytes; at most ${maxMessageBytes} are allowed: split it or store it elsewhere and send a reference.`,
    );
  }
  // only absent means 0: null is refused, as it is for tags, keys and delayLevel
  const flag = msg.flag === undefined ? 0 : msg.flag;
  if (!isInt32(flag))
    throw new MQError("MESSAGE_ILLEGAL", `flag must be a 32-bit signed integer (it is stored as one), not ${shownValue(flag)}.`);
  const uniqKey = createUniqId();
  const properties = buildProperties(msg, uniqKey);
  // room is left for what the broker adds when it delays the message or sends it back, so a message
  // taken can always be retried and dead-lettered
  checkSendProperties(properties);
  return { topic: msg.topic, body, flag, properties, uniqKey };
}

/** zlib level of compressed bodies (RocketMQ's default `rocketmq.message.compressLevel`). */
const COMPRESS_LEVEL = 5;
/** The sysFlag bits of a body {@link compressBody} compressed: COMPRESSED, compression type ZLIB (RocketMQ 5). */
export const ZLIB_COMPRESSED_SYS_FLAG = MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_ZLIB_TYPE;

/**
 * The zlib-compressed body of a single message of at least `overHowmuch` bytes (RocketMQ's
 * `tryToCompressMessage`), or null when the body is shorter or deflate does not make it smaller
 * (then it travels as it is). Batches are never compressed, as in RocketMQ.
 */
export function compressBody(body: Buffer, overHowmuch: number): Buffer | null {
  if (body.length < overHowmuch) return null;
  const compressed = deflateSync(body, { level: COMPRESS_LEVEL });
  return compressed.length < body.length ? compressed : null;
}

/** A validated batch: one topic, one encoded body. */
export interface PreparedBatch {
  topic: string;
  body: Buffer;
  uniqKeys: string[];
}

/**
 * Validates a batch (non-empty, one topic that is not a retry topic, no delay levels, total size
 * within `maxMessageBytes`) and encodes it with `encodeMessageBatch`; throws MQError MESSAGE_ILLEGAL.
 */
export function prepareBatch(msgs: ReadonlyArray<Message>, maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): PreparedBatch {
  if (!Array.isArray(msgs) || msgs.length === 0) throw new MQError("MESSAGE_ILLEGAL", "sendBatch needs a non-empty array of messages.");
  const topic = msgs[0]?.topic;
  // as RocketMQ's DefaultMQProducer.batch ("Retry Group is not supported for batching"); the broker refuses it too
  if (typeof topic === "string" && topic.startsWith(RETRY_GROUP_TOPIC_PREFIX))
    throw new MQError("MESSAGE_ILLEGAL", `A batch cannot be sent to the retry topic ${topic}: send its messages one by one.`);
  const entries: BatchMessage[] = new Array(msgs.length);
  const uniqKeys: string[] = new Array(msgs.length);
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i];
    if (typeof m !== "object" || m === null)
      throw new MQError(
        "MESSAGE_ILLEGAL",
        `message ${i} of the batch is ${String(m)}: every entry must be a message { topic, body, ... }.`,
      );
    if (m.topic !== topic)
      throw new MQError(
        "MESSAGE_ILLEGAL",
        `All messages of a batch must have the same topic; message ${i} has "${String(m.topic)}", the first "${String(topic)}".`,
      );
    if (m.delayLevel) throw new MQError("MESSAGE_ILLEGAL", "A batch cannot carry delayed messages: send those one by one.");
    const p = prepareMessage(m, maxMessageBytes);
    entries[i] = { body: p.body, flag: p.flag, properties: p.properties };
    uniqKeys[i] = p.uniqKey;
  }
  const body = encodeMessageBatch(entries);
  if (body.length > maxMessageBytes) {
    throw new MQError(
      "MESSAGE_ILLEGAL",
      `The batch is ${body.length} bytes; at most ${maxMessageBytes} are allowed: send it as several smaller batches.`,
    );
  }
  return { topic: topic as string, body, uniqKeys };
}
