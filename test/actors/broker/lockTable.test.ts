import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LockTable } from "../../../actors/broker/lockTable.ts";
import { fakeWallClock } from "../../helpers.ts";

const g = "group";
const mq1 = { topic: "T", brokerName: "b", queueId: 1 };
const mq2 = { topic: "T", brokerName: "b", queueId: 2 };

function table() {
  const clock = { t: 1_000_000 };
  return { clock, locks: new LockTable({ now: () => clock.t }) };
}

describe("LockTable (RebalanceLockManagerTest vectors)", () => {
  it("unknown group: all expired", () => {
    assert.equal(table().locks.isLockAllExpired("nobody"), true);
  });
  it("free queue locks; same client relocks; other live client refused; other after expiry takes over", () => {
    const { clock, locks } = table();
    assert.equal(locks.tryLock(g, mq1, "c1"), true);
    assert.equal(locks.isLockAllExpired(g), false);
    assert.equal(locks.tryLock(g, mq1, "c1"), true);
    assert.equal(locks.tryLock(g, mq1, "c2"), false);
    clock.t += 60_000;
    assert.equal(locks.tryLock(g, mq1, "c2"), false, "exactly 60 s is still live");
    clock.t += 1;
    assert.equal(locks.isLockAllExpired(g), true);
    assert.equal(locks.tryLock(g, mq1, "c2"), true);
    assert.equal(locks.lockOwner(g, mq1), "c2");
    assert.equal(locks.isLocked(g, mq1, "c1"), false);
  });
  it("renewal keeps a lock alive", () => {
    const { clock, locks } = table();
    locks.tryLock(g, mq1, "c1");
    clock.t += 50_000;
    assert.equal(locks.isLocked(g, mq1, "c1"), true);
    clock.t += 50_000;
    assert.equal(locks.tryLock(g, mq1, "c2"), false);
  });
  it("tryLockBatch: two free => both, two held by another => none, mixed => the lockable one", () => {
    const { locks } = table();
    assert.deepEqual(locks.tryLockBatch(g, [mq1, mq2], "c1"), [mq1, mq2]);
    assert.deepEqual(locks.tryLockBatch(g, [mq1, mq2], "c2"), []);
    locks.unlockBatch(g, [mq2], "c1");
    assert.deepEqual(locks.tryLockBatch(g, [mq1, mq2], "c2"), [mq2]);
  });
  it("purgeExpired drops expired entries and emptied groups; a live lock stays its owner's", () => {
    const { clock, locks } = table();
    locks.tryLockBatch("gone", [mq1, mq2], "c1");
    locks.tryLock(g, mq1, "c1");
    clock.t += 40_000;
    locks.tryLock(g, mq2, "c2");
    clock.t += 30_000;
    assert.equal(locks.purgeExpired(), 3);
    assert.equal(locks.entryCount("gone"), 0);
    assert.equal(locks.groupCount(), 1);
    assert.equal(locks.tryLock(g, mq2, "c1"), false, "the live lock is kept");
    assert.equal(locks.tryLock(g, mq1, "c1"), true, "an expired queue is free, as before");
  });
  it("unlock by the owner removes its entries only; by a non-owner removes nothing", () => {
    const { locks } = table();
    locks.tryLockBatch(g, [mq1, mq2], "c1");
    locks.unlockBatch(g, [mq1], "c2");
    assert.equal(locks.entryCount(g), 2);
    locks.unlockBatch(g, [mq1], "c1");
    assert.equal(locks.entryCount(g), 1);
    assert.equal(locks.lockOwner(g, mq2), "c1");
  });
});

it("a lock renewed just now stays its owner's when the wall clock steps forward 61 s (the default clock is monotonic)", () => {
  const clock = fakeWallClock();
  try {
    const locks = new LockTable();
    assert.equal(locks.tryLock(g, mq1, "c1"), true);
    clock.jump(61_000);
    assert.equal(locks.tryLock(g, mq1, "c2"), false, "another client took a live lock");
    assert.equal(locks.lockOwner(g, mq1), "c1");
  } finally {
    clock.restore();
  }
});
