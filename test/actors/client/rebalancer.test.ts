import assert from "node:assert/strict";
import { test } from "node:test";
import { allocateAveragely, allocateByMachineRoom } from "../../../actors/client/allocateStrategies.ts";
import { ConsumeService, defaultConsumeSettings } from "../../../actors/client/consumeService.ts";
import type { OffsetStore } from "../../../actors/client/offsetStore.ts";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import { PULL_FAILURE_LOG_INTERVAL_MS } from "../../../actors/client/pullService.ts";
import { type HeldQueue, offsetsToPersist, Rebalancer, rebalanceLog } from "../../../actors/client/rebalancer.ts";
import { SubscriptionTable } from "../../../actors/client/subscriptions.ts";
import type { ActorNode } from "../../../actors/runtime/index.ts";
import { monotonicNow } from "../../../transport/clock.ts";
import type { MessageExt } from "../../../transport/messageRecord.ts";
import { MASTER_ID, type MessageModel, type MessageQueue, MQError, mqKey } from "../../../transport/protocol.ts";
import { monotonicFollowsDate } from "../../helpers.ts";

/** What a fake node says of its connections: never lost. */
const connected = {
  peerUnreachable: () => false,
  peerFailedSince: () => false,
  peerRefusal: () => undefined,
  onPeerFailure: () => () => {},
};

/** An offset store that keeps nothing: every queue reads offset 0. */
const noOffsets = (): OffsetStore => ({
  load: async () => {},
  updateOffset: () => {},
  updateAndFreeze: () => {},
  readOffset: async () => 0,
  readOffsetFromMemory: () => -1,
  persistAll: async () => {},
  persist: async () => {},
  removeOffset: () => {},
});

const queues = (n: number): MessageQueue[] =>
  Array.from({ length: n }, (_, i) => ({ topic: "T", brokerName: i < n / 2 ? "b" : "a", queueId: i % (n / 2) }));

function setupRebalancer(model: MessageModel, me: string, members: { ids: string[]; registerOnHeartbeat?: boolean }) {
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
  const node = {
    ...connected,
    ref: () => ({ ask: async () => ({ fields: { consumerIdList: [...members.ids] } }) }),
  } as unknown as ActorNode;
  let heartbeats = 0;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: me,
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async () => queues(8),
      sendHeartbeatToAllBrokers: async () => {
        heartbeats++;
        if (members.registerOnHeartbeat && !members.ids.includes(me)) members.ids.push(me);
      },
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
  assert.deepEqual(
    x.started.map((p) => `${p.mq.brokerName}${p.mq.queueId}@${p.nextOffset}`),
    ["a0@0", "a1@40", "a2@0"],
  );
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

test("a client the broker does not list registers again at once; one still not listed holds nothing; broadcasting holds everything", async () => {
  // the broker lost this client (a late unregister, a broker restart): it heartbeats and takes its share
  const lost = setupRebalancer("CLUSTERING", "c2", { ids: ["c1"], registerOnHeartbeat: true });
  assert.equal(await lost.r.doRebalance(), true);
  assert.deepEqual([...lost.held.values()].map((h) => `${h.mq.brokerName}${h.mq.queueId}`).sort(), ["b0", "b1", "b2", "b3"]);
  assert.equal(lost.heartbeats(), 2, "one heartbeat to register again, one announcing the new assignment");
  const outsider = setupRebalancer("CLUSTERING", "zz", { ids: ["c1", "c2"] });
  await outsider.r.doRebalance();
  assert.equal(outsider.held.size, 0);
  assert.equal(outsider.heartbeats(), 1, "it tried to register again");
  const b = setupRebalancer("BROADCASTING", "c1", { ids: [] });
  await b.r.doRebalance();
  assert.equal(b.held.size, 8);
});

test("the group's members are asked of a slave while the master is out of the route, so a consumer started then still gets its queues", async () => {
  const asked: string[] = [];
  const node = {
    ...connected,
    ref: (addr: string) => ({
      ask: async () => {
        asked.push(addr);
        return { fields: { consumerIdList: ["c1"] } };
      },
    }),
  } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      // only slaves are in the route: the masters are down
      brokerAddress: (name, id = 0) => (id === 1 ? `tcp://slave-${name}:1` : undefined),
      fetchSubscribeQueues: async () => queues(4),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: {
      load: async () => {},
      updateOffset: () => {},
      updateAndFreeze: () => {},
      readOffset: async () => 7,
      readOffsetFromMemory: () => -1,
      persistAll: async () => {},
      persist: async () => {},
      removeOffset: () => {},
    },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  assert.equal(await r.doRebalance(), true);
  assert.deepEqual([...held.keys()].sort(), ["T@a@0", "T@a@1", "T@b@0", "T@b@1"]);
  assert.ok(asked.length > 0 && asked.every((a) => a.startsWith("tcp://slave-")), `asked ${asked.join(", ")}`);
});

test("clustering: the members are the union of every broker's list (one that has not heard of a member yet, one that fails, one unreachable are no veto)", async () => {
  // a new broker group "c" joined the topic: this client heartbeated it already, c2 not yet; broker "d" does not answer;
  // broker "e" is unreachable (killed, still in the route) and is not asked while others are reachable
  const lists: Record<string, string[] | Error> = {
    "tcp://a:1": ["c2", "c1"],
    "tcp://c:1": ["c1"],
    "tcp://d:1": new MQError("TIMEOUT", "no answer within 3000 ms"),
    "tcp://e:1": ["c1"],
  };
  const asked: string[] = [];
  const node = {
    ...connected,
    ref: (addr: string) => ({
      ask: async () => {
        asked.push(addr);
        const l = lists[addr]!;
        if (l instanceof Error) throw l;
        return { fields: { consumerIdList: [...l] } };
      },
    }),
  } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      brokerAddress: (name, id = 0) => (id === 0 ? `tcp://${name}:1` : undefined),
      isBrokerUnreachable: (addr) => addr === "tcp://e:1",
      // the group's retry topic has no queues here
      fetchSubscribeQueues: async (topic) =>
        topic === "T" ? ["a", "c", "d", "e"].flatMap((brokerName) => [0, 1].map((queueId) => ({ topic, brokerName, queueId }))) : [],
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: noOffsets(),
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  assert.equal(await r.doRebalance(), true);
  // members [c1, c2] over a0 a1 c0 c1 d0 d1 e0 e1: c1 holds the first half
  assert.deepEqual([...held.keys()].sort(), ["T@a@0", "T@a@1", "T@c@0", "T@c@1"]);
  assert.deepEqual(asked.sort(), ["tcp://a:1", "tcp://c:1", "tcp://d:1"], "every reachable broker asked, the unreachable one not");
});

test("clustering hand-over: a lost queue's listener batch ends before its final offset is released; a gained queue is taken over", async () => {
  const members = { ids: ["c1"] };
  const memory = new Map<string, number>();
  const released: { key: string; offset: number; at: number }[] = [];
  const takenOver: string[] = [];
  const store: OffsetStore = {
    load: async () => {},
    updateOffset: (mq, offset, increaseOnly) => {
      const k = mqKey(mq);
      if (!increaseOnly || offset > (memory.get(k) ?? -1)) memory.set(k, offset);
    },
    updateAndFreeze: () => {},
    readOffset: async () => assert.fail("a gained queue is read by a take-over"),
    readOffsetFromMemory: (mq) => memory.get(mqKey(mq)) ?? -1,
    persistAll: async () => {},
    persist: async () => {},
    removeOffset: (mq) => void memory.delete(mqKey(mq)),
    takeOver: async (mq, clientId) => {
      takenOver.push(`${mqKey(mq)} by ${clientId}`);
      return 100;
    },
    release: async (mq) => void released.push({ key: mqKey(mq), offset: memory.get(mqKey(mq)) ?? -1, at: Date.now() }),
  };
  const node = {
    ...connected,
    ref: () => ({ ask: async () => ({ fields: { consumerIdList: [...members.ids] } }) }),
  } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async () => queues(2),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: store,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  await r.doRebalance();
  assert.deepEqual(takenOver.sort(), ["T@a@0 by c1", "T@b@0 by c1"]);
  assert.deepEqual(
    [...held.values()].map((h) => h.request.nextOffset),
    [100, 100],
  );

  // queue b0 (sorted second, so c2's share) has 3 messages: the first in a slow listener call, the others waiting
  const lose = held.get("T@b@0")!;
  let finish!: () => void;
  const slow = new Promise<void>((resolve) => (finish = resolve));
  const consume = new ConsumeService({
    group: "g",
    model: "CLUSTERING",
    listener: async () => {
      await slow;
      return "CONSUME_SUCCESS";
    },
    offsetStore: store,
    settings: { ...defaultConsumeSettings(), consumeThreads: 1 },
    processQueues: () => held.values(),
  });
  const msgs = [100, 101, 102].map((queueOffset) => ({ queueOffset, body: Buffer.from("x"), properties: {} }) as unknown as MessageExt);
  lose.pq.putMessages(msgs);
  lose.request.nextOffset = 103;
  consume.submit(lose.mq, lose.pq, msgs);
  assert.equal(consume.activeCount, 1);

  members.ids = ["c1", "c2"];
  const round = r.doRebalance();
  await new Promise((res) => setTimeout(res, 50));
  assert.equal(released.length, 0, "not released while its listener batch runs");
  assert.equal(lose.pq.dropped, true, "dropped at once: no new batch of it starts");
  const ended = Date.now();
  finish();
  await round;
  // the batch in hand (100) finished; 101 and 102 never started: the new holder starts at 101
  assert.equal(released.length, 1);
  assert.equal(released[0]!.key, "T@b@0");
  assert.equal(released[0]!.offset, 101);
  assert.ok(released[0]!.at >= ended);
  assert.deepEqual([...held.keys()], ["T@a@0"]);
  await consume.stop(0);
});

/** The sole member "c1" of a clustering group with orderly locking, over `queueCount` queues; unlocks are recorded. */
function orderlyRebalancer(o: {
  queueCount: number;
  readOffset: OffsetStore["readOffset"];
  lockQueue: (mq: MessageQueue) => Promise<boolean>;
  unlocked: string[];
}) {
  const store: OffsetStore = {
    load: async () => {},
    updateOffset: () => {},
    updateAndFreeze: () => {},
    readOffset: o.readOffset,
    readOffsetFromMemory: () => -1,
    persistAll: async () => {},
    persist: async () => {},
    removeOffset: () => {},
  };
  const node = { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: ["c1"] } }) }) } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async () => queues(o.queueCount),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: store,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
    lockQueue: o.lockQueue,
    releaseQueue: async () => {},
    unlockQueue: async (mq) => void o.unlocked.push(mqKey(mq)),
  });
  return { r, held };
}

test("clustering: a kept queue whose broker connection was lost since its offset was read is read again, and restarts at the group's offset only when it is further", async () => {
  const memory = new Map<string, number>();
  /** the broker's committed offsets */
  const committed = new Map<string, number>();
  const resynced: string[] = [];
  let resyncFails = false;
  const store: OffsetStore = {
    load: async () => {},
    updateOffset: (mq, offset, increaseOnly) => {
      const k = mqKey(mq);
      if (!increaseOnly || offset > (memory.get(k) ?? -1)) memory.set(k, offset);
    },
    updateAndFreeze: () => {},
    readOffset: async () => assert.fail("a gained queue is read by a take-over"),
    readOffsetFromMemory: (mq) => memory.get(mqKey(mq)) ?? -1,
    persistAll: async () => {},
    persist: async () => {},
    removeOffset: (mq) => void memory.delete(mqKey(mq)),
    takeOver: async (mq) => committed.get(mqKey(mq)) ?? 0,
    release: async () => {},
    resync: async (mq, clientId) => {
      resynced.push(`${mqKey(mq)} by ${clientId}`);
      if (resyncFails) return -2;
      const c = committed.get(mqKey(mq)) ?? -1;
      store.updateOffset(mq, c, true);
      return c;
    },
  };
  const node = { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: ["c1"] } }) }) } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  const started: PullRequest[] = [];
  let lostAt = 0;
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      brokerLostAt: () => lostAt,
      fetchSubscribeQueues: async () => queues(2),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: store,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: (req) => void started.push(req),
  });
  const a = "T@a@0";
  const b = "T@b@0";
  committed.set(a, 10);
  committed.set(b, 10);
  await r.doRebalance();
  assert.deepEqual([...held.keys()].sort(), [a, b]);
  const [ha, hb] = [held.get(a)!, held.get(b)!];
  assert.ok(!ha.pq.isOffsetStale() && !hb.pq.isOffsetStale(), "read at the take-over");
  // consumed up to 100 each (pulled to 100, nothing cached), committed up to 90
  for (const h of [ha, hb]) {
    h.request.nextOffset = 100;
    store.updateOffset(h.mq, 100, true);
  }
  committed.set(a, 90);
  committed.set(b, 90);
  await r.doRebalance();
  assert.deepEqual(resynced, [], "nothing read again while the connection held");

  // the connection is lost (and made again): both queues are stale, their offsets not persisted
  lostAt = monotonicNow();
  assert.ok(ha.pq.isOffsetStale() && hb.pq.isOffsetStale());
  assert.deepEqual(offsetsToPersist(held.values()), { synced: [], unsynced: [ha.mq, hb.mq] });
  // meanwhile another member took a over and consumed it to 250; b stayed at this member's commit
  committed.set(a, 250);
  // a read that fails leaves both as they were, stale
  resyncFails = true;
  await r.doRebalance();
  assert.deepEqual(resynced.sort(), [`${a} by c1`, `${b} by c1`]);
  assert.ok(held.get(a) === ha && held.get(b) === hb && ha.pq.isOffsetStale() && hb.pq.isOffsetStale(), "still stale");
  resyncFails = false;
  resynced.length = 0;
  started.length = 0;
  await r.doRebalance();
  assert.deepEqual(resynced.sort(), [`${a} by c1`, `${b} by c1`]);
  // a: restarted at the group's offset, its old process queue dropped
  assert.equal(ha.pq.dropped, true);
  const na = held.get(a)!;
  assert.notEqual(na, ha);
  assert.equal(na.request.nextOffset, 250);
  assert.deepEqual(
    started.map((p) => `${mqKey(p.mq)}@${p.nextOffset}`),
    [`${a}@250`],
  );
  assert.equal(store.readOffsetFromMemory(na.mq), 250);
  // b: nobody else consumed it, it goes on where it was
  assert.equal(held.get(b), hb);
  assert.equal(hb.pq.dropped, false);
  assert.equal(hb.request.nextOffset, 100);
  assert.equal(store.readOffsetFromMemory(hb.mq), 100, "its offset in memory is kept, not the broker's older one");
  const persist = offsetsToPersist(held.values());
  assert.deepEqual({ synced: persist.synced.map(mqKey).sort(), unsynced: persist.unsynced }, { synced: [a, b], unsynced: [] });
  resynced.length = 0;
  await r.doRebalance();
  assert.deepEqual(resynced, [], "read again once only");
});

test("clustering: a stale queue is read again only where its broker can be reached; staleness follows the master's current address and sticks; a stale queue's release carries no offset", async () => {
  const memory = new Map<string, number>();
  const resynced: string[] = [];
  const released: { key: string; offset: number }[] = [];
  const store: OffsetStore = {
    load: async () => {},
    updateOffset: (mq, offset) => void memory.set(mqKey(mq), offset),
    updateAndFreeze: () => {},
    readOffset: async () => 0,
    readOffsetFromMemory: (mq) => memory.get(mqKey(mq)) ?? -1,
    persistAll: async () => {},
    persist: async () => {},
    removeOffset: (mq) => void memory.delete(mqKey(mq)),
    takeOver: async () => 10,
    release: async (mq) => void released.push({ key: mqKey(mq), offset: memory.get(mqKey(mq)) ?? -1 }),
    resync: async (mq) => {
      resynced.push(mqKey(mq));
      return 10;
    },
  };
  const node = { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: ["c1"] } }) }) } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  // broker b: a master; broker a: no master in the route at first (only its slave is listed)
  let masterA: string | undefined;
  const lost = new Map<string, number>();
  const unreachable = new Set<string>();
  let topicQueues = queues(2);
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      brokerAddress: (name, id) =>
        name === "b" ? (id === MASTER_ID ? "tcp://b:1" : undefined) : id === MASTER_ID ? masterA : id === 1 ? "tcp://a-slave:1" : undefined,
      isBrokerUnreachable: (addr) => unreachable.has(addr),
      brokerLostAt: (addr) => lost.get(addr) ?? 0,
      fetchSubscribeQueues: async () => topicQueues,
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: store,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
    releaseWaitMs: 0,
  });
  const a = "T@a@0";
  await r.doRebalance();
  const h = held.get(a)!;
  assert.equal(h.pq.isOffsetStale(), false);
  // a's master is back in the route, then this client is cut off from broker a
  masterA = "tcp://a:1";
  lost.set(masterA, h.pq.offsetReadAt + 1);
  for (const addr of [masterA, "tcp://a-slave:1"]) unreachable.add(addr);
  assert.equal(h.pq.isOffsetStale(), true, "the loss is read on the master's current address");
  // the master moves (a new address, never lost): the loss seen is not forgotten
  masterA = "tcp://a:2";
  unreachable.add(masterA);
  assert.equal(h.pq.isOffsetStale(), true, "stale until read again");
  // no address of broker a can be reached (b lists the members): a is not read again, since the
  // query would hold this round, and every later topic's, for the take-over's 15 s
  await r.doRebalance();
  assert.deepEqual(resynced, []);
  assert.equal(held.get(a), h);
  // reachable again: read
  unreachable.clear();
  await r.doRebalance();
  assert.deepEqual(resynced, [a]);
  assert.equal(h.pq.isOffsetStale(), false);
  // stale again, then the queue is lost: its release carries no offset (it may be behind the group's)
  lost.set(masterA, h.pq.offsetReadAt + 1);
  memory.set(a, 7);
  topicQueues = queues(2).filter((q) => q.brokerName === "b");
  await r.doRebalance();
  assert.deepEqual(released, [{ key: a, offset: -1 }]);
});

test("orderly: a queue locked for a gain that does not happen is unlocked (offset unreadable, or the consumer stopped meanwhile)", async () => {
  const locked: string[] = [];
  const unlocked: string[] = [];
  let r!: Rebalancer;
  let gainingWhileStopping: string[] = [];
  const built = orderlyRebalancer({
    queueCount: 8,
    readOffset: async (mq) => {
      if (mq.brokerName === "a" && mq.queueId === 1) throw new Error("broker unreachable");
      if (mq.brokerName === "a" && mq.queueId === 2) {
        gainingWhileStopping = r.lockedForGain().map(mqKey);
        r.stop(); // the consumer closes while this gain reads the offset
      }
      return 0;
    },
    lockQueue: async (mq) => {
      locked.push(mqKey(mq));
      return true;
    },
    unlocked,
  });
  r = built.r;
  const { held } = built;
  await r.doRebalance();
  assert.deepEqual([...held.keys()], ["T@a@0"]);
  assert.deepEqual(locked, ["T@a@0", "T@a@1", "T@a@2"], "no lock taken once stopped");
  assert.deepEqual(unlocked, ["T@a@1", "T@a@2"]);
  assert.deepEqual(gainingWhileStopping, ["T@a@2"], "a closing consumer sees the queue locked for the gain in progress");
  assert.deepEqual(r.lockedForGain(), []);
});

test("orderly: a queue dropped outside a round with its lock held (rebuilt) is held again by the next round, or its lock given back", async () => {
  const unlocked: string[] = [];
  const locked: string[] = [];
  const { r, held } = orderlyRebalancer({
    queueCount: 4,
    readOffset: async () => 0,
    lockQueue: async (mq) => {
      locked.push(mqKey(mq));
      return true;
    },
    unlocked,
  });
  // both rebuilt after their lock was regained; the route no longer gives this client the second
  r.droppedLocked({ topic: "T", brokerName: "a", queueId: 0 });
  r.droppedLocked({ topic: "T", brokerName: "z", queueId: 7 });
  assert.deepEqual(r.lockedForGain().map(mqKey), ["T@a@0", "T@z@7"], "a closing consumer unlocks them");
  await r.doRebalance();
  assert.ok(held.has("T@a@0"), "the one still assigned is held again");
  assert.deepEqual(unlocked, ["T@z@7"], "the other's lock is given back, not left to the broker's expiry");
  assert.deepEqual(r.lockedForGain(), []);
  assert.ok(r.brokersInUse().has("a"));
});

test("orderly: stop() waits for a round whose lock request is in flight, and the round gives that lock back", async () => {
  const unlocked: string[] = [];
  let answerLock!: (locked: boolean) => void;
  let lockAsked!: () => void;
  const asked = new Promise<void>((r) => {
    lockAsked = r;
  });
  const { r, held } = orderlyRebalancer({
    queueCount: 2,
    readOffset: async () => 0,
    lockQueue: () => {
      lockAsked();
      return new Promise<boolean>((resolve) => {
        answerLock = resolve;
      });
    },
    unlocked,
  });
  const round = r.doRebalance();
  await asked;
  let stopped = false;
  const stopping = r.stop().then(() => {
    stopped = true;
  });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(stopped, false, "stop waits for the round in flight");
  answerLock(true); // the broker locked the queue for a consumer that is closing
  await stopping;
  await round;
  assert.deepEqual(unlocked, ["T@a@0"], "the round gave the lock back before stop resolved");
  assert.equal(held.size, 0);
});

test("broadcasting: a lost queue whose offset cannot be written is reported and the round goes on", async () => {
  let count = 8;
  const failures: unknown[] = [];
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node: { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: [] } }) }) } as unknown as ActorNode,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async () => queues(count),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "BROADCASTING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "BROADCASTING"),
    offsetStore: {
      load: async () => {},
      updateOffset: () => {},
      updateAndFreeze: () => {},
      readOffset: async () => 0,
      readOffsetFromMemory: () => -1,
      persistAll: async () => {},
      persist: async () => {
        throw new Error("ENOSPC: no space left on device");
      },
      removeOffset: () => {},
    },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
    onPersistFailed: (e) => void failures.push(e),
  });
  await r.doRebalance();
  assert.equal(held.size, 8);
  // the topic shrinks to 4 queues: 4 are lost, and their offsets cannot be written
  count = 4;
  await r.doRebalance();
  assert.equal(held.size, 4);
  assert.equal(failures.length, 4);
  assert.match(String(failures[0]), /ENOSPC/);
});

test("a queue whose start offset cannot be read is logged at warn, at most once per queue per interval, and retried next round", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(rebalanceLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  let brokerDown = true;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node: { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: ["c1"] } }) }) } as unknown as ActorNode,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async () => queues(4),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: {
      load: async () => {},
      updateOffset: () => {},
      updateAndFreeze: () => {},
      // broker a is down: its committed offsets cannot be read (-2)
      readOffset: async (mq) => (brokerDown && mq.brokerName === "a" ? -2 : 0),
      readOffsetFromMemory: () => -1,
      persistAll: async () => {},
      persist: async () => {},
      removeOffset: () => {},
    },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  await r.doRebalance();
  assert.deepEqual([...held.keys()].sort(), ["T@b@0", "T@b@1"]);
  assert.deepEqual(lines.map((l) => `${l.fields.brokerName}:${l.fields.queueId}`).sort(), ["a:0", "a:1"]);
  assert.deepEqual(
    { group: lines[0]!.fields.group, topic: lines[0]!.fields.topic, code: lines[0]!.fields.code },
    { group: "g", topic: "T", code: "QUERY_NOT_FOUND" },
  );
  assert.match(lines[0]!.msg, /T@a@[01]/);
  assert.match(lines[0]!.msg, /could not be read/);

  // the next round within the interval: still failing, quiet
  t.mock.timers.tick(PULL_FAILURE_LOG_INTERVAL_MS - 1);
  await r.doRebalance();
  assert.equal(lines.length, 2);
  t.mock.timers.tick(1);
  await r.doRebalance();
  assert.equal(lines.length, 4, "logged again once the interval has passed");
  brokerDown = false;
  await r.doRebalance();
  assert.equal(held.size, 4, "the queues are taken once their offsets can be read");
  assert.equal(lines.length, 4);
});

test("clustering: a topic whose group members no broker can list is logged at warn, at most once per topic per interval", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(rebalanceLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  let brokerDown = true;
  const node = {
    ...connected,
    ref: () => ({
      ask: async () => {
        if (brokerDown) throw new MQError("TIMEOUT", "no answer within 3000 ms");
        return { fields: { consumerIdList: ["c1"] } };
      },
    }),
  } as unknown as ActorNode;
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node,
      clientId: "c1",
      brokerAddress: (name, id = 0) => (id === 0 ? `tcp://${name}:1` : undefined),
      fetchSubscribeQueues: async () => [0, 1].map((queueId) => ({ topic: "T", brokerName: "a", queueId })),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "CLUSTERING"),
    offsetStore: noOffsets(),
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  await r.doRebalance();
  assert.equal(held.size, 0);
  assert.equal(lines.length, 1, "asked twice in the round (once more after a heartbeat), logged once");
  assert.deepEqual({ group: lines[0]!.fields.group, topic: lines[0]!.fields.topic }, { group: "g", topic: "T" });
  assert.match(lines[0]!.msg, /tcp:\/\/a:1/);
  assert.match(lines[0]!.msg, /no answer within 3000 ms/);
  t.mock.timers.tick(PULL_FAILURE_LOG_INTERVAL_MS - 1);
  await r.doRebalance();
  assert.equal(lines.length, 1);
  t.mock.timers.tick(1);
  await r.doRebalance();
  assert.equal(lines.length, 2, "logged again once the interval has passed");
  brokerDown = false;
  await r.doRebalance();
  assert.equal(held.size, 2);
  assert.equal(lines.length, 2);
});

test("a subscribed topic that does not exist is logged at warn, at most once per topic per interval; a retry topic is not", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(rebalanceLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  let created = false;
  const held = new Map<string, HeldQueue>();
  const subscriptions = SubscriptionTable.build("g", { T: "*", Down: "*" }, "CLUSTERING");
  const r = new Rebalancer({
    host: {
      node: { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: ["c1"] } }) }) } as unknown as ActorNode,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async (topic) => {
        // the retry topic is created by the broker when needed; another failure (no name server answered) is not "missing"
        if (topic === "Down") throw new MQError("NO_ROUTE", "No name server answered.");
        if (topic === "T" && created) return [0, 1].map((queueId) => ({ topic, brokerName: "a", queueId }));
        throw new MQError("TOPIC_NOT_EXIST", `Topic ${topic} has no route; create it or wait for its broker to register.`);
      },
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateAveragely,
    subscriptions,
    offsetStore: noOffsets(),
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  assert.ok(subscriptions.topics().includes("%RETRY%g"), "the retry topic is subscribed too");
  await r.doRebalance();
  assert.equal(held.size, 0);
  assert.equal(lines.length, 1, lines.map((l) => l.msg).join("\n"));
  assert.deepEqual({ group: lines[0]!.fields.group, topic: lines[0]!.fields.topic }, { group: "g", topic: "T" });
  assert.match(lines[0]!.msg, /Group g subscribes topic T, which does not exist/);
  // rounds every second (a route change, the missing-route retry) within the interval: quiet
  for (let i = 0; i < 5; i++) {
    t.mock.timers.tick(1_000);
    await r.doRebalance();
  }
  assert.equal(lines.length, 1);
  t.mock.timers.tick(PULL_FAILURE_LOG_INTERVAL_MS);
  await r.doRebalance();
  assert.equal(lines.length, 2, "logged again once the interval has passed");
  created = true;
  await r.doRebalance();
  assert.equal(held.size, 2, "the topic is taken once it exists");
  assert.equal(lines.length, 2);
});

test("an allocation that throws (a machineRoomOf failing for a broker it does not know) is logged at warn with the error, at most once per topic per interval", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(rebalanceLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  const rooms: Record<string, string> = { a: "room1" };
  const held = new Map<string, HeldQueue>();
  const r = new Rebalancer({
    host: {
      node: { ...connected, ref: () => ({ ask: async () => ({ fields: { consumerIdList: ["c1"] } }) }) } as unknown as ActorNode,
      clientId: "c1",
      brokerAddress: () => "tcp://fake:1",
      fetchSubscribeQueues: async (topic) => ["a", "b"].map((brokerName) => ({ topic, brokerName, queueId: 0 })),
      sendHeartbeatToAllBrokers: async () => {},
    },
    group: "g",
    model: "CLUSTERING",
    strategy: allocateByMachineRoom,
    allocateOptions: {
      consumeridcs: ["room1"],
      machineRoomOf: (b) => {
        const room = rooms[b];
        if (!room) throw new Error(`no room for broker ${b}`);
        return room;
      },
    },
    subscriptions: SubscriptionTable.build("g", { T: "*" }, "BROADCASTING"),
    offsetStore: noOffsets(),
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeTimestamp: 0,
    held,
    startPull: () => {},
  });
  await r.doRebalance();
  assert.equal(held.size, 0);
  assert.equal(lines.length, 1, "RocketMQ logs it (allocate message queue exception); it was swallowed");
  assert.equal(lines[0]!.fields.topic, "T");
  assert.match(lines[0]!.msg, /no room for broker b/);
  t.mock.timers.tick(1_000);
  await r.doRebalance();
  assert.equal(lines.length, 1, "at most once per topic per interval");
  rooms.b = "room2";
  await r.doRebalance();
  assert.deepEqual(
    [...held.values()].map((h) => h.mq.brokerName),
    ["a"],
  );
});
