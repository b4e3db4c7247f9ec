import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { isMQError, NAMESRV_ACTOR, type TopicRouteData } from "../../../transport/protocol.ts";
import { EPHEMERAL, fakeWallClock, waitFor } from "../../helpers.ts";

let ns: NameServer;
let client: ActorNode;

before(async () => {
  ns = await NameServer.start({ listen: EPHEMERAL, scanIntervalMs: 50 });
  client = await ActorNode.start({ listen: null });
});
after(async () => {
  await client.close();
  await ns.close();
});

const topicConfigTable = { T: { topicName: "T", readQueueNums: 4, writeQueueNums: 4, perm: 6, order: false } };

test("a registered broker's topic route is served over the wire, and dropped after its timeout", async () => {
  const ref = client.ref(ns.address, NAMESRV_ACTOR);
  await ref.ask({
    type: "REGISTER_BROKER",
    clusterName: "C",
    brokerName: "a",
    brokerAddr: "tcp://127.0.0.1:1",
    brokerId: 0,
    heartbeatTimeoutMillis: 300,
    topicConfigTable,
    dataVersion: 1,
  });
  const r = await ref.ask<TopicRouteData>({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "T" });
  assert.deepEqual(r.fields.queueDatas, [{ brokerName: "a", readQueueNums: 4, writeQueueNums: 4, perm: 6 }]);
  assert.deepEqual(r.fields.brokerDatas[0]!.brokerAddrs, { "0": "tcp://127.0.0.1:1" });
  const list = await ref.ask<{ topicList: string[] }>({ type: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER" });
  assert.deepEqual(list.fields.topicList, ["T"]);
  const ci = await ref.ask<{ clusterAddrTable: Record<string, string[]> }>({ type: "GET_BROKER_CLUSTER_INFO" });
  assert.deepEqual(ci.fields.clusterAddrTable, { C: ["a"] });
  await waitFor(
    async () =>
      ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "T" }).then(
        () => false,
        (e) => isMQError(e, "TOPIC_NOT_EXIST"),
      ),
    5000,
    "route expiry",
  );
});

test("a wall clock step forward of 5 min does not expire a broker that registered just now", async () => {
  // installed before the name server starts: it would keep the Date.now it saw at start
  const clock = fakeWallClock();
  const own = await NameServer.start({ listen: EPHEMERAL, scanIntervalMs: 50 });
  const ref = client.ref(own.address, NAMESRV_ACTOR);
  const register = (brokerName: string, port: number, heartbeatTimeoutMillis: number, topic: string) =>
    ref.ask({
      type: "REGISTER_BROKER",
      clusterName: "C",
      brokerName,
      brokerAddr: `tcp://127.0.0.1:${port}`,
      brokerId: 0,
      heartbeatTimeoutMillis,
      topicConfigTable: { [topic]: { ...topicConfigTable.T, topicName: topic } },
      dataVersion: 1,
    });
  const routed = (topic: string) =>
    ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic }).then(
      () => true,
      (e) => (isMQError(e, "TOPIC_NOT_EXIST") ? false : Promise.reject(e)),
    );
  try {
    await register("live", 2, 120_000, "Live");
    // a broker with a 300 ms timeout: once it is dropped, scans have run past the step
    await register("short", 3, 300, "Short");
    clock.jump(5 * 60_000);
    await waitFor(async () => !(await routed("Short")), 5000, "the 300 ms broker expired");
    assert.equal(await routed("Live"), true, "the broker that registered just now was dropped");
  } finally {
    clock.restore();
    await own.close();
  }
});

test("unknown topics, malformed and unknown requests get coded errors and the server keeps serving", async () => {
  const ref = client.ref(ns.address, NAMESRV_ACTOR);
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "nope" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: 42 }), (e) => isMQError(e, "INVALID_PARAMETER"));
  await assert.rejects(ref.ask({ type: "REGISTER_BROKER", brokerName: "x" }), (e) => isMQError(e, "INVALID_PARAMETER"));
  await assert.rejects(
    ref.ask({ type: "REGISTER_BROKER", clusterName: "C", brokerName: "x", brokerAddr: "tcp://h:1", brokerId: 0, topicConfigTable: 5 }),
    (e) => isMQError(e, "INVALID_PARAMETER"),
  );
  // topic configs clients would build routes from: a bad one refuses the registration, nothing is kept
  const reg = (tc: unknown) =>
    ref.ask({
      type: "REGISTER_BROKER",
      clusterName: "C",
      brokerName: "bad",
      brokerAddr: "tcp://h:3",
      brokerId: 0,
      topicConfigTable: { B: tc },
    });
  for (const tc of [
    5,
    null,
    { topicName: "B", readQueueNums: 1e9, writeQueueNums: 4, perm: 6 },
    { topicName: "B", readQueueNums: 4, writeQueueNums: -1, perm: 6 },
    { topicName: "B", readQueueNums: 4, writeQueueNums: 4, perm: 99 },
    { topicName: "a b", readQueueNums: 4, writeQueueNums: 4, perm: 6 },
    { readQueueNums: 4, writeQueueNums: 4, perm: 6 },
  ])
    await assert.rejects(reg(tc), (e) => isMQError(e, "INVALID_PARAMETER"), JSON.stringify(tc));
  // a broker id past 2^53 is not exact (two slaves would share one entry of brokerAddrs), nor is a fraction
  for (const type of ["REGISTER_BROKER", "UNREGISTER_BROKER"])
    for (const brokerId of [2 ** 53 + 2, -1, 1.5])
      await assert.rejects(
        ref.ask({ type, clusterName: "C", brokerName: "bad", brokerAddr: "tcp://h:3", brokerId, topicConfigTable: {} }),
        (e) =>
          isMQError(e, "INVALID_PARAMETER") &&
          /brokerId must be an integer from 0 \(the master\) to 2\^53-1 .*, got /.test(e.message) &&
          e.message.includes(String(brokerId)),
        `${type} ${brokerId}`,
      );
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "B" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
  await assert.rejects(ref.ask({ type: "PULL_MESSAGE" }), (e) => isMQError(e, "REQUEST_CODE_NOT_SUPPORTED"));
  await ref.ask({
    type: "REGISTER_BROKER",
    clusterName: "C",
    brokerName: "b",
    brokerAddr: "tcp://127.0.0.1:2",
    brokerId: 0,
    topicConfigTable,
    dataVersion: 1,
  });
  await ref.ask({ type: "UNREGISTER_BROKER", clusterName: "C", brokerName: "b", brokerAddr: "tcp://127.0.0.1:2", brokerId: 0 });
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "T" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
});

test("a broker address (or HA address) that is not tcp://host:port is refused at register and unregister, and kept out of every route", async () => {
  const ref = client.ref(ns.address, NAMESRV_ACTOR);
  const good = {
    clusterName: "C",
    brokerName: "ep",
    brokerAddr: "tcp://127.0.0.1:3",
    brokerId: 0,
    topicConfigTable: { E: { ...topicConfigTable.T, topicName: "E" } },
  };
  // clients could not connect to such an address: sends to its topics failed ILLEGAL_ARGUMENT, not retried elsewhere
  for (const brokerAddr of [
    "not-an-endpoint",
    "tcp://127.0.0.1",
    "tcp://127.0.0.1:0",
    "tcp://127.0.0.1:70000",
    "tcp://127.0.0.1:*",
    "ipc:///tmp/x",
  ]) {
    await assert.rejects(
      ref.ask({ type: "REGISTER_BROKER", ...good, brokerAddr }),
      (e) => isMQError(e, "INVALID_PARAMETER") && e.message.includes(brokerAddr) && /tcp:\/\/host:port/.test(e.message),
      brokerAddr,
    );
    await assert.rejects(ref.ask({ type: "UNREGISTER_BROKER", ...good, brokerAddr }), (e) => isMQError(e, "INVALID_PARAMETER"), brokerAddr);
  }
  await assert.rejects(ref.ask({ type: "REGISTER_BROKER", ...good, haServerAddr: "nowhere" }), (e) => isMQError(e, "INVALID_PARAMETER"));
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "E" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
  await ref.ask({ type: "REGISTER_BROKER", ...good, brokerAddr: "tcp://[::1]:3", haServerAddr: "tcp://broker-host:10912" });
  await ref.ask({ type: "UNREGISTER_BROKER", ...good, brokerAddr: "tcp://[::1]:3" });
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "E" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
});

test("a broker or cluster name brokers refuse at start (__proto__, a space, other characters) is refused at register and unregister", async () => {
  const ref = client.ref(ns.address, NAMESRV_ACTOR);
  const good = {
    clusterName: "C",
    brokerName: "nm",
    brokerAddr: "tcp://127.0.0.1:4",
    brokerId: 0,
    topicConfigTable: { N: { ...topicConfigTable.T, topicName: "N" } },
  };
  await ref.ask({ type: "REGISTER_BROKER", ...good });
  // a __proto__ cluster turned clusterAddrTable into an array on the wire, and every real cluster vanished from it
  for (const [field, bad] of [
    ["brokerName", "__proto__"],
    ["clusterName", "__proto__"],
    ["brokerName", "a b"],
    ["clusterName", "c/d"],
    ["brokerName", 5],
  ] as const) {
    for (const type of ["REGISTER_BROKER", "UNREGISTER_BROKER"])
      await assert.rejects(
        ref.ask({ type, ...good, brokerAddr: "tcp://127.0.0.1:5", [field]: bad }),
        (e) => isMQError(e, "INVALID_PARAMETER") && e.message.includes(field),
        `${type} ${field} ${bad}`,
      );
  }
  const ci = await ref.ask<{ clusterAddrTable: Record<string, string[]> }>({ type: "GET_BROKER_CLUSTER_INFO" });
  assert.deepEqual(ci.fields.clusterAddrTable, { C: ["nm"] });
  await ref.ask({ type: "UNREGISTER_BROKER", ...good });
});

test("a heartbeatTimeoutMillis that is not an integer number of ms from 1 to 2^31 - 1 is refused: that broker would never expire", async () => {
  const ref = client.ref(ns.address, NAMESRV_ACTOR);
  const good = {
    clusterName: "C",
    brokerName: "hb",
    brokerAddr: "tcp://127.0.0.1:6",
    brokerId: 0,
    topicConfigTable: { H: { ...topicConfigTable.T, topicName: "H" } },
  };
  for (const v of [Number.POSITIVE_INFINITY, 1e300, 2 ** 31, 1.5, 0, -1, Number.NaN, "120000"])
    await assert.rejects(
      ref.ask({ type: "REGISTER_BROKER", ...good, heartbeatTimeoutMillis: v }),
      (e) => isMQError(e, "INVALID_PARAMETER") && /heartbeatTimeoutMillis/.test(e.message),
      String(v),
    );
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "H" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
  await ref.ask({ type: "REGISTER_BROKER", ...good, heartbeatTimeoutMillis: 2 ** 31 - 1 });
  await ref.ask({ type: "UNREGISTER_BROKER", ...good });
});

test("a scanIntervalMs that is not a whole number of ms from 1 to 2^31 - 1 is refused before the server binds", async () => {
  // 0, NaN and negative scans fire every timer tick (a core spinning idle); a string ran out of heap
  for (const v of [0, -5, Number.NaN, 1.5, 2 ** 31, "5000"]) {
    await assert.rejects(
      NameServer.start({ listen: EPHEMERAL, scanIntervalMs: v as number, logLevel: "error" }).then((n) => n.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /scanIntervalMs/.test(e.message),
      String(v),
    );
  }
});

test("a master's registration without a topicConfigTable refreshes its liveness and keeps its topics, as RocketMQ's without a topic config wrapper", async () => {
  const ref = client.ref(ns.address, NAMESRV_ACTOR);
  const broker = { clusterName: "C", brokerName: "noTable", brokerAddr: "tcp://127.0.0.1:7", brokerId: 0 };
  const table = { NT: { topicName: "NT", readQueueNums: 2, writeQueueNums: 2, perm: 6, order: false } };
  await ref.ask({ type: "REGISTER_BROKER", ...broker, topicConfigTable: table, dataVersion: 1 });
  await ref.ask({ type: "REGISTER_BROKER", ...broker, dataVersion: 1 });
  const r = (await ref.ask<TopicRouteData>({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "NT" })).fields;
  assert.deepEqual(
    r.queueDatas.map((q) => [q.brokerName, q.writeQueueNums]),
    [["noTable", 2]],
  );
  // an empty table is a broker that has no topic left
  await ref.ask({ type: "REGISTER_BROKER", ...broker, topicConfigTable: {}, dataVersion: 2 });
  await assert.rejects(ref.ask({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "NT" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
  await ref.ask({ type: "UNREGISTER_BROKER", ...broker });
});
