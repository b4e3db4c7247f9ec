/**
 * When the broker cannot take a failed message back, and no broker takes the consumer's own retry
 * copy either (the only broker is read only), the consumer consumes it again locally after
 * `reconsumeLaterDelayMs` (5 s by default; shortened here) with reconsumeTimes + 1; once send-back
 * works again the retry goes through `%RETRY%<group>`.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Admin, type LocalCluster, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { MessageConst } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

const LEVEL_STEP_MS = 200;
const LEVELS = Array.from({ length: 18 }, (_, i) => `${(i + 1) * LEVEL_STEP_MS}ms`).join(" ");
const LOCAL_RETRY_MS = 500;

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let admin: Admin;

before(async () => {
  const t = await tempDir("actormq-retry-fallback-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, broker: { flush: "async", messageDelayLevel: LEVELS } });
  admin = await Admin.start({ nameservers: cluster.nameservers });
  await admin.createTopic({ topic: "RetryFallback", readQueueNums: 1, writeQueueNums: 1 });
});

after(async () => {
  await admin?.close();
  await cluster?.close();
  await cleanup?.();
});

test("send-back and retry copy failing: consumed again locally after the delay with reconsumeTimes + 1; send-back back: retried through the retry topic", async () => {
  const broker = cluster.brokers[0]!;
  const group = "fallback-cg";
  const deliveries: { at: number; msg: MessageExt }[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { RetryFallback: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    reconsumeLaterDelayMs: LOCAL_RETRY_MS,
    listener: async (msgs) => {
      for (const m of msgs) deliveries.push({ at: Date.now(), msg: { ...m, properties: { ...m.properties } } });
      // the first failure: the broker read only refuses the send-back and the copy (no other broker has the retry topic)
      if (deliveries.length === 1) await admin.updateBrokerConfig(broker.brokerName, { brokerPermission: 4 });
      if (deliveries.length === 2) await admin.updateBrokerConfig(broker.brokerName, { brokerPermission: 6 });
      return deliveries.length < 3 ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  const producer = await Producer.start({ group: "fallback-pg", nameservers: cluster.nameservers });
  try {
    const sent = await producer.send({ topic: "RetryFallback", body: "fallback-1" });
    await waitFor(() => deliveries.length >= 2, 10_000, "the local redelivery");
    const [first, local] = deliveries as [{ at: number; msg: MessageExt }, { at: number; msg: MessageExt }];
    assert.equal(first.msg.reconsumeTimes, 0);
    assert.equal(local.msg.reconsumeTimes, 1, "reconsumeTimes + 1 locally");
    assert.equal(local.msg.queueOffset, first.msg.queueOffset, "the same pulled message, not a retry-topic copy");
    assert.equal(local.msg.properties[MessageConst.RETRY_TOPIC], undefined);
    assert.ok(local.at - first.at >= LOCAL_RETRY_MS, `local redelivery after ${local.at - first.at} ms`);
    assert.equal(broker.store.getMaxOffset(`%RETRY%${group}`, 0), 0, "nothing reached the retry topic");

    await waitFor(() => deliveries.length >= 3, 10_000, "the redelivery through the retry topic");
    const viaRetry = deliveries[2]!;
    assert.equal(viaRetry.msg.topic, "RetryFallback");
    assert.equal(viaRetry.msg.msgId, sent.msgId);
    assert.equal(viaRetry.msg.properties[MessageConst.RETRY_TOPIC], "RetryFallback");
    assert.equal(broker.store.getMaxOffset(`%RETRY%${group}`, 0), 1);
    // the broker counts from the stored original (reconsumeTimes 0): level 3
    assert.equal(viaRetry.msg.reconsumeTimes, 1);
    assert.ok(viaRetry.at - local.at >= 3 * LEVEL_STEP_MS, `retry-topic redelivery after ${viaRetry.at - local.at} ms`);
    // the original is committed once sent back: the consumer's offset moves past it
    await waitFor(
      () => consumer.offsetStore.readOffsetFromMemory({ topic: "RetryFallback", brokerName: broker.brokerName, queueId: 0 }) === 1,
      5_000,
      "offset past the sent-back message",
    );
  } finally {
    await producer.close();
    await consumer.close();
  }
});
