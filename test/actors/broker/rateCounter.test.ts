import assert from "node:assert/strict";
import { test } from "node:test";
import { RateCounter } from "../../../actors/broker/rateCounter.ts";
import { fakeWallClock } from "../../helpers.ts";

test("rate over the last minute: a young key over its own age, an old one over 60 s; buckets roll; an idle key is forgotten", () => {
  let now = 1_000_000;
  const r = new RateCounter(() => now);
  assert.equal(r.perSecond("T@g"), 0, "unknown key");
  r.add("T@g", 30);
  assert.equal(r.perSecond("T@g"), 30, "30 in the first second");
  now += 1000;
  r.add("T@g", 10);
  assert.equal(r.perSecond("T@g"), 20, "40 over 2 seconds");
  r.add("T@other", 5);
  assert.equal(r.perSecond("T@g"), 20, "keys are separate");
  // 2 minutes later: a full minute of 6 per second
  now += 120_000;
  for (let i = 0; i < 60; i++) {
    r.add("T@g", 6);
    now += 1000;
  }
  now -= 1000;
  assert.equal(r.perSecond("T@g"), 6, "the old counts rolled out of the window");
  r.add("T@g", 0);
  r.add("T@g", -3);
  assert.equal(r.perSecond("T@g"), 6, "nothing counted for n <= 0");
  now += 61_000;
  assert.equal(r.perSecond("T@g"), 0, "idle for a minute");
  r.add("T@g", 60);
  assert.equal(r.perSecond("T@g"), 60, "a forgotten key starts young again");
});

test("the default clock is monotonic: a wall clock step neither empties the last minute nor counts it twice", () => {
  const clock = fakeWallClock();
  try {
    const r = new RateCounter();
    r.add("T@g", 100);
    clock.jump(3_600_000);
    assert.equal(r.perSecond("T@g"), 100, "a step forward of 1 h emptied the window");
    clock.jump(-7_200_000);
    r.add("T@g", 100);
    assert.ok(r.perSecond("T@g") <= 200, `${r.perSecond("T@g")} msg/s`);
    assert.ok(r.perSecond("T@g") >= 100, `${r.perSecond("T@g")} msg/s`);
  } finally {
    clock.restore();
  }
});

test("a key idle for a minute is forgotten without being read: the broker keeps no window per topic@group that ever pulled", () => {
  let now = 1_000_000;
  const r = new RateCounter(() => now);
  const windows = (r as unknown as { windows: Map<string, unknown> }).windows;
  // groups that pulled once and are gone; nobody asks for their consume stats
  for (let i = 0; i < 1000; i++) r.add(`T@gone${i}`, 1);
  now += 30_000;
  r.add("T@live", 1);
  assert.equal(windows.size, 1001, "idle for less than a minute: kept");
  now += 31_000;
  r.add("T@live", 1);
  assert.deepEqual([...windows.keys()], ["T@live"], "the keys idle for a minute are gone");
  assert.equal(r.perSecond("T@live"), 2 / 32, "the live key keeps its counts (2 over its 32 seconds)");
});
