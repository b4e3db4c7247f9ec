import assert from "node:assert/strict";
import { test } from "node:test";
import { clusterConflictMessage } from "../../../actors/nameserver/nameServer.ts";
import {
  CLUSTER_CONFLICT_REPORT_MS,
  type ClusterConflict,
  DEFAULT_BROKER_EXPIRED_MS,
  RouteTable,
} from "../../../actors/nameserver/routeTable.ts";
import { isMQError, type RegisterBrokerRequest, type TopicConfig } from "../../../transport/protocol.ts";

function tc(topicName: string, q = 4, perm = 6): TopicConfig {
  return { topicName, readQueueNums: q, writeQueueNums: q, perm, order: false };
}

function reg(
  brokerName: string,
  brokerAddr: string,
  topics: TopicConfig[],
  brokerId = 0,
  extra: Partial<RegisterBrokerRequest> = {},
): RegisterBrokerRequest {
  return {
    clusterName: "C",
    brokerName,
    brokerAddr,
    brokerId,
    topicConfigTable: Object.fromEntries(topics.map((t) => [t.topicName, t])),
    dataVersion: 1,
    ...extra,
  };
}

test("a registered master's topics have routes with queue and broker data", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T", 4), tc("U", 2, 4)]), 0);
  t.register(reg("b", "tcp://h:2", [tc("T", 8)]), 0);
  const r = t.getRoute("T");
  assert.deepEqual(r.queueDatas, [
    { brokerName: "a", readQueueNums: 4, writeQueueNums: 4, perm: 6 },
    { brokerName: "b", readQueueNums: 8, writeQueueNums: 8, perm: 6 },
  ]);
  assert.deepEqual(r.brokerDatas.map((b) => [b.brokerName, b.brokerAddrs["0"]]).sort(), [
    ["a", "tcp://h:1"],
    ["b", "tcp://h:2"],
  ]);
  assert.deepEqual(t.getRoute("U").queueDatas, [{ brokerName: "a", readQueueNums: 2, writeQueueNums: 2, perm: 4 }]);
  assert.deepEqual(t.topicList(), ["T", "U"]);
  assert.deepEqual(t.clusterInfo().clusterAddrTable, { C: ["a", "b"] });
});

test("an unknown topic is TOPIC_NOT_EXIST naming the topic and the command that creates it", () => {
  const t = new RouteTable();
  assert.throws(
    () => t.getRoute("nope"),
    (e) => isMQError(e, "TOPIC_NOT_EXIST") && /topic "nope".*`actormq topic create nope`/.test((e as Error).message),
  );
});

test("a re-registration replaces the master's topic list", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T"), tc("U")]), 0);
  t.register(reg("a", "tcp://h:1", [tc("T", 2)]), 10);
  assert.equal(t.getRoute("T").queueDatas[0]!.writeQueueNums, 2);
  assert.throws(
    () => t.getRoute("U"),
    (e) => isMQError(e, "TOPIC_NOT_EXIST"),
  );
});

test("a broker silent past its timeout is dropped from every route; others stay", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")]), 0);
  t.register(reg("b", "tcp://h:2", [tc("T")], 0, { heartbeatTimeoutMillis: 1000 }), 0);
  assert.deepEqual(t.scanNotActiveBrokers(1000), []);
  assert.deepEqual(t.scanNotActiveBrokers(1001), ["tcp://h:2"]);
  assert.deepEqual(
    t.getRoute("T").queueDatas.map((q) => q.brokerName),
    ["a"],
  );
  assert.deepEqual(t.scanNotActiveBrokers(DEFAULT_BROKER_EXPIRED_MS + 1), ["tcp://h:1"]);
  assert.throws(
    () => t.getRoute("T"),
    (e) => isMQError(e, "TOPIC_NOT_EXIST"),
  );
  assert.deepEqual(t.clusterInfo(), { brokerAddrTable: {}, clusterAddrTable: {} });
});

test("a registration refreshes liveness", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")], 0, { heartbeatTimeoutMillis: 1000 }), 0);
  t.register(reg("a", "tcp://h:1", [tc("T")], 0, { heartbeatTimeoutMillis: 1000 }), 900);
  assert.deepEqual(t.scanNotActiveBrokers(1500), []);
  assert.equal(t.getRoute("T").queueDatas.length, 1);
});

test("unregister removes the broker; a slave gets its master's address; queues stay while a slave is alive", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")]), 0);
  const r = t.register(reg("a", "tcp://h:3", [], 1), 0);
  assert.equal(r.masterAddr, "tcp://h:1");
  t.unregister({ clusterName: "C", brokerName: "a", brokerAddr: "tcp://h:1", brokerId: 0 });
  const route = t.getRoute("T");
  assert.deepEqual(route.brokerDatas[0]!.brokerAddrs, { "1": "tcp://h:3" });
  // read from the slave, never written to: a producer that only checks perm sends elsewhere
  assert.deepEqual(route.queueDatas, [{ brokerName: "a", readQueueNums: 4, writeQueueNums: 4, perm: 4 }]);
  t.register(reg("a", "tcp://h:1", [tc("T")]), 0);
  assert.equal(t.getRoute("T").queueDatas[0]!.perm, 6, "writable again once the master is back");
  t.unregister({ clusterName: "C", brokerName: "a", brokerAddr: "tcp://h:1", brokerId: 0 });
  t.unregister({ clusterName: "C", brokerName: "a", brokerAddr: "tcp://h:3", brokerId: 1 });
  assert.throws(
    () => t.getRoute("T"),
    (e) => isMQError(e, "TOPIC_NOT_EXIST"),
  );
});

test("a broker registering on an address another broker name was live on replaces that entry", () => {
  const t = new RouteTable();
  // broker a (master on h:1, slave on h:2) and broker c on h:9
  t.register(reg("a", "tcp://h:1", [tc("TA")]), 0);
  t.register(reg("a", "tcp://h:2", [], 1), 0);
  t.register(reg("c", "tcp://h:9", [tc("TC")]), 0);
  // c died without unregistering; broker b started on its port: c is gone at once, not kept forever
  t.register(reg("b", "tcp://h:9", [tc("TB")]), 1000);
  assert.deepEqual(t.topicList(), ["TA", "TB"]);
  assert.deepEqual(Object.keys(t.clusterInfo().brokerAddrTable).sort(), ["a", "b"]);
  assert.equal(t.liveBrokerCount, 3);
  // a's slave address taken over by b's slave: a keeps its master and its topics
  t.register(reg("b", "tcp://h:2", [], 1), 2000);
  assert.deepEqual(t.clusterInfo().brokerAddrTable.a!.brokerAddrs, { "0": "tcp://h:1" });
  assert.deepEqual(t.getRoute("TA").brokerDatas[0]!.brokerAddrs, { "0": "tcp://h:1" });
  assert.deepEqual(t.clusterInfo().brokerAddrTable.b!.brokerAddrs, { "0": "tcp://h:9", "1": "tcp://h:2" });
  // b keeps registering; a stops: a expires like any silent broker
  const late = DEFAULT_BROKER_EXPIRED_MS + 10_000;
  t.register(reg("b", "tcp://h:9", [tc("TB")]), late);
  t.register(reg("b", "tcp://h:2", [], 1), late);
  assert.deepEqual(t.scanNotActiveBrokers(late + 1), ["tcp://h:1"]);
  assert.deepEqual(t.topicList(), ["TB"]);
  assert.deepEqual(t.clusterInfo().clusterAddrTable, { C: ["b"] });
});

test("a master re-registering on its address under another id leaves no stale master entry, and keeps its queues", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")]), 0);
  t.register(reg("a", "tcp://h:1", [], 1), 10); // demoted to slave in place
  assert.deepEqual(t.clusterInfo().brokerAddrTable.a?.brokerAddrs, { "1": "tcp://h:1" });
  assert.deepEqual(t.getRoute("T").brokerDatas[0]!.brokerAddrs, { "1": "tcp://h:1" });
  assert.equal(t.liveBrokerCount, 1);
  assert.deepEqual(t.scanNotActiveBrokers(DEFAULT_BROKER_EXPIRED_MS + 11), ["tcp://h:1"]);
  assert.deepEqual(t.clusterInfo(), { brokerAddrTable: {}, clusterAddrTable: {} });
});

test("a topic named like an Object.prototype member leaves the route when its master stops listing it", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T"), tc("constructor"), tc("toString"), tc("hasOwnProperty")]), 0);
  assert.deepEqual(t.topicList(), ["T", "constructor", "hasOwnProperty", "toString"]);
  t.register(reg("a", "tcp://h:1", [tc("T")]), 10);
  assert.deepEqual(t.topicList(), ["T"]);
});

test("cluster info keeps every entry whatever the names: a __proto__ key is an entry, not the prototype", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")]), 0);
  t.register({ ...reg("b", "tcp://h:2", [tc("T")]), clusterName: "__proto__" }, 0);
  t.register(reg("__proto__", "tcp://h:3", [tc("T")]), 0);
  const ci = t.clusterInfo();
  assert.ok(!Array.isArray(ci.clusterAddrTable));
  assert.deepEqual(Object.keys(ci.clusterAddrTable).sort(), ["C", "__proto__"]);
  assert.deepEqual(ci.clusterAddrTable.C, ["__proto__", "a"]);
  assert.deepEqual(Object.keys(ci.brokerAddrTable).sort(), ["__proto__", "a", "b"]);
});

test("an unregister naming another broker name or id than its address registered with changes nothing; the broker still expires", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")], 0, { heartbeatTimeoutMillis: 1000 }), 0);
  // the liveness entry went first: the route stayed, and nothing could expire it any more
  t.unregister({ clusterName: "C", brokerName: "other", brokerAddr: "tcp://h:1", brokerId: 0 });
  t.unregister({ clusterName: "C", brokerName: "a", brokerAddr: "tcp://h:1", brokerId: 1 });
  assert.equal(t.liveBrokerCount, 1);
  assert.deepEqual(t.getRoute("T").brokerDatas[0]!.brokerAddrs, { "0": "tcp://h:1" });
  assert.deepEqual(t.scanNotActiveBrokers(10 * 60_000), ["tcp://h:1"]);
  assert.throws(
    () => t.getRoute("T"),
    (e) => isMQError(e, "TOPIC_NOT_EXIST"),
  );
});

test("a broker re-registering under another cluster moves to it, and leaves every cluster when it expires", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T")]), 0);
  t.register({ ...reg("a", "tcp://h:2", [], 1), clusterName: "C1" }, 0);
  t.register(reg("b", "tcp://h:3", [tc("T")]), 0);
  // restarted with another clusterName: it stayed listed under C for good
  t.register({ ...reg("a", "tcp://h:1", [tc("T")]), clusterName: "C2" }, 1000);
  assert.deepEqual(t.clusterInfo().clusterAddrTable, { C: ["b"], C2: ["a"] });
  assert.equal(t.clusterInfo().brokerAddrTable.a!.cluster, "C2");
  assert.equal(t.getRoute("T").brokerDatas.find((b) => b.brokerName === "a")!.cluster, "C2");
  t.register(reg("b", "tcp://h:3", [tc("T")]), DEFAULT_BROKER_EXPIRED_MS + 500);
  assert.deepEqual(t.scanNotActiveBrokers(DEFAULT_BROKER_EXPIRED_MS + 1001).sort(), ["tcp://h:1", "tcp://h:2"]);
  assert.deepEqual(t.clusterInfo().clusterAddrTable, { C: ["b"] });
});

test("a slave naming another cluster than its master is listed under the master's, whichever registers first, and reported", () => {
  const conflicts: ClusterConflict[] = [];
  const t = new RouteTable({ onClusterConflict: (c) => conflicts.push(c) });
  t.register({ ...reg("a", "tcp://h:2", [], 1), clusterName: "C2" }, 0);
  t.register({ ...reg("a", "tcp://h:1", [tc("T")]), clusterName: "C1" }, 0);
  for (let now = 0; now <= 90_000; now += 30_000) {
    t.register({ ...reg("a", "tcp://h:2", [], 1), clusterName: "C2" }, now);
    t.register({ ...reg("a", "tcp://h:1", [tc("T")]), clusterName: "C1" }, now);
    assert.deepEqual(t.clusterInfo().clusterAddrTable, { C1: ["a"] }, `at ${now}`);
    assert.equal(t.getRoute("T").brokerDatas[0]!.cluster, "C1");
  }
  assert.deepEqual(
    conflicts.map((c) => [c.kind, c.brokerAddr, c.clusterName, c.listedUnder]),
    [
      ["slave", "tcp://h:2", "C2", "C1"],
      ["slave", "tcp://h:2", "C2", "C1"],
    ],
    `once per ${CLUSTER_CONFLICT_REPORT_MS} ms`,
  );
  assert.deepEqual(conflicts[0]!.others, [{ brokerAddr: "tcp://h:1", brokerId: 0, clusterName: "C1" }]);
  assert.match(
    clusterConflictMessage(conflicts[0]!),
    /slave 1 of a \(tcp:\/\/h:2\) registers in cluster C2, its master in C1: .*its master's clusterName/,
  );
});

test("two masters of one broker name in two clusters are reported: the name flips to the last to register", () => {
  const conflicts: ClusterConflict[] = [];
  const t = new RouteTable({ onClusterConflict: (c) => conflicts.push(c) });
  t.register({ ...reg("a", "tcp://h:1", [tc("T")]), clusterName: "C1" }, 0);
  t.register({ ...reg("a", "tcp://h:9", [tc("T")]), clusterName: "C2" }, 10);
  assert.deepEqual(t.clusterInfo().clusterAddrTable, { C2: ["a"] });
  assert.deepEqual(
    conflicts.map((c) => [c.kind, c.brokerName, c.brokerAddr, c.clusterName, c.others]),
    [["name", "a", "tcp://h:9", "C2", [{ brokerAddr: "tcp://h:1", brokerId: 0, clusterName: "C1" }]]],
  );
  assert.match(clusterConflictMessage(conflicts[0]!), /two brokers named a .*tcp:\/\/h:1 \(id 0, cluster C1\).*unique brokerName/);
  // a master restarted in another cluster, its old address gone: no rival, nothing reported
  const quiet: ClusterConflict[] = [];
  const u = new RouteTable({ onClusterConflict: (c) => quiet.push(c) });
  u.register({ ...reg("b", "tcp://h:3", [tc("T")]), clusterName: "C1" }, 0);
  u.register({ ...reg("b", "tcp://h:3", [tc("T")]), clusterName: "C2" }, 10);
  assert.deepEqual(u.clusterInfo().clusterAddrTable, { C2: ["b"] });
  assert.deepEqual(quiet, []);
});

test("deleteTopic removes a topic's route from every broker, or only from those of one cluster", () => {
  const t = new RouteTable();
  t.register(reg("a", "tcp://h:1", [tc("T"), tc("U")]), 0);
  t.register(reg("b", "tcp://h:2", [tc("T"), tc("U")], 0, { clusterName: "D" }), 0);
  assert.equal(t.deleteTopic("T", "D"), true);
  assert.deepEqual(
    t.getRoute("T").queueDatas.map((q) => q.brokerName),
    ["a"],
  );
  assert.equal(t.deleteTopic("T", "NoSuchCluster"), false);
  assert.equal(t.deleteTopic("U"), true);
  assert.throws(
    () => t.getRoute("U"),
    (e) => isMQError(e, "TOPIC_NOT_EXIST"),
  );
  assert.equal(t.deleteTopic("U"), false, "a topic without a route: nothing to do");
  assert.deepEqual(t.topicList(), ["T"]);
  // a broker that still has the topic puts it back when it registers again
  t.register(reg("a", "tcp://h:1", [tc("T"), tc("U")]), 1);
  assert.deepEqual(t.topicList(), ["T", "U"]);
});
