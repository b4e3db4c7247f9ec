import assert from "node:assert/strict";
import { it } from "node:test";
import * as zmq from "zeromq";
import { Broker } from "../../../actors/broker/broker.ts";
import { consumerTableOf } from "../../../actors/broker/consumerManager.ts";
import { ClientInstance } from "../../../actors/client/clientInstance.ts";
import { consumerHostOf } from "../../../actors/client/pushConsumer.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { Admin, Producer, PushConsumer } from "../../../index.ts";
import { monotonicNow } from "../../../transport/clock.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { PEER_EXPIRY_MS } from "../../../transport/zmqNode.ts";
import { EPHEMERAL, tempDir, waitFor } from "../../helpers.ts";

it("an acquire made while the last holder releases gets a live instance, not the closing one", async (t) => {
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  t.after(() => ns.close());
  const opts = { nameservers: [ns.address] };
  const first = await ClientInstance.acquire(opts);
  const second = ClientInstance.acquire(opts); // a restart: the new client starts, then the old one closes
  const released = first.release();
  const inst = await second;
  await released;
  try {
    assert.ok(first.closed);
    assert.notEqual(inst, first);
    assert.equal(inst.closed, false);
    assert.equal(inst.node.transport.isClosed, false);
    const info = await inst.clusterInfo();
    assert.deepEqual(info.brokerAddrTable, {});
    // and the registry hands the live one to the next acquire
    const third = await ClientInstance.acquire(opts);
    assert.equal(third, inst);
    await third.release();
  } finally {
    await inst.release();
  }
});

it("a route already learned survives a name server that restarted and knows no topic yet", async () => {
  const { dir, cleanup } = await tempDir();
  let ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const addr = ns.address;
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [addr],
    storeDir: dir,
    flush: "async",
    logLevel: "silent",
  });
  const inst = await ClientInstance.acquire({ nameservers: [addr] });
  try {
    await broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
    assert.equal((await inst.updateRoute("T"))?.queues.length, 2);
    // the broker, closed meanwhile, does not register with the restarted name server, which answers TOPIC_NOT_EXIST
    await ns.close();
    await broker.close();
    // the same port again; another process on this machine may hold it for a moment
    ns = await waitFor(
      () => NameServer.start({ listen: addr, logLevel: "silent" }).catch(() => null),
      20_000,
      "the name server back on its port",
    );
    await assert.rejects(inst.askNameserver({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "T" }), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
    await inst.refreshAllRoutes();
    assert.equal(inst.routes.publishInfo("T")?.queues.length, 2, "the periodic refresh kept the route");
    assert.equal(inst.routes.subscribeQueues("T").length, 2);
    assert.equal(inst.routes.masterAddress("broker-a"), broker.address, "and its broker's address");
    assert.equal((await inst.updateRoute("T"))?.queues.length, 2, "a consumer's route query gets the cached route");
    assert.equal((await inst.updateRoute("T", true))?.queues.length, 2, "a producer's refresh after a failed send too");
    // a topic that never had a route is still unknown
    assert.equal(await inst.updateRoute("Never"), undefined);
    assert.equal(inst.routes.publishInfo("Never"), undefined);
  } finally {
    await inst.release();
    await broker.close();
    await ns.close();
    await cleanup();
  }
});

it("a name server address with a port above 65535 is refused at start (libzmq would connect to port mod 65536)", async () => {
  const nameservers = ["tcp://127.0.0.1:9876", "tcp://127.0.0.1:75412"];
  const refused = (e: unknown) =>
    isMQError(e, "ILLEGAL_ARGUMENT") && /nameservers.*tcp:\/\/127\.0\.0\.1:75412.*port/.test((e as Error).message);
  await assert.rejects(ClientInstance.acquire({ nameservers }), refused);
  await assert.rejects(Producer.start({ group: "pg", nameservers }), refused);
  await assert.rejects(Admin.start({ nameservers }), refused);
});

it("a heartbeat skips a broker whose routed address has no valid port instead of rejecting (an unhandled rejection in its timer)", async () => {
  const inst = await ClientInstance.acquire({ nameservers: ["tcp://127.0.0.1:9"] });
  try {
    inst.routes.put("T", {
      queueDatas: [{ brokerName: "bad", readQueueNums: 1, writeQueueNums: 1, perm: 6 }],
      brokerDatas: [{ cluster: "c", brokerName: "bad", brokerAddrs: { "0": "tcp://127.0.0.1:0" } }],
    } as never);
    const remove = inst.addHeartbeatSource(() => ({
      consumerData: [
        {
          groupName: "g",
          consumeType: "CONSUME_PASSIVELY",
          messageModel: "CLUSTERING",
          consumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
          subscriptionDataSet: [],
        },
      ],
    }));
    await inst.sendHeartbeatToAllBrokers();
    remove();
  } finally {
    await inst.release();
  }
});

it("unregistering a consumer skips a routed broker address ref() cannot connect to instead of rejecting (PushConsumer.close() rejected)", async () => {
  const inst = await ClientInstance.acquire({ nameservers: ["tcp://127.0.0.1:9"] });
  try {
    inst.routes.put("T", {
      queueDatas: [{ brokerName: "bad", readQueueNums: 1, writeQueueNums: 1, perm: 6 }],
      brokerDatas: [{ cluster: "c", brokerName: "bad", brokerAddrs: { "0": "not-an-endpoint", "1": "tcp://127.0.0.1:0" } }],
    } as never);
    // ref() threw inside the map, before the per-address catch
    await consumerHostOf(inst).unregisterConsumer("g");
  } finally {
    await inst.release();
  }
});

it("a push consumer's route look-up of a topic no name server knows names the command that creates it", async (t) => {
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  t.after(() => ns.close());
  const inst = await ClientInstance.acquire({ nameservers: [ns.address] });
  try {
    await assert.rejects(
      consumerHostOf(inst).fetchSubscribeQueues("it's"),
      (e: unknown) =>
        isMQError(e, "TOPIC_NOT_EXIST") &&
        /^Topic it's has no route; create it with `actormq topic create 'it'\\''s'`/.test((e as Error).message),
    );
  } finally {
    await inst.release();
  }
});

it("client timer options that are not an integer from 1 to 2^31 - 1 ms are refused at acquire, naming the option", async () => {
  // 0, NaN, negative or string intervals became setInterval's 1 ms: a heartbeat or route poll every millisecond
  const nameservers = ["tcp://127.0.0.1:1"];
  for (const name of ["heartbeatBrokerIntervalMs", "pollNameServerIntervalMs", "requestTimeoutMs"]) {
    for (const v of [0, -1, Number.NaN, 1.5, 2 ** 31, "30000"]) {
      await assert.rejects(
        ClientInstance.acquire({ nameservers, instanceName: `iv-${name}`, [name]: v }).then((i) => i.release()),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && e.message.startsWith(name),
        `${name}: ${String(v)}`,
      );
    }
  }
  // and every client kind goes through it
  await assert.rejects(Producer.start({ group: "pgIv", nameservers, heartbeatBrokerIntervalMs: 0 }), (e) =>
    isMQError(e, "ILLEGAL_ARGUMENT"),
  );
  await assert.rejects(Admin.start({ nameservers, pollNameServerIntervalMs: -1 }), (e) => isMQError(e, "ILLEGAL_ARGUMENT"));
});

it("Admin.start and ClientInstance.acquire without an options object are refused with ILLEGAL_ARGUMENT", async () => {
  for (const options of [undefined, null]) {
    await assert.rejects(Admin.start(options as never), (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /nameservers/.test(e.message));
    await assert.rejects(
      ClientInstance.acquire(options as never),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /nameservers/.test(e.message),
    );
  }
});

it("a name server that refuses connections is passed over at once: a fresh producer's first send does not wait out the request timeout", async (t) => {
  const { dir, cleanup } = await tempDir();
  const down = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  await down.close(); // as if its process died: connections to it are refused
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async",
    logLevel: "silent",
  });
  t.after(async () => {
    await broker.close();
    await ns.close();
    await cleanup();
  });
  await broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
  for (let i = 0; i < 3; i++) {
    const p = await Producer.start({ group: "pgNsDown", nameservers: [down.address, ns.address], instanceName: `nsDown${i}` });
    try {
      // the closed one first, its connection never tried before
      const inst = p.clientInstance as unknown as { nsIndex: number };
      inst.nsIndex = 0;
      let t0 = performance.now();
      assert.equal((await p.send({ topic: "T", body: `m${i}` })).status, "SEND_OK");
      const first = performance.now() - t0;
      assert.ok(
        first < 1_000,
        `producer ${i}: the first send took ${Math.round(first)} ms (request timeout 3000 ms, sendTimeoutMs 3000 ms)`,
      );
      // now its connection is known to be refused: asked last
      inst.nsIndex = 0;
      t0 = performance.now();
      await p.clientInstance.askNameserver({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "T" });
      const again = performance.now() - t0;
      assert.ok(again < 1_000, `producer ${i}: a later look-up took ${Math.round(again)} ms`);
    } finally {
      await p.close();
    }
  }
});

it("a topic the name server asked first does not know (it just restarted) is asked of the others before it counts as not existing", async (t) => {
  const { dir, cleanup } = await tempDir();
  // a name server that restarted knows no topic until each broker's next registration (up to 30 s)
  const empty = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async",
    logLevel: "silent",
  });
  t.after(async () => {
    await broker.close();
    await ns.close();
    await empty.close();
    await cleanup();
  });
  await broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
  const nameservers = [empty.address, ns.address];
  const p = await Producer.start({ group: "pgNsEmpty", nameservers, instanceName: "nsEmpty" });
  try {
    const inst = p.clientInstance;
    (inst as unknown as { nsIndex: number }).nsIndex = 0;
    const r = await p.send({ topic: "T", body: "m" });
    assert.equal(r.status, "SEND_OK");
    assert.equal(r.queue.brokerName, "broker-a");
    assert.equal(inst.routes.isProvisional("T"), false, "the topic's own route, not one built from TBW102's");
    // a consumer's route look-up too
    (inst as unknown as { nsIndex: number }).nsIndex = 0;
    inst.routes.delete("T");
    assert.equal((await inst.updateRoute("T"))?.queues.length, 2);
    // a topic no name server knows is still unknown
    (inst as unknown as { nsIndex: number }).nsIndex = 0;
    assert.equal(await inst.updateRoute("Never"), undefined);
  } finally {
    await p.close();
  }
  // once one answered TOPIC_NOT_EXIST, a name server that refuses connections is not waited for
  const down = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  await down.close();
  const inst = await ClientInstance.acquire({ nameservers: [ns.address, down.address], instanceName: "nsEmptyDown" });
  try {
    (inst as unknown as { nsIndex: number }).nsIndex = 0;
    const t0 = performance.now();
    assert.equal(await inst.updateRoute("Never"), undefined);
    const took = performance.now() - t0;
    assert.ok(took < 1_000, `the look-up took ${Math.round(took)} ms (request timeout 3000 ms)`);
  } finally {
    await inst.release();
  }
  // one that takes the connection and does not answer is waited for once, not at every new topic
  const silent = new zmq.Router({ linger: 0 });
  await silent.bind(EPHEMERAL);
  const hung = await ClientInstance.acquire({
    nameservers: [ns.address, silent.lastEndpoint!],
    instanceName: "nsEmptyHung",
    requestTimeoutMs: 1_000,
  });
  try {
    const lookUp = async (topic: string) => {
      (hung as unknown as { nsIndex: number }).nsIndex = 0;
      const t0 = performance.now();
      assert.equal(await hung.updateRoute(topic), undefined);
      return performance.now() - t0;
    };
    const first = await lookUp("Never1");
    assert.ok(first >= 900, `the first look-up took ${Math.round(first)} ms: the silent name server was not asked`);
    for (const topic of ["Never2", "Never3"]) {
      const took = await lookUp(topic);
      assert.ok(took < 500, `a later look-up took ${Math.round(took)} ms (request timeout 1000 ms)`);
    }
  } finally {
    await hung.release();
    silent.close();
  }
});

it("Admin.topicRoute asks the other name servers when the one asked first does not know the topic (it just restarted)", async (t) => {
  const { dir, cleanup } = await tempDir();
  const empty = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async",
    logLevel: "silent",
  });
  t.after(async () => {
    await broker.close();
    await ns.close();
    await empty.close();
    await cleanup();
  });
  await broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
  const admin = await Admin.start({ nameservers: [empty.address, ns.address], instanceName: "adminNsEmpty" });
  try {
    (admin.instance as unknown as { nsIndex: number }).nsIndex = 0;
    const route = await admin.topicRoute("T");
    assert.deepEqual(
      route.queueDatas.map((q) => [q.brokerName, q.writeQueueNums]),
      [["broker-a", 2]],
    );
    (admin.instance as unknown as { nsIndex: number }).nsIndex = 0;
    await assert.rejects(admin.topicRoute("Never"), (e) => isMQError(e, "TOPIC_NOT_EXIST"));
  } finally {
    await admin.close();
  }
});

it("when no name server answers, the error names each of them", async () => {
  const a = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const b = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  await a.close();
  await b.close();
  const inst = await ClientInstance.acquire({ nameservers: [a.address, b.address], instanceName: "nsAllDown", requestTimeoutMs: 500 });
  try {
    await assert.rejects(
      inst.askNameserver({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "T" }),
      (e) =>
        isMQError(e, "TIMEOUT") &&
        e.message.includes(a.address) &&
        e.message.includes(b.address) &&
        /No name server answered GET_ROUTEINFO_BY_TOPIC/.test(e.message),
    );
  } finally {
    await inst.release();
  }
});

it("a consumer of many topics heartbeats a bounded number of times at start, and once for many routes changed together", async (t) => {
  // one full heartbeat (every subscription) per topic whose route was learned: O(topics²) bytes at start
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async",
    logLevel: "silent",
  });
  const opts = { nameservers: [ns.address], instanceName: "hbStorm", heartbeatBrokerIntervalMs: 600_000 };
  const inst = await ClientInstance.acquire(opts);
  let c: PushConsumer | undefined;
  t.after(async () => {
    await c?.close();
    await inst.release();
    await broker.close();
    await ns.close();
    await cleanup();
  });
  const topics = Array.from({ length: 60 }, (_, i) => `HbStorm${i}`);
  for (const topic of topics) await broker.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  let heartbeats = 0;
  const send = inst.sendHeartbeatToAllBrokers.bind(inst);
  inst.sendHeartbeatToAllBrokers = () => {
    heartbeats++;
    return send();
  };
  c = await PushConsumer.start({
    ...opts,
    group: "cgHbStorm",
    rebalanceIntervalMs: 600_000,
    subscriptions: Object.fromEntries(topics.map((topic) => [topic, "*"])),
    listener: async () => "CONSUME_SUCCESS",
  });
  // and the group's retry topic's queue
  await waitFor(() => c!.assignment().length === topics.length + 1, 10_000, "every queue held");
  assert.ok(heartbeats <= 4, `${heartbeats} heartbeats at start for ${topics.length} topics`);

  // every route changes at once (a broker joining or leaving): one heartbeat, then one rebalance
  const rebalancer = (c as unknown as { rebalancer: { rounds: number } }).rebalancer;
  const rounds = rebalancer.rounds;
  heartbeats = 0;
  for (const topic of topics) (inst as unknown as { routeChanged(t: string): void }).routeChanged(topic);
  await waitFor(() => rebalancer.rounds > rounds, 10_000, "a rebalance after the route changes");
  assert.equal(heartbeats, 1, `${heartbeats} heartbeats for ${topics.length} routes changed in one tick`);
});

it("Producer.close() and Admin.close() called twice at once: the second resolves only once the first did (every socket released)", async () => {
  // nothing listens there: neither client sends anything
  const nameservers = ["tcp://127.0.0.1:1"];
  const producer = await Producer.start({ group: "pgTwiceClosed", nameservers, instanceName: "twiceClosedP" });
  const admin = await Admin.start({ nameservers, instanceName: "twiceClosedA" });
  for (const [name, client, node] of [
    ["Producer", producer, producer.clientInstance.node],
    ["Admin", admin, admin.instance.node],
  ] as const) {
    const order: string[] = [];
    const first = client.close().then(() => order.push("first"));
    const second = client.close().then(() => order.push(node.transport.isClosed ? "second" : "second, sockets still open"));
    await Promise.all([first, second]);
    assert.deepEqual(order, ["first", "second"], name);
  }
  await assert.rejects(producer.send({ topic: "T", body: "x" }), (e) => isMQError(e, "CLOSED"));
  await assert.rejects(admin.clusterInfo(), (e) => isMQError(e, "CLOSED"));
});

it("a consumer stops heartbeating a broker of a vanished topic unreachable for PEER_EXPIRY_MS, so its link is closed; a route naming it again resumes them", async (t) => {
  // a long-lived consumer while brokers come and go: each dead broker of a topic the name servers no
  // longer know (its route is kept) held a socket, 3 fds and a reconnect every second, forever
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  const brokerOpts = {
    brokerName: "broker-x",
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async" as const,
    logLevel: "silent" as const,
  };
  let broker = await Broker.start({ ...brokerOpts, listen: EPHEMERAL });
  const address = broker.address;
  const inst = await ClientInstance.acquire({ nameservers: [ns.address], instanceName: "hbGone", heartbeatBrokerIntervalMs: 600_000 });
  const transport = inst.node.transport as unknown as { peers: Map<string, unknown>; forgetIdlePeers(now?: number): void };
  const removeSource = inst.addHeartbeatSource(() => ({
    consumerData: [
      {
        groupName: "cgHbGone",
        consumeType: "CONSUME_PASSIVELY",
        messageModel: "CLUSTERING",
        consumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
        subscriptionDataSet: [],
      },
    ],
  }));
  t.after(async () => {
    removeSource();
    await inst.release();
    await broker.close();
    await ns.close();
    await cleanup();
  });
  await broker.createTopic({ topic: "X", readQueueNums: 1, writeQueueNums: 1 });
  assert.equal((await inst.updateRoute("X"))?.queues.length, 1);
  await inst.sendHeartbeatToAllBrokers();
  assert.ok(consumerTableOf(broker.ctx).group("cgHbGone"), "the broker heard the heartbeat");

  await broker.close(); // unregisters: the name server no longer knows X, the client keeps its route
  await inst.refreshAllRoutes();
  assert.equal(inst.routes.masterAddress("broker-x"), address, "the route kept");
  await waitFor(() => inst.node.peerUnreachable(address), 10_000, "the closed connection noticed");
  await inst.sendHeartbeatToAllBrokers();
  assert.ok(transport.peers.has(address), "unreachable for less than PEER_EXPIRY_MS: still heartbeated");

  const later = monotonicNow() + PEER_EXPIRY_MS + 10_000;
  await inst.sendHeartbeatToAllBrokers(later);
  // once the heartbeat sent while it was unreachable less long has left the link's queue (its send
  // waits on the socket until that ask's deadline, which a loaded machine may pass late)
  await waitFor(
    () => {
      transport.forgetIdlePeers(later + PEER_EXPIRY_MS);
      return !transport.peers.has(address);
    },
    10_000,
    "the link closed",
  );
  await inst.sendHeartbeatToAllBrokers();
  await inst.refreshAllRoutes();
  await inst.sendHeartbeatToAllBrokers();
  assert.ok(!transport.peers.has(address), "no heartbeat opened it again");

  // a broker back at that address, which the name server names again: heartbeats resume
  broker = await waitFor(() => Broker.start({ ...brokerOpts, listen: address }).catch(() => null), 20_000, "the broker back on its port");
  await broker.createTopic({ topic: "X", readQueueNums: 1, writeQueueNums: 1 });
  await inst.refreshAllRoutes();
  await inst.sendHeartbeatToAllBrokers();
  assert.ok(consumerTableOf(broker.ctx).group("cgHbGone"), "the broker back heard the heartbeat");
});
