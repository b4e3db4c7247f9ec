/**
 * Where a consumer starts pulling a queue it was just given (RocketMQ's
 * `RebalancePushImpl#computePullFromWhereWithException`, reference §6). Pure decision; the
 * broker look-ups are passed in so tests can drive every branch.
 */

import { type ConsumeFromWhere, type MessageQueue, MQError, RETRY_GROUP_TOPIC_PREFIX } from "../../transport/protocol.ts";
import { OFFSET_NOT_FOUND } from "./offsetTable.ts";

/** The look-ups computePullFromWhere needs. */
export interface PullFromWhereLookups {
  /** the committed offset from the offset store (READ_FROM_STORE): >= 0, -1 not found, -2 error */
  readOffset(mq: MessageQueue): Promise<number>;
  /** GET_MAX_OFFSET */
  maxOffset(mq: MessageQueue): Promise<number>;
  /** SEARCH_OFFSET_BY_TIMESTAMP */
  searchOffset(mq: MessageQueue, timestamp: number): Promise<number>;
}

/** True for `%RETRY%<group>` topics. */
export function isRetryTopic(topic: string): boolean {
  return topic.startsWith(RETRY_GROUP_TOPIC_PREFIX);
}

/**
 * The offset to start pulling `mq` from.
 *
 * | mode      | committed >= 0 | never committed (-1)                            |
 * |-----------|----------------|-------------------------------------------------|
 * | LAST      | committed      | retry topic: 0; else the queue's max offset     |
 * | FIRST     | committed      | 0 (moved by OFFSET_ILLEGAL if 0 is gone)        |
 * | TIMESTAMP | committed      | retry topic: max offset; else search(timestamp) |
 *
 * @throws MQError QUERY_NOT_FOUND when the committed offset could not be read, SYSTEM_ERROR on a
 * negative result; the rebalancer skips the queue this round and tries again next round. `then`
 * ends those messages: what happens to the queue next.
 */
export async function computePullFromWhere(
  mode: ConsumeFromWhere,
  consumeTimestamp: number,
  mq: MessageQueue,
  lookups: PullFromWhereLookups,
  then = "the queue is retried at the next rebalance",
): Promise<number> {
  const last = await lookups.readOffset(mq);
  let result: number;
  if (last >= 0) {
    result = last;
  } else if (last !== OFFSET_NOT_FOUND) {
    throw new MQError("QUERY_NOT_FOUND", `The committed offset of ${mq.topic}@${mq.brokerName}@${mq.queueId} could not be read; ${then}.`);
  } else if (mode === "CONSUME_FROM_FIRST_OFFSET") {
    result = 0;
  } else if (mode === "CONSUME_FROM_LAST_OFFSET" && isRetryTopic(mq.topic)) {
    result = 0;
  } else {
    // a new group's LAST / TIMESTAMP start is asked of the queue's master (as in RocketMQ): -1 is
    // a look-up that failed, most often because the master is down or unreachable
    const byTime = mode === "CONSUME_FROM_TIMESTAMP" && !isRetryTopic(mq.topic);
    result = byTime ? await lookups.searchOffset(mq, consumeTimestamp) : await lookups.maxOffset(mq);
    if (result === -1)
      throw new MQError(
        "SYSTEM_ERROR",
        `The ${byTime ? "offset by timestamp" : "max offset"} of ${mq.topic}@${mq.brokerName}@${mq.queueId}, where a group with no committed offset starts, could not be read from the master of ${mq.brokerName} (down or unreachable?); ${then}.`,
      );
  }
  if (!(result >= 0)) {
    throw new MQError("SYSTEM_ERROR", `Found unexpected start offset ${result} for ${mq.topic}@${mq.brokerName}@${mq.queueId}; ${then}.`);
  }
  return result;
}
