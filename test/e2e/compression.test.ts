/**
 * Body compression end to end (RocketMQ's `compressMsgBodyOverHowmuch`, reference §2.1 and §10.1):
 * the producer zlib-compresses a single message body of 4 KiB or more and marks it COMPRESSED |
 * ZLIB (0x301); the broker stores those bytes; push and pull consumers, retries through
 * `%RETRY%<group>` included, receive the original body. Batches are not compressed.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { deflateSync } from "node:zlib";
import {
  ActorNode,
  Admin,
  isMQError,
  type LocalCluster,
  type MessageExt,
  Producer,
  PullConsumer,
  PushConsumer,
  startLocalCluster,
} from "../../index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { BrokerActor, type MessageQueue, type SendMessageReply } from "../../transport/protocol.ts";
import { SHORT_DELAY_LEVELS, tempDir, waitFor } from "../helpers.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let producer: Producer;
let admin: Admin;

before(async () => {
  const t = await tempDir("actormq-compress-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, broker: { flush: "async", messageDelayLevel: SHORT_DELAY_LEVELS } });
  producer = await Producer.start({ group: "compress-pg", nameservers: cluster.nameservers });
  admin = await Admin.start({ nameservers: cluster.nameservers });
  for (const topic of ["Zipped", "Plain", "ZipBatch", "RawZip", "ZipRetry", "Incompressible"])
    await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
});

after(async () => {
  await producer?.close();
  await admin?.close();
  await cluster?.close();
  await cleanup?.();
});

/** The record as the broker stores it (body not inflated). */
function stored(topic: string, queueOffset: number): MessageExt {
  const broker = cluster.brokers[0]!;
  const r = broker.store.getMessage("compress-test", topic, 0, queueOffset, 1);
  assert.equal(r.status, "FOUND", `${topic}@${queueOffset}`);
  return decodeRecords(Buffer.concat(r.buffers), broker.brokerName, false)[0]!;
}

async function pollAll(group: string, topic: string, count: number): Promise<MessageExt[]> {
  const pc = await PullConsumer.start({ group, nameservers: cluster.nameservers });
  try {
    const mq: MessageQueue = { topic, brokerName: cluster.brokers[0]!.brokerName, queueId: 0 };
    await pc.assign([mq]);
    await pc.seek(mq, 0);
    const out: MessageExt[] = [];
    await waitFor(
      async () => {
        out.push(...(await pc.poll(200)));
        return out.length >= count;
      },
      10_000,
      `${count} polled from ${topic}`,
    );
    return out;
  } finally {
    await pc.close();
  }
}

async function pushAll(group: string, topic: string, count: number): Promise<MessageExt[]> {
  const got: MessageExt[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      got.push(...msgs);
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await waitFor(() => got.length >= count, 15_000, `${count} pushed from ${topic}`);
    return got;
  } finally {
    await consumer.close();
  }
}

test("an 8 KiB compressible body is stored zlib-compressed (sysFlag 0x301, smaller) and push and pull consumers get the original", async () => {
  const body = Buffer.from("order line 0042; ".repeat(482).slice(0, 8192));
  const r = await producer.send({ topic: "Zipped", body, tags: "T" });
  const rec = stored("Zipped", r.queueOffset);
  assert.equal(rec.sysFlag, 0x301, "COMPRESSED | ZLIB type");
  assert.ok(rec.body.length < body.length / 4, `stored ${rec.body.length} bytes`);

  const [pulled] = await pollAll("compress-pull", "Zipped", 1);
  assert.deepEqual(pulled!.body, body);
  assert.equal(pulled!.sysFlag, 0, "the delivered flag describes the delivered, inflated body");
  const [pushed] = await pushAll("compress-push", "Zipped", 1);
  assert.deepEqual(pushed!.body, body);
  assert.equal(pushed!.tags, "T");
});

test("a 3 KiB body, a body that does not shrink and a batch of 8 KiB bodies are stored uncompressed", async () => {
  const small = Buffer.alloc(3 * 1024, "s");
  const r = await producer.send({ topic: "Plain", body: small });
  assert.equal(stored("Plain", r.queueOffset).sysFlag, 0);
  assert.deepEqual(stored("Plain", r.queueOffset).body, small);

  const noise = randomBytes(8192);
  const n = await producer.send({ topic: "Incompressible", body: noise });
  assert.equal(stored("Incompressible", n.queueOffset).sysFlag, 0, "deflate would make it larger");
  assert.deepEqual(stored("Incompressible", n.queueOffset).body, noise);

  const bodies = [0, 1, 2].map((i) => Buffer.alloc(8192, String(i)));
  const b = await producer.sendBatch(bodies.map((body) => ({ topic: "ZipBatch", body })));
  for (let i = 0; i < 3; i++) {
    const m = stored("ZipBatch", b.queueOffset + i);
    assert.equal(m.sysFlag, 0, "RocketMQ compresses single messages only");
    assert.deepEqual(m.body, bodies[i]);
  }
  assert.deepEqual(
    (await pollAll("compress-batch", "ZipBatch", 3)).map((m) => m.body),
    bodies,
  );
});

test("compressMsgBodyOverHowmuch: a non-negative integer (else ILLEGAL_ARGUMENT); bodies below it are sent as they are", async () => {
  for (const bad of [-1, 1.5, Number.NaN, "4096"]) {
    await assert.rejects(
      Producer.start({ group: "compress-bad", nameservers: cluster.nameservers, compressMsgBodyOverHowmuch: bad as number }),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /compressMsgBodyOverHowmuch/.test((e as Error).message),
      String(bad),
    );
  }
  const high = await Producer.start({ group: "compress-high", nameservers: cluster.nameservers, compressMsgBodyOverHowmuch: 16 * 1024 });
  try {
    const body = Buffer.alloc(8192, "h");
    const r = await high.send({ topic: "Plain", body });
    assert.equal(stored("Plain", r.queueOffset).sysFlag, 0);
    const big = await high.send({ topic: "Plain", body: Buffer.alloc(16 * 1024, "h") });
    assert.equal(stored("Plain", big.queueOffset).sysFlag, 0x301, "RocketMQ compresses a body of at least the threshold");
  } finally {
    await high.close();
  }
});

test("records another client stored with COMPRESSED and a zlib body are delivered inflated; an LZ4-typed one as stored", async () => {
  const raw = await ActorNode.start({ listen: null });
  const text = "from a RocketMQ 4.x producer ".repeat(10);
  try {
    const ref = raw.ref(cluster.brokers[0]!.address, BrokerActor.BROKER);
    for (const sysFlag of [0x1, 0x301, 0x101]) {
      const r = await ref.ask<SendMessageReply>(
        { type: "SEND_MESSAGE", producerGroup: "raw-pg", topic: "RawZip", queueId: 0, sysFlag, bornTimestamp: Date.now(), properties: "" },
        { body: deflateSync(Buffer.from(text)) },
      );
      assert.equal(r.fields.status, "SEND_OK");
    }
  } finally {
    await raw.close();
  }
  const got = await pollAll("compress-raw", "RawZip", 3);
  assert.deepEqual(
    got.map((m) => [m.sysFlag, m.body.toString()]),
    [
      [0, text],
      [0, text],
      [0x101, deflateSync(Buffer.from(text)).toString()],
    ],
  );
});

test("a compressed message failed with RECONSUME_LATER comes back with its original body; the retry copy stays compressed", async () => {
  const body = Buffer.from("retry me please; ".repeat(600));
  const deliveries: MessageExt[] = [];
  const consumer = await PushConsumer.start({
    group: "compress-retry",
    nameservers: cluster.nameservers,
    subscriptions: { ZipRetry: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      deliveries.push(...msgs);
      return deliveries.length < 2 ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  try {
    await producer.send({ topic: "ZipRetry", body });
    await waitFor(() => deliveries.length >= 2, 15_000, "the retry");
  } finally {
    await consumer.close();
  }
  const [first, again] = deliveries;
  assert.deepEqual(first!.body, body);
  assert.equal(again!.reconsumeTimes, 1);
  assert.equal(again!.topic, "ZipRetry");
  assert.deepEqual(again!.body, body, "the redelivery is inflated like the original");
  const broker = cluster.brokers[0]!;
  const copy = decodeRecords(broker.store.viewMessage(again!.commitLogOffset)!, broker.brokerName, false)[0]!;
  assert.equal(copy.sysFlag, 0x301, "the broker re-stored the compressed bytes with their flag");
  assert.ok(copy.body.length < body.length / 4);
});
