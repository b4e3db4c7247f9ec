import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { isMQError, type LockBatchReply, type MessageQueue } from "../../../transport/protocol.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";

let f: Fixture;

before(async () => {
  f = await startFixture();
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
