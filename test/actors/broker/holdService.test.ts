import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { HoldContext } from "../../../actors/broker/holdService.ts";
import { MAX_SUSPEND_TIMEOUT_MS } from "../../../actors/broker/pullProcessor.ts";
import { monotonicNow } from "../../../transport/clock.ts";
import { decodeRecords } from "../../../transport/messageRecord.ts";
import { BrokerActor, isMQError, PullSysFlag } from "../../../transport/protocol.ts";
import { fakeWallClock, waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";

const SUSPEND = PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND;

let f: Fixture;

before(async () => {
  f = await startFixture();
  await f.broker.createTopic({ topic: "T", readQueueNums: 4, writeQueueNums: 4 });
});
after(async () => {
  await f?.close();
});

/** Pulls the broker's `hold` actor is holding now. */
function heldPulls(fx: Fixture): number {
  const ref = fx.broker.ctx.node.actorOf(BrokerActor.HOLD);
  return ref ? (ref.getSnapshot().context as HoldContext).table.size : 0;
}

/** Starts a pull and tracks when it settles. */
function track<T>(p: Promise<T>) {
  const t = { settled: false, at: 0, value: undefined as T | undefined, error: undefined as unknown };
  const done = p.then(
    (v) => Object.assign(t, { settled: true, at: Date.now(), value: v }),
    (e: unknown) => Object.assign(t, { settled: true, at: Date.now(), error: e }),
  );
  return Object.assign(t, { done });
}

test("a held pull wakes within milliseconds of a send", async () => {
  const held = track(f.pull({ queueId: 0, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 10_000 }, 15_000));
  // the pull is held (nothing answered) until a message arrives
  await waitFor(() => heldPulls(f) === 1, 2000, "the pull held by the broker");
  assert.equal(held.settled, false);
  const t0 = Date.now();
  await f.send("T", 0, [{ body: "wake" }]);
  await held.done;
  assert.ifError(held.error);
  const waited = held.at - t0;
  assert.ok(waited < 500, `woken ${waited} ms after the send`);
  assert.equal(held.value!.fields.status, "SUCCESS");
  assert.equal(held.value!.fields.nextBeginOffset, 1);
  assert.deepEqual(
    decodeRecords(held.value!.body!, "a").map((m) => m.body.toString()),
    ["wake"],
  );
});

test("an arrival that cannot match the subscription leaves the pull held; a matching one wakes it", async () => {
  const held = track(f.pull({ queueId: 1, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 10_000, subscription: "TagA" }, 15_000));
  await waitFor(() => heldPulls(f) === 1, 2000, "the pull held by the broker");
  await f.send("T", 1, [{ tags: "TagB", body: "b" }]);
  await f.send("T", 1, [{ tags: "TagA", body: "a" }]);
  await held.done;
  // arrivals are handled in order: had the TagB one answered the pull, it would not hold "a"
  assert.equal(held.value!.fields.status, "SUCCESS");
  assert.deepEqual(
    decodeRecords(held.value!.body!, "a").map((m) => m.body.toString()),
    ["a"],
  );
  assert.equal(held.value!.fields.nextBeginOffset, 2);
});

test("a held pull times out to PULL_NOT_FOUND at its suspend time", async () => {
  const t0 = Date.now();
  const r = await f.pull({ queueId: 2, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 300 });
  const waited = Date.now() - t0;
  assert.equal(r.fields.status, "PULL_NOT_FOUND");
  assert.equal(r.fields.nextBeginOffset, 0);
  assert.ok(waited >= 280 && waited < 2000, `answered after ${waited} ms`);
});

test("a held pull times out at its suspend time of real time, whichever way the wall clock steps meanwhile", async () => {
  const clock = fakeWallClock();
  try {
    for (const [queueId, step] of [
      [2, -3_600_000],
      [3, 3_600_000],
    ] as const) {
      const t0 = performance.now();
      const p = f.pull({ queueId, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 500 }, 5_000);
      await waitFor(() => heldPulls(f) === 1, 2000, "the pull held by the broker");
      clock.jump(step);
      const r = await p;
      const waited = performance.now() - t0;
      assert.equal(r.fields.status, "PULL_NOT_FOUND");
      assert.ok(waited >= 450 && waited < 2000, `step ${step}: answered after ${Math.round(waited)} ms`);
    }
  } finally {
    clock.restore();
  }
});

test("a suspend time past MAX_SUSPEND_TIMEOUT_MS is held for MAX_SUSPEND_TIMEOUT_MS", async () => {
  // the hold's deadlines are on the monotonic clock, which drifts from Date.now() on a busy VM
  const t0 = monotonicNow();
  const held = track(f.pull({ queueId: 3, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 2 ** 32 }, 15_000));
  await waitFor(() => heldPulls(f) === 1, 2000, "the pull held by the broker");
  const ctx = f.broker.ctx.node.actorOf(BrokerActor.HOLD)!.getSnapshot().context as HoldContext;
  // a deadline past Node's timer limit (2^31-1 ms) would arm a timer that fires every millisecond
  assert.ok(ctx.armedAt <= monotonicNow() + MAX_SUSPEND_TIMEOUT_MS, `held until ${ctx.armedAt - t0} ms from now`);
  assert.ok(ctx.armedAt >= t0 + MAX_SUSPEND_TIMEOUT_MS);
  await f.send("T", 3, [{ body: "wake" }]);
  await held.done;
  assert.equal(held.value!.fields.status, "SUCCESS");
});

test("a pull without the SUSPEND flag is answered at once", async () => {
  const t0 = Date.now();
  const r = await f.pull({ queueId: 2, queueOffset: 0, sysFlag: PullSysFlag.SUBSCRIPTION, suspendTimeoutMillis: 10_000 });
  assert.equal(r.fields.status, "PULL_NOT_FOUND");
  assert.ok(Date.now() - t0 < 500);
});

test("short polling holds a pull for shortPollingTimeMills, then answers what is there", async () => {
  const s = await startFixture({ longPolling: false, shortPollingTimeMills: 300 });
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 1, writeQueueNums: 1 });
    const t0 = Date.now();
    const held = track(s.pull({ queueId: 0, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 15_000 }));
    await s.send("T", 0, [{ body: "x" }]);
    await held.done;
    const waited = held.at - t0;
    assert.equal(held.value!.fields.status, "SUCCESS");
    // Short polling answers at the hold service's next check (RocketMQ wakes every
    // shortPollingTimeMills for all held pulls), so anywhere within one interval, not on arrival.
    assert.ok(waited < 300 + 1000, `answered after ${waited} ms`);
    const t1 = Date.now();
    const r = await s.pull({ queueId: 0, queueOffset: 1, sysFlag: SUSPEND, suspendTimeoutMillis: 15_000 });
    assert.equal(r.fields.status, "PULL_NOT_FOUND");
    assert.ok(Date.now() - t1 >= 250, "an empty short poll waits its interval");
  } finally {
    await s.close();
  }
});

test("pending pulls are answered empty when the broker closes", async () => {
  const s = await startFixture();
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 1, writeQueueNums: 1 });
    const held = track(s.pull({ queueId: 0, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 15_000 }, 20_000));
    await waitFor(() => heldPulls(s) === 1, 2000, "the pull held by the broker");
    assert.equal(held.settled, false);
    const t0 = Date.now();
    await s.broker.close();
    await held.done;
    assert.ifError(held.error);
    assert.equal(held.value!.fields.status, "PULL_NOT_FOUND");
    assert.ok(held.at - t0 < 2000);
  } finally {
    await s.close();
  }
});

test("a pull that finds nothing after the hold service shut down is answered at once, not left waiting", async () => {
  const s = await startFixture();
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 1, writeQueueNums: 1 });
    // the first step of the broker's close: the node keeps serving pulls until it closes
    await s.broker.ctx.node.ref(null, BrokerActor.HOLD).ask({ type: "SHUTDOWN" }, { timeoutMs: 3000 });
    const t0 = Date.now();
    const r = await s.pull({ queueId: 0, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 15_000 }, 3000);
    assert.equal(r.fields.status, "PULL_NOT_FOUND");
    assert.equal(r.fields.nextBeginOffset, 0);
    assert.ok(Date.now() - t0 < 1000, `answered after ${Date.now() - t0} ms`);
    assert.equal(heldPulls(s), 0);
  } finally {
    await s.close();
  }
});

test("a held pull whose group was deleted meanwhile is answered SUBSCRIPTION_GROUP_NOT_EXIST and does not bring the group back", async () => {
  const s = await startFixture();
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 1, writeQueueNums: 1 });
    // the pull's group exists once the pull is taken (auto-created)
    const held = track(s.pull({ queueId: 0, queueOffset: 0, sysFlag: SUSPEND, suspendTimeoutMillis: 300 }, 5_000));
    await waitFor(() => heldPulls(s) === 1, 2000, "the pull held by the broker");
    assert.ok(s.broker.ctx.groups.get("G"), "group G auto-created by the pull");
    // deleted while the pull waits, as `group delete` does after its consumer left
    assert.equal(await s.broker.ctx.groups.delete("G"), true);
    await held.done;
    assert.ok(isMQError(held.error, "SUBSCRIPTION_GROUP_NOT_EXIST"), String(held.error ?? held.value?.fields.status));
    assert.equal(s.broker.ctx.groups.get("G"), undefined, "the re-executed pull did not create the group again");
  } finally {
    await s.close();
  }
});
