/**
 * PULL_OFFSET_MOVED stores the broker's offset, then drops the queue's entry and rebuilds it. The
 * store can take a while (a slow broker); a rebalance meanwhile may let the queue go and take it
 * back (a member joined and left). The entry dropped afterwards was the new holding's: what it had
 * consumed since was forgotten, not committed by the periodic persist nor at close, and the group
 * got those messages again (here 3 of them: the group's offset stayed at 2 instead of 5).
 *
 * The answer is handed to the consumer directly, as in orderly-offsetMoved.test.ts: the moment a
 * broker answers PULL_OFFSET_MOVED cannot be timed against a rebalance from outside.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { PullRequest } from "../../actors/client/pullRequest.ts";
import { Admin, type MessageQueue, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("PULL_OFFSET_MOVED whose store outlasts a rebalance that let the queue go and took it back keeps the new holding's offset", async () => {
  const { dir, cleanup } = await tempDir("actormq-offset-moved-retaken-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } as object });
  const producer = await Producer.start({ group: "pgMovedRetaken", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const topic = "MovedRetaken";
  const group = "cgMovedRetaken";
  let consumed = 0;
  let a: PushConsumer | undefined;
  let b: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
    const start = (instanceName: string, count: boolean) =>
      PushConsumer.start({
        group,
        nameservers: cluster.nameservers,
        instanceName,
        subscriptions: { [topic]: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        // only close stores this member's offsets (nor do pulls: each waits 15 s on the broker)
        persistConsumerOffsetIntervalMs: 600_000,
        listener: async (msgs) => {
          if (count) consumed += msgs.length;
          return "CONSUME_SUCCESS";
        },
      });
    // member "b" sorts after member "a": the queue is a's while both run
    a = await start("b", true);
    const send = async (n: number) => {
      for (let i = 0; i < n; i++) await producer.send({ topic, body: String(i) });
    };
    await send(2);
    await waitFor(() => consumed === 2, 15_000, "2 consumed");
    const mq = a.assignment().find((q) => q.topic === topic)!;
    const pq = a.processQueue(mq)!;

    // the broker's offset is stored slowly
    const store = a.offsetStore as unknown as { persist(mq: MessageQueue, final?: boolean): Promise<void> };
    const persist = store.persist.bind(store);
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    store.persist = async (q, final) => {
      await gate;
      return persist(q, final);
    };
    pq.dropped = true;
    const request: PullRequest = { consumerGroup: group, mq, pq, nextOffset: 2, brokerId: 0 };
    const moved = (a as unknown as { onOffsetIllegal(r: PullRequest): Promise<void> }).onOffsetIllegal(request);

    // meanwhile the queue goes to a member that joins, and comes back once it leaves
    b = await start("a", false);
    await waitFor(() => a!.assignment().every((q) => q.topic !== topic), 15_000, "the queue let go");
    await b.close();
    b = undefined;
    await waitFor(() => a!.assignment().some((q) => q.topic === topic), 15_000, "the queue held again");
    await send(3);
    await waitFor(() => consumed === 5, 15_000, "3 more consumed by the new holding");
    await waitFor(() => a!.offsetStore.readOffsetFromMemory(mq) === 5, 5_000, "the new holding's offset");

    open();
    await moved;
    assert.equal(a.offsetStore.readOffsetFromMemory(mq), 5, "the new holding's offset after the moved offset was stored");
    await a.close();
    a = undefined;
    const progress = (await admin.consumerProgress(group)).find((e) => e.topic === topic)?.consumerOffset;
    assert.equal(progress, 5, "the group's offset after close");
  } finally {
    await b?.close();
    await a?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
