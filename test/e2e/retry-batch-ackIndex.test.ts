/**
 * Retries of messages sent with sendBatch, and of the part of a listener batch past its ackIndex
 * (RocketMQ's ConsumeConcurrentlyContext.ackIndex, reference §12.1): exactly the failed messages
 * come back through `%RETRY%<group>` with reconsumeTimes 1; those acknowledged never do, and the
 * queue's offset moves past all of them. RECONSUME_LATER fails the whole batch whatever ackIndex says.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  Admin,
  type ConsumeConcurrentlyContext,
  type LocalCluster,
  type MessageExt,
  Producer,
  PushConsumer,
  startLocalCluster,
} from "../../index.ts";
import { MessageConst } from "../../transport/protocol.ts";
import { SHORT_DELAY_LEVELS, tempDir, waitFor } from "../helpers.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let producer: Producer;
let admin: Admin;

before(async () => {
  const t = await tempDir("actormq-retry-batch-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, broker: { flush: "async", messageDelayLevel: SHORT_DELAY_LEVELS } });
  producer = await Producer.start({ group: "batch-pg", nameservers: cluster.nameservers });
  admin = await Admin.start({ nameservers: cluster.nameservers });
});

after(async () => {
  await producer?.close();
  await admin?.close();
  await cluster?.close();
  await cleanup?.();
});

interface Call {
  bodies: string[];
  times: number[];
}

/**
 * Sends `bodies` as one batch to a new one-queue topic, then consumes it with `group`; `decide`
 * answers each listener call. Resolves with the calls and the consumer once `until` holds.
 */
async function run(
  topic: string,
  group: string,
  bodies: string[],
  batchMax: number,
  decide: (msgs: MessageExt[], ctx: ConsumeConcurrentlyContext) => "CONSUME_SUCCESS" | "RECONSUME_LATER",
  until: (calls: Call[]) => boolean,
): Promise<{ calls: Call[]; consumer: PushConsumer; sent: string[] }> {
  await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  // sent before the consumer starts, so its first pull takes the whole batch
  const r = await producer.sendBatch(bodies.map((body) => ({ topic, body, keys: body })));
  const calls: Call[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeMessageBatchMaxSize: batchMax,
    listener: async (msgs, ctx) => {
      for (const m of msgs) {
        assert.equal(m.topic, topic, "the original topic restored");
        if (m.reconsumeTimes > 0) assert.equal(m.properties[MessageConst.RETRY_TOPIC], topic);
      }
      calls.push({ bodies: msgs.map((m) => m.body.toString()), times: msgs.map((m) => m.reconsumeTimes) });
      return decide(msgs, ctx as ConsumeConcurrentlyContext);
    },
  });
  await waitFor(() => until(calls), 15_000, `${group}'s deliveries`);
  return { calls, consumer, sent: r.msgId.split(",") };
}

function deliveredAt(calls: Call[], times: number): string[] {
  return calls.flatMap((c) => c.bodies.filter((_, i) => c.times[i] === times)).sort();
}

/** Waits until the group's committed offset of the topic's queue 0 is past the whole batch. */
async function committedPast(consumer: PushConsumer, topic: string, n: number): Promise<void> {
  const mq = { topic, brokerName: cluster.brokers[0]!.brokerName, queueId: 0 };
  await waitFor(() => consumer.offsetStore.readOffsetFromMemory(mq) === n, 10_000, `${topic}'s offset at ${n}`);
}

test("one message of a sendBatch failed (batches of 1): only it comes back, with reconsumeTimes 1", async () => {
  const bodies = ["b0", "b1", "b2", "b3"];
  const { calls, consumer } = await run(
    "RetryBatchOne",
    "batch-one-cg",
    bodies,
    1,
    (msgs) => (msgs[0]!.body.toString() === "b2" && msgs[0]!.reconsumeTimes === 0 ? "RECONSUME_LATER" : "CONSUME_SUCCESS"),
    (c) => deliveredAt(c, 1).length >= 1,
  );
  try {
    await committedPast(consumer, "RetryBatchOne", 4);
    assert.deepEqual(deliveredAt(calls, 0), bodies);
    assert.deepEqual(deliveredAt(calls, 1), ["b2"]);
    assert.ok(
      calls.every((c) => c.bodies.length === 1),
      "consumeMessageBatchMaxSize 1",
    );
  } finally {
    await consumer.close();
  }
});

test("a partial ackIndex on CONSUME_SUCCESS: the messages after it come back, those up to it do not", async () => {
  const bodies = ["p0", "p1", "p2", "p3", "p4"];
  const { calls, consumer } = await run(
    "RetryAckIndex",
    "ack-index-cg",
    bodies,
    bodies.length,
    (msgs, ctx) => {
      if (msgs.some((m) => m.reconsumeTimes === 0)) ctx.ackIndex = 1;
      return "CONSUME_SUCCESS";
    },
    (c) => deliveredAt(c, 1).length >= 3,
  );
  try {
    await committedPast(consumer, "RetryAckIndex", bodies.length);
    assert.deepEqual(calls[0]!.bodies, bodies, "one listener call for the whole batch");
    assert.deepEqual(deliveredAt(calls, 0), bodies);
    assert.deepEqual(deliveredAt(calls, 1), ["p2", "p3", "p4"]);
  } finally {
    await consumer.close();
  }
});

test("RECONSUME_LATER with an ackIndex set: the whole batch comes back", async () => {
  const bodies = ["r0", "r1", "r2"];
  const { calls, consumer } = await run(
    "RetryLaterAckIndex",
    "later-ack-cg",
    bodies,
    bodies.length,
    (msgs, ctx) => {
      ctx.ackIndex = 1;
      return msgs.some((m) => m.reconsumeTimes === 0) ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
    (c) => deliveredAt(c, 1).length >= 3,
  );
  try {
    await committedPast(consumer, "RetryLaterAckIndex", bodies.length);
    assert.deepEqual(calls[0]!.bodies, bodies);
    assert.deepEqual(deliveredAt(calls, 1), bodies);
  } finally {
    await consumer.close();
  }
});
