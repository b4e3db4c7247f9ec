/**
 * PullConsumer offsets: what poll returned is committed, also for a queue a later assign() drops.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, Producer, PullConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

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
    pc = await PullConsumer.start({ group: "cgUnassign", nameservers: cluster.nameservers, consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET" });
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
