/**
 * PULL_OFFSET_MOVED answering the late pull of an orderly queue whose lock lapsed (its client frozen
 * or cut off past rebalanceLockMaxLiveTimeMs; another member may have consumed and committed it
 * since): the corrected offset is not stored on the broker, as nothing else of a lapsed queue is
 * (periodic persist, release, close, pulls). It was stored: the group's offset went from 5 back to
 * the answer's 1. The queue is rebuilt all the same, from the broker's offset once it is locked again.
 *
 * The answer is handed to the consumer directly: a broker answers PULL_OFFSET_MOVED to an offset
 * outside its queue (expired segments, a tail lost in a crash) or to the first pull after a reset,
 * none of which can be timed against a lapse from outside.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { PullRequest } from "../../actors/client/pullRequest.ts";
import { Admin, type MessageQueue, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("orderly: PULL_OFFSET_MOVED for a queue whose lock lapsed does not store its offset on the broker", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-offset-moved-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } as object });
  const producer = await Producer.start({ group: "pgOrdMoved", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const topic = "OrdMoved";
  const group = "cgOrdMoved";
  let consumed = 0;
  let a: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
    a = await PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      subscriptions: { [topic]: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly: true,
      persistConsumerOffsetIntervalMs: 200,
      listener: async (msgs) => {
        consumed += msgs.length;
        return "SUCCESS";
      },
    });
    for (let i = 0; i < 5; i++) await producer.send({ topic, body: String(i) }, { selector: (mqs: MessageQueue[]) => mqs[0]!, arg: 0 });
    const progress = async () => (await admin.consumerProgress(group)).find((e) => e.topic === topic)?.consumerOffset;
    await waitFor(async () => consumed === 5 && (await progress()) === 5, 15_000, "5 consumed and stored");

    const mq = a.assignment().find((q) => q.topic === topic)!;
    const pq = a.processQueue(mq)!;
    // the lock lapses, as for a client frozen past its lock's life; a pull answered late moves the offset
    pq.lastLockTimestamp -= 120_000;
    pq.dropped = true;
    const request: PullRequest = { consumerGroup: group, mq, pq, nextOffset: 1, brokerId: 0 };
    await (a as unknown as { onOffsetIllegal(r: PullRequest): Promise<void> }).onOffsetIllegal(request);
    assert.equal(await progress(), 5, "the group's offset after the lapsed queue's PULL_OFFSET_MOVED");
    await waitFor(() => a!.assignment().some((q) => q.topic === topic), 10_000, "the queue held again");
  } finally {
    await a?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
