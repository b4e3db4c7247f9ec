import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  clampDelayLevel,
  computeDeliverTimestamp,
  correctDeliverTimestamp,
  DEFAULT_MESSAGE_DELAY_LEVEL,
  delayLevelToQueueId,
  delayOfLevel,
  parseDelayLevels,
} from "../../../actors/broker/delayLevels.ts";
import { isMQError } from "../../../transport/protocol.ts";

describe("delay levels", () => {
  it("parses RocketMQ's default into 18 levels", () => {
    const l = parseDelayLevels(DEFAULT_MESSAGE_DELAY_LEVEL);
    assert.equal(l.length, 18);
    assert.deepEqual(l.slice(0, 5), [1_000, 5_000, 10_000, 30_000, 60_000]);
    assert.equal(delayOfLevel(l, 3), 10_000);
    assert.equal(delayOfLevel(l, 18), 7_200_000);
    assert.equal(delayOfLevel(l, 19), undefined);
    assert.equal(delayOfLevel(l, 0), undefined);
    assert.deepEqual(parseDelayLevels(), l);
  });
  it("accepts ms and d units and extra blanks", () => {
    assert.deepEqual(parseDelayLevels(" 100ms  200ms\t1d "), [100, 200, 86_400_000]);
  });
  it("rejects bad strings with ILLEGAL_ARGUMENT", () => {
    for (const bad of ["", "   ", "1x", "s", "1.5s", "-1s", "1s 2", "1 s"]) {
      assert.throws(
        () => parseDelayLevels(bad),
        (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"),
        bad,
      );
    }
  });
  it("deliver time, unknown level, clock-jump guard, clamping, queue ids", () => {
    const l = parseDelayLevels();
    assert.equal(computeDeliverTimestamp(l, 999, 0), 1_000);
    assert.equal(computeDeliverTimestamp(l, 2, 10), 5_010);
    assert.equal(correctDeliverTimestamp(l, 1, 100, 50_000), 100);
    assert.equal(correctDeliverTimestamp(l, 1, 100, 1_050), 1_050);
    assert.equal(clampDelayLevel(25, 18), 18);
    assert.equal(clampDelayLevel(3, 18), 3);
    assert.equal(delayLevelToQueueId(3), 2);
  });
});
