/**
 * An orderly queue given up while its batch is still in the listener: the release waits for the
 * batch at most 20 s (RocketMQ's UNLOCK_DELAY_TIME_MILLS), then stores the offset before it and
 * unlocks the queue, so the next owner consumes it. The batch that ends after that must not
 * commit: here the queue came back to its first owner (read from the broker, past the batch) before
 * the batch ended, and its commit moved that owner's offset back to just after the batch, which its
 * pulls and persists then stored on the broker: a member started after it was re-delivered what the
 * other owner had consumed (duplicates, out of order). Seen failing so before the fix: the group's
 * offset went from 10 back to 1.
 *
 * Takes ~25 s: the release's 20 s wait is RocketMQ's constant.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageExt, type MessageQueue, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("orderly: a batch still in the listener when its queue was released (and regained) does not move the offset back", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-late-batch-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } as object });
  const producer = await Producer.start({ group: "pgOrdLate", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const topic = "OrdLate";
  const group = "cgOrdLate";
  const delivered: { client: string; offset: number }[] = [];
  let openGate!: () => void;
  const gate = new Promise<void>((r) => (openGate = r));
  let aInBatch = false;
  // instance names sort B before A: with one queue and two members, B is given it
  const start = (name: string, instanceName: string) =>
    PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      instanceName,
      subscriptions: { [topic]: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly: true,
      persistConsumerOffsetIntervalMs: 200,
      heartbeatBrokerIntervalMs: 500,
      listener: async (msgs: MessageExt[]) => {
        for (const m of msgs) delivered.push({ client: name, offset: m.queueOffset });
        if (name === "A" && !aInBatch) {
          aInBatch = true;
          await gate;
        }
        return "SUCCESS" as const;
      },
    });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
    const toQueue0 = { selector: (mqs: MessageQueue[]) => mqs[0]!, arg: 0 };
    await producer.send({ topic, body: "0" }, toQueue0);
    const a = await start("A", "late-b-A");
    consumers.push(a);
    await waitFor(() => aInBatch, 15_000, "A inside its batch of offset 0");
    for (let i = 1; i < 10; i++) await producer.send({ topic, body: String(i) }, toQueue0);
    // B joins: the queue moves to B; A's release gives up waiting for its batch after 20 s
    const b = await start("B", "late-a-B");
    consumers.push(b);
    await waitFor(() => delivered.filter((d) => d.client === "B").length === 10, 40_000, "B consuming offsets 0..9");
    const progress = async () => (await admin.consumerProgress(group)).find((e) => e.topic === topic)?.consumerOffset;
    await waitFor(async () => (await progress()) === 10, 10_000, "B's offset 10 stored");
    // B leaves: the queue comes back to A, from the broker's offset 10, while A's batch is still in hand
    await b.close();
    consumers.splice(consumers.indexOf(b), 1);
    await waitFor(() => a.assignment().some((q) => q.topic === topic), 15_000, "A holding the queue again");
    openGate();
    await a.close();
    consumers.splice(0);
    assert.equal(await progress(), 10, "the group's offset after A's late batch ended and A closed");
    // a member started now goes on after offset 9: nothing B consumed comes again
    const c = await start("C", "late-c-C");
    consumers.push(c);
    await producer.send({ topic, body: "10" }, toQueue0);
    await waitFor(() => delivered.some((d) => d.client === "C" && d.offset === 10), 15_000, "C consuming offset 10");
    assert.deepEqual(
      delivered.filter((d) => d.client === "C").map((d) => d.offset),
      [10],
      "C is delivered only the new message",
    );
  } finally {
    for (const c of consumers) await c.close().catch(() => {});
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
