/**
 * Retry and dead-letter decisions (RocketMQ `consumerSendMsgBack`, `handleRetryAndDLQ`,
 * `ConsumeMessageConcurrentlyService.processConsumeResult`, `ConsumeMessageOrderlyService`).
 * Pure functions: the `sendback` actor and the consume workers act on their answers.
 */
import { DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX } from "../../transport/protocol.ts";

/** Default retries of a concurrent consumer (and of a subscription group's retryMaxTimes). */
export const DEFAULT_MAX_RECONSUME_TIMES = 16;
/** Orderly consumers retry locally forever unless configured (Java Integer.MAX_VALUE). */
export const ORDERLY_DEFAULT_MAX_RECONSUME_TIMES = 2_147_483_647;
/** The first retry waits at this delay level (10 s by default); each retry one level more. */
export const FIRST_RETRY_DELAY_LEVEL = 3;
/** RocketMQ's default number of delay levels. */
export const DEFAULT_MAX_DELAY_LEVEL = 18;
/** Queues of a DLQ topic. */
export const DLQ_NUMS_PER_GROUP = 1;
/** Concurrent listener's default ackIndex: every message succeeded. */
export const ACK_INDEX_ALL = 2_147_483_647;
/** Orderly suspend time bounds and default (ms). */
export const DEFAULT_SUSPEND_CURRENT_QUEUE_TIME_MS = 1_000;
export const MIN_SUSPEND_TIME_MS = 10;
export const MAX_SUSPEND_TIME_MS = 30_000;

/** `%RETRY%<group>` */
export function retryTopic(group: string): string {
  return RETRY_GROUP_TOPIC_PREFIX + group;
}
/** `%DLQ%<group>` */
export function dlqTopic(group: string): string {
  return DLQ_GROUP_TOPIC_PREFIX + group;
}
export function isRetryTopic(topic: string): boolean {
  return topic.startsWith(RETRY_GROUP_TOPIC_PREFIX);
}
export function isDlqTopic(topic: string): boolean {
  return topic.startsWith(DLQ_GROUP_TOPIC_PREFIX);
}
/** The group a retry or DLQ topic belongs to, or undefined for other topics. */
export function groupOfRetryOrDlqTopic(topic: string): string | undefined {
  if (isRetryTopic(topic)) return topic.slice(RETRY_GROUP_TOPIC_PREFIX.length);
  if (isDlqTopic(topic)) return topic.slice(DLQ_GROUP_TOPIC_PREFIX.length);
  return undefined;
}

/** Inputs of a CONSUMER_SEND_MSG_BACK decision. */
export interface SendBackInput {
  /** reconsumeTimes of the stored message being sent back */
  reconsumeTimes: number;
  /** from the request when present, else the group's retryMaxTimes */
  maxReconsumeTimes?: number;
  /** requested level: 0 = broker decides, < 0 = straight to the DLQ, > 0 = that level */
  delayLevel: number;
  /** highest configured delay level @default 18 */
  maxDelayLevel?: number;
}

/** Where a sent-back message goes. */
export interface SendBackDecision {
  toDLQ: boolean;
  /** delay level of the new message (0 for the DLQ: visible at once) */
  delayLevel: number;
  /** reconsumeTimes of the new message */
  reconsumeTimes: number;
}

/**
 * The broker's send-back rule: exhausted retries (reconsumeTimes >= max) or a negative level go
 * to the DLQ at once; otherwise level 0 becomes 3 + reconsumeTimes, capped at the highest level.
 */
export function decideSendBack(input: SendBackInput): SendBackDecision {
  const max = input.maxReconsumeTimes ?? DEFAULT_MAX_RECONSUME_TIMES;
  const maxLevel = input.maxDelayLevel ?? DEFAULT_MAX_DELAY_LEVEL;
  const reconsumeTimes = input.reconsumeTimes + 1;
  if (input.reconsumeTimes >= max || input.delayLevel < 0) return { toDLQ: true, delayLevel: 0, reconsumeTimes };
  const level = input.delayLevel === 0 ? FIRST_RETRY_DELAY_LEVEL + input.reconsumeTimes : input.delayLevel;
  return { toDLQ: false, delayLevel: Math.min(level, maxLevel), reconsumeTimes };
}

/**
 * A plain SEND_MESSAGE to a `%RETRY%` topic (the client's fallback when send-back failed) is
 * diverted to the DLQ when its header reconsumeTimes exceeds the maximum, or when the group holds
 * a live orderly lock (so orderly groups never re-order through the retry topic).
 */
export function shouldDivertRetrySendToDLQ(reconsumeTimes: number, maxReconsumeTimes: number, groupHoldsLiveLock: boolean): boolean {
  return reconsumeTimes > maxReconsumeTimes || groupHoldsLiveLock;
}

/** Delay level the client uses when it produces a retry copy itself: 3 + reconsumeTimes. */
export function clientRetryDelayLevel(reconsumeTimes: number): number {
  return FIRST_RETRY_DELAY_LEVEL + reconsumeTimes;
}

/** A consumer's maxReconsumeTimes option: -1 means 16 (concurrent) or unlimited (orderly). */
export function effectiveMaxReconsumeTimes(configured: number | undefined, orderly: boolean): number {
  if (configured === undefined || configured === -1) return orderly ? ORDERLY_DEFAULT_MAX_RECONSUME_TIMES : DEFAULT_MAX_RECONSUME_TIMES;
  return configured;
}

/** Concurrent listener outcome. */
export type ConsumeConcurrentlyStatus = "CONSUME_SUCCESS" | "RECONSUME_LATER";

/**
 * Index of the last message of a batch that counts as consumed: CONSUME_SUCCESS with the
 * context's ackIndex (clamped to the batch), RECONSUME_LATER => -1 (none).
 */
export function normalizeAckIndex(batchSize: number, status: ConsumeConcurrentlyStatus, ackIndex: number = ACK_INDEX_ALL): number {
  if (status !== "CONSUME_SUCCESS") return -1;
  if (ackIndex >= batchSize) return batchSize - 1;
  return Math.max(ackIndex, -1);
}

/**
 * The messages of a concurrent batch to send back for retry: those after the ack index.
 * Broadcasting consumers drop them instead (RocketMQ only logs them), so this is for clustering.
 */
export function messagesToSendBack<M>(msgs: readonly M[], status: ConsumeConcurrentlyStatus, ackIndex: number = ACK_INDEX_ALL): M[] {
  if (msgs.length === 0) return [];
  return msgs.slice(normalizeAckIndex(msgs.length, status, ackIndex) + 1);
}

/**
 * Orderly SUSPEND_CURRENT_QUEUE_A_MOMENT: messages that reached maxReconsumeTimes are copied to
 * the retry topic (and land in the DLQ); if any other remains, the batch is put back and the
 * queue suspends.
 */
export function orderlySuspendDecision<M extends { reconsumeTimes: number }>(
  msgs: readonly M[],
  maxReconsumeTimes: number,
): { exhausted: M[]; suspend: boolean } {
  const exhausted = msgs.filter((m) => m.reconsumeTimes >= maxReconsumeTimes);
  return { exhausted, suspend: exhausted.length < msgs.length };
}

/** Orderly suspend time: -1 => the consumer's default (1 s), clamped to 10 ms .. 30 s. */
export function suspendTimeMillis(requested: number, consumerDefault: number = DEFAULT_SUSPEND_CURRENT_QUEUE_TIME_MS): number {
  const t = requested === -1 ? consumerDefault : requested;
  return Math.min(MAX_SUSPEND_TIME_MS, Math.max(MIN_SUSPEND_TIME_MS, t));
}
