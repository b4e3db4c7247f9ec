/**
 * A delay level above the broker's highest waits at the highest level (RocketMQ clamps it, reference
 * §13), up to Java's int maximum; a larger one is refused (it used to be written "1e+21", read as 1).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const HIGHEST_MS = 800;

test("a delay level past the highest, up to 2^31-1, waits at the highest level; a larger one is refused", async () => {
  const { dir, cleanup } = await tempDir("actormq-delay-clamp-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", messageDelayLevel: `50ms 100ms ${HIGHEST_MS}ms` } });
  const producer = await Producer.start({ group: "clamp-pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const sentAt = new Map<string, number>();
  const waited = new Map<string, number>();
  const consumer = await PushConsumer.start({
    group: "clamp-cg",
    nameservers: cluster.nameservers,
    subscriptions: { DelayClamp: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) waited.set(m.body.toString(), Date.now() - sentAt.get(m.body.toString())!);
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await admin.createTopic({ topic: "DelayClamp", readQueueNums: 1, writeQueueNums: 1 });
    for (const level of [2 ** 31, 2 ** 53, 1e21, Number.MAX_VALUE])
      await assert.rejects(producer.send({ topic: "DelayClamp", body: "never", delayLevel: level }), { code: "MESSAGE_ILLEGAL" });
    const levels = [4, 2 ** 31 - 1];
    for (const level of levels) {
      sentAt.set(String(level), Date.now());
      await producer.send({ topic: "DelayClamp", body: String(level), delayLevel: level });
    }
    await waitFor(() => waited.size === levels.length, 10_000, "every delayed message");
    for (const level of levels) {
      const ms = waited.get(String(level))!;
      assert.ok(ms >= HIGHEST_MS, `delayLevel ${level} waited ${ms} ms, less than the highest level's ${HIGHEST_MS} ms`);
    }
  } finally {
    await consumer.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
