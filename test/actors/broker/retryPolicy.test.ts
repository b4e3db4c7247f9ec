import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDelayLevels } from "../../../actors/broker/delayLevels.ts";
import {
  clientRetryDelayLevel,
  decideSendBack,
  dlqTopic,
  effectiveMaxReconsumeTimes,
  groupOfRetryOrDlqTopic,
  isRetryTopic,
  messagesToSendBack,
  normalizeAckIndex,
  orderlySuspendDecision,
  retryTopic,
  shouldDivertRetrySendToDLQ,
  suspendTimeMillis,
} from "../../../actors/broker/retryPolicy.ts";

describe("retry policy", () => {
  it("topic names", () => {
    assert.equal(retryTopic("cg"), "%RETRY%cg");
    assert.equal(dlqTopic("cg"), "%DLQ%cg");
    assert.equal(isRetryTopic("%RETRY%cg"), true);
    assert.equal(isRetryTopic("cg"), false);
    assert.equal(groupOfRetryOrDlqTopic("%DLQ%cg"), "cg");
    assert.equal(groupOfRetryOrDlqTopic("TopicA"), undefined);
  });

  it("always failing message: 16 retries 10s..2h, the 17th failure goes to the DLQ", () => {
    const levels = parseDelayLevels();
    const delays: number[] = [];
    let reconsumeTimes = 0;
    for (;;) {
      const d = decideSendBack({ reconsumeTimes, delayLevel: 0 });
      if (d.toDLQ) break;
      delays.push(levels[d.delayLevel - 1]!);
      reconsumeTimes = d.reconsumeTimes;
    }
    assert.equal(reconsumeTimes, 16);
    assert.equal(delays.length, 16);
    assert.deepEqual(
      delays.map((ms) => ms / 1000),
      [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200],
    );
    const total = delays.reduce((a, b) => a + b, 0);
    assert.equal(Math.round(total / 60_000), 4 * 60 + 46);
    assert.deepEqual(decideSendBack({ reconsumeTimes: 16, delayLevel: 0 }), { toDLQ: true, delayLevel: 0, reconsumeTimes: 17 });
  });

  it("negative level => DLQ; explicit level kept; level capped; request max wins", () => {
    assert.equal(decideSendBack({ reconsumeTimes: 0, delayLevel: -1 }).toDLQ, true);
    assert.deepEqual(decideSendBack({ reconsumeTimes: 2, delayLevel: 5 }), { toDLQ: false, delayLevel: 5, reconsumeTimes: 3 });
    assert.equal(decideSendBack({ reconsumeTimes: 15, delayLevel: 0 }).delayLevel, 18);
    assert.equal(decideSendBack({ reconsumeTimes: 1, delayLevel: 0, maxDelayLevel: 2 }).delayLevel, 2);
    assert.equal(decideSendBack({ reconsumeTimes: 2, maxReconsumeTimes: 2, delayLevel: 0 }).toDLQ, true);
    assert.equal(decideSendBack({ reconsumeTimes: 1, maxReconsumeTimes: 2, delayLevel: 0 }).toDLQ, false);
  });

  it("plain sends to a retry topic divert to the DLQ past the maximum or under an orderly lock", () => {
    assert.equal(shouldDivertRetrySendToDLQ(17, 16, false), true);
    assert.equal(shouldDivertRetrySendToDLQ(16, 16, false), false);
    assert.equal(shouldDivertRetrySendToDLQ(1, 16, true), true);
    assert.equal(clientRetryDelayLevel(0), 3);
  });

  it("ackIndex semantics of concurrent consumption", () => {
    const batch = ["m0", "m1", "m2", "m3"];
    assert.deepEqual(messagesToSendBack(batch, "CONSUME_SUCCESS"), []);
    assert.deepEqual(messagesToSendBack(batch, "RECONSUME_LATER"), batch);
    assert.deepEqual(messagesToSendBack(batch, "CONSUME_SUCCESS", 1), ["m2", "m3"]);
    assert.deepEqual(messagesToSendBack(batch, "RECONSUME_LATER", 1), batch);
    assert.deepEqual(messagesToSendBack(batch, "CONSUME_SUCCESS", -1), batch);
    assert.deepEqual(messagesToSendBack([], "RECONSUME_LATER"), []);
    assert.equal(normalizeAckIndex(4, "CONSUME_SUCCESS"), 3);
  });

  it("orderly: max reconsume defaults, suspend decision, suspend time clamps", () => {
    assert.equal(effectiveMaxReconsumeTimes(-1, false), 16);
    assert.equal(effectiveMaxReconsumeTimes(undefined, true), 2_147_483_647);
    assert.equal(effectiveMaxReconsumeTimes(3, true), 3);
    const d = orderlySuspendDecision([{ reconsumeTimes: 3 }, { reconsumeTimes: 1 }], 3);
    assert.equal(d.exhausted.length, 1);
    assert.equal(d.suspend, true);
    assert.equal(orderlySuspendDecision([{ reconsumeTimes: 3 }], 3).suspend, false);
    assert.equal(suspendTimeMillis(-1), 1_000);
    assert.equal(suspendTimeMillis(1), 10);
    assert.equal(suspendTimeMillis(60_000), 30_000);
  });
});
