/**
 * Pipelined pulls: a push consumer draining a backlog keeps several pulls in flight per queue
 * (at the offsets the earlier ones end at) and still delivers every message exactly once, in
 * queue order per queue, also when the broker's byte limit cuts batches short of pullBatchSize;
 * the pulls in flight count toward the cache's size and span limits.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { after, before, test } from "node:test";
import { Admin, type LocalCluster, type MessageQueue, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

let dir: string;
let cleanup: () => Promise<void>;
let cluster: LocalCluster;
let producer: Producer;
let admin: Admin;

before(async () => {
  ({ dir, cleanup } = await tempDir("actormq-consume-pipelined-"));
  cluster = await startLocalCluster({ dir: path.join(dir, "c"), broker: { flush: "async" } });
  producer = await Producer.start({ group: "pgPipe", nameservers: cluster.nameservers });
  admin = await Admin.start({ nameservers: cluster.nameservers });
});

after(async () => {
  await admin?.close();
  await producer?.close();
  await cluster?.close();
  await cleanup?.();
});

async function drainOnce(topic: string, bodyBytes: number, total: number): Promise<{ pipelined: number; seen: number[] }> {
  await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  const selector = (qs: MessageQueue[]) => qs[0];
  for (let i = 0; i < total; i += 32) {
    const msgs = [];
    for (let k = i; k < Math.min(total, i + 32); k++) {
      const body = Buffer.alloc(bodyBytes, 1);
      body.writeUInt32BE(k, 0);
      msgs.push({ topic, body });
    }
    await producer.sendBatch(msgs, { selector });
  }
  const seen: number[] = [];
  const c = await PushConsumer.start({
    group: `cg${topic}`,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeMessageBatchMaxSize: 32,
    consumeThreads: 1,
    listener: async (msgs) => {
      for (const m of msgs) seen.push(Buffer.from(m.body).readUInt32BE(0));
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await waitFor(() => seen.length >= total, 20_000, `${total} messages`);
    // late duplicates from dropped speculative pulls would show up here
    await new Promise((r) => setTimeout(r, 100));
    return { pipelined: c.pullService.stats.pipelined, seen };
  } finally {
    await c.close();
  }
}

test("a backlog drains exactly once and in order with several pulls in flight", async () => {
  const total = 2_000;
  const { seen, pipelined } = await drainOnce("PipeSmall", 256, total);
  assert.deepEqual(
    seen,
    Array.from({ length: total }, (_, i) => i),
  );
  assert.ok(pipelined > 0, "no pull was issued behind another");
});

test("batches cut short by the broker's byte limit still deliver each message once, in order", async () => {
  // 40 KiB bodies: the broker's 256 KiB transfer limit answers ~6 messages where 32 were asked
  const total = 150;
  const { seen } = await drainOnce("PipeBig", 40 * 1024, total);
  assert.deepEqual(
    seen,
    Array.from({ length: total }, (_, i) => i),
  );
});

test("pulls in flight stop at pullThresholdSizeForQueue: the cache stays within one pull of it", async () => {
  // 1 MiB bodies: one message per answer (the broker's 256 KiB transfer limit lets one through);
  // 16 pulls in flight counted by messages only would cache ~17 MiB under a 1 MiB threshold
  const topic = "PipeSize";
  await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  // random: a compressible body would be sent compressed, many to one answer
  for (let i = 0; i < 40; i++) await producer.send({ topic, body: randomBytes(1024 * 1024) });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const c = await PushConsumer.start({
    group: `cg${topic}`,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    // broadcasting: no retry topic, whose long poll would count among the pulls in flight
    model: "BROADCASTING",
    offsetStoreDir: path.join(dir, "offsets"),
    pullThresholdSizeForQueue: 1,
    listener: async () => {
      await gate;
      return "CONSUME_SUCCESS";
    },
  });
  try {
    // flow-controlled, and every pull issued before that has been answered: the cache no longer grows
    await waitFor(() => c.pullService.stats.flowControlSize > 0 && c.pullService.pullsInFlight === 0, 20_000, "size flow control");
    const st = c.processQueueStats().find((s) => s.mq.topic === topic)!;
    assert.ok(st.msgSize <= 2 * 1024 * 1024, `cached ${st.msgCount} messages, ${(st.msgSize / 1048576).toFixed(1)} MiB`);
  } finally {
    release();
    await c.close();
  }
});

test("pulls in flight stop at consumeConcurrentlyMaxSpan: the cached offsets stay within one pull of it", async () => {
  const topic = "PipeSpan";
  await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  const selector = (qs: MessageQueue[]) => qs[0];
  for (let i = 0; i < 640; i += 32)
    await producer.sendBatch(
      Array.from({ length: 32 }, () => ({ topic, body: "x" })),
      { selector },
    );
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const c = await PushConsumer.start({
    group: `cg${topic}`,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    model: "BROADCASTING",
    offsetStoreDir: path.join(dir, "offsets"),
    consumeConcurrentlyMaxSpan: 100,
    listener: async () => {
      await gate;
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await waitFor(() => c.pullService.stats.flowControlSpan > 0 && c.pullService.pullsInFlight === 0, 20_000, "span flow control");
    const [mq] = c.assignment();
    const span = c.processQueue(mq!)!.maxSpan;
    assert.ok(span <= 100 + 32, `span ${span} with consumeConcurrentlyMaxSpan 100 and pullBatchSize 32`);
  } finally {
    release();
    await c.close();
  }
});
