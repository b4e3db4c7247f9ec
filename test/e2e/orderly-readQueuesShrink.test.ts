/**
 * An orderly member whose topic's read queue count is lowered under it (the queues past the new
 * count still hold what it consumed since its last offset persist) lets those queues go at its next
 * route refresh. Their final offsets must reach the broker as they go, as a concurrent member's do
 * (consume-routeShrink): the broker has the queues and their consume queues, so their lock renewals
 * between the shrink and the route refresh must not read as lost locks, or the release skips the
 * commit and, once the count is raised again, the group consumes those messages twice.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { Broker, NameServer, Producer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const TOPIC = "ReadQueuesShrink";
const GROUP = "cgReadQueuesShrink";

test("an orderly member commits the queues a read-queue shrink takes from it, and consumes nothing twice once they are back", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-orderly-readshrink-");
  const closers: (() => Promise<unknown>)[] = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
    await cleanup();
  });
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  closers.push(() => ns.close());
  const nameservers = [ns.address];
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers,
    storeDir: path.join(dir, "broker-a"),
    flush: "async",
    logLevel: "silent",
  });
  closers.push(() => broker.close());
  await broker.createTopic({ topic: TOPIC, readQueueNums: 2, writeQueueNums: 2 });

  const consumed = new Map<string, number>();
  const consumer = await PushConsumer.start({
    group: GROUP,
    nameservers,
    orderly: true,
    // the lock renewals run well before the route refresh that lets the queue go
    rebalanceLockIntervalMs: 100,
    pollNameServerIntervalMs: 1_500,
    rebalanceIntervalMs: 600_000,
    // offsets reach the broker only when a queue is let go (and at close)
    persistConsumerOffsetIntervalMs: 600_000,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    subscriptions: { [TOPIC]: "*" },
    listener: async (msgs) => {
      for (const m of msgs) consumed.set(m.body.toString(), (consumed.get(m.body.toString()) ?? 0) + 1);
      return "SUCCESS";
    },
  });
  closers.push(() => consumer.close());
  const producer = await Producer.start({ group: "pgReadQueuesShrink", nameservers, instanceName: "readShrinkProducer" });
  closers.push(() => producer.close());
  const held = () => consumer.assignment().filter((q) => q.topic === TOPIC);
  await waitFor(() => held().length === 2, 10_000, "both queues held");

  let sent = 0;
  const send = async (n: number, queueId: number) => {
    for (let i = 0; i < n; i++)
      await producer.send({ topic: TOPIC, body: `m${sent++}` }, { selector: (mqs) => mqs.find((q) => q.queueId === queueId)! });
  };
  await send(10, 0);
  await send(10, 1);
  await waitFor(() => consumed.size === sent, 10_000, `the first ${sent} messages consumed`);
  const renewals = consumer.queueLocks!.stats.lockAllRounds;

  await broker.createTopic({ topic: TOPIC, readQueueNums: 1, writeQueueNums: 2 });
  // a few renewals of queue 1's lock under the old route
  await waitFor(() => consumer.queueLocks!.stats.lockAllRounds >= renewals + 3, 5_000, "lock renewals after the shrink");
  await waitFor(() => held().length === 1 && held()[0]!.queueId === 0, 10_000, "queue 1 let go at the route refresh");
  const committed = (q: number) => consumerOffsetsOf(broker.ctx).offsetsOf(GROUP, TOPIC)?.get(q);
  await waitFor(() => committed(1) === broker.store.getMaxOffset(TOPIC, 1), 5_000, "queue 1 committed at its end as it was let go");

  await broker.createTopic({ topic: TOPIC, readQueueNums: 2, writeQueueNums: 2 });
  await waitFor(() => held().length === 2, 10_000, "queue 1 held again");
  await send(5, 1);
  await waitFor(() => consumed.size === sent, 10_000, `all ${sent} messages consumed`);
  const twice = [...consumed].filter(([, n]) => n > 1);
  assert.deepEqual(twice, [], "no message consumed twice by the group's only member");
});
