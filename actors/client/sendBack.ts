/**
 * The client's half of retries (RocketMQ's `ConsumeMessageConcurrentlyService` and
 * `DefaultMQPushConsumerImpl#sendMessageBack`, reference §12.1): messages a concurrent listener
 * failed go back to the broker that stored them (CONSUMER_SEND_MSG_BACK), which re-delivers them
 * through the group's retry topic; and a message pulled from the retry topic shows the listener
 * its original topic again.
 *
 * When that broker cannot take the message back (down, too slow, or answering an error), the
 * consumer sends its own copy to `%RETRY%<group>` on a broker that has the retry topic, another
 * one first (RocketMQ's fallback through the instance's inner producer): RETRY_TOPIC, ORIGIN_MESSAGE_ID,
 * RECONSUME_TIME (reconsumeTimes + 1, sent as the request's reconsumeTimes), MAX_RECONSUME_TIMES
 * and delay level 3 + reconsumeTimes. A copy past maxReconsumeTimes (or meant for the dead-letter
 * queue) carries DELAY -1, and the broker stores it in `%DLQ%<group>` instead. Only when that fails
 * too does the caller keep the message and consume it again locally.
 *
 * No copy is made of a message whose queue was given up meanwhile (moved to another member in a
 * rebalance, reset: for callers that pass its process queue, see {@link SendBackOptions.queue}) nor
 * once the consumer is closing: such a message is simply not acknowledged, as
 * RocketMQ leaves a message whose send-back did not finish. It is still in its process queue, so the
 * queue's offset is committed before it and whoever consumes the queue next (another member, or this
 * group after a restart) gets it again. A copy there would deliver it twice: once from the queue and
 * once from the retry topic. Closing waits for the send-backs in flight to settle (each bounded by its
 * own timeout; one whose broker connection is lost fails at once); after that nothing is sent or
 * logged (see {@link SendBack.close}).
 */
import { monotonicNow } from "../../transport/clock.ts";
import { encodeProperties, type MessageExt, MessageSysFlag } from "../../transport/messageRecord.ts";
import {
  BrokerActor,
  type ConsumerSendMsgBackRequest,
  DLQ_GROUP_TOPIC_PREFIX,
  isMQError,
  MessageConst,
  type MessageQueue,
  MQError,
  RETRY_GROUP_TOPIC_PREFIX,
  type SendMessageReply,
  type SendMessageRequest,
} from "../../transport/protocol.ts";
import { LogThrottle, lazyClientLogger } from "../logger.ts";
import type { ActorNode } from "../runtime/index.ts";
import { bornHostOfThisProcess } from "./bornHost.ts";
import { InFlight } from "./inFlight.ts";
import { compressBody, ZLIB_COMPRESSED_SYS_FLAG } from "./messageBuilder.ts";
import { attemptBudgetMs, DEFAULT_COMPRESS_MSG_BODY_OVER_HOWMUCH } from "./producer.ts";

/** How long a send-back may take before the message is retried locally instead (RocketMQ: 5 s). */
export const SEND_BACK_TIMEOUT_MS = 5_000;
/** A consumer logs failed send-backs of one error code at most once per this long. */
export const SEND_BACK_FAILURE_LOG_INTERVAL_MS = 30_000;
/** Failed send-backs, at warn (ACTORMQ_LOG_LEVEL). */
export const sendBackLog = lazyClientLogger("client:sendback");
/** Send-backs of one failed batch in flight at once. */
const SEND_BACK_PARALLELISM = 16;
/** How long the consumer's own retry copy may take, all brokers tried (RocketMQ's inner producer: sendMsgTimeout 3 s). */
export const RETRY_COPY_TIMEOUT_MS = 3_000;
/** Producer group the retry copies are sent under (RocketMQ's `MixAll.CLIENT_INNER_PRODUCER_GROUP`). */
export const CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER";
/** The first retry waits at this delay level; each retry one level more (RocketMQ: 3 + reconsumeTimes). */
export const FIRST_RETRY_DELAY_LEVEL = 3;

/** What sending back needs from the client instance. */
export interface SendBackHost {
  readonly node: ActorNode;
  /** address of a broker by name and id (master for 0) */
  brokerAddress(brokerName: string, brokerId?: number): string | undefined;
  /**
   * The writable queues of a topic (from the cached route; `refresh` asks the name servers first).
   * Without it a failed send-back is not followed by the consumer's own retry copy.
   */
  publishQueues?(topic: string, refresh?: boolean): Promise<MessageQueue[]>;
  /**
   * `ask` to a broker address, or a TIMEOUT as soon as its connection reads refused or lost: a
   * killed broker fails the send-back at once (RocketMQ's connect exception) instead of at its timeout.
   */
  unlessBrokerLost?<R>(addr: string, ask: Promise<R>): Promise<R>;
  /** true while the connection to this broker address is refused or lost: such a broker is tried last */
  isBrokerUnreachable?(addr: string): boolean;
}

/** How a send-back counts the message's retries. */
export interface SendBackOptions {
  /**
   * The messages were retried in place (orderly): their reconsumeTimes counts deliveries the
   * stored copy knows nothing of, so it travels with the request (RocketMQ's orderly consumer
   * writes it as RECONSUME_TIME, reference §12.3). Otherwise the broker counts from the stored copy.
   */
  retriedInPlace?: boolean;
  /**
   * The process queue the messages are in: once it is dropped (its queue given up), a failed
   * send-back is not followed by a retry copy. The queue's offset stays before the messages, so they
   * are delivered again from the queue. The concurrent service passes it (a lost queue is released
   * after a wait shorter than a send-back and its copy); the orderly one does not (its released
   * queue's batch in hand ends and commits, for up to 20 s).
   */
  queue?: { readonly dropped: boolean };
}

/**
 * Sends failed messages back; resolves with those that could not be sent back (the caller
 * consumes them again locally). `delayLevel` 0 lets the broker choose (3 + reconsumeTimes).
 */
export type SendBackFn = (msgs: readonly MessageExt[], delayLevel: number, opts?: SendBackOptions) => Promise<MessageExt[]>;

/**
 * Longest wait of a consumer's close for its send-backs in flight: a send-back's own timeout plus a
 * retry copy's (a copy under way when the close began ends its attempt in flight; none starts after).
 */
export const SEND_BACK_CLOSE_WAIT_MS = SEND_BACK_TIMEOUT_MS + RETRY_COPY_TIMEOUT_MS;

/** Why a failed send-back made no retry copy, or stopped trying brokers for it: see the module's comment. */
type CutShort = "closing" | "queueDropped";

/** A consumer's {@link SendBackFn}, with what its close needs. */
export interface SendBack extends SendBackFn {
  /** calls not settled yet (send-backs, with their retry copies) */
  readonly inFlight: number;
  /**
   * The consumer began closing: no retry copy starts from now. A message whose send-back fails is
   * resolved as not sent back, and its caller leaves it unacknowledged (its offset is not committed).
   */
  beginClose(): void;
  /**
   * {@link beginClose}, then resolves once every call in flight has settled (true) or after
   * `maxWaitMs` (false). From then on nothing is sent or logged: a new call resolves with every
   * message unsent, and one still in flight (only past `maxWaitMs`) ends silently, without a copy.
   */
  close(maxWaitMs?: number): Promise<boolean>;
}

/** The CONSUMER_SEND_MSG_BACK fields for one message. */
export function sendBackRequest(
  msg: MessageExt,
  group: string,
  delayLevel: number,
  maxReconsumeTimes: number,
  opts?: SendBackOptions,
): ConsumerSendMsgBackRequest {
  const req: ConsumerSendMsgBackRequest = {
    group,
    offset: msg.commitLogOffset,
    delayLevel,
    originMsgId: msg.properties[MessageConst.ORIGIN_MESSAGE_ID] ?? msg.msgId,
    originTopic: msg.topic,
    maxReconsumeTimes,
  };
  if (opts?.retriedInPlace) req.reconsumeTimes = msg.reconsumeTimes;
  return req;
}

/** The consumer's own copy of a failed message for its group's retry topic (RocketMQ's sendMessageBack fallback). */
export interface RetryCopy {
  /** `%RETRY%<group>` */
  topic: string;
  body: Buffer;
  flag: number;
  /** sysFlag of the body as it is sent (a body still compressed keeps its compression bits) */
  sysFlag: number;
  /** the copy's properties, RECONSUME_TIME and MAX_RECONSUME_TIMES included */
  properties: Record<string, string>;
  /** RECONSUME_TIME: reconsumeTimes + 1, the request's reconsumeTimes */
  reconsumeTimes: number;
  /** the broker stores it in `%DLQ%<group>` (retries used up, or the caller asked for the dead-letter queue) */
  toDLQ: boolean;
}

/** Properties of a consumed message that are the consumer's, not the message's: not copied. */
const CLIENT_ONLY_PROPERTIES = [MessageConst.CONSUME_START_TIME, "TRAN_MSG"];

/**
 * The retry copy of `msg` for `group` (RocketMQ's sendMessageBack fallback, reference §12.1): its
 * body, flag and properties, with RETRY_TOPIC = the original topic, ORIGIN_MESSAGE_ID = the existing
 * one or the message's id, RECONSUME_TIME = reconsumeTimes + 1, MAX_RECONSUME_TIMES and DELAY =
 * `delayLevel` when positive, else 3 + reconsumeTimes. Past maxReconsumeTimes (reconsumeTimes + 1
 * above it, as the broker's send-back counts) or with a negative `delayLevel` it is meant for the
 * dead-letter queue: DELAY -1, which the broker stores in `%DLQ%<group>`.
 */
export function retryCopyOf(msg: MessageExt, group: string, delayLevel: number, maxReconsumeTimes: number): RetryCopy {
  const topic = RETRY_GROUP_TOPIC_PREFIX + group;
  const properties: Record<string, string> = { ...msg.properties };
  for (const k of CLIENT_ONLY_PROPERTIES) delete properties[k];
  // a message pulled from the retry topic shows its original topic once restored; one that was not still names it here
  const originalTopic = msg.topic === topic ? (msg.properties[MessageConst.RETRY_TOPIC] ?? msg.topic) : msg.topic;
  properties[MessageConst.RETRY_TOPIC] = originalTopic;
  properties[MessageConst.ORIGIN_MESSAGE_ID] = msg.properties[MessageConst.ORIGIN_MESSAGE_ID] || msg.msgId;
  const reconsumeTimes = msg.reconsumeTimes + 1;
  properties[MessageConst.RECONSUME_TIME] = String(reconsumeTimes);
  properties[MessageConst.MAX_RECONSUME_TIMES] = String(maxReconsumeTimes);
  const toDLQ = delayLevel < 0 || reconsumeTimes > maxReconsumeTimes;
  properties[MessageConst.DELAY] = toDLQ ? "-1" : String(delayLevel > 0 ? delayLevel : FIRST_RETRY_DELAY_LEVEL + msg.reconsumeTimes);
  // a body the consumer could not inflate (LZ4, ZSTD) travels as it came, with its compression bits
  const still = msg.sysFlag & (MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_TYPE_MASK);
  return { topic, body: msg.body, flag: msg.flag ?? 0, sysFlag: still, properties, reconsumeTimes, toDLQ };
}

/**
 * The brokers to try a retry copy on, one queue each: brokers other than `failedBroker` first (the
 * one that could not take the send-back is likely down), those whose connection reads lost after
 * the others, `failedBroker` last. Starts at a random broker so copies spread.
 */
export function retryCopyTargets(
  queues: readonly MessageQueue[],
  failedBroker: string,
  unreachable: (brokerName: string) => boolean = () => false,
): MessageQueue[] {
  const byBroker = new Map<string, MessageQueue[]>();
  for (const q of queues) {
    const list = byBroker.get(q.brokerName);
    if (list) list.push(q);
    else byBroker.set(q.brokerName, [q]);
  }
  const names = [...byBroker.keys()].sort();
  const start = names.length > 0 ? Math.floor(Math.random() * names.length) : 0;
  const rotated = [...names.slice(start), ...names.slice(0, start)];
  const rank = (n: string): number => (n === failedBroker ? 2 : unreachable(n) ? 1 : 0);
  rotated.sort((a, b) => rank(a) - rank(b));
  return rotated.map((n) => {
    const qs = byBroker.get(n)!;
    return qs[Math.floor(Math.random() * qs.length)]!;
  });
}

/**
 * Sends a retry copy; resolves with the broker that stored it, or rejects with the last failure.
 * No further broker is tried once `stop()` says so.
 */
async function sendRetryCopy(
  host: SendBackHost,
  copy: RetryCopy,
  failedBroker: string,
  timeoutMs: number,
  stop: () => boolean,
): Promise<string> {
  const deadline = monotonicNow() + timeoutMs;
  const unreachable = (name: string): boolean => {
    const addr = host.brokerAddress(name, 0);
    return addr === undefined || (host.isBrokerUnreachable?.(addr) ?? false);
  };
  let queues = await host.publishQueues!(copy.topic);
  // the cached route may not list the retry topic on another broker yet (or at all): ask once
  if (!queues.some((q) => q.brokerName !== failedBroker)) queues = await host.publishQueues!(copy.topic, true);
  const targets = retryCopyTargets(queues, failedBroker, unreachable);
  if (targets.length === 0)
    throw new MQError(
      "NO_ROUTE",
      `No broker in the route takes writes to ${copy.topic}: none has it (a broker creates it when a member of the group heartbeats to it), ` +
        "or every one that has it is read only or has no master.",
    );
  const compressed = copy.sysFlag === 0 ? compressBody(copy.body, DEFAULT_COMPRESS_MSG_BODY_OVER_HOWMUCH) : null;
  const body = compressed ?? copy.body;
  // RocketMQ's producer moves RECONSUME_TIME into the request header for a retry topic
  const { [MessageConst.RECONSUME_TIME]: _moved, ...props } = copy.properties;
  const properties = encodeProperties(props);
  let last: unknown;
  for (let i = 0; i < targets.length; i++) {
    const mq = targets[i]!;
    const left = deadline - monotonicNow();
    if (left <= 0 || stop()) break;
    const addr = host.brokerAddress(mq.brokerName, 0);
    if (!addr) {
      last = new MQError("NO_ROUTE", `No address for the master of broker ${mq.brokerName}.`);
      continue;
    }
    const fields: SendMessageRequest = {
      producerGroup: CLIENT_INNER_PRODUCER_GROUP,
      topic: copy.topic,
      queueId: mq.queueId,
      sysFlag: compressed ? ZLIB_COMPRESSED_SYS_FLAG : copy.sysFlag,
      bornTimestamp: Date.now(),
      bornHost: bornHostOfThisProcess(),
      flag: copy.flag,
      properties,
      reconsumeTimes: copy.reconsumeTimes,
    };
    // while other brokers remain, one attempt may use a share of what is left, as a producer's does
    const attemptMs = attemptBudgetMs(left, i < targets.length - 1);
    try {
      const ask = host.node
        .ref(addr, BrokerActor.BROKER)
        .ask<SendMessageReply>({ type: "SEND_MESSAGE", ...fields }, { body, timeoutMs: attemptMs });
      await (host.unlessBrokerLost ? host.unlessBrokerLost(addr, ask) : ask);
      return mq.brokerName;
    } catch (e) {
      last = e;
    }
  }
  throw last ?? new MQError("TIMEOUT", `Sending the retry copy to ${copy.topic} did not complete within ${timeoutMs} ms.`);
}

/** A {@link SendBackFn} that asks the `sendback` actor of each message's broker (its master). */
export function createSendBack(
  host: SendBackHost,
  group: string,
  maxReconsumeTimes: number,
  timeoutMs: number = SEND_BACK_TIMEOUT_MS,
  copyTimeoutMs: number = RETRY_COPY_TIMEOUT_MS,
): SendBack {
  const inFlight = new InFlight();
  /** the consumer is closing: no retry copy starts */
  let closing = false;
  /** its close resolved: nothing is sent or logged any more */
  let closed = false;
  // a failed send-back is followed by the consumer's own retry copy, and a message neither takes is
  // consumed again locally, past maxReconsumeTimes if it keeps failing: say so (RocketMQ logs each
  // one), once per error code and outcome per interval
  const throttle = new LogThrottle(SEND_BACK_FAILURE_LOG_INTERVAL_MS);
  const logFailure = (
    m: MessageExt,
    delayLevel: number,
    addr: string | undefined,
    e: unknown,
    fallback?: { broker: string; toDLQ: boolean } | { error: unknown; cut: CutShort | undefined } | { notCopied: CutShort },
  ): void => {
    if (closed) return;
    const code = isMQError(e) ? e.code : "UNKNOWN";
    const copied = fallback && "broker" in fallback ? fallback : undefined;
    const copyError = fallback && "error" in fallback ? fallback.error : undefined;
    const notCopied = fallback && "notCopied" in fallback ? fallback.notCopied : undefined;
    const cut = notCopied ?? (fallback && "cut" in fallback ? fallback.cut : undefined);
    const notAcknowledged =
      cut === undefined
        ? ""
        : (cut === "closing" ? "The consumer is closing" : "Its queue was given up meanwhile (moved to another member, or reset)") +
          ": the message is not acknowledged. Its queue's offset stays before it, so the group consumes it again from the queue.";
    const copyCode = copyError === undefined ? undefined : isMQError(copyError) ? copyError.code : "UNKNOWN";
    const suppressed = throttle.pass(`${code}|${copied ? "copied" : (notCopied ?? copyCode ?? "")}`);
    if (suppressed === undefined) return;
    const error = e instanceof Error ? e.message : String(e);
    const fields: Record<string, unknown> = { group, topic: m.topic, msgId: m.msgId, broker: addr, delayLevel, code, error, suppressed };
    let outcome: string;
    if (copied) {
      fields.retryCopyBroker = copied.broker;
      const where = copied.toDLQ
        ? `${RETRY_GROUP_TOPIC_PREFIX}${group}, as a dead letter the broker stores in ${DLQ_GROUP_TOPIC_PREFIX}${group},`
        : `${RETRY_GROUP_TOPIC_PREFIX}${group}`;
      outcome = `The consumer sent its own copy to ${where} through broker ${copied.broker} instead.`;
    } else if (copyError !== undefined) {
      const copyMessage = copyError instanceof Error ? copyError.message : String(copyError);
      fields.retryCopyCode = copyCode;
      fields.retryCopyError = copyMessage;
      outcome =
        `Sending its own copy to ${RETRY_GROUP_TOPIC_PREFIX}${group} failed too, with ${copyCode}: ${copyMessage} ` +
        (cut === undefined ? "The consumer keeps the message and retries it locally." : notAcknowledged);
      if (cut !== undefined) fields.cutShort = cut;
    } else if (notCopied !== undefined) {
      fields.notCopied = notCopied;
      outcome = `No copy is sent. ${notAcknowledged}`;
    } else outcome = "The consumer keeps the message and retries it locally.";
    sendBackLog().warn(
      fields,
      `Sending message ${m.msgId} of ${m.topic} back for group ${group} failed with ${code}: ${error} ${outcome} ` +
        `Failures with this code and outcome are logged at most once every ${SEND_BACK_FAILURE_LOG_INTERVAL_MS / 1000} s.`,
    );
  };
  const fallBack = async (
    m: MessageExt,
    delayLevel: number,
    addr: string | undefined,
    e: unknown,
    opts: SendBackOptions | undefined,
  ): Promise<boolean> => {
    // not copied once its queue's offset stays before it anyway: see the module's comment
    const cutShort = (): CutShort | undefined => (closing ? "closing" : opts?.queue?.dropped ? "queueDropped" : undefined);
    const notCopied = cutShort();
    if (notCopied) {
      logFailure(m, delayLevel, addr, e, { notCopied });
      return false;
    }
    if (!host.publishQueues) {
      logFailure(m, delayLevel, addr, e);
      return false;
    }
    const copy = retryCopyOf(m, group, delayLevel, maxReconsumeTimes);
    try {
      // a copy under way tries no further broker once it was cut short
      const broker = await sendRetryCopy(host, copy, m.brokerName, copyTimeoutMs, () => cutShort() !== undefined);
      logFailure(m, delayLevel, addr, e, { broker, toDLQ: copy.toDLQ });
      return true;
    } catch (copyError) {
      logFailure(m, delayLevel, addr, e, { error: copyError, cut: cutShort() });
      return false;
    }
  };
  const one = async (m: MessageExt, delayLevel: number, opts: SendBackOptions | undefined): Promise<boolean> => {
    if (closed) return false;
    const addr = host.brokerAddress(m.brokerName, 0);
    if (!addr)
      return fallBack(
        m,
        delayLevel,
        addr,
        new MQError("NO_ROUTE", `No address for the master of broker ${m.brokerName} (not in the route).`),
        opts,
      );
    try {
      const ask = host.node
        .ref(addr, BrokerActor.SENDBACK)
        .ask({ type: "CONSUMER_SEND_MSG_BACK", ...sendBackRequest(m, group, delayLevel, maxReconsumeTimes, opts) }, { timeoutMs });
      await (host.unlessBrokerLost ? host.unlessBrokerLost(addr, ask) : ask);
      return true;
    } catch (e) {
      // closed meanwhile: fallBack sees it as closing, makes no copy and logs nothing
      return fallBack(m, delayLevel, addr, e, opts);
    }
  };
  const sendBack = async (msgs: readonly MessageExt[], delayLevel: number, opts?: SendBackOptions): Promise<MessageExt[]> => {
    if (closed) return msgs.slice();
    inFlight.begin();
    try {
      const failed: MessageExt[] = [];
      for (let i = 0; i < msgs.length; i += SEND_BACK_PARALLELISM) {
        const part = msgs.slice(i, i + SEND_BACK_PARALLELISM);
        const ok = await Promise.all(part.map((m) => one(m, delayLevel, opts)));
        for (let k = 0; k < part.length; k++) if (!ok[k]) failed.push(part[k]!);
      }
      return failed;
    } finally {
      inFlight.end();
    }
  };
  const beginClose = (): void => {
    closing = true;
  };
  const close = async (maxWaitMs = SEND_BACK_CLOSE_WAIT_MS): Promise<boolean> => {
    closing = true;
    const settled = await inFlight.idle(maxWaitMs);
    closed = true;
    return settled;
  };
  // a getter on the function itself (Object.assign would copy the count once)
  Object.defineProperty(sendBack, "inFlight", { get: () => inFlight.count });
  return Object.assign(sendBack as typeof sendBack & { readonly inFlight: number }, { beginClose, close });
}

/**
 * Messages pulled from `%RETRY%<group>` get their original topic back (RETRY_TOPIC) before the
 * listener sees them (RocketMQ's `resetRetryAndNamespace`). Changes the messages in place.
 */
export function restoreRetryTopic(msgs: readonly MessageExt[], group: string): void {
  const retryTopic = RETRY_GROUP_TOPIC_PREFIX + group;
  for (const m of msgs) {
    const original = m.properties[MessageConst.RETRY_TOPIC];
    if (original && m.topic === retryTopic) m.topic = original;
  }
}
