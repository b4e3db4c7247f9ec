/**
 * An orderly push consumer consumes its queues in parallel, at most `consumeThreads` listener calls
 * at a time across them (RocketMQ's consume thread pool), and each queue one batch at a time.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const QUEUES = 4;
const PER_QUEUE = 5;

test("orderly consumeThreads: 4 threads overlap listener calls across 4 queues, 1 thread never does; never within a queue", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-threads-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgOrdThreads", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "OrdThreads", readQueueNums: QUEUES, writeQueueNums: QUEUES });
    const queues = await producer.fetchPublishQueues("OrdThreads");
    assert.equal(queues.length, QUEUES);
    for (const q of queues)
      for (let i = 0; i < PER_QUEUE; i++) await producer.send({ topic: "OrdThreads", body: `${q.queueId}-${i}` }, { selector: () => q });

    for (const consumeThreads of [4, 1]) {
      let inListener = 0;
      let maxConcurrent = 0;
      const inQueue = new Map<number, number>();
      let maxPerQueue = 0;
      const seen = new Map<number, string[]>();
      let count = 0;
      // with 4 threads, the first batch of each queue waits (up to 5 s) for the other queues' first
      // batches to be in the listener too: the overlap does not depend on how the pulls line up
      let firstBatches = 0;
      let allFirstIn!: () => void;
      const allFirst = new Promise<void>((r) => (allFirstIn = r));
      const c = await PushConsumer.start({
        group: `cgOrdThreads${consumeThreads}`,
        nameservers: cluster.nameservers,
        subscriptions: { OrdThreads: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly: true,
        consumeThreads,
        listener: async (msgs: MessageExt[]) => {
          const q = msgs[0]!.queueId;
          inListener++;
          inQueue.set(q, (inQueue.get(q) ?? 0) + 1);
          maxConcurrent = Math.max(maxConcurrent, inListener);
          maxPerQueue = Math.max(maxPerQueue, inQueue.get(q)!);
          if (!seen.has(q)) {
            seen.set(q, []);
            if (++firstBatches === QUEUES) allFirstIn();
            if (consumeThreads === QUEUES) {
              let t: NodeJS.Timeout | undefined;
              await Promise.race([allFirst, new Promise((r) => (t = setTimeout(r, 5_000)))]);
              clearTimeout(t);
            }
          }
          for (const m of msgs) seen.get(q)!.push(m.body.toString());
          // some work, so that queues started together would overlap
          await new Promise((r) => setTimeout(r, 10));
          inQueue.set(q, inQueue.get(q)! - 1);
          inListener--;
          count += msgs.length;
          return "SUCCESS";
        },
      });
      consumers.push(c);
      await waitFor(() => count === QUEUES * PER_QUEUE, 20_000, `consumeThreads ${consumeThreads}: all consumed`);
      await c.close();
      assert.equal(maxConcurrent, consumeThreads, `consumeThreads ${consumeThreads}: listener calls at once across queues`);
      assert.equal(maxPerQueue, 1, `consumeThreads ${consumeThreads}: one call at a time per queue`);
      for (const q of queues)
        assert.deepEqual(
          seen.get(q.queueId),
          Array.from({ length: PER_QUEUE }, (_, i) => `${q.queueId}-${i}`),
          `queue ${q.queueId} in order`,
        );
    }
  } finally {
    for (const c of consumers) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
