import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ProcessQueue, type ProcessQueueMessage } from "../../../actors/client/processQueue.ts";
import { fakeWallClock } from "../../helpers.ts";

function msg(queueOffset: number, bytes = 123, properties?: Record<string, string>): ProcessQueueMessage {
  return { queueOffset, body: Buffer.alloc(bytes), properties };
}
function batch(from: number, to: number, bytes = 123): ProcessQueueMessage[] {
  return Array.from({ length: to - from + 1 }, (_, i) => msg(from + i, bytes));
}

describe("ProcessQueue: concurrent commit offset rule", () => {
  it("consumed 1001..1008 of 1001..1010 commits 1009; all commits 1011; all but 1001 commits 1001", () => {
    const a = new ProcessQueue();
    a.putMessages(batch(1001, 1010));
    assert.equal(a.removeMessages(batch(1001, 1008)), 1009);
    assert.equal(a.removeMessages(batch(1009, 1010)), 1011);
    assert.equal(a.msgCount, 0);
    assert.equal(a.msgSize, 0);

    const b = new ProcessQueue();
    b.putMessages(batch(1001, 1010));
    assert.equal(b.removeMessages(batch(1002, 1010)), 1001);
    assert.equal(b.removeMessages([msg(1001)]), 1011);
    assert.equal(b.removeMessages([msg(1001)]), -1, "nothing held");
  });

  it("worked example: 1002..1011 first keeps 1001, then 1012", () => {
    const q = new ProcessQueue();
    q.putMessages(batch(1001, 1011));
    assert.equal(q.removeMessages(batch(1002, 1011)), 1001);
    assert.equal(q.removeMessages([msg(1001)]), 1012);
  });

  it("counts only new offsets and reports when consumption must be dispatched", () => {
    const q = new ProcessQueue();
    assert.equal(q.putMessages(batch(0, 9)), true);
    assert.equal(q.putMessages(batch(5, 14)), false, "already consuming");
    assert.equal(q.msgCount, 15);
    assert.equal(q.msgSize, 15 * 123);
    assert.equal(q.queueOffsetMax, 14);
    assert.equal(q.maxSpan, 14);
  });

  it("out-of-order inserts stay sorted and removal from the middle keeps the minimum", () => {
    const q = new ProcessQueue();
    q.putMessages([msg(10), msg(5), msg(7), msg(20), msg(1)]);
    assert.deepEqual(
      q.messages().map((m) => m.queueOffset),
      [1, 5, 7, 10, 20],
    );
    assert.equal(q.removeMessages([msg(5), msg(10)]), 1);
    assert.equal(q.removeMessages([msg(1)]), 7);
    assert.equal(q.maxSpan, 13);
  });

  it("backlog estimate from MAX_OFFSET", () => {
    const q = new ProcessQueue();
    q.putMessages([msg(0), msg(1, 123, { MAX_OFFSET: "101" })]);
    assert.equal(q.msgAccCnt, 100);
  });

  it("property: the commit offset is the smallest unfinished offset or highest + 1", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), fc.array(fc.nat(), { maxLength: 400 }), (n, picks) => {
        const q = new ProcessQueue();
        const all = batch(1000, 1000 + n - 1, 1);
        q.putMessages(all);
        const left = new Set(all.map((m) => m.queueOffset));
        for (const p of picks) {
          if (left.size === 0) break;
          const offset = [...left][p % left.size]!;
          left.delete(offset);
          const expected = left.size === 0 ? 1000 + n : Math.min(...left);
          if (q.removeMessages([msg(offset)]) !== expected) return false;
          if (q.msgCount !== left.size || q.msgSize !== left.size) return false;
        }
        return true;
      }),
      { numRuns: 100 },
    );
  });
});

describe("ProcessQueue: RocketMQ ProcessQueueTest vectors", () => {
  it("100 messages of 123 bytes: take 10 + commit, then remove the last", () => {
    const q = new ProcessQueue();
    const msgs = batch(0, 99);
    q.putMessages(msgs);
    assert.equal(q.msgCount, 100);
    assert.equal(q.msgSize, 12_300);
    assert.equal(q.takeMessages(10).length, 10);
    assert.equal(q.commit(), 10);
    assert.equal(q.msgCount, 90);
    assert.equal(q.msgSize, 11_070);
    q.removeMessages([msgs[99]!]);
    assert.equal(q.msgCount, 89);
    assert.equal(q.msgSize, 10_947);
    assert.equal(q.containsMessage(msgs[50]!), true);
    assert.equal(q.containsMessage(msgs[5]!), false);
    assert.equal(q.containsMessage(msgs[99]!), false);
  });

  it("cached MiB: 102 400 x 123 B = 12, then 10, 9, 0 as batches are committed", () => {
    const q = new ProcessQueue();
    q.putMessages(batch(0, 102_399));
    assert.equal(q.cachedMsgMiB, 12);
    q.takeMessages(10_000);
    q.commit();
    assert.equal(q.cachedMsgMiB, 10);
    q.takeMessages(10_000);
    q.commit();
    assert.equal(q.cachedMsgMiB, 9);
    q.takeMessages(80_000);
    q.commit();
    assert.equal(q.cachedMsgMiB, 0);
    assert.equal(q.msgCount, 2_400);
  });

  it("a message that started consuming 20 minutes ago is handed back", () => {
    const now = 1_700_000_000_000;
    const q = new ProcessQueue({ now: () => now });
    q.putMessages([
      msg(0, 10, { CONSUME_START_TIME: String(now - 20 * 60_000) }),
      msg(1, 10, { CONSUME_START_TIME: String(now - 16 * 60_000) }),
      msg(2, 10, { CONSUME_START_TIME: String(now - 60_000) }),
      msg(3, 10, { CONSUME_START_TIME: String(now - 30 * 60_000) }),
    ]);
    const expired = q.cleanExpiredMessages(15);
    assert.deepEqual(
      expired.map((m) => m.queueOffset),
      [0, 1],
      "only the leading expired run",
    );
    assert.equal(q.msgCount, 4, "not removed until sent back");
    assert.equal(q.removeMessages(expired), 2);
    assert.deepEqual(q.cleanExpiredMessages(15), []);
    assert.equal(new ProcessQueue().cleanExpiredMessages(15).length, 0);
  });

  it("rollback empties the in-flight map", () => {
    const q = new ProcessQueue();
    q.putMessages(batch(0, 9));
    q.takeMessages(4);
    assert.equal(q.inFlightCount, 4);
    q.rollback();
    assert.equal(q.inFlightCount, 0);
    assert.deepEqual(
      q.takeMessages(2).map((m) => m.queueOffset),
      [0, 1],
    );
  });
});

describe("ProcessQueue: orderly helpers", () => {
  it("take, put back, redeliver in the same order, commit", () => {
    const q = new ProcessQueue();
    assert.equal(q.putMessages(batch(0, 5)), true);
    const first = q.takeMessages(3);
    assert.deepEqual(
      first.map((m) => m.queueOffset),
      [0, 1, 2],
    );
    q.makeMessageToConsumeAgain(first);
    assert.equal(q.inFlightCount, 0);
    assert.deepEqual(
      q.takeMessages(3).map((m) => m.queueOffset),
      [0, 1, 2],
    );
    assert.equal(q.commit(), 3);
    assert.equal(q.commit(), -1);
    assert.deepEqual(
      q.takeMessages(10).map((m) => m.queueOffset),
      [3, 4, 5],
    );
    assert.equal(q.commit(), 6);
    assert.equal(q.msgCount, 0);
    assert.equal(q.msgSize, 0);
    assert.equal(q.consuming, true);
    assert.deepEqual(q.takeMessages(1), []);
    assert.equal(q.consuming, false, "nothing left: the consume task stops");
    assert.equal(q.putMessages(batch(6, 7)), true, "new work dispatches again");
  });

  it("lock and pull expiry", () => {
    let t = 0;
    const q = new ProcessQueue({ now: () => t });
    t = 30_000;
    assert.equal(q.isLockExpired(), false);
    t = 30_001;
    assert.equal(q.isLockExpired(), true);
    t = 120_001;
    assert.equal(q.isPullExpired(), true);
    q.lastPullTimestamp = t;
    assert.equal(q.isPullExpired(), false);
  });

  it("the default clock is monotonic: a wall clock step forward neither expires a lock granted just now nor a pull", () => {
    const clock = fakeWallClock();
    try {
      const q = new ProcessQueue();
      q.locked = true;
      clock.jump(121_000);
      assert.equal(q.isLockExpired(), false, "lock read expired");
      assert.equal(q.isPullExpired(), false, "pull read expired");
    } finally {
      clock.restore();
    }
  });

  it("clear resets counts", () => {
    const q = new ProcessQueue();
    q.putMessages(batch(0, 3));
    q.takeMessages(2);
    q.clear();
    assert.equal(q.msgCount, 0);
    assert.equal(q.msgSize, 0);
    assert.equal(q.queueOffsetMax, 0);
    assert.equal(q.maxSpan, 0);
  });

  it("appending 100k messages in batches of 32 and draining them stays fast", () => {
    const q = new ProcessQueue();
    const t0 = performance.now();
    for (let o = 0; o < 100_000; o += 32) {
      q.putMessages(batch(o, o + 31, 1));
      q.removeMessages(batch(o, o + 15, 1));
    }
    assert.equal(q.removeMessages(q.messages()), 100_000);
    assert.ok(performance.now() - t0 < 2_000);
  });
});
