/**
 * A consumer killed with kill -9 and restarted resumes from the offset it last committed:
 * nothing is lost, and what is redelivered starts exactly at the committed offset.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, Producer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { startConsumerChild } from "./fixtures/consumerChild.ts";

test("kill -9 and restart: resumes from the last committed offset, nothing lost", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-crash-");
  const cluster = await startLocalCluster({
    dir,
    broker: { flush: "async", channelExpiredTimeoutMs: 2000, clientScanIntervalMs: 250 } as object,
  });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  try {
    await admin.createTopic({ topic: "Crash", readQueueNums: 2, writeQueueNums: 2 });
    const N = 2000;
    for (let i = 0; i < N; i += 50) {
      await producer.sendBatch(Array.from({ length: 50 }, (_, j) => ({ topic: "Crash", body: `k${i + j}` })));
    }
    const env = { NAMESRV: cluster.nameservers[0]!, GROUP: "cgCrash", TOPIC: "Crash", DELAY_MS: "2" };
    const first = startConsumerChild({ ...env, INSTANCE: "first" });
    await first.ready;
    await waitFor(() => first.consumed.length >= 600, 20_000, "600 messages before the kill");
    // once both queues have something committed, kill without warning
    await waitFor(
      async () => {
        const p = (await admin.consumerProgress("cgCrash")).filter((x) => x.topic === "Crash");
        return p.length === 2 && p.every((x) => x.consumerOffset > 0);
      },
      20_000,
      "offsets committed for both queues",
    );
    first.proc.kill("SIGKILL");
    await first.exited;
    const progress = (await admin.consumerProgress("cgCrash")).filter((p) => p.topic === "Crash");
    assert.equal(progress.length, 2);
    const committed = new Map(progress.map((p) => [p.queueId, p.consumerOffset]));
    const brokerMax = new Map(progress.map((p) => [p.queueId, p.brokerOffset]));
    for (const [q, off] of committed) {
      const seen = first.consumed.filter((m) => m.queueId === q).map((m) => m.queueOffset);
      assert.ok(off > 0, `queue ${q} committed something`);
      assert.ok(off <= Math.max(...seen) + 1, `queue ${q} committed ${off} only what was consumed`);
    }

    const second = startConsumerChild({ ...env, INSTANCE: "second" });
    await second.ready;
    const all = new Set(first.consumed.map((m) => m.body));
    await waitFor(
      () => {
        for (const m of second.consumed) all.add(m.body);
        return all.size === N;
      },
      30_000,
      `all ${N} messages across both runs`,
    );
    for (const [q, off] of committed) {
      const offs = second.consumed.filter((m) => m.queueId === q).map((m) => m.queueOffset);
      if (off < brokerMax.get(q)!) assert.equal(Math.min(...offs), off, `queue ${q} restarted at its committed offset ${off}`);
    }
    second.proc.kill("SIGTERM");
    assert.equal(await second.exited, 0);
  } finally {
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
