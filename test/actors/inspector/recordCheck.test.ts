import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkRecord, estimateSize, redactBodies } from "../../../actors/inspector/recordCheck.ts";

const base = { nodeId: "n", actorName: "a", sessionId: "x:0", time: 1 };

describe("inspection record checks", () => {
  it("accepts the runtime's record kinds", () => {
    for (const r of [
      { ...base, kind: "actor", machineId: "m" },
      { ...base, kind: "event", type: "E", payload: {} },
      { ...base, kind: "snapshot", status: "active", value: "idle" },
      { ...base, kind: "failure", action: "restart", error: "boom", restarts: 1 },
    ])
      assert.equal(checkRecord(r).ok, true, r.kind);
  });

  it("refuses malformed records", () => {
    for (const r of [
      null,
      5,
      "x",
      [],
      { ...base },
      { ...base, kind: "nope" },
      { ...base, kind: "event" },
      { ...base, kind: "snapshot" },
      { ...base, kind: "actor", nodeId: "" },
      { ...base, kind: "actor", time: "now" },
      { ...base, kind: "snapshot", status: 'active"><b id="x">', value: "idle" },
      { ...base, kind: "snapshot", status: 1, value: "idle" },
      // times a Date cannot hold (the page shows each record's time)
      { ...base, kind: "event", type: "E", payload: {}, time: 9e15 },
      { ...base, kind: "event", type: "E", payload: {}, time: -8.7e15 },
      { ...base, kind: "event", type: "E", payload: {}, time: Number.NaN },
      { ...base, kind: "event", type: "E", payload: {}, time: Number.POSITIVE_INFINITY },
      { ...base, kind: "actor", sessionId: 3 },
    ]) {
      assert.deepEqual(checkRecord(r), { ok: false, reason: "malformed" }, JSON.stringify(r));
    }
  });

  it("refuses oversized records", () => {
    const big = { ...base, kind: "event", type: "E", payload: { s: "x".repeat(2000) } };
    assert.deepEqual(checkRecord(big, 1000), { ok: false, reason: "oversized" });
    assert.equal(checkRecord(big, 10_000).ok, true);
    assert.ok(estimateSize({ a: [1, 2, "abc"] }, 1e9) > 10);
    // the walk stops once past the limit
    assert.ok(estimateSize(new Array(1e6).fill("y"), 100) <= 200);
  });

  it("reduces message bodies to their size", () => {
    const r = checkRecord({
      ...base,
      kind: "event",
      type: "SEND",
      payload: { body: "secret text", msgs: [{ body: new Uint8Array(7) }], other: "kept" },
    });
    assert.ok(r.ok);
    const p = (r.record as { payload: unknown }).payload;
    assert.deepEqual(p, { body: { chars: 11 }, msgs: [{ body: { bytes: 7 } }], other: "kept" });
    assert.deepEqual(redactBodies({ body: { bytes: 4 } }), { body: { bytes: 4 } });
    const s = checkRecord({ ...base, kind: "snapshot", status: "active", context: { last: { body: "secret" } } });
    assert.ok(s.ok);
    assert.doesNotMatch(JSON.stringify(s.record), /secret/);
  });
});
