import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OffsetTable } from "../../../actors/client/offsetTable.ts";

const mq = { topic: "TopicTest", brokerName: "broker-a", queueId: 1 };
const other = { topic: "TopicTest", brokerName: "broker-a", queueId: 2 };

describe("OffsetTable (RemoteBrokerOffsetStoreTest vectors)", () => {
  it("update, overwrite, increaseOnly", () => {
    const t = new OffsetTable();
    assert.equal(t.readOffset(mq), -1);
    t.updateOffset(mq, 1024, false);
    assert.equal(t.readOffset(mq), 1024);
    t.updateOffset(mq, 1023, false);
    assert.equal(t.readOffset(mq), 1023);
    t.updateOffset(mq, 1022, true);
    assert.equal(t.readOffset(mq), 1023);
    t.updateOffset(mq, 1030, true);
    assert.equal(t.readOffset(mq), 1030);
  });
  it("freeze ignores updates until removed", () => {
    const t = new OffsetTable();
    t.updateAndFreeze(mq, 1024);
    t.updateOffset(mq, 1023, true);
    assert.equal(t.readOffset(mq), 1024);
    t.updateOffset(mq, 1023, false);
    assert.equal(t.readOffset(mq), 1024);
    t.updateOffset(mq, 2000, true);
    assert.equal(t.readOffset(mq), 1024);
    assert.equal(t.isFrozen(mq), true);
    t.removeOffset(mq);
    assert.equal(t.readOffset(mq), -1);
    t.updateOffset(mq, 1023, false);
    assert.equal(t.readOffset(mq), 1023);
    assert.equal(t.isFrozen(mq), false);
  });
  it("retainOnly drops queues no longer held; cloneOffsetTable filters by topic", () => {
    const t = new OffsetTable();
    t.updateOffset(mq, 5, false);
    t.updateOffset(other, 6, false);
    t.updateOffset({ ...mq, topic: "X" }, 7, false);
    assert.equal(t.cloneOffsetTable("TopicTest").size, 2);
    assert.deepEqual(t.retainOnly([mq]), [other, { ...mq, topic: "X" }]);
    assert.deepEqual(t.entries(), [{ mq, offset: 5 }]);
  });
});
