/**
 * An orderly member's pulls carry its consumed offset (COMMIT_OFFSET), which the broker stores, as
 * RocketMQ's does, whoever it last saw pulling the queue: orderly queues change hands under broker
 * locks, not the concurrent hand-over (internals §6.5). They did not once the member had left the
 * group (closed) and come back under the same client id while another member had pulled the queue
 * meanwhile: the broker took the member for one whose pulls had left before its release and ignored
 * every offset they carried, so only the periodic persist (here 60 s) stored its progress.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageQueue, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("orderly: a member back under its old client id has its pulls' offsets stored after another member held the queue", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-pull-commit-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } as object });
  const producer = await Producer.start({ group: "pgOrdPullCommit", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const topic = "OrdPullCommit";
  const group = "cgOrdPullCommit";
  const delivered: { name: string; offset: number }[] = [];
  const consumers: PushConsumer[] = [];
  // instance names sort A before B: with one queue, A is given it whenever it is a member
  const start = async (name: string) => {
    const c = await PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      instanceName: `pull-commit-${name}`,
      subscriptions: { [topic]: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly: true,
      brokerSuspendMaxTimeMillis: 300,
      persistConsumerOffsetIntervalMs: 60_000,
      heartbeatBrokerIntervalMs: 500,
      listener: async (msgs) => {
        for (const m of msgs) delivered.push({ name, offset: m.queueOffset });
        return "SUCCESS";
      },
    });
    consumers.push(c);
    return c;
  };
  const send = async (n: number) => {
    for (let i = 0; i < n; i++) await producer.send({ topic, body: String(i) }, { selector: (mqs: MessageQueue[]) => mqs[0]!, arg: 0 });
  };
  const progress = async () => (await admin.consumerProgress(group)).find((e) => e.topic === topic)?.consumerOffset;
  const holds = (c: PushConsumer) => c.assignment().some((q) => q.topic === topic);
  try {
    await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
    const a = await start("A");
    await send(2);
    await waitFor(() => delivered.length === 2, 15_000, "A consuming offsets 0..1");
    // A leaves; B pulls the queue; A comes back under the same client id and is given the queue again
    await a.close();
    consumers.splice(consumers.indexOf(a), 1);
    const b = await start("B");
    await send(2);
    await waitFor(() => delivered.filter((d) => d.name === "B").length === 2, 15_000, "B consuming offsets 2..3");
    const a2 = await start("A");
    await waitFor(() => holds(a2) && !holds(b), 15_000, "the queue back with A");
    await send(3);
    await waitFor(() => delivered.filter((d) => d.name === "A").length === 5, 15_000, "A consuming offsets 4..6");
    // its next pulls (held 300 ms each) carry offset 7
    await waitFor(async () => (await progress()) === 7, 10_000, "A's offset 7 stored by its pulls");
    assert.deepEqual(
      delivered.map((d) => d.offset),
      [0, 1, 2, 3, 4, 5, 6],
      "each message once, in order",
    );
  } finally {
    for (const c of consumers) await c.close().catch(() => {});
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
