import assert from "node:assert/strict";
import { test } from "node:test";
import { allocateAveragely } from "../../../actors/client/allocateStrategies.ts";
import type { OffsetStore } from "../../../actors/client/offsetStore.ts";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import { type HeldQueue, Rebalancer } from "../../../actors/client/rebalancer.ts";
import { SubscriptionTable } from "../../../actors/client/subscriptions.ts";
import type { ActorNode } from "../../../actors/runtime/index.ts";
import { type MessageModel, type MessageQueue, mqKey } from "../../../transport/protocol.ts";

const queues = (n: number): MessageQueue[] => Array.from({ length: n }, (_, i) => ({ topic: "T", brokerName: i < n / 2 ? "b" : "a", queueId: i % (n / 2) }));

function setupRebalancer(model: MessageModel, me: string, members: { ids: string[] }) {
  const persisted: string[] = [];
  const removed: string[] = [];
  const started: PullRequest[] = [];
  const committed = new Map<string, number>([[mqKey({ topic: "T", brokerName: "a", queueId: 1 }), 40]]);
  const store: OffsetStore = {
    load: async () => {},
    updateOffset: () => {},
    updateAndFreeze: () => {},
    readOffset: async (mq) => committed.get(mqKey(mq)) ?? -1,
    readOffsetFromMemory: () => -1,
    persistAll: async () => {},
    persist: async (mq) => void persisted.push(mqKey(mq)),
    removeOffset: (mq) => void removed.push(mqKey(mq)),
  };
  const node = { ref: () => ({ ask: async () => ({ fields: { consumerIdList: [...members.ids] } }) }) } as unknown as ActorNode;
  let heartbeats = 0;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: me,
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async () => queues(8),
      sendHeartbeatToAllBrokers: async () => void heartbeats++,
    },
    group: "g",
    model,
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "BROADCASTING"),
    offsetStore: store,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: (req) => void started.push(req),
  });
  return { r, held, started, persisted, removed, heartbeats: () => heartbeats };
}

test("clustering: sorted queues and ids, AVERAGELY share, pulls start at computePullFromWhere", async () => {
  const members = { ids: ["c3", "c1", "c2"] };
  const x = setupRebalancer("CLUSTERING", "c1", members);
  assert.equal(await x.r.doRebalance(), true);
  // sorted: a0..a3, b0..b3; c1 is first of 3 => 3 queues a0, a1, a2
  assert.deepEqual(x.started.map((p) => `${p.mq.brokerName}${p.mq.queueId}@${p.nextOffset}`), ["a0@0", "a1@40", "a2@0"]);
  assert.equal(x.heartbeats(), 1, "a changed assignment is announced");
  assert.equal(await x.r.doRebalance(), false, "nothing changes while membership is stable");

  // c3 leaves: c1 now takes a0..a3; a member joining would shrink it again
  members.ids = ["c1", "c2"];
  assert.equal(await x.r.doRebalance(), true);
  assert.deepEqual([...x.held.values()].map((h) => `${h.mq.brokerName}${h.mq.queueId}`).sort(), ["a0", "a1", "a2", "a3"]);
  members.ids = ["c0", "c1", "c2", "c3"];
  const before = new Map(x.held);
  await x.r.doRebalance();
  assert.deepEqual([...x.held.values()].map((h) => `${h.mq.brokerName}${h.mq.queueId}`).sort(), ["a2", "a3"]);
  for (const k of ["T@a@0", "T@a@1"]) {
    assert.equal(before.get(k)!.pq.dropped, true, `${k} dropped`);
    assert.ok(x.persisted.includes(k) && x.removed.includes(k), `${k} persisted then removed`);
  }
});

test("a client not in the member list holds nothing; broadcasting holds everything", async () => {
  const outsider = setupRebalancer("CLUSTERING", "zz", { ids: ["c1", "c2"] });
  await outsider.r.doRebalance();
  assert.equal(outsider.held.size, 0);
  const b = setupRebalancer("BROADCASTING", "c1", { ids: [] });
  await b.r.doRebalance();
  assert.equal(b.held.size, 8);
});
