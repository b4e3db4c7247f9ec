/**
 * Queue hand-over on the broker (internals §6.5): pulls name their puller, a take-over query waits
 * for the holder's release (or its leaving, or the timeout), stale pulls of a released holder do
 * not commit, and a late release does not overwrite the new holder's offset (nor, once the new
 * holder let the queue go, the offset it committed).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { consumerOffsetsOf } from "../../../actors/broker/consumerOffsetManager.ts";
import { waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";
import { handOverCalls } from "./handOverCalls.ts";

const HAND_OVER_TIMEOUT_MS = 400;
let f: Fixture;
const { heartbeat, pullAs, committed } = handOverCalls(() => f);

before(async () => {
  f = await startFixture({ queueHandOverTimeoutMs: HAND_OVER_TIMEOUT_MS });
  await f.broker.createTopic({ topic: "H", readQueueNums: 4, writeQueueNums: 4 });
  for (let q = 0; q < 4; q++)
    await f.send(
      "H",
      q,
      Array.from({ length: 20 }, () => ({})),
    );
});
after(async () => {
  await f?.close();
});

/** Take-over queries the broker is holding now. */
function heldTakeOvers(): number {
  return consumerOffsetsOf(f.broker.ctx).waitingTakeOvers;
}

/** A take-over query; resolves to the offset and how long the broker held it. */
async function takeOver(clientId: string, group: string, queueId: number): Promise<{ offset: number; ms: number }> {
  const t0 = Date.now();
  const r = await f.ask<{ offset: number }>(
    "QUERY_CONSUMER_OFFSET",
    { consumerGroup: group, topic: "H", queueId, clientId, waitRelease: true },
    10_000,
  );
  return { offset: r.fields.offset, ms: Date.now() - t0 };
}

function release(clientId: string, group: string, queueId: number, commitOffset: number) {
  return f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: group, topic: "H", queueId, commitOffset, clientId, release: true });
}

test("a take-over waits for the holder's release and gets its final offset; the released holder's late pulls commit nothing", async () => {
  await heartbeat("A", "G1");
  await heartbeat("B", "G1");
  await pullAs("A", "G1", 0, 3);
  assert.equal(await committed("G1", 0), 3);
  let settled = false;
  const waiting = takeOver("B", "G1", 0).finally(() => {
    settled = true;
  });
  await waitFor(() => heldTakeOvers() === 1, 5_000, "the broker holding B's take-over");
  assert.equal(settled, false, "held while A holds the queue");
  await release("A", "G1", 0, 10);
  const got = await waiting;
  assert.equal(got.offset, 10, "the offset A released with");
  assert.ok(got.ms < HAND_OVER_TIMEOUT_MS, `answered on the release (${got.ms} ms), not at the timeout`);
  // a pull A sent before its release arrives late: it neither commits nor takes the queue back
  await pullAs("A", "G1", 0, 5);
  assert.equal(await committed("G1", 0), 10);
  await pullAs("B", "G1", 0, 12);
  assert.equal(await committed("G1", 0), 12);
});

test("a holder that leaves the group hands over at once; nobody holding: answered at once", async () => {
  await heartbeat("C", "G2");
  await heartbeat("D", "G2");
  await pullAs("C", "G2", 1, 7);
  const waiting = takeOver("D", "G2", 1);
  await waitFor(() => heldTakeOvers() === 1, 5_000, "the broker holding D's take-over");
  await f.ask("UNREGISTER_CLIENT", { clientID: "C", consumerGroup: "G2" });
  const got = await waiting;
  assert.equal(got.offset, 7);
  assert.ok(got.ms < HAND_OVER_TIMEOUT_MS, `answered when C left (${got.ms} ms)`);
  const free = await takeOver("D", "G2", 2);
  assert.ok(free.ms < HAND_OVER_TIMEOUT_MS, "a queue nobody pulled is answered at once");
  // a holder known to the offsets but no longer a member does not hold anything up
  await pullAs("E", "G2", 3, 4);
  const gone = await takeOver("D", "G2", 3);
  assert.equal(gone.offset, 4);
  assert.ok(gone.ms < HAND_OVER_TIMEOUT_MS, "E is not a member: answered at once");
});

test("a holder that never releases: answered after the hand-over timeout, and its late release does not overwrite", async () => {
  await heartbeat("F", "G3");
  await heartbeat("G", "G3");
  await pullAs("F", "G3", 0, 6);
  const got = await takeOver("G", "G3", 0);
  assert.equal(got.offset, 6);
  assert.ok(got.ms >= HAND_OVER_TIMEOUT_MS - 50, `held until the timeout (${got.ms} ms)`);
  await pullAs("G", "G3", 0, 8);
  await release("F", "G3", 0, 15);
  assert.equal(await committed("G3", 0), 8, "G holds the queue: F's late release is not committed");
  // the same member taking its own queue over again is answered at once
  const again = await takeOver("G", "G3", 0);
  assert.ok(again.ms < HAND_OVER_TIMEOUT_MS);
  // nor once G let the queue go and nobody holds it: F's release (one F kept while it could not
  // reach the broker) is older than G's hold, and answered without a commit
  await release("G", "G3", 0, 9);
  await release("F", "G3", 0, 15);
  assert.equal(await committed("G3", 0), 9, "F let the queue go before G held it: its release is not committed");
});
