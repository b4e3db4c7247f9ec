/**
 * Orderly SUSPEND and dead letters through a real broker: a message the listener always suspends
 * is delivered maxReconsumeTimes + 1 times in place (nothing after it in its queue meanwhile),
 * then parked in `%DLQ%<group>`, where it can be consumed; the queue moves on to the next message.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { consumeLog } from "../../actors/client/consumeService.ts";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("orderly: SUSPEND redelivers in place, then the message goes to the DLQ and the queue moves on", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-dlq-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgOrdDlq", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "OrdDlq", readQueueNums: 1, writeQueueNums: 1 });
    for (const body of ["first", "bad", "after"]) await producer.send({ topic: "OrdDlq", body });
    const seen: { body: string; reconsumeTimes: number; at: number }[] = [];
    consumers.push(
      await PushConsumer.start({
        group: "cgOrdDlq",
        nameservers: cluster.nameservers,
        subscriptions: { OrdDlq: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly: true,
        maxReconsumeTimes: 2,
        suspendCurrentQueueTimeMillis: 100,
        persistConsumerOffsetIntervalMs: 200,
        listener: async (msgs) => {
          for (const m of msgs) seen.push({ body: m.body.toString(), reconsumeTimes: m.reconsumeTimes, at: Date.now() });
          return msgs.some((m) => m.body.toString() === "bad") ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "SUCCESS";
        },
      }),
    );
    await waitFor(() => seen.some((s) => s.body === "after"), 20_000, "the message after the dead-lettered one");
    assert.deepEqual(
      seen.map((s) => s.body),
      ["first", "bad", "bad", "bad", "after"],
    );
    assert.deepEqual(
      seen.filter((s) => s.body === "bad").map((s) => s.reconsumeTimes),
      [0, 1, 2],
    );
    const bad = seen.filter((s) => s.body === "bad");
    for (let i = 1; i < bad.length; i++) assert.ok(bad[i]!.at - bad[i - 1]!.at >= 90, "the queue paused after each SUSPEND");

    const dead: MessageExt[] = [];
    consumers.push(
      await PushConsumer.start({
        group: "cgOrdDlqReader",
        nameservers: cluster.nameservers,
        subscriptions: { "%DLQ%cgOrdDlq": "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs) => {
          dead.push(...msgs);
          return "CONSUME_SUCCESS";
        },
      }),
    );
    await waitFor(() => dead.length > 0, 20_000, "the dead letter");
    assert.deepEqual(
      dead.map((m) => m.body.toString()),
      ["bad"],
    );
    await waitFor(
      async () => (await admin.consumerProgress("cgOrdDlq")).some((p) => p.topic === "OrdDlq" && p.consumerOffset === 3),
      10_000,
      "offset committed past all three",
    );
  } finally {
    for (const c of consumers) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("orderly: the dead-lettered copy carries the retries the message had in place, not the stored count", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-dlq-times-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgOrdDlqTimes", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "OrdDlqTimes", readQueueNums: 1, writeQueueNums: 1 });
    await producer.send({ topic: "OrdDlqTimes", body: "bad" });
    const seen: number[] = [];
    consumers.push(
      await PushConsumer.start({
        group: "cgOrdDlqTimes",
        nameservers: cluster.nameservers,
        subscriptions: { OrdDlqTimes: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly: true,
        maxReconsumeTimes: 3,
        suspendCurrentQueueTimeMillis: 50,
        listener: async (msgs) => {
          for (const m of msgs) seen.push(m.reconsumeTimes);
          return "SUSPEND_CURRENT_QUEUE_A_MOMENT";
        },
      }),
    );
    const dead: MessageExt[] = [];
    consumers.push(
      await PushConsumer.start({
        group: "cgOrdDlqTimesReader",
        nameservers: cluster.nameservers,
        subscriptions: { "%DLQ%cgOrdDlqTimes": "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs) => {
          dead.push(...msgs);
          return "CONSUME_SUCCESS";
        },
      }),
    );
    await waitFor(() => dead.length > 0, 20_000, "the dead letter");
    assert.deepEqual(seen, [0, 1, 2, 3]);
    // reference §12.3: the copy is written with RECONSUME_TIME = times + 1, as a concurrent
    // consumer's dead letter after maxReconsumeTimes retries carries maxReconsumeTimes + 1
    assert.equal(dead[0]!.reconsumeTimes, 4);
    assert.equal(dead[0]!.body.toString(), "bad");
  } finally {
    for (const c of consumers) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("orderly broadcasting: a message past maxReconsumeTimes is skipped, not dead-lettered, and logged at warn with its id, queue, offset and retries", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-orderly-bcast-skip-");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgOrdSkip", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(consumeLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  let consumer: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "OrdSkip", readQueueNums: 1, writeQueueNums: 1 });
    const bad = await producer.send({ topic: "OrdSkip", body: "bad" });
    await producer.send({ topic: "OrdSkip", body: "after" });
    const seen: string[] = [];
    consumer = await PushConsumer.start({
      group: "cgOrdSkip",
      nameservers: cluster.nameservers,
      model: "BROADCASTING",
      instanceName: "m1",
      offsetStoreDir: path.join(dir, "offsets"),
      subscriptions: { OrdSkip: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly: true,
      maxReconsumeTimes: 2,
      suspendCurrentQueueTimeMillis: 50,
      listener: async (msgs) => {
        for (const m of msgs) seen.push(`${m.body.toString()}#${m.reconsumeTimes}`);
        return msgs.some((m) => m.body.toString() === "bad") ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "SUCCESS";
      },
    });
    await waitFor(() => seen.includes("after#0"), 20_000, "the message after the skipped one");
    assert.deepEqual(seen, ["bad#0", "bad#1", "bad#2", "after#0"]);
    const skipped = lines.filter((l) => /skipped/.test(l.msg));
    assert.equal(skipped.length, 1, "the skip is logged");
    const { fields, msg } = skipped[0]!;
    assert.deepEqual(
      [fields.group, fields.msgId, fields.topic, fields.queueId, fields.queueOffset, fields.reconsumeTimes],
      ["cgOrdSkip", bad.msgId, "OrdSkip", 0, 0, 2],
    );
    assert.match(msg, /maxReconsumeTimes/);
    assert.match(msg, /dead-letter/);
    await assert.rejects(admin.topicRoute("%DLQ%cgOrdSkip"), "no dead-letter queue was made");
  } finally {
    await consumer?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
