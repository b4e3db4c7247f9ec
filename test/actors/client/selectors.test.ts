import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { selectByHash, selectRandom } from "../../../actors/client/selectors.ts";
import { isMQError } from "../../../transport/protocol.ts";

const queues = Array.from({ length: 8 }, (_, queueId) => ({ topic: "T", brokerName: "b", queueId }));

describe("selectors", () => {
  it("selectByHash = |String.hashCode(arg) mod n| as in Java", () => {
    // "hello".hashCode() = 99162322; 99162322 % 8 = 2
    assert.equal(selectByHash(queues, {}, "hello").queueId, 2);
    // "polygenelubricants".hashCode() = Integer.MIN_VALUE; MIN_VALUE % 8 = 0
    assert.equal(selectByHash(queues, {}, "polygenelubricants").queueId, 0);
    // negative hash: Java's -2147483648 % 5 = -3, so |-3| = 3
    assert.equal(selectByHash(queues.slice(0, 5), {}, "polygenelubricants").queueId, 3);
    // numbers are hashed as their string form: "12345".hashCode() = 46792755; mod 8 = 3
    assert.equal(selectByHash(queues, {}, 12345).queueId, 3);
    // keys whose hash codes are negative still land in range
    for (const k of ["zzzzzzzz", "ééé", "order-1", "order-2"]) {
      const q = selectByHash(queues.slice(0, 5), {}, k);
      assert.ok(q.queueId >= 0 && q.queueId < 5);
    }
  });
  it("the same key always maps to the same queue", () => {
    for (let i = 0; i < 50; i++) assert.equal(selectByHash(queues, {}, `k${i}`), selectByHash(queues, {}, `k${i}`));
  });
  it("selectRandom stays in range and empty lists are NO_ROUTE", () => {
    for (let i = 0; i < 50; i++) assert.ok(queues.includes(selectRandom(queues, {}, undefined)));
    assert.throws(
      () => selectByHash([], {}, "x"),
      (e: unknown) => isMQError(e, "NO_ROUTE"),
    );
  });
});
