/**
 * PushConsumer.start and PullConsumer.start refuse an allocation configuration that can never
 * allocate a queue (BY_MACHINE_ROOM without rooms or without a broker-to-room mapping, BY_CONFIG
 * without its queue list, CONSISTENT_HASH with a bad virtualNodes) with ILLEGAL_ARGUMENT, before they connect to anything, rather than
 * start a consumer that silently holds nothing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type AllocateOptions, MQError, PullConsumer, PushConsumer } from "../../../index.ts";

const nameservers = ["tcp://127.0.0.1:1"];
const bad: [string, "BY_MACHINE_ROOM" | "BY_CONFIG", AllocateOptions | undefined, RegExp][] = [
  ["rooms only (broker names cannot carry a room)", "BY_MACHINE_ROOM", { consumeridcs: ["room1"] }, /machineRoomOf/],
  ["no rooms", "BY_MACHINE_ROOM", { machineRoomOf: () => "room1" }, /consumeridcs/],
  ["no options", "BY_MACHINE_ROOM", undefined, /consumeridcs/],
  ["no queue list", "BY_CONFIG", {}, /messageQueueList/],
];

test("a consumer whose allocation can never match a queue is refused at start", async () => {
  for (const [what, allocateStrategy, allocateOptions, pattern] of bad) {
    const refused = (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && pattern.test(e.message);
    await assert.rejects(
      PushConsumer.start({
        group: "cgAlloc",
        nameservers,
        subscriptions: { T: "*" },
        allocateStrategy,
        ...(allocateOptions ? { allocateOptions } : {}),
        listener: async () => "CONSUME_SUCCESS",
      }),
      refused,
      `push, ${allocateStrategy}: ${what}`,
    );
    await assert.rejects(
      PullConsumer.start({ group: "cgAlloc", nameservers, allocateStrategy, ...(allocateOptions ? { allocateOptions } : {}) }),
      refused,
      `pull, ${allocateStrategy}: ${what}`,
    );
  }
});

test("CONSISTENT_HASH with a virtualNodes that is not a positive integer is refused at start", async () => {
  // 0: an empty ring, every consumer idle
  for (const virtualNodes of [-1, 0, 2.5, "10", Number.NaN]) {
    const allocateOptions = { virtualNodes } as unknown as AllocateOptions;
    const refused = (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /virtualNodes/.test(e.message);
    await assert.rejects(
      PushConsumer.start({
        group: "cgAlloc",
        nameservers,
        subscriptions: { T: "*" },
        allocateStrategy: "CONSISTENT_HASH",
        allocateOptions,
        listener: async () => "CONSUME_SUCCESS",
      }),
      refused,
      `push, virtualNodes ${String(virtualNodes)}`,
    );
    await assert.rejects(
      PullConsumer.start({ group: "cgAlloc", nameservers, allocateStrategy: "CONSISTENT_HASH", allocateOptions }),
      refused,
      `pull, virtualNodes ${String(virtualNodes)}`,
    );
  }
});

test("BY_CONFIG with a queue list entry that is not a queue, or (push) a queue of a topic not subscribed, is refused at start", async () => {
  // each was taken: a malformed entry failed every rebalance unlogged, or was pulled with a wrong
  // field; a queue of a topic not subscribed (a typo) was held, never pulled, dropped, held again
  const malformed: unknown[] = [
    null,
    "T@broker-a@0",
    { topic: "T", brokerName: "broker-a" },
    { topic: "T", brokerName: "broker-a", queueId: "0" },
    { topic: "T", brokerName: "broker-a", queueId: -1 },
    { topic: "T", brokerName: "broker-a", queueId: 1.5 },
    { topic: "T", brokerName: "", queueId: 0 },
    { brokerName: "broker-a", queueId: 0 },
  ];
  for (const entry of malformed) {
    const allocateOptions = { messageQueueList: [{ topic: "T", brokerName: "broker-a", queueId: 0 }, entry] } as unknown as AllocateOptions;
    const refused = (e: unknown) =>
      e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /messageQueueList\[1\]/.test(e.message) && /queueId/.test(e.message);
    await assert.rejects(
      PushConsumer.start({
        group: "cgAlloc",
        nameservers,
        subscriptions: { T: "*" },
        allocateStrategy: "BY_CONFIG",
        allocateOptions,
        listener: async () => "CONSUME_SUCCESS",
      }),
      refused,
      `push, ${JSON.stringify(entry)}`,
    );
    await assert.rejects(
      PullConsumer.start({ group: "cgAlloc", nameservers, allocateStrategy: "BY_CONFIG", allocateOptions }),
      refused,
      `pull, ${JSON.stringify(entry)}`,
    );
  }
  await assert.rejects(
    PushConsumer.start({
      group: "cgAlloc",
      nameservers,
      subscriptions: { T: "*" },
      allocateStrategy: "BY_CONFIG",
      allocateOptions: { messageQueueList: [{ topic: "t", brokerName: "broker-a", queueId: 0 }] },
      listener: async () => "CONSUME_SUCCESS",
    }),
    (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /"t"/.test(e.message) && /T, %RETRY%cgAlloc/.test(e.message),
    "push, a queue of a topic not subscribed",
  );
});
