/**
 * Queue hand-over across several topics: a round hands the topics over one after the other, each
 * topic's lost queues released before its gains wait for theirs. Members that list their
 * subscriptions in another order must still go through the topics in one order, or each waits in
 * one topic for a release the other makes only in the topic it has not reached yet: both take-overs
 * then end at the broker's hand-over timeout, and a queue is consumed by two members at once.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const GROUP = "cgTopicOrder";

test("members that list their topics in another order hand queues over without waiting for the hand-over timeout, nothing consumed twice", async () => {
  const { dir, cleanup } = await tempDir("actormq-handover-order-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgTopicOrder", nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  let sending = true;
  let sender: Promise<void> = Promise.resolve();
  try {
    const admin = await Admin.start({ nameservers: cluster.nameservers });
    // AVERAGELY_BY_CIRCLE, members A < B, then C: on OrderA (4 queues) A takes queue 3 from B; on
    // OrderB (5 queues) B takes queue 4 from A (and A queue 3 from B)
    await admin.createTopic({ topic: "OrderA", readQueueNums: 4, writeQueueNums: 4 });
    await admin.createTopic({ topic: "OrderB", readQueueNums: 5, writeQueueNums: 5 });
    await admin.close();
    const counts = new Map<string, number>();
    const member = (name: string, subscriptions: Record<string, string>) =>
      PushConsumer.start({
        group: GROUP,
        nameservers: cluster.nameservers,
        instanceName: name,
        subscriptions,
        allocateStrategy: "AVERAGELY_BY_CIRCLE",
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs: MessageExt[]) => {
          for (const m of msgs) {
            const b = m.body.toString();
            counts.set(b, (counts.get(b) ?? 0) + 1);
          }
          return "CONSUME_SUCCESS";
        },
      });
    consumers.push(await member("A", { OrderA: "*", OrderB: "*" }));
    consumers.push(await member("B", { OrderB: "*", OrderA: "*" }));
    const [a, b] = consumers as [PushConsumer, PushConsumer];
    const held = (c: PushConsumer) => c.assignment().filter((q) => !q.topic.startsWith("%RETRY%")).length;
    await waitFor(() => held(a) + held(b) === 9, 15_000, "A and B share the 9 queues");
    let sent = 0;
    sender = (async () => {
      while (sending) {
        const n = sent;
        sent += 40;
        await Promise.all([
          producer.sendBatch(Array.from({ length: 20 }, (_, k) => ({ topic: "OrderA", body: `a${n + k}` }))),
          producer.sendBatch(Array.from({ length: 20 }, (_, k) => ({ topic: "OrderB", body: `b${n + 20 + k}` }))),
        ]);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await waitFor(() => counts.size >= 2_000, 15_000, "the stream is consumed");
    const joined = performance.now();
    consumers.push(await member("C", { OrderA: "*", OrderB: "*" }));
    const c = consumers[2]!;
    const expected = (x: PushConsumer, topic: string, ids: number[]) =>
      JSON.stringify(
        x
          .assignment()
          .filter((q) => q.topic === topic)
          .map((q) => q.queueId)
          .sort(),
      ) === JSON.stringify(ids);
    await waitFor(
      () =>
        expected(a, "OrderA", [0, 3]) &&
        expected(b, "OrderA", [1]) &&
        expected(c, "OrderA", [2]) &&
        expected(a, "OrderB", [0, 3]) &&
        expected(b, "OrderB", [1, 4]) &&
        expected(c, "OrderB", [2]),
      15_000,
      "the new assignment",
    );
    const took = performance.now() - joined;
    sending = false;
    await sender;
    await waitFor(() => counts.size === sent, 30_000, `all ${sent} messages`);
    await new Promise((r) => setTimeout(r, 300));
    const duplicates = [...counts.values()].reduce((s, v) => s + (v - 1), 0);
    assert.equal(duplicates, 0, "nothing consumed twice");
    // the broker answers a take-over whose queue is not released after 5 s (queueHandOverTimeoutMs)
    assert.ok(took < 4_000, `the queues moved in ${Math.round(took)} ms, not at the hand-over timeout`);
  } finally {
    sending = false;
    await sender.catch(() => {});
    await Promise.all(consumers.map((c) => c.close().catch(() => {})));
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
