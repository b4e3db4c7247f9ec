import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TimelineBuffer, topicAndQueue } from "../../../actors/inspector/timelineBuffer.ts";
import type { InspectionRecord } from "../../../actors/runtime/index.ts";

const ev = (i: number, payload: unknown = {}): InspectionRecord => ({
  kind: "event",
  nodeId: "n",
  actorName: "a",
  sessionId: "x:0",
  time: i,
  type: `E${i}`,
  payload,
});

describe("timeline buffer", () => {
  it("keeps the newest records within its byte budget, the newest always", () => {
    const b = new TimelineBuffer(1000, 10_000);
    for (let i = 1; i <= 30; i++) b.push(ev(i), 1000);
    assert.equal(b.size, 10);
    assert.equal(b.bytes, 10_000);
    assert.equal(b.evicted, 20);
    assert.deepEqual(
      b.since(0).map((e) => e.seq),
      [21, 22, 23, 24, 25, 26, 27, 28, 29, 30],
    );
    b.push(ev(31), 9_500);
    assert.deepEqual(
      b.since(0).map((e) => e.seq),
      [31],
    );
    b.push(ev(32), 50_000);
    assert.deepEqual(
      b.since(0).map((e) => e.seq),
      [32],
      "a record over the whole budget is still kept, alone",
    );
    assert.equal(b.bytes, 50_000);
  });

  it("estimates a record's size when not told", () => {
    const b = new TimelineBuffer(1000, 100_000);
    for (let i = 0; i < 10; i++) b.push(ev(i, { note: "x".repeat(20_000) }));
    assert.ok(b.size <= 5 && b.size >= 4, `kept ${b.size}`);
    assert.ok(b.bytes <= 100_000);
  });

  it("keeps the newest records up to its capacity and counts evictions", () => {
    const b = new TimelineBuffer(3);
    for (let i = 1; i <= 5; i++) b.push(ev(i));
    assert.equal(b.size, 3);
    assert.equal(b.evicted, 2);
    assert.equal(b.lastSeq, 5);
    assert.deepEqual(
      b.since(0).map((e) => e.seq),
      [3, 4, 5],
    );
    assert.deepEqual(
      b.since(0).map((e) => (e.record as { type: string }).type),
      ["E3", "E4", "E5"],
    );
  });

  it("answers what came after a seq, cut to the newest `limit`", () => {
    const b = new TimelineBuffer(10);
    for (let i = 1; i <= 6; i++) b.push(ev(i));
    assert.deepEqual(
      b.since(4).map((e) => e.seq),
      [5, 6],
    );
    assert.deepEqual(b.since(6), []);
    assert.deepEqual(
      b.since(0, 2).map((e) => e.seq),
      [5, 6],
    );
    assert.deepEqual(new TimelineBuffer(2).since(0), []);
  });

  it("takes a fractional or out-of-range `after` and `limit` (from a query string) as whole numbers", () => {
    const b = new TimelineBuffer(10);
    for (let i = 1; i <= 6; i++) b.push(ev(i));
    const seqs = (after?: number, limit?: number) => b.since(after, limit).map((e) => e?.seq);
    assert.deepEqual(seqs(3.5), [4, 5, 6]);
    assert.deepEqual(seqs(0, 2.5), [5, 6]);
    assert.deepEqual(seqs(3.5, 1.9), [6]);
    assert.deepEqual(seqs(-2.5), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(seqs(0, -1), []);
    assert.deepEqual(seqs(Number.POSITIVE_INFINITY), []);
    assert.deepEqual(seqs(0, Number.POSITIVE_INFINITY), [1, 2, 3, 4, 5, 6]);
  });

  it("refuses a capacity that is not a positive integer", () => {
    assert.throws(() => new TimelineBuffer(0), RangeError);
    assert.throws(() => new TimelineBuffer(1.5), RangeError);
  });

  it("finds the topic and queue an event payload names", () => {
    assert.deepEqual(topicAndQueue({ type: "PULL", request: { mq: { topic: "T", brokerName: "b", queueId: 2 } } }), {
      topic: "T",
      queue: "T@2",
    });
    assert.deepEqual(topicAndQueue({ topic: "T" }), { topic: "T" });
    assert.deepEqual(topicAndQueue({ queueId: 1 }), { queue: "@1" });
    assert.deepEqual(topicAndQueue({ a: { b: { c: { d: { topic: "deep" } } } } }), {});
    const b = new TimelineBuffer(2);
    assert.equal(b.push(ev(1, { topic: "X", queueId: 0 })).queue, "X@0");
  });
});
