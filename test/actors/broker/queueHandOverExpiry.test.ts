/**
 * A member dropped by the broker's heartbeat-expiry scan that was alive all along (a long pause)
 * registers again and keeps pulling its queues: it still holds them, its pulls commit, and a
 * member joining later waits for its release. Once another member took a queue over, its pulls
 * neither commit nor take the queue back.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { consumerTableOf } from "../../../actors/broker/consumerManager.ts";
import { consumerOffsetsOf } from "../../../actors/broker/consumerOffsetManager.ts";
import { waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";
import { handOverCalls } from "./handOverCalls.ts";

const HAND_OVER_TIMEOUT_MS = 1_000;
let f: Fixture;
const { heartbeat, pullAs, committed } = handOverCalls(() => f);

before(async () => {
  f = await startFixture({ queueHandOverTimeoutMs: HAND_OVER_TIMEOUT_MS, channelExpiredTimeoutMs: 300, clientScanIntervalMs: 100 });
  await f.broker.createTopic({ topic: "H", readQueueNums: 2, writeQueueNums: 2 });
});
after(async () => {
  await f?.close();
});

async function takeOver(clientId: string, group: string, queueId: number): Promise<{ offset: number; ms: number }> {
  const t0 = Date.now();
  const r = await f.ask<{ offset: number }>(
    "QUERY_CONSUMER_OFFSET",
    { consumerGroup: group, topic: "H", queueId, clientId, waitRelease: true },
    10_000,
  );
  return { offset: r.fields.offset, ms: Date.now() - t0 };
}

test("a member expired and registered again still holds its queue: its pulls commit and a joiner waits for its release", async () => {
  await heartbeat("A", "G1");
  await takeOver("A", "G1", 0);
  await pullAs("A", "G1", 0, 3);
  assert.equal(await committed("G1", 0), 3);
  await waitFor(() => !consumerTableOf(f.broker.ctx).group("G1"), 5_000, "A dropped by the expiry scan");
  await pullAs("A", "G1", 0, 5);
  assert.equal(await committed("G1", 0), 3, "not a member: its pull does not commit");
  await heartbeat("A", "G1");
  await pullAs("A", "G1", 0, 8);
  assert.equal(await committed("G1", 0), 8, "a member again: its pull commits");
  await heartbeat("B", "G1");
  let answered = false;
  const b = takeOver("B", "G1", 0).finally(() => {
    answered = true;
  });
  await waitFor(() => consumerOffsetsOf(f.broker.ctx).waitingTakeOvers === 1, 5_000, "B's take-over held");
  assert.equal(answered, false, "B waits for A's release");
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G1", topic: "H", queueId: 0, commitOffset: 9, clientId: "A", release: true });
  const got = await b;
  assert.equal(got.offset, 9);
  assert.ok(got.ms < HAND_OVER_TIMEOUT_MS, `answered on A's release (${got.ms} ms)`);
});

test("a member expired while another took its queue over: back as a member, its pulls neither commit nor take the queue", async () => {
  await heartbeat("C", "G2");
  await takeOver("C", "G2", 1);
  await pullAs("C", "G2", 1, 4);
  await waitFor(() => !consumerTableOf(f.broker.ctx).group("G2"), 5_000, "C dropped by the expiry scan");
  await heartbeat("D", "G2");
  const d = await takeOver("D", "G2", 1);
  assert.equal(d.offset, 4);
  assert.ok(d.ms < HAND_OVER_TIMEOUT_MS, "nobody holds the queue: answered at once");
  await heartbeat("C", "G2");
  await pullAs("C", "G2", 1, 6);
  assert.equal(await committed("G2", 1), 4, "C's pull after D's take-over is ignored");
  await heartbeat("D", "G2");
  await pullAs("D", "G2", 1, 7);
  assert.equal(await committed("G2", 1), 7);
});
