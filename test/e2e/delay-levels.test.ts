/**
 * Delay levels end to end: messages sent with several delay levels wait in SCHEDULE_TOPIC_XXXX
 * (queue level - 1) and reach a push consumer no earlier than due and within 200 ms after.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Admin, type LocalCluster, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { decodeRecords, parseOffsetMsgId } from "../../transport/messageRecord.ts";
import { MessageConst, SCHEDULE_TOPIC } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

const LEVEL_STEP_MS = 300;
const LEVELS = Array.from({ length: 18 }, (_, i) => `${(i + 1) * LEVEL_STEP_MS}ms`).join(" ");
/** How late a delivery may reach the listener. */
const MAX_LATENESS_MS = 200;

let cluster: LocalCluster;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await tempDir("actormq-delay-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, broker: { flush: "async", messageDelayLevel: LEVELS } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  await admin.createTopic({ topic: "Delayed", readQueueNums: 2, writeQueueNums: 2 });
  await admin.close();
});

after(async () => {
  await cluster?.close();
  await cleanup?.();
});

test("messages at levels 1-4 arrive no earlier than due and within 200 ms after", async () => {
  const broker = cluster.brokers[0]!;
  const received = new Map<string, { at: number; msg: MessageExt }[]>();
  const consumer = await PushConsumer.start({
    group: "delay-cg",
    nameservers: cluster.nameservers,
    subscriptions: { Delayed: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      const at = Date.now();
      for (const m of msgs) {
        const list = received.get(m.msgId) ?? [];
        list.push({ at, msg: m });
        received.set(m.msgId, list);
      }
      return "CONSUME_SUCCESS";
    },
  });
  const producer = await Producer.start({ group: "delay-pg", nameservers: cluster.nameservers });
  try {
    const due = new Map<string, { level: number; dueAt: number }>();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      const level = (i % 4) + 1;
      sends.push(
        producer.send({ topic: "Delayed", body: `d${i}`, delayLevel: level }).then((r) => {
          const rec = broker.store.viewMessage(parseOffsetMsgId(r.offsetMsgId).commitLogOffset)!;
          const scheduled = decodeRecords(rec, broker.brokerName)[0]!;
          assert.equal(scheduled.topic, SCHEDULE_TOPIC, "stored under the schedule topic");
          assert.equal(scheduled.queueId, level - 1, "in queue level - 1");
          assert.equal(scheduled.properties[MessageConst.REAL_TOPIC], "Delayed");
          assert.equal(scheduled.properties[MessageConst.REAL_QUEUE_ID], String(r.queue.queueId));
          due.set(r.msgId, { level, dueAt: scheduled.storeTimestamp + level * LEVEL_STEP_MS });
        }),
      );
    }
    await Promise.all(sends);
    await waitFor(() => received.size === 20, 10_000, "20 delayed messages");
    for (const [msgId, { level, dueAt }] of due) {
      const got = received.get(msgId);
      assert.ok(got, `message ${msgId} received`);
      assert.equal(got.length, 1, `message ${msgId} delivered once`);
      const { at, msg } = got[0]!;
      assert.equal(msg.topic, "Delayed");
      assert.equal(msg.properties[MessageConst.DELAY], undefined);
      assert.ok(msg.storeTimestamp >= dueAt, `level ${level}: re-stored ${dueAt - msg.storeTimestamp} ms before due`);
      assert.ok(at >= dueAt, `level ${level}: received ${dueAt - at} ms before due`);
      assert.ok(at - dueAt <= MAX_LATENESS_MS, `level ${level}: received ${at - dueAt} ms after due`);
    }
  } finally {
    await producer.close();
    await consumer.close();
  }
});
