/**
 * PullConsumer with autoCommit false: only commit() moves the group's committed offsets. Polling,
 * empty pulls after the backlog (which used to advance the offset of an empty queue and carry it
 * on the next pull) and a rebalance that moves a queue to another member commit nothing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { PullService } from "../../actors/client/pullService.ts";
import { Admin, Producer, PullConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const pullsOf = (pc: PullConsumer): number => (pc as unknown as { pullService: PullService }).pullService.stats.pulls;

test("pull consumer without autoCommit: polls, empty pulls and a rebalance commit nothing; commit() does", async () => {
  const { dir, cleanup } = await tempDir("actormq-pull-manual-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PullConsumer[] = [];
  const start = (instanceName: string) =>
    PullConsumer.start({
      group: "cgManual",
      nameservers: cluster.nameservers,
      instanceName,
      autoCommit: false,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      brokerSuspendMaxTimeMillis: 100,
    });
  const committed = async () =>
    (await admin.consumerProgress("cgManual")).filter((p) => p.topic === "Manual").map((p) => Math.max(0, p.consumerOffset));
  try {
    await admin.createTopic({ topic: "Manual", readQueueNums: 2, writeQueueNums: 2 });
    await producer.sendBatch(Array.from({ length: 20 }, (_, j) => ({ topic: "Manual", body: `m${j}` })));
    await producer.sendBatch(Array.from({ length: 20 }, (_, j) => ({ topic: "Manual", body: `n${j}` })));
    const a = await start("a");
    consumers.push(a);
    await a.subscribe("Manual", "*");
    let n = 0;
    await waitFor(async () => (n += (await a.poll(100)).length) >= 40, 10_000, "40 polled");
    // several empty pulls of the drained queues go by
    const pulls = pullsOf(a);
    await waitFor(() => pullsOf(a) >= pulls + 6, 10_000, "empty pulls");
    assert.deepEqual(await committed(), [0, 0], "polling and empty pulls committed nothing");

    // a second member takes one queue: the first lets it go without committing what it polled
    const b = await start("b");
    consumers.push(b);
    await b.subscribe("Manual", "*");
    await waitFor(() => a.assignment().length === 1 && b.assignment().length === 1, 10_000, "one queue each");
    await waitFor(() => pullsOf(b) >= 2, 10_000, "the new member pulls");
    assert.deepEqual(await committed(), [0, 0], "the queue that moved was released without a commit");

    await a.commit();
    const kept = a.assignment()[0]!.queueId;
    const after = (await admin.consumerProgress("cgManual")).filter((p) => p.topic === "Manual");
    assert.equal(after.find((p) => p.queueId === kept)!.consumerOffset, 20, "commit() stores what was polled of the held queue");
  } finally {
    for (const c of consumers) await c.close().catch(() => {});
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
