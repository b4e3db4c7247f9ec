/**
 * Delivery behaviours of the push consumer: long polling wakes at once, short polling works,
 * tag filters (`TagA || TagB`, `*`), flow control with a slow listener, and a subscribed topic
 * that does not exist yet (warned about, taken once created).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { rebalanceLog } from "../../actors/client/rebalancer.ts";
import { ActorNode } from "../../actors/runtime/index.ts";
import { Admin, type LocalCluster, type MessageExt, MQError, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { parseOffsetMsgId, RecordOffset } from "../../transport/messageRecord.ts";
import { BrokerActor } from "../../transport/protocol.ts";
import { flipCommitLogByte, tempDir, waitFor } from "../helpers.ts";

let dir: string;
let cleanup: () => Promise<void>;
let cluster: LocalCluster;
let producer: Producer;
let admin: Admin;

before(async () => {
  ({ dir, cleanup } = await tempDir("actormq-consume-delivery-"));
  cluster = await startLocalCluster({ dir: path.join(dir, "long"), broker: { flush: "async" } });
  producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  admin = await Admin.start({ nameservers: cluster.nameservers });
});

after(async () => {
  await admin?.close();
  await producer?.close();
  await cluster?.close();
  await cleanup?.();
});

test("long polling: a consumer held on an empty queue gets a new message within milliseconds", async () => {
  await admin.createTopic({ topic: "LongPoll", readQueueNums: 1, writeQueueNums: 1 });
  const arrivals: number[] = [];
  const c = await PushConsumer.start({
    group: "cgLong",
    nameservers: cluster.nameservers,
    subscriptions: { LongPoll: "*" },
    listener: async () => {
      arrivals.push(Date.now());
      return "CONSUME_SUCCESS";
    },
  });
  try {
    // let the first pulls reach the broker and be held
    await waitFor(() => c.pullService.stats.pulls >= 2, 5_000, "pulls sent");
    await new Promise((r) => setTimeout(r, 200));
    const lat: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      await producer.send({ topic: "LongPoll", body: `x${i}` });
      await waitFor(() => arrivals.length === i + 1, 5_000, "delivery");
      lat.push(arrivals[i]! - t0);
      await new Promise((r) => setTimeout(r, 100));
    }
    // a poll interval would be 1 s (short polling) or 5 s (hold recheck): far above this
    assert.ok(Math.max(...lat) < 500, `long-poll latencies ${lat.join(", ")} ms`);
  } finally {
    await c.close();
  }
});

test("a consumer the broker does not list (a late unregister of its client id) registers again at its next rebalance, not at the next heartbeat", async () => {
  await admin.createTopic({ topic: "Forgotten", readQueueNums: 2, writeQueueNums: 2 });
  const got: string[] = [];
  const c = await PushConsumer.start({
    group: "cgForgotten",
    nameservers: cluster.nameservers,
    subscriptions: { Forgotten: "*" },
    rebalanceIntervalMs: 300,
    listener: async (msgs) => {
      for (const m of msgs) got.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  const raw = await ActorNode.start({ listen: null });
  const consumers = raw.ref(cluster.brokers[0]!.address, BrokerActor.CONSUMERS);
  // the broker answers "no consumer for this group" when it lists nobody
  const members = () =>
    consumers.ask<{ consumerIdList: string[] }>({ type: "GET_CONSUMER_LIST_BY_GROUP", consumerGroup: "cgForgotten" }).then(
      (r) => r.fields.consumerIdList,
      () => [] as string[],
    );
  try {
    const held = () => c.assignment().filter((q) => q.topic === "Forgotten").length;
    await waitFor(() => held() === 2, 5_000, "both queues held");
    assert.deepEqual(await members(), [c.clientId]);
    // what a consumer of the same client id that closed earlier sends, arriving late
    await consumers.ask({ type: "UNREGISTER_CLIENT", clientID: c.clientId, consumerGroup: "cgForgotten" });
    assert.deepEqual(await members(), [], "the broker forgot the consumer");
    // the periodic heartbeat is 30 s away: the rebalance (every 300 ms here) notices and registers again
    await waitFor(async () => (await members()).includes(c.clientId), 5_000, "the consumer listed again");
    for (let i = 0; i < 10; i++) await producer.send({ topic: "Forgotten", body: `after-${i}` });
    await waitFor(() => got.filter((b) => b.startsWith("after-")).length === 10, 5_000, "delivery after");
    assert.equal(held(), 2);
  } finally {
    await raw.close();
    await c.close();
  }
});

test("a consumer of a topic that does not exist warns, at most once per 30 s, and takes the topic once it is created", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(rebalanceLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  const got: string[] = [];
  const c = await PushConsumer.start({
    group: "cgNotYet",
    nameservers: cluster.nameservers,
    subscriptions: { NotYetCreated: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    rebalanceIntervalMs: 100,
    listener: async (msgs) => {
      for (const m of msgs) got.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  try {
    const missing = () => lines.filter((l) => l.fields.topic === "NotYetCreated");
    await waitFor(() => missing().length > 0, 5_000, "a warning about the missing topic");
    assert.equal(missing()[0]!.fields.group, "cgNotYet");
    assert.match(
      missing()[0]!.msg,
      /Group cgNotYet subscribes topic NotYetCreated, which does not exist: .*`actormq topic create NotYetCreated`/,
    );
    // a round every 100 ms here: still one line
    const rebalancer = (c as unknown as { rebalancer: { rounds: number } }).rebalancer;
    const rounds = rebalancer.rounds;
    await waitFor(() => rebalancer.rounds >= rounds + 10, 5_000, "ten more rebalance rounds");
    assert.equal(missing().length, 1);
    assert.ok(!lines.some((l) => String(l.fields.topic).startsWith("%RETRY%")), "no warning about the retry topic");
    await admin.createTopic({ topic: "NotYetCreated", readQueueNums: 2, writeQueueNums: 2 });
    await producer.send({ topic: "NotYetCreated", body: "created" });
    await waitFor(() => got.includes("created"), 10_000, "the message once the topic exists");
  } finally {
    await c.close();
  }
});

test("a record damaged in the broker's file after it was stored: the consumer refuses it, pulls again with verification, and gets every other message of the batch", async () => {
  await admin.createTopic({ topic: "Damaged", readQueueNums: 1, writeQueueNums: 1 });
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await producer.send({ topic: "Damaged", body: `dm${i}-${"z".repeat(100)}` })).offsetMsgId);
  const broker = cluster.brokers[0]!;
  const skippedBefore = broker.store.damage.damagedRecordsSkipped;
  // flip one body bit of message 4 in its commit-log file, under the running broker
  const phy = parseOffsetMsgId(ids[4]!).commitLogOffset;
  flipCommitLogByte(path.join(dir, "long", broker.brokerName, "commitlog"), phy + RecordOffset.BODY + 1, 0x04);
  const got: string[] = [];
  const c = await PushConsumer.start({
    group: "cgDamaged",
    nameservers: cluster.nameservers,
    subscriptions: { Damaged: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs: MessageExt[]) => {
      for (const m of msgs) got.push(m.body.toString().split("-")[0]!);
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await waitFor(() => got.length >= 9, 10_000, "the nine undamaged messages");
    await producer.send({ topic: "Damaged", body: "after" });
    await waitFor(() => got.includes("after"), 10_000, "a message sent after: the queue goes on");
    assert.deepEqual(got, ["dm0", "dm1", "dm2", "dm3", "dm5", "dm6", "dm7", "dm8", "dm9", "after"]);
    assert.ok(c.pullService.stats.recordsRefused >= 1, "the consumer refused the damaged answer");
    assert.equal(broker.store.damage.damagedRecordsSkipped, skippedBefore + 1, "the broker skipped and counted it");
  } finally {
    await c.close();
  }
});

test("short polling (longPolling: false) still delivers", async () => {
  const shortCluster = await startLocalCluster({ dir: path.join(dir, "short"), broker: { flush: "async", longPolling: false } });
  const p = await Producer.start({ group: "pg", nameservers: shortCluster.nameservers, instanceName: "short" });
  const shortAdmin = await Admin.start({ nameservers: shortCluster.nameservers, instanceName: "short" });
  await shortAdmin.createTopic({ topic: "ShortPoll", readQueueNums: 2, writeQueueNums: 2 });
  await shortAdmin.close();
  const got: string[] = [];
  const c = await PushConsumer.start({
    group: "cgShort",
    nameservers: shortCluster.nameservers,
    instanceName: "short",
    subscriptions: { ShortPoll: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs: MessageExt[]) => {
      for (const m of msgs) got.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  try {
    for (let i = 0; i < 5; i++) await p.send({ topic: "ShortPoll", body: `s${i}` });
    await waitFor(() => got.length >= 5, 10_000, "5 messages by short polling");
    const later = Date.now();
    await p.send({ topic: "ShortPoll", body: "late" });
    await waitFor(() => got.includes("late"), 5_000, "a message sent later");
    assert.ok(Date.now() - later < 3_000, "delivered within a couple of short-poll periods");
  } finally {
    await c.close();
    await p.close();
    await shortCluster.close();
  }
});

test("tag filter: `TagA || TagB` gets only those tags, `*` gets everything", async () => {
  await admin.createTopic({ topic: "Tagged", readQueueNums: 2, writeQueueNums: 2 });
  const tags = ["TagA", "TagB", "TagC", undefined];
  const N = 200;
  for (let i = 0; i < N; i++) await producer.send({ topic: "Tagged", body: `t${i}`, tags: tags[i % 4] });
  const ab: MessageExt[] = [];
  const all: MessageExt[] = [];
  const mk = (group: string, expr: string, sink: MessageExt[]) =>
    PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      instanceName: group,
      subscriptions: { Tagged: expr },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs: MessageExt[]) => {
        sink.push(...msgs);
        return "CONSUME_SUCCESS";
      },
    });
  const c1 = await mk("cgTagAB", "TagA || TagB", ab);
  const c2 = await mk("cgTagAll", "*", all);
  try {
    await waitFor(() => ab.length >= N / 2 && all.length >= N, 10_000, "filtered and unfiltered deliveries");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(ab.length, N / 2);
    assert.ok(ab.every((m) => m.tags === "TagA" || m.tags === "TagB"));
    assert.equal(all.length, N);
    // the filtered-out tail still moves the committed offset (correctTagsOffset)
    await c1.persistOffsets();
    const progress = (await admin.consumerProgress("cgTagAB")).filter((p) => p.topic === "Tagged");
    assert.equal(
      progress.reduce((s, p) => s + p.lag, 0),
      0,
      "no lag left for the filtered group",
    );
  } finally {
    await c1.close();
    await c2.close();
  }
});

test("flow control: with a slow listener the cached count stays near pullThresholdForQueue", async () => {
  await admin.createTopic({ topic: "Flow", readQueueNums: 1, writeQueueNums: 1 });
  const N = 3000;
  for (let i = 0; i < N; i += 100)
    await producer.sendBatch(Array.from({ length: 100 }, (_, j) => ({ topic: "Flow", body: Buffer.alloc(256, i + j) })));
  let consumed = 0;
  let maxCached = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const c = await PushConsumer.start({
    group: "cgFlow",
    nameservers: cluster.nameservers,
    subscriptions: { Flow: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    pullThresholdForQueue: 500,
    consumeThreads: 1,
    listener: async () => {
      await gate;
      consumed++;
      return "CONSUME_SUCCESS";
    },
  });
  try {
    const sample = setInterval(() => {
      for (const s of c.processQueueStats()) maxCached = Math.max(maxCached, s.msgCount);
    }, 5);
    await waitFor(() => c.pullService.stats.flowControlCount >= 5, 10_000, "flow control engaged");
    const cached = c.processQueueStats().find((s) => s.mq.topic === "Flow")!.msgCount;
    assert.ok(cached > 500 && cached <= 500 + 32, `cached ${cached} near the threshold`);
    release();
    await waitFor(() => consumed === N, 20_000, "all consumed after the listener speeds up");
    clearInterval(sample);
    assert.ok(maxCached <= 500 + 32, `never more than threshold + one batch cached (max ${maxCached})`);
  } finally {
    release();
    await c.close();
  }
});

test("a closed push consumer refuses suspend and resume with CLOSED", async () => {
  await admin.createTopic({ topic: "ClosedPush", readQueueNums: 1, writeQueueNums: 1 });
  const c = await PushConsumer.start({
    group: "cgClosedPush",
    nameservers: cluster.nameservers,
    subscriptions: { ClosedPush: "*" },
    listener: async () => "CONSUME_SUCCESS",
  });
  await c.suspend();
  await c.close();
  const closed = (e: unknown) => e instanceof MQError && e.code === "CLOSED" && /cgClosedPush.*closed/.test(e.message);
  await assert.rejects(c.suspend(), closed);
  await assert.rejects(c.resume(), closed);
});
