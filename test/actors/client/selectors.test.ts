import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { javaArgHashCode, selectByHash, selectRandom } from "../../../actors/client/selectors.ts";
import { isMQError } from "../../../transport/protocol.ts";

const queues = Array.from({ length: 8 }, (_, queueId) => ({ topic: "T", brokerName: "b", queueId }));

describe("selectors", () => {
  it("selectByHash = |arg.hashCode() mod n| as in Java (Integer, Long, String)", () => {
    // "hello".hashCode() = 99162322; 99162322 % 8 = 2
    assert.equal(selectByHash(queues, {}, "hello").queueId, 2);
    // "polygenelubricants".hashCode() = Integer.MIN_VALUE; MIN_VALUE % 8 = 0
    assert.equal(selectByHash(queues, {}, "polygenelubricants").queueId, 0);
    // negative hash: Java's -2147483648 % 5 = -3, so |-3| = 3
    assert.equal(selectByHash(queues.slice(0, 5), {}, "polygenelubricants").queueId, 3);
    // an int is an Integer (hashCode = value): 12345 % 8 = 1; -7 % 8 = -7, so 7
    assert.equal(selectByHash(queues, {}, 12345).queueId, 1);
    assert.equal(selectByHash(queues, {}, -7).queueId, 7);
    // a larger integer is a Long: 2^32 + 5 hashes to (int)(v ^ v >>> 32) = 5 ^ 1 = 4
    assert.equal(javaArgHashCode(2 ** 32 + 5), 4);
    assert.equal(javaArgHashCode(-1n), 0); // Long.hashCode(-1L) = (int)(0xffffffffffffffff ^ 0xffffffff) = 0
    assert.equal(javaArgHashCode(5_000_000_000), 705032705); // 0x12A05F200 ^ 0x1 = 0x12A05F201, (int) = 0x2A05F201
    assert.equal(selectByHash(queues, {}, 2 ** 32 + 5).queueId, 4);
    // strings and other values: String.hashCode of the string form ("1.5".hashCode() = 48568, mod 8 = 0)
    assert.equal(selectByHash(queues, {}, 1.5).queueId, 0);
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
