/**
 * An orderly queue whose lock lapsed (the client frozen or cut off past its lock's life) may have
 * been consumed by another member since: its pulls must not commit the stale offset in memory,
 * which would move the group's offset back behind the other member's commits. Likewise a
 * concurrent queue whose broker connection was lost since its offset was read: it is not pulled
 * at all until its offset is read again.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ProcessQueue } from "../../../actors/client/processQueue.ts";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import { defaultPullSettings, PullService, type PullServiceDeps } from "../../../actors/client/pullService.ts";
import { SubscriptionTable } from "../../../actors/client/subscriptions.ts";
import type { MessageExt } from "../../../transport/messageRecord.ts";
import { MASTER_ID, PullSysFlag } from "../../../transport/protocol.ts";
import { waitFor } from "../../helpers.ts";

async function firstPull(lockAgeMs: number): Promise<{ sysFlag: number; commitOffset: number }> {
  const pulls: Array<{ sysFlag: number; commitOffset: number }> = [];
  const subscriptions = new SubscriptionTable();
  subscriptions.subscribe("T", "*");
  let now = 1_000_000;
  const deps = {
    host: {
      brokerAddress: () => "tcp://127.0.0.1:1",
      node: {
        ref: () => ({
          ask: (ev: { sysFlag: number; commitOffset: number }) => {
            pulls.push({ sysFlag: ev.sysFlag, commitOffset: ev.commitOffset });
            return new Promise(() => {});
          },
        }),
      },
    },
    group: "g",
    model: "CLUSTERING",
    subscriptions,
    offsetStore: { readOffsetFromMemory: () => 8, updateOffset: () => {} },
    settings: { ...defaultPullSettings(), orderly: true, lockMaxLiveTimeMs: 1_500, pullsInFlightPerQueue: 1 },
    onFound: () => {},
    onOffsetIllegal: () => {},
  } as unknown as PullServiceDeps;
  const pq = new ProcessQueue<MessageExt>({ now: () => now });
  pq.locked = true;
  pq.lastLockTimestamp = now;
  now += lockAgeMs;
  const service = new PullService(deps);
  const request: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 0 },
    pq,
    nextOffset: 8,
    brokerId: MASTER_ID,
  };
  try {
    service.executeNow(request);
    return await waitFor(() => pulls[0], 5_000, "the pull sent");
  } finally {
    service.stop();
  }
}

test("an orderly pull commits the consumed offset while the lock holds, not once it lapsed", async () => {
  const held = await firstPull(1_000);
  assert.ok(held.sysFlag & PullSysFlag.COMMIT_OFFSET, "a held lock's pull carries the offset");
  assert.equal(held.commitOffset, 8);
  const lapsed = await firstPull(1_501);
  assert.equal(lapsed.sysFlag & PullSysFlag.COMMIT_OFFSET, 0, "a lapsed lock's pull carries no offset");
});

test("a concurrent queue whose broker connection was lost since its offset was read is not pulled until read again; a read is asked once the broker is reachable", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const pulls: Array<{ sysFlag: number; commitOffset: number }> = [];
  const subscriptions = new SubscriptionTable();
  subscriptions.subscribe("T", "*");
  let unreachable = true;
  let asked = 0;
  const deps = {
    host: {
      brokerAddress: () => "tcp://127.0.0.1:1",
      isBrokerUnreachable: () => unreachable,
      node: {
        ref: () => ({
          ask: (ev: { sysFlag: number; commitOffset: number }) => {
            pulls.push({ sysFlag: ev.sysFlag, commitOffset: ev.commitOffset });
            return new Promise(() => {});
          },
        }),
      },
    },
    group: "g",
    model: "CLUSTERING",
    subscriptions,
    offsetStore: { readOffsetFromMemory: () => 8, updateOffset: () => {} },
    settings: { ...defaultPullSettings(), pullsInFlightPerQueue: 1 },
    onFound: () => {},
    onOffsetIllegal: () => {},
    onOffsetStale: () => asked++,
  } as unknown as PullServiceDeps;
  const pq = new ProcessQueue<MessageExt>();
  pq.offsetRead(100);
  pq.offsetLostAt = () => 200;
  const service = new PullService(deps);
  const request: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 0 },
    pq,
    nextOffset: 8,
    brokerId: MASTER_ID,
  };
  try {
    service.executeNow(request);
    assert.deepEqual([pulls.length, asked], [0, 0], "not pulled; nothing asked while the broker cannot be reached");
    unreachable = false;
    t.mock.timers.tick(1_000);
    assert.deepEqual([pulls.length, asked], [0, 1], "still not pulled; a read asked for");
    t.mock.timers.tick(1_000);
    assert.deepEqual([pulls.length, asked], [0, 2], "asked again at each retry");
    pq.offsetRead(300);
    t.mock.timers.tick(1_000);
    assert.equal(pulls.length, 1, "pulled once read again");
    assert.ok(pulls[0]!.sysFlag & PullSysFlag.COMMIT_OFFSET, "carrying its offset");
    assert.equal(asked, 2);
  } finally {
    service.stop();
  }
});

test("pipelined pulls answered after the queue's offset went stale make one retry of the queue, not one per answer", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const answers: Array<() => void> = [];
  let pulls = 0;
  const subscriptions = new SubscriptionTable();
  subscriptions.subscribe("T", "*");
  let asked = 0;
  const deps = {
    host: {
      brokerAddress: () => "tcp://127.0.0.1:1",
      isBrokerUnreachable: () => false,
      node: {
        ref: () => ({
          ask: (ev: { queueOffset: number; maxMsgNums: number }) => {
            pulls++;
            // the first answer says the queue holds plenty: the next pulls are pipelined behind it
            return new Promise((resolve) =>
              answers.push(() =>
                resolve({
                  fields: {
                    status: "SUCCESS",
                    nextBeginOffset: ev.queueOffset + ev.maxMsgNums,
                    minOffset: 0,
                    maxOffset: 100_000,
                    suggestWhichBrokerId: MASTER_ID,
                  },
                }),
              ),
            );
          },
        }),
      },
    },
    group: "g",
    model: "CLUSTERING",
    subscriptions,
    offsetStore: { readOffsetFromMemory: () => 8, updateOffset: () => {} },
    settings: defaultPullSettings(),
    onFound: () => {},
    onOffsetIllegal: () => {},
    onOffsetStale: () => asked++,
  } as unknown as PullServiceDeps;
  const pq = new ProcessQueue<MessageExt>();
  pq.offsetRead(100);
  let lostAt = 0;
  pq.offsetLostAt = () => lostAt;
  const service = new PullService(deps);
  const request: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 0 },
    pq,
    nextOffset: 8,
    brokerId: MASTER_ID,
  };
  const settle = async () => {
    for (const a of answers.splice(0)) a();
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  try {
    service.executeNow(request);
    await settle();
    const inFlight = answers.length;
    assert.ok(inFlight > 4, `pulls pipelined (${inFlight})`);
    // the broker's connection is lost and back: the answers of the pulls in flight come in
    lostAt = 200;
    await settle();
    assert.equal(asked, 1, "one read of the offset asked for");
    pulls = 0;
    asked = 0;
    t.mock.timers.tick(1_000);
    assert.deepEqual([pulls, asked], [0, 1], "one retry a second, not one per answer");
    t.mock.timers.tick(1_000);
    assert.deepEqual([pulls, asked], [0, 2]);
    pq.offsetRead(300);
    t.mock.timers.tick(1_000);
    await settle();
    assert.ok(pulls > 0, "pulled again once read again");
  } finally {
    service.stop();
  }
});
