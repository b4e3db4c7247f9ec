/**
 * The client's reading of a topic route (reference §17): a producer writes to writeQueueNums queues
 * of each queue data with WRITE perm on a broker that has a master, by broker name; a consumer
 * reads readQueueNums queues of each queue data with READ perm (a slave-only broker included).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { publishQueuesOf, RouteCache, routeFromDefaultTopic, subscribeQueuesOf } from "../../../actors/client/routeCache.ts";
import { type BrokerData, Perm, type TopicRouteData } from "../../../transport/protocol.ts";

const ids = (qs: { brokerName: string; queueId: number }[]) => qs.map((q) => `${q.brokerName}:${q.queueId}`);

const route: TopicRouteData = {
  queueDatas: [
    // unsorted on purpose: publish queues come by broker name
    { brokerName: "c", readQueueNums: 2, writeQueueNums: 2, perm: Perm.READ | Perm.WRITE | Perm.INHERIT },
    { brokerName: "a", readQueueNums: 1, writeQueueNums: 3, perm: Perm.READ | Perm.WRITE },
    { brokerName: "b", readQueueNums: 3, writeQueueNums: 1, perm: Perm.READ | Perm.WRITE },
    { brokerName: "ro", readQueueNums: 2, writeQueueNums: 2, perm: Perm.READ },
    { brokerName: "wo", readQueueNums: 2, writeQueueNums: 2, perm: Perm.WRITE },
    { brokerName: "slaveOnly", readQueueNums: 1, writeQueueNums: 1, perm: Perm.READ | Perm.WRITE },
  ],
  brokerDatas: ["a", "b", "c", "ro", "wo"]
    .map((brokerName): BrokerData => ({ cluster: "C", brokerName, brokerAddrs: { "0": `tcp://127.0.0.1:${brokerName.length}` } }))
    .concat([{ cluster: "C", brokerName: "slaveOnly", brokerAddrs: { "1": "tcp://127.0.0.1:9" } }]),
};

test("publish queues: writeQueueNums per writable queue data with a master, by broker name; subscribe queues: readQueueNums per readable one", () => {
  assert.deepEqual(ids(publishQueuesOf("T", route)), ["a:0", "a:1", "a:2", "b:0", "c:0", "c:1", "wo:0", "wo:1"]);
  assert.deepEqual(ids(subscribeQueuesOf("T", route)), ["c:0", "c:1", "a:0", "b:0", "b:1", "b:2", "ro:0", "ro:1", "slaveOnly:0"]);
  // the route itself is left as it came (the name server's order)
  assert.deepEqual(
    route.queueDatas.map((q) => q.brokerName),
    ["c", "a", "b", "ro", "wo", "slaveOnly"],
  );
});

test("a route for a topic not created yet takes the TBW102 brokers with at most the default queue count, READ|WRITE only", () => {
  const r = routeFromDefaultTopic(
    {
      queueDatas: [
        { brokerName: "a", readQueueNums: 8, writeQueueNums: 8, perm: Perm.INHERIT | Perm.READ | Perm.WRITE },
        { brokerName: "b", readQueueNums: 2, writeQueueNums: 2, perm: Perm.INHERIT | Perm.READ | Perm.WRITE },
      ],
      brokerDatas: route.brokerDatas,
    },
    4,
  );
  assert.deepEqual(
    r.queueDatas.map((q) => [q.brokerName, q.readQueueNums, q.writeQueueNums, q.perm]),
    [
      ["a", 4, 4, Perm.READ | Perm.WRITE],
      ["b", 2, 2, Perm.READ | Perm.WRITE],
    ],
  );
});

test("a route change that only alters perm or one queue count is a change; the same route again is not", () => {
  const cache = new RouteCache();
  assert.equal(cache.put("T", route), true);
  assert.equal(cache.put("T", structuredClone(route)), false);
  const readOnly = structuredClone(route);
  readOnly.queueDatas[1]!.perm = Perm.READ;
  assert.equal(cache.put("T", readOnly), true);
  assert.deepEqual(ids(cache.publishInfo("T")!.queues), ["b:0", "c:0", "c:1", "wo:0", "wo:1"]);
  const fewerReadQueues = structuredClone(readOnly);
  fewerReadQueues.queueDatas[2]!.readQueueNums = 1;
  assert.equal(cache.put("T", fewerReadQueues), true);
  assert.deepEqual(
    ids(cache.subscribeQueues("T")).filter((k) => k.startsWith("b:")),
    ["b:0"],
  );
  // topic names are case-sensitive
  assert.equal(cache.route("t"), undefined);
});

test("the address book keeps a broker's latest address through a prune, not an older one a kept route of a vanished topic still names", () => {
  const cache = new RouteCache();
  const at = (addrs: Record<string, string>): TopicRouteData => ({
    queueDatas: [{ brokerName: "a", readQueueNums: 1, writeQueueNums: 1, perm: Perm.READ | Perm.WRITE }],
    brokerDatas: [{ cluster: "C", brokerName: "a", brokerAddrs: addrs }],
  });
  cache.put("Y", at({ "0": "tcp://127.0.0.1:1", "1": "tcp://127.0.0.1:3" }));
  cache.put("X", at({ "0": "tcp://127.0.0.1:1", "1": "tcp://127.0.0.1:3" }));
  // broker a restarted on another port and its master later left: Y's route says so, X's route is
  // kept as it was (X is TOPIC_NOT_EXIST now: it was deleted)
  cache.put("Y", at({ "0": "tcp://127.0.0.1:2" }));
  assert.equal(cache.masterAddress("a"), "tcp://127.0.0.1:2");
  cache.pruneBrokers();
  assert.equal(cache.masterAddress("a"), "tcp://127.0.0.1:2");
  assert.equal(cache.brokerAddress("a", 1), undefined);
  cache.put("Y", at({ "1": "tcp://127.0.0.1:3" }));
  cache.pruneBrokers();
  assert.equal(cache.masterAddress("a"), undefined);
  assert.equal(cache.brokerAddress("a", 1), "tcp://127.0.0.1:3");
  // a broker no route names any more leaves the book, unless kept
  cache.delete("X");
  cache.delete("Y");
  cache.pruneBrokers(new Set(["a"]));
  assert.equal(cache.brokerAddress("a", 1), "tcp://127.0.0.1:3");
  cache.pruneBrokers();
  assert.equal(cache.brokers().size, 0);
});
