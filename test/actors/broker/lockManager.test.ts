import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { lockTableOf } from "../../../actors/broker/lockManager.ts";
import { type ErrorCode, isMQError, type LockBatchReply, type MessageQueue } from "../../../transport/protocol.ts";
import { waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";

let f: Fixture;

before(async () => {
  f = await startFixture();
  await f.broker.createTopic({ topic: "T", readQueueNums: 4, writeQueueNums: 4 });
});
after(async () => {
  await f?.close();
});

const q = (queueId: number): MessageQueue => ({ topic: "T", brokerName: "a", queueId });

async function lock(clientId: string, mqSet: MessageQueue[]): Promise<number[]> {
  const r = await f.ask<LockBatchReply>("LOCK_BATCH_MQ", { consumerGroup: "OG", clientId, mqSet });
  return r.fields.lockOKMQSet.map((m) => m.queueId).sort();
}

test("LOCK_BATCH_MQ grants free queues, refuses live locks of others; UNLOCK_BATCH_MQ frees only the owner's", async () => {
  assert.deepEqual(await lock("c1", [q(0), q(1)]), [0, 1]);
  assert.deepEqual(await lock("c1", [q(0)]), [0], "the owner renews");
  assert.deepEqual(await lock("c2", [q(0), q(1), q(2)]), [2], "only the free queue");
  await f.ask("UNLOCK_BATCH_MQ", { consumerGroup: "OG", clientId: "c2", mqSet: [q(0)] });
  assert.deepEqual(await lock("c2", [q(0)]), [], "a non-owner cannot unlock");
  await f.ask("UNLOCK_BATCH_MQ", { consumerGroup: "OG", clientId: "c1", mqSet: [q(0)] });
  assert.deepEqual(await lock("c2", [q(0)]), [0]);
  await assert.rejects(f.ask("LOCK_BATCH_MQ", { consumerGroup: "OG", clientId: "c1" }), (e: unknown) => isMQError(e, "INVALID_PARAMETER"));
});

test("LOCK_BATCH_MQ grants no queue this broker does not have, refuses a request of none of its queues, and a bad group name", async () => {
  const foreign: [string, MessageQueue, ErrorCode][] = [
    ["a topic it does not have", { topic: "NoSuchTopic", brokerName: "a", queueId: 0 }, "TOPIC_NOT_EXIST"],
    ["a queue id past its queues", q(4), "INVALID_PARAMETER"],
    ["another broker's queue", { topic: "T", brokerName: "other", queueId: 0 }, "INVALID_PARAMETER"],
  ];
  for (const [what, mq, code] of foreign) {
    const r = await f.ask<LockBatchReply>("LOCK_BATCH_MQ", { consumerGroup: "FG", clientId: "c1", mqSet: [mq, q(3)] });
    assert.deepEqual(
      r.fields.lockOKMQSet.map((m) => m.queueId),
      [3],
      `${what}: not granted, the broker's own queue is`,
    );
    await assert.rejects(
      f.ask("LOCK_BATCH_MQ", { consumerGroup: "FG", clientId: "c1", mqSet: [mq] }),
      (e: unknown) => isMQError(e, code) && e.message.includes(mq.topic),
      what,
    );
  }
  assert.equal(lockTableOf(f.broker.ctx).entryCount("FG"), 1, "only the broker's own queue has an entry");
  for (const type of ["LOCK_BATCH_MQ", "UNLOCK_BATCH_MQ"] as const)
    await assert.rejects(f.ask(type, { consumerGroup: "bad group!", clientId: "c1", mqSet: [q(0)] }), (e: unknown) =>
      isMQError(e, "INVALID_PARAMETER"),
    );
  assert.equal(lockTableOf(f.broker.ctx).entryCount("bad group!"), 0);
});

test("LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with a malformed mqSet entry are refused naming the entry and what is wrong; nothing is locked or unlocked", async () => {
  const lockMG = async (clientId: string) =>
    (await f.ask<LockBatchReply>("LOCK_BATCH_MQ", { consumerGroup: "MG", clientId, mqSet: [q(2)] })).fields.lockOKMQSet.length;
  assert.equal(await lockMG("m1"), 1);
  const malformed: [string, unknown, RegExp][] = [
    ["no topic", { brokerName: "a", queueId: 0 }, /mqSet\[1\].*topic/],
    ["an empty topic", { topic: "", brokerName: "a", queueId: 0 }, /mqSet\[1\].*topic/],
    ["no brokerName", { topic: "T", queueId: 0 }, /mqSet\[1\].*brokerName/],
    ["a non-integer queue id", { topic: "T", brokerName: "a", queueId: 1.5 }, /mqSet\[1\].*queueId.*1\.5/],
    ["a queue id that is a string", { topic: "T", brokerName: "a", queueId: "0" }, /mqSet\[1\].*queueId/],
    ["a negative queue id", q(-1), /mqSet\[1\].*queueId.*-1/],
    ["no object", null, /mqSet\[1\]/],
  ];
  for (const [what, bad, says] of malformed)
    for (const type of ["LOCK_BATCH_MQ", "UNLOCK_BATCH_MQ"] as const)
      await assert.rejects(
        f.ask(type, { consumerGroup: "MG", clientId: "m1", mqSet: [q(2), bad] }),
        (e: unknown) => isMQError(e, "INVALID_PARAMETER") && says.test(e.message) && e.message.includes("{ topic, brokerName, queueId }"),
        `${type} with ${what}`,
      );
  // the refused unlocks left the lock its owner's
  assert.equal(await lockMG("m2"), 0);
  assert.equal(lockTableOf(f.broker.ctx).entryCount("MG"), 1);
});

test("expired lock entries are swept; a live one stays its owner's", async () => {
  const s = await startFixture({ lockMaxLiveTimeMs: 300 });
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 4, writeQueueNums: 4 });
    const table = lockTableOf(s.broker.ctx);
    const ask = (group: string, clientId: string, ids: number[]) =>
      s
        .ask<LockBatchReply>("LOCK_BATCH_MQ", { consumerGroup: group, clientId, mqSet: ids.map(q) })
        .then((r) => r.fields.lockOKMQSet.map((m) => m.queueId).sort());
    for (let i = 0; i < 20; i++) await ask(`Gone${i}`, "c1", [0, 1, 2, 3]);
    assert.equal(table.entryCount("Gone0"), 4);
    const live = ask("Live", "c1", [0]);
    assert.deepEqual(await live, [0]);
    // the live owner renews; the others never come back
    const renew = setInterval(() => void ask("Live", "c1", [0]), 50);
    try {
      await waitFor(
        () => Array.from({ length: 20 }, (_, i) => table.entryCount(`Gone${i}`)).every((n) => n === 0),
        5000,
        "expired entries swept",
      );
      assert.equal(table.groupCount(), 1, "only the live group is left");
      assert.deepEqual(await ask("Live", "c2", [0]), [], "the live lock is not taken");
    } finally {
      clearInterval(renew);
    }
  } finally {
    await s.close();
  }
});
