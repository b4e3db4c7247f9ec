/**
 * Producer queue selectors (RocketMQ `MessageQueueSelector` implementations) for the `selector`
 * send option: `(queues, msg, arg) => queue`.
 */
import { javaStringHashCode } from "../../filter/javaHash.ts";
import { type MessageQueue, MQError } from "../../transport/protocol.ts";

/** Picks the queue a message goes to; `arg` is the send call's `arg` (e.g. an order id). */
export type MessageQueueSelector = (queues: readonly MessageQueue[], msg: unknown, arg: unknown) => MessageQueue;

function requireQueues(queues: readonly MessageQueue[]): void {
  if (!queues || queues.length === 0) {
    throw new MQError("NO_ROUTE", "No message queue to select from: the topic has no writable queue; check its route and permissions.");
  }
}

/**
 * `SelectMessageQueueByHash`: `queues[|hash(String(arg)) mod n|]` with Java's String.hashCode,
 * so one sharding key always lands on the same queue (ordered messages per key).
 */
export const selectByHash: MessageQueueSelector = (queues, _msg, arg) => {
  requireQueues(queues);
  const value = javaStringHashCode(String(arg)) % queues.length;
  return queues[Math.abs(value)]!;
};

/** `SelectMessageQueueByRandom`. */
export const selectRandom: MessageQueueSelector = (queues) => {
  requireQueues(queues);
  return queues[Math.floor(Math.random() * queues.length)]!;
};
