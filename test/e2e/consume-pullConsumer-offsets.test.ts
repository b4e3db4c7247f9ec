/**
 * PullConsumer offsets: what poll returned is committed, also for a queue a later assign() drops;
 * a commit() the broker did not acknowledge says so, and the next one sends the offsets again.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { offsetLog } from "../../actors/client/offsetStore.ts";
import { Admin, Broker, isMQError, NameServer, Producer, PullConsumer, startLocalCluster } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

/** Below the offset request's 5 s timeout, which a commit() to a closed broker waited out (it now takes about a second). */
const FAIL_FAST_BOUND_MS = 4_000;

test("pull consumer with autoCommit: a queue dropped by assign() keeps what poll returned of it committed", async () => {
  const { dir, cleanup } = await tempDir("actormq-pull-unassign-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let pc: PullConsumer | undefined;
  try {
    await admin.createTopic({ topic: "Unassign", readQueueNums: 2, writeQueueNums: 2 });
    await producer.sendBatch(Array.from({ length: 10 }, (_, j) => ({ topic: "Unassign", body: `m${j}` })));
    await producer.sendBatch(Array.from({ length: 10 }, (_, j) => ({ topic: "Unassign", body: `n${j}` })));
    // no periodic commit may store queue 1 before the assign that drops it
    pc = await PullConsumer.start({
      group: "cgUnassign",
      nameservers: cluster.nameservers,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      autoCommitIntervalMs: 600_000,
    });
    const queues = await pc.fetchMessageQueues("Unassign");
    await pc.assign(queues);
    let n = 0;
    await waitFor(async () => (n += (await pc!.poll(100)).length) >= 20, 10_000, "20 polled");
    await pc.assign([queues[0]!]);
    await pc.commit();
    const progress = (await admin.consumerProgress("cgUnassign")).filter((p) => p.topic === "Unassign");
    assert.deepEqual(
      progress.map((p) => p.consumerOffset),
      [10, 10],
      "both queues committed at what poll returned",
    );
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: a commit() its broker does not acknowledge rejects; the next one, with the broker back, stores the offsets", async () => {
  const { dir, cleanup } = await tempDir("actormq-pull-commitfail-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const brokerOpts = { brokerName: "broker-a", nameservers: [ns.address!], storeDir: dir, flush: "async" as const };
  let broker = await Broker.start({ ...brokerOpts, listen: EPHEMERAL });
  const address = broker.address!;
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address!] });
  const admin = await Admin.start({ nameservers: [ns.address!] });
  let pc: PullConsumer | undefined;
  try {
    await admin.createTopic({ topic: "CommitFail", readQueueNums: 1, writeQueueNums: 1 });
    await producer.sendBatch(Array.from({ length: 10 }, (_, j) => ({ topic: "CommitFail", body: `m${j}` })));
    pc = await PullConsumer.start({
      group: "cgCommitFail",
      nameservers: [ns.address!],
      autoCommit: false,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    const [q] = await pc.fetchMessageQueues("CommitFail");
    await pc.assign([q!]);
    let n = 0;
    await waitFor(async () => (n += (await pc!.poll(100)).length) >= 10, 10_000, "10 polled");
    await broker.close();
    const t0 = performance.now();
    await assert.rejects(
      pc.commit(),
      (e: unknown) => isMQError(e) && /CommitFail@broker-a@0/.test(e.message) && /call commit\(\) again/.test(e.message),
      "a commit nothing acknowledged is not a success",
    );
    // told once the connection is lost (at the next failed reconnect), not after the 5 s request timeout
    const ms = performance.now() - t0;
    assert.ok(ms < FAIL_FAST_BOUND_MS, `commit() rejected after ${Math.round(ms)} ms`);
    broker = await Broker.start({ ...brokerOpts, listen: address });
    await waitFor(
      () =>
        pc!.commit().then(
          () => true,
          () => false,
        ),
      15_000,
      "a commit once the broker is back",
    );
    const p = (await admin.consumerProgress("cgCommitFail")).find((x) => x.topic === "CommitFail");
    assert.equal(p?.consumerOffset, 10, "the offsets kept after the failed commit were stored by the next one");
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await broker.close();
    await ns.close();
    await cleanup();
  }
});

test("pull consumer: fetchMessageQueues checks the topic name as subscribe does", async () => {
  const { dir, cleanup } = await tempDir("actormq-pull-fetchcheck-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const pc = await PullConsumer.start({ group: "cgFetchCheck", nameservers: cluster.nameservers });
  try {
    for (const topic of [5, "", "not a topic!"])
      await assert.rejects(
        pc.fetchMessageQueues(topic as string),
        (e: unknown) => isMQError(e, "MESSAGE_ILLEGAL") && /^fetchMessageQueues: the topic/.test((e as Error).message),
        `fetchMessageQueues(${JSON.stringify(topic)})`,
      );
  } finally {
    await pc.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer with autoCommit: a queue assign() drops while its broker is down is told as not committed, at once", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-pull-unassign-down-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({
    brokerName: "broker-a",
    nameservers: [ns.address!],
    storeDir: dir,
    flush: "async",
    listen: EPHEMERAL,
  });
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address!] });
  const admin = await Admin.start({ nameservers: [ns.address!] });
  let pc: PullConsumer | undefined;
  const warned: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(offsetLog(), "warn", (fields: Record<string, unknown>, msg: string) => void warned.push({ fields, msg }));
  try {
    await admin.createTopic({ topic: "UnassignDown", readQueueNums: 2, writeQueueNums: 2 });
    await producer.sendBatch(Array.from({ length: 10 }, (_, j) => ({ topic: "UnassignDown", body: `m${j}` })));
    await producer.sendBatch(Array.from({ length: 10 }, (_, j) => ({ topic: "UnassignDown", body: `n${j}` })));
    pc = await PullConsumer.start({
      group: "cgUnassignDown",
      nameservers: [ns.address!],
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      autoCommitIntervalMs: 600_000,
    });
    const queues = await pc.fetchMessageQueues("UnassignDown");
    await pc.assign(queues);
    let n = 0;
    await waitFor(async () => (n += (await pc!.poll(100)).length) >= 20, 10_000, "20 polled");
    await broker.close();
    const t0 = performance.now();
    await pc.assign([queues[0]!]);
    const ms = performance.now() - t0;
    assert.ok(ms < FAIL_FAST_BOUND_MS, `assign took ${Math.round(ms)} ms`);
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.equal(warned[0]!.fields.queue, `UnassignDown@broker-a@${queues[1]!.queueId}`);
    assert.match(warned[0]!.msg, /assign\(\) let go was not committed/);
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await ns.close();
    await cleanup();
  }
});

test("pull consumer: a seek of a queue lost and regained before the next commit does not move the group's newer offset back", async () => {
  const { dir, cleanup } = await tempDir("actormq-pull-seekregain-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PullConsumer[] = [];
  // one queue, AVERAGELY: the member whose client id sorts first ("a" < "z") holds it
  const start = async (instanceName: string) => {
    const c = await PullConsumer.start({
      group: "cgSeekRegain",
      nameservers: cluster.nameservers,
      instanceName,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      autoCommitIntervalMs: 600_000,
      brokerSuspendMaxTimeMillis: 100,
    });
    consumers.push(c);
    await c.subscribe("SeekRegain", "*");
    return c;
  };
  const committed = async () => (await admin.consumerProgress("cgSeekRegain")).find((p) => p.topic === "SeekRegain")?.consumerOffset;
  try {
    await admin.createTopic({ topic: "SeekRegain", readQueueNums: 1, writeQueueNums: 1 });
    await producer.sendBatch(Array.from({ length: 10 }, (_, j) => ({ topic: "SeekRegain", body: `m${j}` })));
    const z = await start("z");
    let n = 0;
    await waitFor(async () => (n += (await z.poll(100)).length) >= 10, 10_000, "10 polled");
    await z.commit();
    assert.equal(await committed(), 10);
    const [q] = z.assignment();
    await z.seek(q!, 2);
    // another member takes the queue, consumes on and commits: the group is at 30
    const a = await start("a");
    await waitFor(() => z.assignment().length === 0 && a.assignment().length === 1, 10_000, "the queue moved to a");
    await producer.sendBatch(Array.from({ length: 20 }, (_, j) => ({ topic: "SeekRegain", body: `n${j}` })));
    n = 0;
    await waitFor(async () => (n += (await a.poll(100)).length) >= 20, 10_000, "a polled the 20 new ones");
    await a.commit();
    assert.equal(await committed(), 30);
    // it leaves: z holds the queue again, from the group's offset
    await a.close();
    await waitFor(() => z.assignment().length === 1, 10_000, "z holds the queue again");
    await z.commit();
    assert.equal(await committed(), 30, "the seek made before z lost the queue is not committed over the group's offset");
  } finally {
    for (const c of consumers) await c.close().catch(() => {});
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
