/**
 * `Producer` (RocketMQ's `DefaultMQProducer`): validates messages, finds the topic's writable
 * queues through the shared client instance, picks one (round robin avoiding recently failed
 * brokers, or the caller's selector for ordered messages), sends one request per message or per
 * batch, and retries a failed send on another broker up to `retryTimesWhenSendFailed` times
 * within `sendTimeoutMs` (and, with `retryAnotherBrokerWhenNotStoreOK`, a send the broker stored but
 * answered other than SEND_OK).
 */

import { monotonicNow } from "../../transport/clock.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import {
  BrokerActor,
  checkBoolean,
  checkRange,
  checkTopic,
  DEFAULT_MAX_MESSAGE_BYTES,
  INT32_MAX,
  isGroupName,
  isMQError,
  MAX_TIMER_MS,
  type MessageQueue,
  MQError,
  type SendMessageReply,
  type SendMessageRequest,
  type SendStatus,
  shownValue,
  topicCreateCommand,
} from "../../transport/protocol.ts";
import { DEFAULT_MAX_INBOUND_BYTES } from "../../transport/zmqNode.ts";
import { bornHostOfThisProcess } from "./bornHost.ts";
import { CLIENT_INSTANCE_OPTION_NAMES, ClientInstance, type ClientInstanceOptions } from "./clientInstance.ts";
import { checkFaultTables, LatencyFaultTolerance, QueueSelector } from "./faultTolerance.ts";
import { InFlight } from "./inFlight.ts";
import { compressBody, type Message, prepareBatch, prepareMessage, ZLIB_COMPRESSED_SYS_FLAG } from "./messageBuilder.ts";
import { brokersWithMaster, type TopicPublishInfo, writableQueueDatas } from "./routeCache.ts";

export const DEFAULT_SEND_TIMEOUT_MS = 3000;
/**
 * Longest wait of close() for the sends called before it: a live broker answers in milliseconds,
 * a frozen one would hold close for the whole sendTimeoutMs.
 */
export const PRODUCER_CLOSE_GRACE_MS = 3_000;
export const DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED = 2;
/** RocketMQ's `compressMsgBodyOverHowmuch`: single-message bodies of 4 KiB or more are sent compressed. */
export const DEFAULT_COMPRESS_MSG_BODY_OVER_HOWMUCH = 4096;
/**
 * Share of the remaining send budget one attempt may use while retries remain, so that a broker
 * that died without closing its connection (kill -9, network loss) still leaves time to retry on
 * another broker.
 */
export const ATTEMPT_BUDGET_SHARE = 2 / 3;

/** The time one attempt of a send may use: a share of what is `leftMs` while more attempts may follow, else all of it. */
export function attemptBudgetMs(leftMs: number, moreToCome: boolean): number {
  return Math.max(1, Math.ceil(moreToCome ? leftMs * ATTEMPT_BUDGET_SHARE : leftMs));
}

/** RocketMQ's `MixAll.DEFAULT_PRODUCER_GROUP`. */
export const DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER";

/** Options of `Producer.start` (API.md). */
export interface ProducerOptions extends ClientInstanceOptions {
  group: string;
  /** whole budget of one send, retries included. @default 3000 */
  sendTimeoutMs?: number;
  /** extra attempts on another broker after a failed send (not for selector or oneway sends). @default 2 */
  retryTimesWhenSendFailed?: number;
  /**
   * RocketMQ's `retryAnotherBrokerWhenNotStoreOK`: a send (or batch) the broker answered with a status
   * other than SEND_OK (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is sent again to
   * another broker, within retryTimesWhenSendFailed and sendTimeoutMs; when no attempt gets SEND_OK,
   * the last such result is returned. The broker stored the message all the same, so a consumer may
   * get it twice. Off, that result is returned at once. Not for selector or oneway sends. @default false
   */
  retryAnotherBrokerWhenNotStoreOK?: boolean;
  /** largest body (or batch) accepted, before compression. @default 4 MiB */
  maxMessageBytes?: number;
  /**
   * bodies of single messages (not batches) of at least this many bytes are sent zlib-compressed
   * (level 5, sysFlag COMPRESSED | ZLIB), unless that does not make them smaller; consumers get
   * them inflated. 0 compresses every body. @default 4096
   */
  compressMsgBodyOverHowmuch?: number;
  /**
   * avoid brokers that failed or answered slowly recently (a MESSAGE_ILLEGAL answer is the message's
   * fault and does not count). RocketMQ's default is false; ours is true so that once a broker fails,
   * sends skip its queues at once instead of each spending an attempt on it until the name server
   * drops it from the route (README, "Where actormq differs from RocketMQ"). @default true
   */
  sendLatencyFaultEnable?: boolean;
  /** latency thresholds (ms) of the fault strategy. @default [50, 100, 550, 1800, 3000, 5000, 15000] */
  latencyMax?: number[];
  /** how long (ms) a broker is avoided per threshold. @default [0, 0, 2000, 5000, 6000, 10000, 30000] */
  notAvailableDuration?: number[];
}

/** The names {@link ProducerOptions} may hold; Producer.start refuses any other. */
export const PRODUCER_OPTION_NAMES = optionNamesOf<ProducerOptions>()([
  "group",
  ...CLIENT_INSTANCE_OPTION_NAMES,
  "sendTimeoutMs",
  "retryTimesWhenSendFailed",
  "maxMessageBytes",
  "compressMsgBodyOverHowmuch",
  "sendLatencyFaultEnable",
  "latencyMax",
  "notAvailableDuration",
  "retryAnotherBrokerWhenNotStoreOK",
]);

/**
 * The allowed range of each numeric producer option. sendTimeoutMs is a timer's delay (a longer
 * one fires at once); the others are Java ints in RocketMQ's DefaultMQProducer, as a record's
 * sizes are in the store.
 */
export const PRODUCER_OPTION_RANGES = {
  sendTimeoutMs: [1, MAX_TIMER_MS],
  retryTimesWhenSendFailed: [0, INT32_MAX],
  maxMessageBytes: [1, INT32_MAX],
  compressMsgBodyOverHowmuch: [0, INT32_MAX],
} as const satisfies Partial<Record<keyof ProducerOptions, readonly [number, number]>>;

/**
 * Refuses numeric producer options that are not integers within {@link PRODUCER_OPTION_RANGES}
 * (ILLEGAL_ARGUMENT naming the option and its range), as RocketMQ's producer setters do; unset
 * options take their defaults.
 */
export function checkProducerOptions(opts: ProducerOptions): void {
  for (const [name, [min, max]] of Object.entries(PRODUCER_OPTION_RANGES)) {
    const v = opts[name as keyof typeof PRODUCER_OPTION_RANGES];
    if (v !== undefined) checkRange(name, v, min, max);
  }
}

/** The outcome of a send (API.md). */
export interface SendResult {
  status: SendStatus;
  /** UNIQ_KEY of the message; for a batch, the keys of its messages comma-separated */
  msgId: string;
  /** store-assigned id(s): store host + commit-log offset */
  offsetMsgId: string;
  queue: MessageQueue;
  /** queue offset of the (first) message */
  queueOffset: number;
}

/** Picks the queue for a message (ordered messages: by a sharding key in `arg`). */
export type MessageQueueSelector = (queues: MessageQueue[], msg: Message | Message[], arg: unknown) => MessageQueue | undefined | null;

export interface SendOptions {
  selector?: MessageQueueSelector;
  arg?: unknown;
}

/** What a send given null options uses: one shared object, none per send. */
const NO_OPTIONS: SendOptions = Object.freeze({});

/** Errors after which trying another broker can help. */
function worthRetrying(e: unknown): boolean {
  return e instanceof MQError && (e.retriable || e.code === "NO_PERMISSION");
}

interface Outgoing {
  type: "SEND_MESSAGE" | "SEND_BATCH_MESSAGE";
  topic: string;
  body: Buffer;
  flag: number;
  /** COMPRESSED | ZLIB when `body` is compressed, else 0 */
  sysFlag: number;
  properties?: string;
  msgId: string;
  /** what the selector sees */
  original: Message | Message[];
}

export class Producer {
  private readonly faults: LatencyFaultTolerance;
  private readonly selector: QueueSelector;
  private readonly sendTimeoutMs: number;
  private readonly retryTimes: number;
  private readonly retryNotStoreOK: boolean;
  private readonly maxMessageBytes: number;
  private readonly compressOver: number;
  /** set by the first close(); later calls return it, so none resolves before the sockets are released */
  private closing: Promise<void> | null = null;
  /** a one-way send was queued: close lets the transport hand it over before the sockets close */
  private sentOneway = false;
  /** sends called before close(): it waits for them (PRODUCER_CLOSE_GRACE_MS at most) */
  private readonly inFlight = new InFlight();
  private readonly bornHost = bornHostOfThisProcess();
  private readonly removeHeartbeat: () => void;

  private constructor(
    private readonly instance: ClientInstance,
    readonly group: string,
    opts: ProducerOptions,
  ) {
    this.faults = new LatencyFaultTolerance({ latencyMax: opts.latencyMax, notAvailableDuration: opts.notAvailableDuration });
    this.selector = new QueueSelector(opts.sendLatencyFaultEnable === false ? null : this.faults);
    this.sendTimeoutMs = opts.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.retryTimes = opts.retryTimesWhenSendFailed ?? DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED;
    this.retryNotStoreOK = opts.retryAnotherBrokerWhenNotStoreOK === true;
    this.maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.compressOver = opts.compressMsgBodyOverHowmuch ?? DEFAULT_COMPRESS_MSG_BODY_OVER_HOWMUCH;
    this.removeHeartbeat = instance.addHeartbeatSource(() => ({ producerGroups: [group] }));
  }

  /** Starts a producer; resolves when it can send. */
  static async start(opts: ProducerOptions): Promise<Producer> {
    checkOptionNames("Producer.start", opts, PRODUCER_OPTION_NAMES);
    if (!isGroupName(opts.group)) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Producer group ${shownValue(opts.group)} is not valid: use 1-255 letters, digits, '%', '|', '_' or '-'.`,
      );
    }
    // as RocketMQ's producer: the reserved default group of clients that never named one
    if (opts.group === DEFAULT_PRODUCER_GROUP)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `The producer group may not be ${DEFAULT_PRODUCER_GROUP} (RocketMQ's reserved default): name your group.`,
      );
    checkProducerOptions(opts);
    checkFaultTables(opts.latencyMax, opts.notAvailableDuration);
    checkBoolean("sendLatencyFaultEnable", opts.sendLatencyFaultEnable);
    checkBoolean("retryAnotherBrokerWhenNotStoreOK", opts.retryAnotherBrokerWhenNotStoreOK);
    const instance = await ClientInstance.acquire(opts);
    try {
      return new Producer(instance, opts.group, opts);
    } catch (e) {
      // the instance is shared: a reference kept here would keep it open after its last producer closes
      await instance.release();
      throw e;
    }
  }

  /** The shared client instance (routes, node). */
  get clientInstance(): ClientInstance {
    return this.instance;
  }

  /** Sends one message and waits for the broker's answer. */
  async send(msg: Message, opts: SendOptions = {}): Promise<SendResult> {
    this.checkOpen();
    return (await this.tracked(this.single(msg), opts, false))!;
  }

  /** Sends one message without waiting for an answer (no retries); resolves once it is handed to the transport. */
  async sendOneway(msg: Message, opts: SendOptions = {}): Promise<void> {
    this.checkOpen();
    await this.tracked(this.single(msg), opts, true);
  }

  /** A validated single message, its body compressed when it is at least compressMsgBodyOverHowmuch bytes. */
  private single(msg: Message): Outgoing {
    const p = prepareMessage(msg, this.maxMessageBytes);
    const compressed = compressBody(p.body, this.compressOver);
    return {
      type: "SEND_MESSAGE",
      topic: p.topic,
      body: compressed ?? p.body,
      flag: p.flag,
      sysFlag: compressed ? ZLIB_COMPRESSED_SYS_FLAG : 0,
      properties: p.properties,
      msgId: p.uniqKey,
      original: msg,
    };
  }

  /** Sends messages of one topic as one request to one queue; one SendResult for all. */
  async sendBatch(msgs: Message[], opts: SendOptions = {}): Promise<SendResult> {
    this.checkOpen();
    const b = prepareBatch(msgs, this.maxMessageBytes);
    const out: Outgoing = {
      type: "SEND_BATCH_MESSAGE",
      topic: b.topic,
      body: b.body,
      flag: 0,
      sysFlag: 0,
      msgId: b.uniqKeys.join(","),
      original: msgs,
    };
    return (await this.tracked(out, opts, false))!;
  }

  /** {@link sendImpl}, counted in flight until it settles, so that close() waits for it. */
  private async tracked(out: Outgoing, opts: SendOptions | null, oneway: boolean): Promise<SendResult | undefined> {
    this.inFlight.begin();
    try {
      return await this.sendImpl(out, opts, oneway);
    } finally {
      this.inFlight.end();
    }
  }

  /**
   * The writable queues of a topic (what a selector is given), copies the caller may change. A topic
   * no name server knows is TOPIC_NOT_EXIST, as RocketMQ's fetchPublishMessageQueues fails: the
   * auto-create route (TBW102) a send may use is not the topic's.
   */
  async fetchPublishQueues(topic: string): Promise<MessageQueue[]> {
    this.checkOpen();
    checkTopic(topic, "fetchPublishQueues");
    const routes = this.instance.routes;
    let info = routes.isProvisional(topic) ? undefined : routes.publishInfo(topic);
    if (!info || info.queues.length === 0) info = await this.instance.updateRoute(topic);
    if (!info)
      throw new MQError(
        "TOPIC_NOT_EXIST",
        `Topic ${topic} does not exist: create it with \`${topicCreateCommand(topic)}\` (Admin.createTopic in code), or send to it once if its brokers auto-create topics, and check the name server addresses.`,
      );
    if (info.queues.length === 0) throw noWritableQueue(info);
    return info.queues.map((q) => ({ ...q }));
  }

  /**
   * Refuses new sends, waits for those called before (closing the sockets under them would fail
   * sends the broker may have stored) up to PRODUCER_CLOSE_GRACE_MS, then releases the sockets: a
   * send still unanswered then (a frozen broker's) fails CLOSED, as RocketMQ's shutdown fails it.
   */
  close(): Promise<void> {
    if (!this.closing) {
      this.removeHeartbeat();
      this.closing = (async () => {
        await this.inFlight.idle(Math.min(this.sendTimeoutMs, PRODUCER_CLOSE_GRACE_MS));
        // a resolved sendOneway is only queued (its connection may still be being made): closing the
        // sockets at once would drop it. Its budget, as a send's, is sendTimeoutMs
        await this.instance.release(this.sentOneway ? this.sendTimeoutMs : 0);
      })();
    }
    return this.closing;
  }

  private checkOpen(): void {
    if (this.closing) throw new MQError("CLOSED", `Producer ${this.group} is closed; start a new one.`);
  }

  private async publishInfo(topic: string, refresh = false): Promise<TopicPublishInfo> {
    let info = refresh ? undefined : this.instance.routes.publishInfo(topic);
    if (!info || info.queues.length === 0) info = await this.instance.updateRoute(topic, true);
    if (!info) {
      throw new MQError(
        "NO_ROUTE",
        `No route info of topic ${topic}: create it with \`${topicCreateCommand(topic)}\` (Admin.createTopic in code) or start a broker with autoCreateTopic, and check the name server addresses.`,
      );
    }
    if (info.queues.length === 0) throw noWritableQueue(info);
    return info;
  }

  private async sendImpl(out: Outgoing, options: SendOptions | null, oneway: boolean): Promise<SendResult | undefined> {
    // JavaScript callers pass null for "no options"
    const opts = options ?? NO_OPTIONS;
    if (opts.selector != null && typeof opts.selector !== "function")
      throw new MQError("ILLEGAL_ARGUMENT", `The selector must be a function (queues, msg, arg) => queue, not ${typeof opts.selector}.`);
    // monotonic: a wall clock step must neither use up the budget of a send in flight nor stretch it
    const begin = monotonicNow();
    const deadline = begin + this.sendTimeoutMs;
    const times = opts.selector || oneway ? 1 : 1 + this.retryTimes;
    let lastBroker: string | undefined;
    let lastError: unknown;
    // the last answer other than SEND_OK (retryAnotherBrokerWhenNotStoreOK): the message is stored,
    // so it is what the send returns when no later attempt gets SEND_OK, whatever failed after it
    let notStoreOK: SendResult | undefined;
    for (let attempt = 0; attempt < times; attempt++) {
      const remaining = deadline - monotonicNow();
      if (remaining <= 0) break;
      let info: TopicPublishInfo;
      try {
        info = await this.publishInfo(out.topic);
      } catch (e) {
        if (notStoreOK) return notStoreOK;
        if (attempt === 0 || !worthRetrying(e)) throw e;
        lastError = e;
        continue;
      }
      const mq = opts.selector ? this.selectWith(opts, info, out) : this.selector.select(info.queues, lastBroker)!;
      // the route lookup can spend the whole budget (a name server that does not answer): then nothing
      // is sent, as in RocketMQ's sendDefaultImpl; a request with 1 ms left would be stored and reported TIMEOUT
      const started = monotonicNow();
      const left = deadline - started;
      if (left <= 0) {
        // a broker that failed first is what to check; else the name servers
        if (lastError !== undefined || notStoreOK) break;
        throw this.routeLookupTimeout(out.topic, started - (deadline - remaining));
      }
      const timeoutMs = attemptBudgetMs(left, attempt < times - 1);
      const fields: SendMessageRequest = {
        producerGroup: this.group,
        topic: out.topic,
        queueId: mq.queueId,
        sysFlag: out.sysFlag,
        bornTimestamp: Date.now(),
        bornHost: this.bornHost,
        ...(out.type === "SEND_MESSAGE" ? { flag: out.flag, properties: out.properties } : {}),
      };
      let sent = false;
      try {
        const ref = this.instance.brokerRef(mq.brokerName, BrokerActor.BROKER);
        if (oneway) {
          ref.send({ type: out.type, ...fields }, { body: out.body });
          this.sentOneway = true;
          return undefined;
        }
        // a broker whose connection is refused or lost (its process gone) fails the attempt at once, as
        // RocketMQ's RemotingConnectException does, and the retry goes to another broker: the ask would
        // sit unsent for most of the budget. One look-up per send, nothing allocated while connected.
        // The last attempt (a selector's only one) asks and fails only if the connection fails again:
        // a broker restarted on its address reads lost until ZeroMQ's next reconnect, up to 1 s away.
        const unreachable = this.instance.brokerUnreachable(mq.brokerName);
        if (unreachable && attempt < times - 1)
          throw new MQError("TIMEOUT", `the connection to broker ${mq.brokerName} was refused or lost`);
        sent = true;
        const ask = ref.ask<SendMessageReply>({ type: out.type, ...fields }, { body: out.body, timeoutMs });
        const r = await (unreachable ? this.instance.unlessBrokerRefused(mq.brokerName, ask, monotonicNow()) : ask);
        this.faults.update(mq.brokerName, monotonicNow() - started, false);
        const f = r.fields;
        const result: SendResult = {
          status: f.status,
          msgId: out.msgId,
          offsetMsgId: f.msgId,
          queue: { topic: out.topic, brokerName: mq.brokerName, queueId: f.queueId },
          queueOffset: f.queueOffset,
        };
        // as RocketMQ's sendDefaultImpl: stored but not SEND_OK is returned unless the option asks
        // for another broker (the selector leaves this one out of the next attempt)
        if (f.status === "SEND_OK" || !this.retryNotStoreOK || attempt === times - 1) return result;
        notStoreOK = result;
        lastBroker = mq.brokerName;
      } catch (e) {
        // a broker that refused the message itself (e.g. a body over its maxMessageBytes) answered and is
        // healthy: isolating it would stop round robin reaching it for 30 s over one bad message. So is
        // one that refused it with NO_PERMISSION (made read only to drain it, a slave): the retry goes
        // to another broker and the route refreshed below leaves it out while it stays so
        this.faults.update(mq.brokerName, monotonicNow() - started, !isMQError(e, "MESSAGE_ILLEGAL", "NO_PERMISSION"));
        lastError = e;
        lastBroker = mq.brokerName;
        if (!worthRetrying(e)) {
          if (notStoreOK) return notStoreOK;
          throw e;
        }
        // a request over the transport's default limit that timed out was most likely cut off by
        // the broker (it drops the connection of a peer that sends more): sent again, its full body
        // would only be dropped again, and cut the connection of every other ask on it
        if (sent && isMQError(e, "TIMEOUT") && overTransportLimit(out) !== undefined) break;
        this.instance.updateRoute(out.topic, true).catch(() => undefined);
      }
    }
    if (notStoreOK) return notStoreOK;
    if (lastError instanceof MQError && isMQError(lastError, "TIMEOUT")) {
      // a closed connection fails an ask early: saying the budget ran out would send the reader to raise it
      const elapsed = Math.round(monotonicNow() - begin);
      const tooLarge = overTransportLimit(out);
      const what = tooLarge
        ? `failed after ${elapsed} ms (${lastError.message}): ${tooLarge}`
        : elapsed >= this.sendTimeoutMs
          ? `did not succeed within ${this.sendTimeoutMs} ms (${lastError.message}); check the brokers or raise sendTimeoutMs.`
          : `failed after ${elapsed} ms (${lastError.message}); check the brokers.`;
      throw new MQError("TIMEOUT", `Sending to topic ${out.topic} ${what}`, { cause: lastError });
    }
    if (lastError) throw lastError;
    throw new MQError("TIMEOUT", `Sending to topic ${out.topic} did not complete within sendTimeoutMs ${this.sendTimeoutMs} ms.`);
  }

  /** The TIMEOUT of a send whose route lookup, taking `tookMs`, used its whole budget: it names the name servers, not the brokers. */
  private routeLookupTimeout(topic: string, tookMs: number): MQError {
    const silent = this.instance.nameserversNotAnswering();
    const who =
      silent.length > 0
        ? `name server${silent.length > 1 ? "s" : ""} ${silent.join(", ")} did not answer`
        : `the name servers ${this.instance.nameservers.join(", ")} answered late`;
    return new MQError(
      "TIMEOUT",
      `Sending to topic ${topic} did not succeed within ${this.sendTimeoutMs} ms: looking up its route took ${Math.round(tookMs)} ms, ` +
        `so the message was not sent (${who}); check the name servers or raise sendTimeoutMs.`,
    );
  }

  private selectWith(opts: SendOptions, info: TopicPublishInfo, out: Outgoing): MessageQueue {
    let q: MessageQueue | undefined | null;
    try {
      q = opts.selector!(info.queues.slice(), out.original, opts.arg);
    } catch (e) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `The queue selector threw: ${e instanceof Error ? e.message : String(e)}; nothing was sent. Fix the selector or its arg.`,
        { cause: e },
      );
    }
    const found =
      typeof q === "object" && q !== null
        ? info.queues.find((x) => x.brokerName === q.brokerName && x.queueId === q.queueId && x.topic === q.topic)
        : undefined;
    if (!found) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `The selector returned ${shownSelection(q)}, which is not one of the ${info.queues.length} writable queues of topic ${out.topic}: return an element of the queues array.`,
      );
    }
    return found;
  }
}

/** What a selector returned that is no queue, as the error shows it: an async selector's Promise was shown as "undefined/undefined". */
function shownSelection(q: unknown): string {
  if (typeof (q as PromiseLike<unknown> | null)?.then === "function")
    return "a Promise (the selector is async): selectors are synchronous, so return the queue itself";
  if (typeof q === "object" && q !== null) {
    const { topic, brokerName, queueId } = q as Partial<MessageQueue>;
    const part = (v: unknown) => (typeof v === "string" ? v : shownValue(v));
    return `${part(topic)}/${part(brokerName)}/${part(queueId)}`;
  }
  if (q === undefined || q === null) return String(q);
  return `${shownValue(q)} (a ${typeof q})`;
}

/**
 * Room kept for a send request's header (its fields, msgpack-encoded) besides the body and the
 * properties when its size is compared with the transport's limit.
 */
const SEND_HEADER_ALLOWANCE_BYTES = 1024;

/**
 * What to say of a send that timed out when its request may be larger than a broker takes in one
 * message (`maxInboundBytes`: 64 MiB, or 4 x the broker's maxMessageBytes when that is more): such
 * a broker drops the connection before it reads the request, so the send can only time out there.
 * undefined when the request is within the default limit.
 */
function overTransportLimit(out: Outgoing): string | undefined {
  const bytes = out.body.length + (out.properties ? Buffer.byteLength(out.properties) : 0) + SEND_HEADER_ALLOWANCE_BYTES;
  if (bytes <= DEFAULT_MAX_INBOUND_BYTES) return undefined;
  const what = out.type === "SEND_BATCH_MESSAGE" ? "batch" : "message";
  return (
    `the ${what} may be too large for the transport: its request is about ${bytes} bytes, over the ${DEFAULT_MAX_INBOUND_BYTES} bytes ` +
    `(${DEFAULT_MAX_INBOUND_BYTES / 1024 / 1024} MiB) a broker takes in one request unless its maxMessageBytes is larger ` +
    `(it takes 4 x maxMessageBytes), and a broker that receives more drops the connection. ${what === "batch" ? "Split the batch" : "Send a smaller message"}, ` +
    `or, if the brokers run with the default, raise their maxMessageBytes to at least ${Math.ceil(bytes / 4)}.`
  );
}

/** Why a route gives a producer no queue: no broker, none writable with a master, or writable ones with 0 write queues. */
function noWritableQueue({ topic, route }: TopicPublishInfo): MQError {
  if (route.queueDatas.length === 0)
    return new MQError("NO_ROUTE", `Topic ${topic} has no live broker in its route; check that its brokers are running.`);
  if (writableQueueDatas(route).length > 0)
    return new MQError(
      "NO_ROUTE",
      `Topic ${topic} has 0 write queues on every broker that takes writes; raise its writeQueueNums (Admin.createTopic, topic create --queues).`,
    );
  // a master that is down (killed, restarting) while its slave stays registered leaves only read-only
  // queues: that is a missing broker, not a permission to change
  const withMaster = brokersWithMaster(route);
  const masterless = [...new Set(route.queueDatas.map((qd) => qd.brokerName).filter((name) => !withMaster.has(name)))];
  if (withMaster.size === 0)
    return new MQError(
      "NO_ROUTE",
      `Topic ${topic} has no master in its route (${masterless.join(", ")}: only slaves, which take no sends); start the master, sends resume once it registers.`,
    );
  return new MQError(
    "NO_PERMISSION",
    `Topic ${topic} is not writable on any broker with a master (read-only)${masterless.length > 0 ? `, and ${masterless.join(", ")} ${masterless.length === 1 ? "has" : "have"} no master` : ""}; change its perm or send elsewhere.`,
  );
}
