/**
 * Orderly: a consumer closed while a rebalance round is gaining a queue (the broker granted the
 * lock, the offset query is in flight) unlocks that queue too. Before, the round returned without
 * adding the queue to the held ones and close unlocked only those: the broker kept the lock until
 * its expiry (`lockMaxLiveTimeMs`, 60 s by default) and no member could consume the queue meanwhile.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ProcessQueue } from "../../actors/client/processQueue.ts";
import { Admin, type MessageQueue, PushConsumer, startLocalCluster } from "../../index.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { tempDir, waitFor } from "../helpers.ts";

const LOCK_MAX_LIVE_MS = 8_000;

test("orderly: closing during a gain leaves no lock behind for the next member", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-close-gain-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", lockMaxLiveTimeMs: LOCK_MAX_LIVE_MS } as object });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "CloseGain", readQueueNums: 4, writeQueueNums: 4 });
    const start = async (instanceName: string) => {
      const c = await PushConsumer.start({
        group: "cgCloseGain",
        nameservers: cluster.nameservers,
        instanceName,
        subscriptions: { CloseGain: "*" },
        orderly: true,
        rebalanceIntervalMs: 1000,
        heartbeatBrokerIntervalMs: 500,
        rebalanceLockIntervalMs: 500,
        rebalanceLockMaxLiveTimeMs: 1500,
        listener: async () => "SUCCESS" as const,
      });
      consumers.push(c);
      return c;
    };
    const own = (c: PushConsumer) =>
      c
        .assignment()
        .filter((q) => q.topic === "CloseGain")
        .map((q) => q.queueId);
    const a = await start("A");
    const c = await start("C");
    await waitFor(() => own(a).length === 2 && own(c).length === 2, 10_000, "A and C hold two queues each");
    // A is closed the moment the broker grants it the lock of a queue it is gaining from C
    const locks = a.queueLocks!;
    const lock = locks.lock.bind(locks);
    let closing: Promise<void> | null = null;
    locks.lock = async (mq: MessageQueue, pq?: ProcessQueue<MessageExt>, retry?: boolean) => {
      const ok = await lock(mq, pq, retry);
      // the lock of a queue A does not hold yet: a gain
      if (ok && !closing && !own(a).includes(mq.queueId)) closing = a.close();
      return ok;
    };
    await c.close();
    await waitFor(() => closing !== null, 10_000, "A closed while gaining a queue");
    await closing;
    const t0 = Date.now();
    const b = await start("B");
    await waitFor(() => own(b).length === 4, LOCK_MAX_LIVE_MS + 5_000, "B holds all four queues");
    const ms = Date.now() - t0;
    assert.ok(ms < LOCK_MAX_LIVE_MS / 2, `the queue A was gaining is free at once, not at the lock's expiry (B waited ${ms} ms)`);
  } finally {
    for (const x of consumers) await x.close().catch(() => {});
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});
