/**
 * Producer queue selectors (RocketMQ `MessageQueueSelector` implementations) for the `selector`
 * send option: `(queues, msg, arg) => queue`.
 */
import { javaStringHashCode } from "../../filter/javaHash.ts";
import { isInt32, type MessageQueue, MQError } from "../../transport/protocol.ts";

/** Picks the queue a message goes to; `arg` is the send call's `arg` (e.g. an order id). */
export type MessageQueueSelector = (queues: readonly MessageQueue[], msg: unknown, arg: unknown) => MessageQueue;

function requireQueues(queues: readonly MessageQueue[]): void {
  if (!queues || queues.length === 0) {
    throw new MQError("NO_ROUTE", "No message queue to select from: the topic has no writable queue; check its route and permissions.");
  }
}

/**
 * Java's `arg.hashCode()` for the values a JS caller passes as a sharding key: an integer in int
 * range is an `Integer` (its value), a larger safe integer or a bigint a `Long`
 * (`(int)(v ^ (v >>> 32))`), anything else the `String.hashCode` of its string form.
 */
export function javaArgHashCode(arg: unknown): number {
  if (isInt32(arg)) return arg;
  if ((typeof arg === "number" && Number.isSafeInteger(arg)) || typeof arg === "bigint") {
    const v = BigInt.asUintN(64, BigInt(arg));
    return Number(BigInt.asIntN(32, v ^ (v >> 32n)));
  }
  return javaStringHashCode(String(arg));
}

/**
 * `SelectMessageQueueByHash`: `queues[|arg.hashCode() mod n|]` with Java's hash codes (see
 * {@link javaArgHashCode}), so one sharding key always lands on the same queue (ordered messages
 * per key) and an integer order id lands on `|id mod n|`, as it does in RocketMQ.
 */
export const selectByHash: MessageQueueSelector = (queues, _msg, arg) => {
  requireQueues(queues);
  const value = javaArgHashCode(arg) % queues.length;
  return queues[Math.abs(value)]!;
};

/** `SelectMessageQueueByRandom`. */
export const selectRandom: MessageQueueSelector = (queues) => {
  requireQueues(queues);
  return queues[Math.floor(Math.random() * queues.length)]!;
};
