/**
 * Several members taking one queue over at once (two joined while the holder finished a batch):
 * the holder's release hands the queue to the first of them only; the next waits for that
 * member's release (or its own timeout), so no two members consume the queue from one offset.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { consumerOffsetsOf } from "../../../actors/broker/consumerOffsetManager.ts";
import { waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";
import { handOverCalls } from "./handOverCalls.ts";

const HAND_OVER_TIMEOUT_MS = 1_500;
let f: Fixture;
const { heartbeat, pullAs } = handOverCalls(() => f);

before(async () => {
  f = await startFixture({ queueHandOverTimeoutMs: HAND_OVER_TIMEOUT_MS });
  await f.broker.createTopic({ topic: "H", readQueueNums: 4, writeQueueNums: 4 });
});
after(async () => {
  await f?.close();
});

function heldTakeOvers(): number {
  return consumerOffsetsOf(f.broker.ctx).waitingTakeOvers;
}

/** A take-over query; `done` is set once it is answered. */
function takeOver(clientId: string, group: string, queueId: number) {
  const t0 = Date.now();
  const state = { done: false };
  const answer = f
    .ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: group, topic: "H", queueId, clientId, waitRelease: true }, 10_000)
    .then((r) => {
      state.done = true;
      return { offset: r.fields.offset, ms: Date.now() - t0 };
    });
  return { state, answer };
}

function release(clientId: string, group: string, queueId: number, commitOffset: number) {
  return f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: group, topic: "H", queueId, commitOffset, clientId, release: true });
}

test("a release answers the first waiting take-over only; the second is answered by the new holder's release", async () => {
  for (const c of ["A", "B", "C"]) await heartbeat(c, "G1");
  await pullAs("A", "G1", 0, 5);
  const b = takeOver("B", "G1", 0);
  await waitFor(() => heldTakeOvers() === 1, 5_000, "B's take-over held");
  const c = takeOver("C", "G1", 0);
  await waitFor(() => heldTakeOvers() === 2, 5_000, "C's take-over held");
  await release("A", "G1", 0, 5);
  const gotB = await b.answer;
  assert.equal(gotB.offset, 5);
  assert.equal(c.state.done, false, "C is not handed the queue B now holds");
  assert.equal(heldTakeOvers(), 1);
  await pullAs("B", "G1", 0, 7);
  await release("B", "G1", 0, 9);
  const gotC = await c.answer;
  assert.equal(gotC.offset, 9, "C starts where B stopped");
  assert.ok(gotC.ms < HAND_OVER_TIMEOUT_MS, `answered on B's release (${gotC.ms} ms)`);
});

test("the second take-over keeps its own deadline, and a holder that leaves hands over to the first waiter only", async () => {
  for (const c of ["D", "E", "F"]) await heartbeat(c, "G2");
  await pullAs("D", "G2", 1, 3);
  const e = takeOver("E", "G2", 1);
  await waitFor(() => heldTakeOvers() === 1, 5_000, "E's take-over held");
  const fw = takeOver("F", "G2", 1);
  await waitFor(() => heldTakeOvers() === 2, 5_000, "F's take-over held");
  await f.ask("UNREGISTER_CLIENT", { clientID: "D", consumerGroup: "G2" });
  assert.equal((await e.answer).offset, 3);
  assert.equal(fw.state.done, false, "F waits for E");
  // E never releases: F is answered when its own wait times out, with E's committed offset
  await pullAs("E", "G2", 1, 4);
  const gotF = await fw.answer;
  assert.equal(gotF.offset, 4);
  assert.ok(gotF.ms >= HAND_OVER_TIMEOUT_MS - 50 && gotF.ms < 2 * HAND_OVER_TIMEOUT_MS, `held until its own timeout (${gotF.ms} ms)`);
});

test("a waiting member that left is answered and forgotten; it does not take the queue when the holder releases", async () => {
  for (const c of ["P", "Q", "R"]) await heartbeat(c, "G3");
  await pullAs("P", "G3", 2, 2);
  const q = takeOver("Q", "G3", 2);
  await waitFor(() => heldTakeOvers() === 1, 5_000, "Q's take-over held");
  const r = takeOver("R", "G3", 2);
  await waitFor(() => heldTakeOvers() === 2, 5_000, "R's take-over held");
  await f.ask("UNREGISTER_CLIENT", { clientID: "Q", consumerGroup: "G3" });
  await q.answer;
  assert.equal(heldTakeOvers(), 1);
  assert.equal(r.state.done, false, "P still holds the queue");
  await release("P", "G3", 2, 6);
  const gotR = await r.answer;
  assert.equal(gotR.offset, 6);
  assert.ok(gotR.ms < HAND_OVER_TIMEOUT_MS, `answered on P's release (${gotR.ms} ms)`);
});
