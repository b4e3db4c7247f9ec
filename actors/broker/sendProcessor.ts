/**
 * SEND_MESSAGE and SEND_BATCH_MESSAGE on the broker (RocketMQ's `SendMessageProcessor` and
 * `AbstractSendMessageProcessor.msgCheck`): validate the request, find or auto-create the topic,
 * check permissions and the queue id, choose a queue when the producer left it open, append
 * through the store actor with one put per request, and map the store's status to a send status.
 */

import { monotonicNow } from "../../transport/clock.ts";
import {
  checkSendProperties,
  decodeProperties,
  encodeMessageBatch,
  encodeProperties,
  isUndispatchedTransaction,
  MAX_SEND_PROPERTIES_BYTES,
  sendPropertiesTooLong,
  walkMessageBatch,
} from "../../transport/messageRecord.ts";
import {
  checkTopic,
  isInt32,
  MessageConst,
  MQError,
  PERM_READ_WRITE,
  Perm,
  RETRY_GROUP_TOPIC_PREFIX,
  type SendMessageReply,
  type SendMessageRequest,
  type SendStatus,
  type SubscriptionGroupConfig,
  SYSTEM_TOPICS,
  topicCreateCommand,
} from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { brokerDelayLevels, mayCarryDelay, scheduleTarget } from "./delayRouting.ts";
import { haServiceOf } from "./haService.ts";
import { lockTableOf } from "./lockManager.ts";
import { DLQ_NUMS_PER_GROUP, dlqTopic, groupOfRetryOrDlqTopic, isRetryTopic, shouldDivertRetrySendToDLQ } from "./retryPolicy.ts";
import { logDeadLettered } from "./sendback.ts";

/** bornHost when the request gives none or a malformed one (actormq producers send their own IPv4, port 0). */
const UNKNOWN_HOST = "127.0.0.1:0";
const HOST_PATTERN = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d{1,5}$/;

/**
 * Of what is left of a producer's attempt when its send is served (the ask's timeout less how long
 * it waited to be served, as the transport estimates it: {@link Replier.answerBy}), what the SYNC
 * waits (a sync flush, a slave's acknowledgement) leave for the answer's way back: a tenth, at
 * least 100 ms. A wait that ends after the producer gave up makes it retry a message already
 * stored (a duplicate) and report TIMEOUT instead of the status.
 */
const REPLY_MARGIN_SHARE = 0.1;
const MIN_REPLY_MARGIN_MS = 100;
/** Least time the SYNC waits are given however short the producer's timeout: an fdatasync or a slave's acknowledgement can take that long. */
const MIN_SYNC_WAIT_MS = 100;

/** When (monotonic ms) the SYNC waits of a send whose producer gives up at `answerBy` must end for it to get the answer. */
export function syncWaitDeadline(answerBy: number, now = monotonicNow()): number {
  const left = answerBy - now;
  return now + Math.max(MIN_SYNC_WAIT_MS, left - Math.max(MIN_REPLY_MARGIN_MS, left * REPLY_MARGIN_SHARE));
}

/** The request fields a send handler reads (all unchecked: they come off the wire). */
export type SendEventFields = Partial<Record<keyof SendMessageRequest, unknown>> & { body?: unknown; reply?: Replier };

function illegal(message: string): MQError {
  return new MQError("MESSAGE_ILLEGAL", message);
}

/** A request field stored as a 32-bit int (or, `wide`, a 64-bit one): out-of-range values are refused, not truncated. */
function intField(v: unknown, name: string, dflt?: number, wide = false): number {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v)) throw illegal(`The send request's "${name}" must be an integer.`);
  if (wide ? !Number.isSafeInteger(v) : !isInt32(v))
    throw illegal(
      `The send request's "${name}" is ${v}: it must fit in a ${wide ? "64-bit field (a safe integer)" : "32-bit signed int"}.`,
    );
  return v;
}

/**
 * Queue chosen for a request that leaves it open (queueId < 0): round robin per broker. Exported
 * for tests.
 */
export class OpenQueueChooser {
  private next = 0;
  choose(writeQueueNums: number): number {
    const q = this.next % writeQueueNums;
    this.next = (this.next + 1) & 0x7fffffff;
    return q;
  }
}

/** The consumer group of a `%RETRY%<group>` topic: found, auto-created, or SUBSCRIPTION_GROUP_NOT_EXIST. */
function retryGroupOf(ctx: BrokerContext, topic: string): SubscriptionGroupConfig {
  return ctx.groups.findOrAutoCreateOrThrow(groupOfRetryOrDlqTopic(topic)!, ctx.config.brokerName, `, so ${topic} takes no messages`);
}

/**
 * RocketMQ's handleRetryAndDLQ, for a plain send to a group's retry topic (a client's own retry
 * copy, when its send-back failed): past the maximum retries (the message's MAX_RECONSUME_TIMES,
 * else the group's retryMaxTimes), or while the group holds a live orderly lock (an orderly group
 * must not re-order through its retry topic), the message goes to `%DLQ%<group>` queue 0 without
 * its delay level. So does a copy whose DELAY is negative: the consumer meant it for the
 * dead-letter queue (delay level -1, as a send-back's). Returns that topic and the properties to
 * store, or undefined to keep the topic.
 */
function retrySendToDLQ(
  ctx: BrokerContext,
  group: SubscriptionGroupConfig,
  reconsumeTimes: number,
  encodedProperties: string,
): { topic: string; properties: string } | undefined {
  const properties = decodeProperties(encodedProperties);
  const requested = properties[MessageConst.MAX_RECONSUME_TIMES];
  const fromMessage = requested !== undefined && /^-?\d{1,10}$/.test(requested) ? Number(requested) : Number.NaN;
  const max = isInt32(fromMessage) ? fromMessage : group.retryMaxTimes;
  const delay = properties[MessageConst.DELAY];
  const deadLetter = delay !== undefined && /^-\d{1,10}$/.test(delay) && Number(delay) < 0;
  const locked = !deadLetter && reconsumeTimes <= max && !lockTableOf(ctx).isLockAllExpired(group.groupName);
  if (!deadLetter && !shouldDivertRetrySendToDLQ(reconsumeTimes, max, locked)) return undefined;
  const dlq = ctx.topics.createIfAbsent(dlqTopic(group.groupName), DLQ_NUMS_PER_GROUP, PERM_READ_WRITE);
  delete properties[MessageConst.DELAY];
  return { topic: dlq.topicName, properties: encodeProperties(properties) };
}

/** A batch member's properties, checked as {@link processSend} checks a single message's. */
function checkBatchMemberProperties(_bodyStart: number, _bodyEnd: number, _flag: number, propsStart: number, propsEnd: number): void {
  if (propsEnd - propsStart > MAX_SEND_PROPERTIES_BYTES) throw sendPropertiesTooLong(propsEnd - propsStart);
}

/** Handles one send request; resolves with the reply fields or rejects with a coded MQError. */
export async function processSend(
  ctx: BrokerContext,
  ev: SendEventFields,
  batch: boolean,
  chooser: OpenQueueChooser,
): Promise<SendMessageReply> {
  const { config, topics } = ctx;
  if ((config.brokerPermission & Perm.WRITE) === 0) {
    throw new MQError(
      "NO_PERMISSION",
      `Broker ${config.brokerName} is not writable (brokerPermission ${config.brokerPermission}); send to another broker (an ordered send to a queue the caller chose: choose among the writable queues of the topic's route, which leaves this broker out once it is refreshed).`,
    );
  }
  if (config.role === "SLAVE") throw new MQError("NO_PERMISSION", `Broker ${config.brokerName} is a slave; send to its master.`);
  const topic = ev.topic;
  checkTopic(topic);
  if (SYSTEM_TOPICS.has(topic))
    throw new MQError("NO_PERMISSION", `Topic ${topic} is a system topic and cannot be sent to; choose another topic name.`);
  const body = ev.body;
  if (!Buffer.isBuffer(body) || body.length === 0) throw illegal(`The send request for topic "${topic}" carries no message body.`);
  if (body.length > config.maxMessageBytes) {
    throw illegal(
      `The message${batch ? " batch" : ""} is ${body.length} bytes; this broker accepts at most ${config.maxMessageBytes}: split it.`,
    );
  }
  const sysFlag = intField(ev.sysFlag, "sysFlag", 0);
  // a half (prepared) or rolled-back message is stored but never dispatched, awaiting a commit this
  // broker has no way to take: refused, as RocketMQ refuses them with rejectTransactionMessage
  if (isUndispatchedTransaction(sysFlag)) {
    throw new MQError(
      "NO_PERMISSION",
      `Broker ${config.brokerName} does not take transactional (half) messages: actormq has no transactions; send without the TRANSACTION_PREPARED / ROLLBACK sysFlag bits.`,
    );
  }
  const bornTimestamp = intField(ev.bornTimestamp, "bornTimestamp", Date.now(), true);
  const reconsumeTimes = intField(ev.reconsumeTimes, "reconsumeTimes", 0);
  let queueId = intField(ev.queueId, "queueId", -1);
  const bornHost = typeof ev.bornHost === "string" && HOST_PATTERN.test(ev.bornHost) ? ev.bornHost : UNKNOWN_HOST;
  // when the producer's attempt gives up (its ask's timeout, less its wait to be served here): the
  // SYNC waits below end in time for it to hear their outcome. Unknown (a local ask, a peer that
  // sends no timeout): they wait their whole time
  const givesUpAt = ev.reply?.answerBy;
  const answerBy = givesUpAt === undefined ? undefined : syncWaitDeadline(givesUpAt);

  let batchBody: Buffer;
  let single: { properties: string; flag: number } | undefined;
  if (batch) {
    // RocketMQ's sendBatchMessage: retry-topic messages carry per-message retry state (RETRY_TOPIC,
    // reconsume times) that one batch request cannot
    if (topic.startsWith(RETRY_GROUP_TOPIC_PREFIX))
      throw illegal(`A batch cannot be sent to the retry topic ${topic}: send its messages one by one.`);
    let count = 0;
    try {
      count = walkMessageBatch(body, checkBatchMemberProperties);
    } catch (e) {
      throw e instanceof MQError ? e : illegal(String(e));
    }
    if (count === 0) throw illegal("The message batch is empty.");
    batchBody = body;
  } else {
    const properties = ev.properties === undefined ? "" : ev.properties;
    if (typeof properties !== "string") throw illegal("The send request's properties must be an encoded string.");
    // the producer's limit, for clients that do not check it: the room left is what a send-back and
    // the delay route add, so the message can be retried and dead-lettered. A client's own retry
    // copy to %RETRY%<group> already carries those properties and has the store's whole limit.
    if (!isRetryTopic(topic)) checkSendProperties(properties);
    single = { properties, flag: intField(ev.flag, "flag", 0) };
    batchBody = encodeMessageBatch([{ body, flag: single.flag, properties }]);
  }
  // before the retry topic is auto-created: a copy for a group the broker does not know is refused
  const retryGroup = single && isRetryTopic(topic) ? retryGroupOf(ctx, topic) : undefined;

  const tc = topics.getOrAutoCreate(topic);
  if (!tc) {
    throw new MQError(
      "TOPIC_NOT_EXIST",
      `Topic ${topic} does not exist on broker ${config.brokerName} and autoCreateTopic is off: create it first with \`${topicCreateCommand(topic)}\` (Admin.createTopic in code).`,
    );
  }
  if ((tc.perm & Perm.WRITE) === 0)
    throw new MQError("NO_PERMISSION", `Topic ${topic} is not writable on broker ${config.brokerName} (perm ${tc.perm}).`);
  if (queueId < 0) {
    // only a queue the broker picks needs a write queue: a chosen one still readable is stored to (below)
    if (tc.writeQueueNums === 0) throw new MQError("NO_PERMISSION", `Topic ${topic} has no write queues on broker ${config.brokerName}.`);
    queueId = chooser.choose(tc.writeQueueNums);
  } else if (queueId >= Math.max(tc.writeQueueNums, tc.readQueueNums)) {
    // RocketMQ's msgCheck: a queue past the write queues that still exists for reading (a scale-down
    // in progress, a producer's cached route) is stored to; past both it is SYSTEM_ERROR, which the
    // producer retries on another queue after refreshing the route
    throw new MQError(
      "SYSTEM_ERROR",
      `Queue ${queueId} of topic ${topic} does not exist on broker ${config.brokerName}: it has ${tc.writeQueueNums} write and ${tc.readQueueNums} read queues; refresh the route.`,
    );
  }

  let putTopic = topic;
  let putQueueId = queueId;
  const dlq = retryGroup && single ? retrySendToDLQ(ctx, retryGroup, reconsumeTimes, single.properties) : undefined;
  if (dlq && single) {
    putTopic = dlq.topic;
    putQueueId = 0;
    batchBody = encodeMessageBatch([{ body, flag: single.flag, properties: dlq.properties }]);
  } else if (single && mayCarryDelay(single.properties)) {
    // a delay level sends the message to SCHEDULE_TOPIC_XXXX; the scheduler moves it back when due
    const target = scheduleTarget(topic, queueId, decodeProperties(single.properties), brokerDelayLevels(config.messageDelayLevel).length);
    if (target) {
      putTopic = target.topic;
      putQueueId = target.queueId;
      batchBody = encodeMessageBatch([{ body, flag: single.flag, properties: encodeProperties(target.properties) }]);
    }
  }
  const r = await ctx.put({
    topic: putTopic,
    queueId: putQueueId,
    bornTimestamp,
    bornHost,
    sysFlag,
    reconsumeTimes,
    body: batchBody,
    // a sync flush is waited for only while the producer still waits for the answer (FLUSH_DISK_TIMEOUT)
    flushDeadline: answerBy,
  });
  let status: SendStatus =
    r.status === "PUT_OK" ? "SEND_OK" : r.status === "FLUSH_DISK_TIMEOUT" ? "FLUSH_DISK_TIMEOUT" : (r.status as SendStatus);
  // replication: SYNC_MASTER answers once a slave holds the message (RocketMQ's handleHA), or
  // FLUSH_SLAVE_TIMEOUT while the producer still waits for the answer. A flush that timed out is
  // combined with the slave's outcome as RocketMQ's thenCombine does: the replica's failure wins
  if ((status === "SEND_OK" || status === "FLUSH_DISK_TIMEOUT") && config.role === "SYNC_MASTER") {
    const replica = await haServiceOf(ctx).waitForSlave(r.commitLogOffset + r.wroteBytes, answerBy);
    if (replica !== "SEND_OK") status = replica;
  }
  // a client's own retry copy dead-lettered here is logged as a send-back's is
  if (dlq && r.status === "PUT_OK")
    logDeadLettered(
      ctx,
      retryGroup!.groupName,
      dlq.topic,
      r.offsetMsgIds,
      decodeProperties(dlq.properties)[MessageConst.RETRY_TOPIC],
      reconsumeTimes,
    );
  return {
    status,
    msgId: r.offsetMsgIds,
    queueId,
    queueOffset: r.firstQueueOffset,
    commitLogOffset: r.commitLogOffset,
    count: r.count,
  };
}
