/**
 * Looking up a retried and a dead-lettered message: the records a retry and a dead letter are stored
 * as (in %RETRY%<group> and %DLQ%<group>) are found by key in those topics, and by their offset msg
 * id under the topic the message was sent to, which they carry as RETRY_TOPIC.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { MessageConst } from "../../transport/protocol.ts";
import { SHORT_DELAY_LEVELS, tempDir, waitFor } from "../helpers.ts";

test("a retried and a dead-lettered message are found by key in %RETRY% / %DLQ% and by offset msg id under their original topic", async () => {
  const { dir, cleanup } = await tempDir("actormq-retry-lookup-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", messageDelayLevel: SHORT_DELAY_LEVELS } });
  const producer = await Producer.start({ group: "lookup-pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const group = "lookup-cg";
  const deliveries: MessageExt[] = [];
  let consumer: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "RetryLookup", readQueueNums: 1, writeQueueNums: 1 });
    consumer = await PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      subscriptions: { RetryLookup: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      maxReconsumeTimes: 1,
      listener: async (msgs) => {
        deliveries.push(...msgs);
        return "RECONSUME_LATER";
      },
    });
    const sent = await producer.send({ topic: "RetryLookup", body: "look me up", keys: "order-42" });
    const broker = cluster.brokers[0]!;
    await waitFor(() => broker.store.getMaxOffset(`%DLQ%${group}`, 0) === 1, 10_000, "the message in the DLQ");
    const retried = deliveries.find((m) => m.reconsumeTimes === 1)!;
    assert.ok(retried, "the message was retried once");
    assert.equal(retried.topic, "RetryLookup");
    assert.equal(retried.properties[MessageConst.RETRY_TOPIC], "RetryLookup");

    // by key, in the topics the copies are stored in
    const inRetry = await admin.queryMessageByKey(`%RETRY%${group}`, "order-42");
    assert.deepEqual(
      inRetry.map((m) => [m.reconsumeTimes, m.msgId]),
      [[1, sent.msgId]],
    );
    const inDlq = await admin.queryMessageByKey(`%DLQ%${group}`, "order-42");
    assert.deepEqual(
      inDlq.map((m) => [m.reconsumeTimes, m.msgId, m.body.toString()]),
      [[2, sent.msgId, "look me up"]],
    );

    // by the offset msg id of the delivered retry, under the topic the listener saw, or none
    for (const topic of [undefined, "RetryLookup", `%RETRY%${group}`]) {
      const found = await admin.viewMessage(retried.offsetMsgId, topic);
      assert.equal(found?.offsetMsgId, retried.offsetMsgId, `the retry record viewed with topic ${topic}`);
      assert.equal(found?.reconsumeTimes, 1);
    }
    // and of the dead letter, under its original topic too
    for (const topic of [undefined, "RetryLookup", `%DLQ%${group}`]) {
      const found = await admin.viewMessage(inDlq[0]!.offsetMsgId, topic);
      assert.equal(found?.offsetMsgId, inDlq[0]!.offsetMsgId, `the dead letter viewed with topic ${topic}`);
    }
    await admin.createTopic({ topic: "RetryLookupOther", readQueueNums: 1, writeQueueNums: 1 });
    assert.equal(await admin.viewMessage(retried.offsetMsgId, "RetryLookupOther"), null, "not a message of another topic");
    // the UNIQ_KEY under the original topic is the original message
    assert.equal((await admin.viewMessage(sent.msgId, "RetryLookup"))?.offsetMsgId, sent.offsetMsgId);
  } finally {
    await consumer?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
