/**
 * Retry and dead letters end to end: a concurrent listener's RECONSUME_LATER sends the message
 * back, the broker redelivers it through `%RETRY%<group>` at delay level 3 + reconsumeTimes
 * (short test levels), and after maxReconsumeTimes the message lands in `%DLQ%<group>`, which
 * can be consumed like any topic.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { prepareMessage } from "../../actors/client/messageBuilder.ts";
import { Admin, type LocalCluster, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { MessageConst, PERM_READ_WRITE } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

/** 18 levels, 300 ms apart: level n waits n x 300 ms, so neighbouring levels are easy to tell apart. */
const LEVEL_STEP_MS = 300;
const LEVELS = Array.from({ length: 18 }, (_, i) => `${(i + 1) * LEVEL_STEP_MS}ms`).join(" ");

let cluster: LocalCluster;
let dir: string;
let cleanup: () => Promise<void>;
let producer: Producer;
let admin: Admin;

before(async () => {
  const t = await tempDir("actormq-retry-");
  cleanup = t.cleanup;
  dir = t.dir;
  cluster = await startLocalCluster({ dir, broker: { flush: "async", messageDelayLevel: LEVELS } });
  producer = await Producer.start({ group: "retry-pg", nameservers: cluster.nameservers });
  admin = await Admin.start({ nameservers: cluster.nameservers });
  for (const topic of ["RetryOrders", "RetryPoison"]) await admin.createTopic({ topic, readQueueNums: 2, writeQueueNums: 2 });
});

after(async () => {
  await producer?.close();
  await admin?.close();
  await cluster?.close();
  await cleanup?.();
});

interface Delivery {
  at: number;
  msg: MessageExt;
}

test("a message failed 3 times then consumed: 4 deliveries, reconsumeTimes 0..3, gaps at levels 3, 4, 5, original topic restored", async () => {
  const deliveries: Delivery[] = [];
  const consumer = await PushConsumer.start({
    group: "retry-cg",
    nameservers: cluster.nameservers,
    subscriptions: { RetryOrders: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) deliveries.push({ at: Date.now(), msg: { ...m, properties: { ...m.properties } } });
      return deliveries.length < 4 ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  try {
    const sent = await producer.send({ topic: "RetryOrders", body: "order-1", keys: "k1", tags: "TagA" });
    await waitFor(() => deliveries.length >= 4, 15_000, "4 deliveries");
    assert.deepEqual(
      deliveries.map((d) => d.msg.reconsumeTimes),
      [0, 1, 2, 3],
    );
    for (const d of deliveries) {
      assert.equal(d.msg.topic, "RetryOrders", "the listener sees the original topic");
      assert.equal(d.msg.body.toString(), "order-1");
      assert.equal(d.msg.msgId, sent.msgId, "UNIQ_KEY kept across retries");
      assert.equal(d.msg.tags, "TagA");
      assert.equal(d.msg.keys, "k1");
    }
    for (const d of deliveries.slice(1)) {
      assert.equal(d.msg.properties[MessageConst.RETRY_TOPIC], "RetryOrders");
      assert.equal(d.msg.properties[MessageConst.ORIGIN_MESSAGE_ID], sent.msgId);
      assert.equal(d.msg.properties[MessageConst.DELAY], undefined, "DELAY removed on redelivery");
    }
    // retry k (k = 1..3) waits at level 3 + (k - 1)
    for (let k = 1; k <= 3; k++) {
      const gap = deliveries[k]!.at - deliveries[k - 1]!.at;
      const due = (3 + k - 1) * LEVEL_STEP_MS;
      assert.ok(gap >= due, `retry ${k} came after ${gap} ms, before its level's ${due} ms`);
      assert.ok(gap < due + LEVEL_STEP_MS, `retry ${k} came after ${gap} ms, later than the next level (${due + LEVEL_STEP_MS} ms)`);
    }
  } finally {
    await consumer.close();
  }
});

test("a message that always fails goes to %DLQ%<group> after maxReconsumeTimes + 1 deliveries, is not retried, and can be consumed from there", async () => {
  const group = "poison-cg";
  const maxReconsumeTimes = 2;
  const deliveries: Delivery[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { RetryPoison: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    maxReconsumeTimes,
    listener: async (msgs) => {
      for (const m of msgs) deliveries.push({ at: Date.now(), msg: m });
      throw new Error("poison");
    },
  });
  let dlqConsumer: PushConsumer | undefined;
  try {
    const sent = await producer.send({ topic: "RetryPoison", body: "poison-1" });
    const dlq = `%DLQ%${group}`;
    const broker = cluster.brokers[0]!;
    await waitFor(() => broker.store.getMaxOffset(dlq, 0) === 1, 15_000, "the message in the DLQ");
    assert.deepEqual(
      deliveries.map((d) => d.msg.reconsumeTimes),
      [0, 1, 2],
      "maxReconsumeTimes + 1 deliveries",
    );
    // nothing left waiting for the group: the retry topic holds the 2 retries, every delay level is drained
    assert.equal(broker.store.getMaxOffset(`%RETRY%${group}`, 0), maxReconsumeTimes);
    const progress = await broker.ctx.ref("scheduler").ask<{ offsetTable: Record<string, number> }>({ type: "GET_ALL_DELAY_OFFSET" });
    for (const [level, offset] of Object.entries(progress.fields.offsetTable)) {
      assert.equal(offset, broker.store.getMaxOffset("SCHEDULE_TOPIC_XXXX", Number(level) - 1), `level ${level} has nothing waiting`);
    }

    const route = await admin.topicRoute(dlq);
    assert.equal(route.queueDatas.length, 1);
    assert.equal(route.queueDatas[0]!.readQueueNums, 1);
    assert.equal(route.queueDatas[0]!.perm & PERM_READ_WRITE, PERM_READ_WRITE, "the DLQ is readable and writable");

    const fromDlq: MessageExt[] = [];
    dlqConsumer = await PushConsumer.start({
      group: "dlq-reader",
      nameservers: cluster.nameservers,
      subscriptions: { [dlq]: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs) => {
        fromDlq.push(...msgs);
        return "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => fromDlq.length >= 1, 10_000, "the DLQ message consumed");
    const m = fromDlq[0]!;
    assert.equal(m.topic, dlq);
    assert.equal(m.body.toString(), "poison-1");
    assert.equal(m.msgId, sent.msgId);
    assert.equal(m.reconsumeTimes, maxReconsumeTimes + 1);
    assert.equal(m.properties[MessageConst.RETRY_TOPIC], "RetryPoison");
    assert.equal(m.properties[MessageConst.ORIGIN_MESSAGE_ID], sent.msgId);
    assert.equal(deliveries.length, maxReconsumeTimes + 1, "not retried after the DLQ");
  } finally {
    await dlqConsumer?.close();
    await consumer.close();
  }
});

test("the longest clustering group (120 characters: %RETRY%<group> is 127) retries through its retry topic; one more is refused at start, broadcasting is not", async () => {
  await admin.createTopic({ topic: "RetryLongGroup", readQueueNums: 1, writeQueueNums: 1 });
  const group = "g".repeat(120);
  const deliveries: number[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { RetryLongGroup: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) deliveries.push(m.reconsumeTimes);
      return msgs[0]!.reconsumeTimes === 0 ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  try {
    await producer.send({ topic: "RetryLongGroup", body: "x" });
    await waitFor(() => deliveries.length >= 2, 15_000, "the retry through %RETRY%<group>");
    assert.deepEqual(deliveries, [0, 1]);
    assert.equal(cluster.brokers[0]!.store.getMaxOffset(`%RETRY%${group}`, 0), 1);
  } finally {
    await consumer.close();
  }
  const tooLong = "g".repeat(121);
  await assert.rejects(
    PushConsumer.start({
      group: tooLong,
      nameservers: cluster.nameservers,
      subscriptions: { RetryLongGroup: "*" },
      listener: async () => "CONSUME_SUCCESS",
    }),
    (e: unknown) =>
      e instanceof Error &&
      (e as { code?: string }).code === "ILLEGAL_ARGUMENT" &&
      /group name is too long for its retry topic/.test(e.message) &&
      /127/.test(e.message) &&
      /shorter/.test(e.message),
  );
  // broadcasting has no retry topic: every valid group name starts
  const b = await PushConsumer.start({
    group: "b".repeat(255),
    model: "BROADCASTING",
    // its offsets file goes under the test's directory, not the home directory's default
    offsetStoreDir: path.join(dir, "offsets"),
    nameservers: cluster.nameservers,
    subscriptions: { RetryLongGroup: "*" },
    listener: async () => "CONSUME_SUCCESS",
  });
  await b.close();
});

test("a fractional delayLevelWhenNextConsume retries through %RETRY%<group> at the truncated level and dead-letters after maxReconsumeTimes", async () => {
  await admin.createTopic({ topic: "RetryFraction", readQueueNums: 1, writeQueueNums: 1 });
  const group = "fraction-cg";
  const deliveries: Delivery[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { RetryFraction: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    maxReconsumeTimes: 2,
    reconsumeLaterDelayMs: 50,
    listener: async (msgs, ctx) => {
      for (const m of msgs) deliveries.push({ at: Date.now(), msg: m });
      (ctx as { delayLevelWhenNextConsume: number }).delayLevelWhenNextConsume = 1.5;
      return "RECONSUME_LATER";
    },
  });
  try {
    await producer.send({ topic: "RetryFraction", body: "f" });
    const broker = cluster.brokers[0]!;
    await waitFor(() => broker.store.getMaxOffset(`%DLQ%${group}`, 0) === 1, 15_000, "the message in the DLQ");
    assert.deepEqual(
      deliveries.map((d) => d.msg.reconsumeTimes),
      [0, 1, 2],
      "retried through the retry topic, not looped locally",
    );
    assert.equal(broker.store.getMaxOffset(`%RETRY%${group}`, 0), 2);
    for (let i = 1; i < deliveries.length; i++) {
      const gap = deliveries[i]!.at - deliveries[i - 1]!.at;
      assert.ok(
        gap >= LEVEL_STEP_MS && gap < 2 * LEVEL_STEP_MS,
        `retry ${i} came after ${gap} ms: level 1 (1.5 truncated) is ${LEVEL_STEP_MS} ms`,
      );
    }
  } finally {
    await consumer.close();
  }
});

/** The longest value of property `big` the producer accepts for `topic` (a binary search over its check). */
function largestAcceptedProperty(topic: string): string {
  let lo = 1;
  let hi = 64 * 1024;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    try {
      prepareMessage({ topic, body: "x", properties: { big: "v".repeat(mid) } });
      lo = mid;
    } catch {
      hi = mid - 1;
    }
  }
  return "v".repeat(lo);
}

test("a message with properties as large as the producer accepts, on the longest topic and group, is sent back, dead-lettered after maxReconsumeTimes, and its queue's offset moves on", async () => {
  // the longest names give the longest RETRY_TOPIC, REAL_TOPIC (%RETRY%<group>) the broker adds
  const topic = "T".repeat(127);
  const group = "g".repeat(120);
  await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  const big = largestAcceptedProperty(topic);
  const deliveries: number[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    maxReconsumeTimes: 1,
    reconsumeLaterDelayMs: 100,
    persistConsumerOffsetIntervalMs: 200,
    listener: async (msgs) => {
      for (const m of msgs) if (m.properties.big) deliveries.push(m.reconsumeTimes);
      return msgs.some((m) => m.properties.big) ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  try {
    const sent = await producer.send({ topic, body: "poison", properties: { big } });
    for (let i = 0; i < 3; i++) await producer.send({ topic, body: `after-${i}` });
    const broker = cluster.brokers[0]!;
    await waitFor(() => broker.store.getMaxOffset(`%DLQ%${group}`, 0) === 1 || deliveries.length > 4, 15_000, "the message in the DLQ");
    assert.deepEqual(deliveries, [0, 1], "delivered maxReconsumeTimes + 1 times, through the retry topic");
    const dead = broker.store.getMessage("x", `%DLQ%${group}`, 0, 0, 1);
    assert.equal(dead.status, "FOUND");
    const [m] = decodeRecords(Buffer.concat(dead.buffers), "x");
    assert.equal(m!.msgId, sent.msgId);
    assert.equal(m!.properties.big, big);
    assert.equal(m!.properties[MessageConst.RETRY_TOPIC], topic);
    let progress: Awaited<ReturnType<Admin["consumerProgress"]>> = [];
    await waitFor(
      async () => {
        progress = (await admin.consumerProgress(group)).filter((p) => p.topic === topic);
        return progress.length === 1 && progress[0]!.consumerOffset === 4;
      },
      15_000,
      "the group's offset past the dead-lettered message",
      100,
    ).catch(() => assert.fail(`the group's progress on the topic: ${JSON.stringify(progress)}`));
  } finally {
    await consumer.close();
  }
});
