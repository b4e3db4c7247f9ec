/**
 * Closing a consumer whose broker is gone is prompt: its last offsets, unlocks and goodbye fail as
 * soon as the transport knows the connection is lost, instead of each waiting out its timeout in
 * turn. A close with the broker up still stores its offsets before the member leaves.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Broker, NameServer, Producer, PullConsumer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killServer, spawnServer, stopServer } from "./fixtures/children.ts";

/** Far below the 8–12 s a close took when it waited out its offset commit, then its goodbye. */
const CLOSE_BOUND_MS = 2_500;

async function timed(f: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
}

for (const orderly of [false, true]) {
  test(`a ${orderly ? "orderly" : "concurrent"} push consumer closed after kill -9 of its broker closes within ${CLOSE_BOUND_MS} ms`, async (t) => {
    const { dir, cleanup } = await tempDir();
    const ns = await NameServer.start({ listen: EPHEMERAL });
    const broker = await spawnServer("broker", { brokerName: "broker-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir });
    t.after(async () => {
      await stopServer(broker);
      await ns.close();
      await cleanup();
    });
    const admin = await Admin.start({ nameservers: [ns.address] });
    const producer = await Producer.start({ group: "pg", nameservers: [ns.address] });
    await admin.createTopic({ topic: "Down", readQueueNums: 2, writeQueueNums: 2 });
    for (const q of await producer.fetchPublishQueues("Down")) await producer.send({ topic: "Down", body: "x" }, { selector: () => q });
    await producer.close();
    await admin.close();
    let consumed = 0;
    const consumer = await PushConsumer.start({
      group: "down-cg",
      nameservers: [ns.address],
      subscriptions: { Down: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly,
      listener: async (msgs) => {
        consumed += msgs.length;
        return orderly ? "SUCCESS" : "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => consumed >= 2, 10_000, "both messages consumed");
    await killServer(broker);
    const ms = await timed(() => consumer.close());
    assert.ok(ms < CLOSE_BOUND_MS, `close took ${Math.round(ms)} ms`);
  });
}

test(`a pull consumer closed after its broker closed closes within ${CLOSE_BOUND_MS} ms`, async (t) => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({ brokerName: "broker-a", listen: EPHEMERAL, nameservers: [ns.address!], storeDir: dir });
  t.after(async () => {
    await broker.close();
    await ns.close();
    await cleanup();
  });
  const admin = await Admin.start({ nameservers: [ns.address!] });
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address!] });
  await admin.createTopic({ topic: "Down", readQueueNums: 2, writeQueueNums: 2 });
  await producer.send({ topic: "Down", body: "x" });
  await producer.close();
  await admin.close();
  const consumer = await PullConsumer.start({
    group: "down-pull",
    nameservers: [ns.address!],
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  });
  await consumer.subscribe("Down", "*");
  let got = 0;
  await waitFor(async () => (got += (await consumer.poll(100)).length) >= 1, 10_000, "the message polled");
  await broker.close();
  const ms = await timed(() => consumer.close());
  assert.ok(ms < CLOSE_BOUND_MS, `close took ${Math.round(ms)} ms`);
});

test("a close with the broker up stores the offsets it consumed: the next member of the group resumes after them", async (t) => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address!],
    storeDir: path.join(dir, "a"),
  });
  t.after(async () => {
    await broker.close();
    await ns.close();
    await cleanup();
  });
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address!] });
  t.after(() => producer.close());
  const admin = await Admin.start({ nameservers: [ns.address!] });
  t.after(() => admin.close());
  await admin.createTopic({ topic: "Resume", readQueueNums: 2, writeQueueNums: 2 });
  const queues = await producer.fetchPublishQueues("Resume");
  const sendEach = async (body: string) => {
    for (const q of queues) await producer.send({ topic: "Resume", body }, { selector: () => q });
  };
  await sendEach("before");
  for (const orderly of [false, true]) {
    const group = orderly ? "resume-orderly" : "resume-cg";
    const bodies: string[] = [];
    const start = () =>
      PushConsumer.start({
        group,
        nameservers: [ns.address!],
        subscriptions: { Resume: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly,
        // only close commits: the periodic persist would hide a close that does not
        persistConsumerOffsetIntervalMs: 600_000,
        listener: async (msgs) => {
          for (const m of msgs) bodies.push(m.body.toString());
          return orderly ? "SUCCESS" : "CONSUME_SUCCESS";
        },
      });
    const first = await start();
    const inTopic = async () => (await admin.consumerProgress(group).catch(() => [])).reduce((n, p) => n + p.brokerOffset, 0);
    const total = orderly ? 4 : 2;
    await waitFor(() => bodies.length >= total, 10_000, `${group}: what the topic holds consumed`);
    await first.close();
    const progress = (await admin.consumerProgress(group)).filter((p) => p.topic === "Resume");
    assert.deepEqual(
      progress.map((p) => p.consumerOffset),
      progress.map((p) => p.brokerOffset),
      `${group}: close committed every queue to its end`,
    );
    assert.equal(await inTopic(), total);
    const next = `after ${group}`;
    await sendEach(next);
    bodies.length = 0;
    const second = await start();
    await waitFor(() => bodies.length >= 2, 10_000, `${group}: the later messages consumed`);
    await second.close();
    assert.deepEqual(bodies, [next, next], `${group}: resumed after the committed offsets`);
  }
});

test(`a producer whose one-way sends went to a broker killed since closes within ${CLOSE_BOUND_MS} ms`, async (t) => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await spawnServer("broker", { brokerName: "broker-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir });
  t.after(async () => {
    await stopServer(broker);
    await ns.close();
    await cleanup();
  });
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address!] });
  await producer.send({ topic: "Down", body: "x" });
  await killServer(broker);
  for (let i = 0; i < 10; i++) await producer.sendOneway({ topic: "Down", body: "lost" });
  const ms = await timed(() => producer.close());
  assert.ok(ms < CLOSE_BOUND_MS, `close took ${Math.round(ms)} ms`);
});
