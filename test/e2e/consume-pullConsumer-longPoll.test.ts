/**
 * PullConsumer.poll with a timeout past the longest timer Node keeps (2^31 - 1 ms), or Infinity,
 * waits for messages: such a timer fires after 1 ms, so the poll returned [] at once.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Producer, PullConsumer, startLocalCluster } from "../../index.ts";
import { tempDir } from "../helpers.ts";

test("poll(2^31) and poll(Infinity) wait for a message sent after they began, and close ends such a poll", async () => {
  const { dir, cleanup } = await tempDir("actormq-long-poll-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgLongPoll", nameservers: cluster.nameservers });
  const pc = await PullConsumer.start({
    group: "cgLongPoll",
    nameservers: cluster.nameservers,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  });
  try {
    await cluster.brokers[0]!.createTopic({ topic: "LongPoll", readQueueNums: 1, writeQueueNums: 1 });
    await pc.assign(await pc.fetchMessageQueues("LongPoll"));
    for (const [i, timeoutMs] of [2 ** 31, Number.POSITIVE_INFINITY].entries()) {
      const polled = pc.poll(timeoutMs);
      // the send's round trip outlasts a timer that fires at once: a poll that did not wait returns []
      await producer.send({ topic: "LongPoll", body: `m${i}` });
      const msgs = await polled;
      assert.deepEqual(
        msgs.map((m) => m.body.toString()),
        [`m${i}`],
        `poll(${timeoutMs})`,
      );
    }
    const waiting = pc.poll(Number.POSITIVE_INFINITY);
    await pc.close();
    assert.deepEqual(await waiting, [], "close ends a poll that waits without end");
  } finally {
    await pc.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
