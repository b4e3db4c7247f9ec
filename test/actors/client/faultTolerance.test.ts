import assert from "node:assert/strict";
import { test } from "node:test";
import { LatencyFaultTolerance, QueueSelector } from "../../../actors/client/faultTolerance.ts";
import type { MessageQueue } from "../../../transport/protocol.ts";
import { fakeWallClock } from "../../helpers.ts";

const queues: MessageQueue[] = [0, 1, 2, 3]
  .flatMap((i) => [{ topic: "T", brokerName: "a", queueId: i }])
  .concat([0, 1, 2, 3].map((i) => ({ topic: "T", brokerName: "b", queueId: i })));

test("latency maps to RocketMQ's not-available durations", () => {
  const f = new LatencyFaultTolerance();
  assert.equal(f.notAvailableDurationFor(10), 0);
  assert.equal(f.notAvailableDurationFor(100), 0);
  assert.equal(f.notAvailableDurationFor(550), 2000);
  assert.equal(f.notAvailableDurationFor(1800), 5000);
  assert.equal(f.notAvailableDurationFor(3000), 6000);
  assert.equal(f.notAvailableDurationFor(5000), 10000);
  assert.equal(f.notAvailableDurationFor(30000), 30000);
});

test("a failed broker is isolated for 30 s, then available again", () => {
  let now = 0;
  const f = new LatencyFaultTolerance({ now: () => now });
  f.update("a", 5, true);
  assert.equal(f.isAvailable("a"), false);
  assert.equal(f.isAvailable("b"), true);
  now = 29_999;
  assert.equal(f.isAvailable("a"), false);
  now = 30_000;
  assert.equal(f.isAvailable("a"), true);
});

test("only brokers avoided now are kept: one per broker name ever sent to was kept for good (brokers come and gone)", () => {
  let now = 0;
  const f = new LatencyFaultTolerance({ now: () => now });
  const items = (f as unknown as { items: Map<string, unknown> }).items;
  for (let i = 0; i < 100; i++) f.update(`fast${i}`, 10, false);
  assert.equal(items.size, 0, "a broker that answered fast is not avoided: nothing to keep");
  for (let i = 0; i < 100; i++) f.update(`gone${i}`, 5, true);
  assert.equal(items.size, 100);
  assert.equal(f.isAvailable("gone0"), false);
  now = 30_000;
  f.update("slow", 600, false);
  assert.deepEqual([...items.keys()], ["slow"], "the isolations that ended are forgotten");
  assert.equal(f.isAvailable("slow"), false);
  assert.equal(f.isAvailable("gone0"), true);
  f.update("slow", 10, false);
  assert.equal(items.size, 0);
  assert.equal(f.isAvailable("slow"), true);
});

test("isolation runs on real time, not the wall clock: a step forward of 31 s does not end it (nor would a step back stretch it)", () => {
  const clock = fakeWallClock();
  try {
    const f = new LatencyFaultTolerance();
    f.update("a", 5, true);
    clock.jump(31_000);
    assert.equal(f.isAvailable("a"), false);
  } finally {
    clock.restore();
  }
});

test("round robin visits every queue evenly", () => {
  const s = new QueueSelector(new LatencyFaultTolerance());
  const counts = new Map<string, number>();
  for (let i = 0; i < 800; i++) {
    const q = s.select(queues)!;
    counts.set(`${q.brokerName}${q.queueId}`, (counts.get(`${q.brokerName}${q.queueId}`) ?? 0) + 1);
  }
  assert.equal(counts.size, 8);
  for (const c of counts.values()) assert.equal(c, 100);
});

test("round robin is per topic: sends alternating between two topics visit every queue of each", () => {
  const s = new QueueSelector(new LatencyFaultTolerance());
  const topics = ["A", "B"].map((topic) => [0, 1, 2, 3].map((queueId) => ({ topic, brokerName: "a", queueId })));
  const counts = topics.map(() => [0, 0, 0, 0]);
  for (let i = 0; i < 40; i++) {
    for (let t = 0; t < 2; t++) counts[t]![s.select(topics[t]!)!.queueId]!++;
  }
  assert.deepEqual(counts, [
    [10, 10, 10, 10],
    [10, 10, 10, 10],
  ]);
});

test("a recently failed broker is avoided; the last failed broker is avoided on retry", () => {
  const f = new LatencyFaultTolerance();
  const s = new QueueSelector(f);
  f.update("a", 0, true);
  for (let i = 0; i < 50; i++) assert.equal(s.select(queues)!.brokerName, "b");
  const g = new QueueSelector(new LatencyFaultTolerance());
  for (let i = 0; i < 50; i++) assert.equal(g.select(queues, "b")!.brokerName, "a");
});

test("when every broker failed, one is still chosen", () => {
  const f = new LatencyFaultTolerance();
  f.update("a", 0, true);
  f.update("b", 0, true);
  const s = new QueueSelector(f);
  assert.ok(s.select(queues));
  assert.equal(s.select(queues, "a")!.brokerName, "b");
  assert.equal(s.select([]), undefined);
});
