import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import type { Broker } from "../../actors/broker/broker.ts";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { Admin, curveKeyPair, NameServer, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { ConsumptionActorFor, isMQError } from "../../transport/protocol.ts";
import { freePort } from "../e2e/fixtures/tcpProxy.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

test("startLocalCluster runs a name server and two brokers; Admin.createTopic reaches every master", async () => {
  const { dir, cleanup } = await tempDir();
  const cluster = await startLocalCluster({ brokers: 2, dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const producer = await Producer.start({ group: "lc", nameservers: cluster.nameservers });
  try {
    assert.equal(cluster.brokers.length, 2);
    const info = await admin.clusterInfo();
    assert.deepEqual(info.clusterAddrTable, { DefaultCluster: ["broker-a", "broker-b"] });
    await admin.createTopic({ topic: "Everywhere", readQueueNums: 2, writeQueueNums: 2 });
    const route = await admin.topicRoute("Everywhere");
    assert.deepEqual(
      route.queueDatas.map((q) => [q.brokerName, q.writeQueueNums]),
      [
        ["broker-a", 2],
        ["broker-b", 2],
      ],
    );
    assert.ok((await admin.topicList()).includes("Everywhere"));
    const brokers = new Set<string>();
    for (let i = 0; i < 8; i++) brokers.add((await producer.send({ topic: "Everywhere", body: `m${i}` })).queue.brokerName);
    assert.deepEqual([...brokers].sort(), ["broker-a", "broker-b"]);
  } finally {
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("Admin.createTopic without brokers skips a broker name whose master is down; named, it is refused; an empty list is ILLEGAL_ARGUMENT", async () => {
  const { dir, cleanup } = await tempDir();
  const cluster = await startLocalCluster({ brokers: 2, slavesPerBroker: 1, dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  try {
    await cluster.brokers.find((b) => b.brokerName === "broker-b" && b.ctx.config.brokerId === 0)!.close();
    await waitFor(async () => {
      const b = (await admin.clusterInfo()).brokerAddrTable["broker-b"];
      return b && !b.brokerAddrs["0"];
    });
    const created = await admin.createTopic({ topic: "MastersOnly", readQueueNums: 2, writeQueueNums: 2 });
    assert.equal(created.length, 1);
    const route = await admin.topicRoute("MastersOnly");
    assert.deepEqual(
      route.queueDatas.map((q) => q.brokerName),
      ["broker-a"],
    );
    await assert.rejects(
      admin.createTopic({ topic: "Named", brokers: ["broker-a", "broker-b"] }),
      (e) => isMQError(e, "NO_ROUTE") && /broker-b has no live master/.test(e.message),
    );
    // an empty list names no broker: not "no broker is registered", which is untrue
    await assert.rejects(
      admin.createTopic({ topic: "Named", brokers: [] }),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /names no broker/.test(e.message),
    );
    // no live master at all: a reset says so instead of an empty answer; progress is asked of the
    // slaves, which answer (here: they do not know the group), not an empty table either
    await cluster.brokers.find((b) => b.brokerName === "broker-a" && b.ctx.config.brokerId === 0)!.close();
    await waitFor(async () => !(await admin.clusterInfo()).brokerAddrTable["broker-a"]?.brokerAddrs["0"]);
    await assert.rejects(
      admin.resetOffsetByTimestamp("g", "MastersOnly", 0),
      (e) => isMQError(e, "NO_ROUTE") && /No broker has a live master/.test(e.message),
    );
    await assert.rejects(admin.consumerProgress("g"), (e) => isMQError(e, "SUBSCRIPTION_GROUP_NOT_EXIST"));
  } finally {
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("startLocalCluster whose broker store directory is a file in the way fails ILLEGAL_ARGUMENT naming it, not a raw fs error", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const file = path.join(dir, "broker-a");
  writeFileSync(file, "not a directory");
  for (const d of [dir, file]) {
    // under a file: mkdir fails ENOTDIR instead of EEXIST
    await assert.rejects(
      startLocalCluster({ dir: d, nameserver: { logLevel: "silent" }, broker: { logLevel: "silent" } }).then((c) => c.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && e.message.includes(path.join(d, "broker-a")) && /not a directory/.test(e.message),
      d,
    );
  }
});

test("Admin consumer progress against name servers with no broker: NO_ROUTE, not an empty table", async () => {
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const admin = await Admin.start({ nameservers: [ns.address] });
  try {
    for (const query of [() => admin.consumerProgress("g"), () => admin.examineConsumeStats("g")]) {
      await assert.rejects(
        query(),
        (e) => isMQError(e, "NO_ROUTE") && /No broker is registered with the name servers: start a broker first/.test(e.message),
      );
    }
  } finally {
    await admin.close();
    await ns.close();
  }
});

test("Admin.createTopic updating a topic with one queue count keeps the other: write queues shrink first, the rest stay readable and drain", async () => {
  const { dir, cleanup } = await tempDir();
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const producer = await Producer.start({ group: "lc", nameservers: cluster.nameservers });
  const broker = cluster.brokers[0]!;
  let consumer: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "Shrink", readQueueNums: 4, writeQueueNums: 4 });
    const queues = new Set<number>();
    for (let i = 0; i < 8; i++) queues.add((await producer.send({ topic: "Shrink", body: `m${i}` })).queue.queueId);
    assert.deepEqual([...queues].sort(), [0, 1, 2, 3]);
    // step 1 of RocketMQ's scale-down: stop writing queues 2 and 3, keep reading them
    await admin.createTopic({ topic: "Shrink", writeQueueNums: 2 });
    const counts = (cfg: { readQueueNums: number; writeQueueNums: number } | undefined) => [cfg?.readQueueNums, cfg?.writeQueueNums];
    assert.deepEqual(counts((await admin.brokerTopicConfigs(broker.address)).Shrink), [4, 2]);
    assert.deepEqual(counts((await admin.topicRoute("Shrink")).queueDatas[0]), [4, 2]);
    const seen = new Set<string>();
    consumer = await PushConsumer.start({
      group: "shrinkGroup",
      nameservers: cluster.nameservers,
      subscriptions: { Shrink: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs) => {
        for (const m of msgs) seen.add(m.body.toString());
        return "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => seen.size === 8, 10_000, "the 8 messages, queues 2-3 included");
    // the other way round: read queues given alone keep the write queues
    await admin.createTopic({ topic: "Shrink", readQueueNums: 2 });
    assert.deepEqual(counts((await admin.brokerTopicConfigs(broker.address)).Shrink), [2, 2]);
    // a new topic given one count gets it for both; given none, the default 8
    assert.deepEqual(counts((await admin.createTopic({ topic: "NewOne", writeQueueNums: 3 }))[0]), [3, 3]);
    assert.deepEqual(counts((await admin.createTopic({ topic: "NewNone" }))[0]), [8, 8]);
    // Broker.createTopic merges the same way (a new topic given none gets defaultQueueNums)
    assert.deepEqual(counts(await broker.createTopic({ topic: "NewOne", readQueueNums: 5 })), [5, 3]);
    assert.deepEqual(counts(await broker.createTopic({ topic: "ByBroker", writeQueueNums: 1 })), [1, 1]);
    assert.deepEqual(counts(await broker.createTopic({ topic: "ByBrokerNone" })), [4, 4]);
  } finally {
    await consumer?.close();
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("a broker whose master is down: consumer progress reads its slave; a reset fails SERVICE_NOT_AVAILABLE naming it and resets nothing; a slave refuses a reset", async () => {
  const { dir, cleanup } = await tempDir();
  const cluster = await startLocalCluster({
    brokers: 2,
    slavesPerBroker: 1,
    dir,
    broker: { flush: "async", registerIntervalMs: 300, heartbeatTimeoutMs: 1500, slaveSyncIntervalMs: 200 } as never,
  });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const producer = await Producer.start({ group: "lc", nameservers: cluster.nameservers });
  const find = (name: string, id: number) => cluster.brokers.find((b) => b.brokerName === name && b.ctx.config.brokerId === id)!;
  try {
    await admin.createTopic({ topic: "Half", readQueueNums: 2, writeQueueNums: 2 });
    for (let i = 0; i < 20; i++) await producer.send({ topic: "Half", body: `m${i}` });
    let consumed = 0;
    const consumer = await PushConsumer.start({
      group: "halfGroup",
      nameservers: cluster.nameservers,
      subscriptions: { Half: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs) => {
        consumed += msgs.length;
        return "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => consumed >= 20, 10_000, "the 20 messages consumed");
    await consumer.close();
    // broker-a's slave copied the group's offsets: they equal its master's
    const committed = (b: Broker) => [0, 1].map((q) => consumerOffsetsOf(b.ctx).queryOffset("halfGroup", "Half", q));
    const before = committed(find("broker-a", 0));
    assert.ok(before.every((o) => o > 0));
    await waitFor(() => committed(find("broker-a", 1)).join() === before.join(), 10_000, "offsets copied to broker-a's slave");
    await find("broker-a", 0).close();
    await waitFor(async () => {
      const a = (await admin.topicRoute("Half")).brokerDatas.find((bd) => bd.brokerName === "broker-a");
      return a && !a.brokerAddrs["0"] && a.brokerAddrs["1"];
    });
    const progress = (await admin.consumerProgress("halfGroup")).filter((p) => p.topic === "Half");
    assert.deepEqual(
      progress.map((p) => [p.brokerName, p.queueId, p.consumerOffset, p.lag]),
      [
        ["broker-a", 0, before[0], 0],
        ["broker-a", 1, before[1], 0],
        ["broker-b", 0, progress[2]?.brokerOffset, 0],
        ["broker-b", 1, progress[3]?.brokerOffset, 0],
      ],
    );
    await assert.rejects(
      admin.resetOffsetByTimestamp("halfGroup", "Half", 0),
      (e) => isMQError(e, "SERVICE_NOT_AVAILABLE") && /broker-a/.test(e.message) && /nothing was reset/.test(e.message),
    );
    const b = consumerOffsetsOf(find("broker-b", 0).ctx);
    assert.ok(
      [0, 1].every((q) => !b.hasPendingReset("halfGroup", "Half", q)),
      "broker-b was not reset",
    );
    await assert.rejects(
      admin.instance
        .refAt(find("broker-a", 1).address, ConsumptionActorFor.INVOKE_BROKER_TO_RESET_OFFSET)
        .ask({ type: "INVOKE_BROKER_TO_RESET_OFFSET", topic: "Half", group: "halfGroup", timestamp: 0, isForce: true }),
      (e) => isMQError(e, "NO_PERMISSION") && /Can not reset offset in slave broker/.test(e.message),
    );
  } finally {
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("resetOffsetByTimestamp of a broadcasting group is refused, with its members online or all gone: they keep their offsets locally", async () => {
  const { dir, cleanup } = await tempDir();
  const cluster = await startLocalCluster({ brokers: 2, dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers, instanceName: "admin" });
  const producer = await Producer.start({ group: "lc", nameservers: cluster.nameservers, instanceName: "producer" });
  const members: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "Everyone", readQueueNums: 2, writeQueueNums: 2 });
    for (let i = 0; i < 10; i++) await producer.send({ topic: "Everyone", body: `m${i}` });
    const counts = [0, 0];
    for (const k of [0, 1])
      members.push(
        await PushConsumer.start({
          group: "bcastGroup",
          nameservers: cluster.nameservers,
          instanceName: `member${k}`,
          model: "BROADCASTING",
          offsetStoreDir: path.join(dir, `offsets${k}`),
          subscriptions: { Everyone: "*" },
          consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
          listener: async (msgs) => {
            counts[k]! += msgs.length;
            return "CONSUME_SUCCESS";
          },
        }),
      );
    await waitFor(() => counts.every((c) => c >= 10), 10_000, "both members got the 10 messages");
    const refused = (e: unknown) => isMQError(e, "NO_PERMISSION") && /broadcasting/.test(e.message) && /offsets\.json\.bak/.test(e.message);
    await assert.rejects(admin.resetOffsetByTimestamp("bcastGroup", "Everyone", 0), refused, "members online");
    // all gone: a reset answered to the first member back would move it alone
    while (members.length > 0) await members.pop()!.close();
    await assert.rejects(admin.resetOffsetByTimestamp("bcastGroup", "Everyone", 0), refused, "members offline");
    for (const b of cluster.brokers)
      assert.ok(
        [0, 1].every((q) => !consumerOffsetsOf(b.ctx).hasPendingReset("bcastGroup", "Everyone", q)),
        `${b.brokerName} made no pending reset`,
      );
  } finally {
    for (const m of members) await m.close();
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("startLocalCluster with nameserver.curve and broker.curve: every server uses CURVE, brokers and slaves link with the servers' keys; a plaintext client is refused", async () => {
  const { dir, cleanup } = await tempDir();
  const nsKeys = curveKeyPair();
  const brokerKeys = curveKeyPair();
  // with a slave, CURVE on the name server alone (or the brokers alone) cannot work: refused before anything starts
  await assert.rejects(
    startLocalCluster({ dir, slavesPerBroker: 1, nameserver: { curve: { secretKey: nsKeys.secretKey } } }),
    (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /nameserver\.curve with slavesPerBroker needs broker\.curve too/.test(e.message),
  );
  // two key pairs: the brokers' links need the name server's key there and the master's key there
  const cluster = await startLocalCluster({
    dir,
    slavesPerBroker: 1,
    nameserver: { curve: { secretKey: nsKeys.secretKey } },
    broker: { flush: "async", curve: { secretKey: brokerKeys.secretKey } },
  });
  const [master, slave] = cluster.brokers as [Broker, Broker];
  const curveServerKey = {
    [cluster.nameservers[0]!]: nsKeys.publicKey,
    [master.address]: brokerKeys.publicKey,
    [slave.address]: brokerKeys.publicKey,
  };
  const plain = await Producer.start({ group: "lc-plain", nameservers: cluster.nameservers, instanceName: "plain" });
  const producer = await Producer.start({ group: "lc-curve", nameservers: cluster.nameservers, curveServerKey });
  const got: string[] = [];
  const consumer = await PushConsumer.start({
    group: "lc-curve-cg",
    nameservers: cluster.nameservers,
    curveServerKey,
    subscriptions: { LocalCurve: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) got.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await assert.rejects(
      plain.send({ topic: "LocalCurve", body: "plain" }),
      (e) => isMQError(e, "AUTH_FAILED") && /requires CURVE/.test(e.message),
    );
    for (let i = 0; i < 10; i++) assert.equal((await producer.send({ topic: "LocalCurve", body: `m${i}` })).status, "SEND_OK");
    await waitFor(() => got.length >= 10, 30_000, `all 10 consumed (${got.length})`);
    assert.deepEqual([...new Set(got)].sort(), Array.from({ length: 10 }, (_, i) => `m${i}`).sort());
    await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 15_000, "the slave replicated over CURVE");
    assert.ok(master.store.maxPhyOffset > 0);
  } finally {
    await consumer.close();
    await producer.close();
    await plain.close();
    await cluster.close();
    await cleanup();
  }
});

test("startLocalCluster refuses broker and nameserver options that are not an options object, or name a per-broker option, with ILLEGAL_ARGUMENT", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const bad: [string, Record<string, unknown>, RegExp][] = [
    // spread into every broker's options, a string would be options "0", "1", ...
    ["broker", { broker: "async" }, /^startLocalCluster's broker takes an options object \{ .*flush/],
    ["broker", { broker: ["flush", "async"] }, /^startLocalCluster's broker takes an options object .* got an array/],
    ["broker", { broker: null }, /^startLocalCluster's broker takes an options object/],
    [
      "nameserver",
      { nameserver: "silent" },
      /^startLocalCluster's nameserver takes an options object \{ scanIntervalMs, logLevel, curve \}/,
    ],
    // the cluster names and places each broker itself; a fixed metrics port would be bound by every broker
    ["broker", { broker: { brokerName: "mine" } }, /^startLocalCluster's broker has no option "brokerName"/],
    ["broker", { broker: { storeDir: dir } }, /^startLocalCluster's broker has no option "storeDir"/],
    [
      "broker",
      { brokers: 2, broker: { metricsListen: "127.0.0.1:9" } },
      /^broker\.metricsListen 127\.0\.0\.1:9 has a fixed port, but 2 brokers/,
    ],
    ["broker", { broker: { flushMode: "async" } }, /^startLocalCluster's broker has no option "flushMode"/],
    [
      "nameserver",
      { nameserver: { scanInterval: 100 } },
      /^startLocalCluster's nameserver has no option "scanInterval" \(did you mean "scanIntervalMs"\?\)/,
    ],
  ];
  for (const [what, opts, message] of bad)
    await assert.rejects(
      startLocalCluster({ dir, ...opts } as never).then(async (c) => {
        await c.close();
        assert.fail(`started with ${what} ${JSON.stringify(opts)}`);
      }),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && message.test(e.message),
      JSON.stringify(opts),
    );
  // tuning options of the brokers' parts pass, and metricsListen with port 0 for several brokers
  const cluster = await startLocalCluster({
    dir,
    brokers: 2,
    broker: { flush: "async", lockMaxLiveTimeMs: 30_000, holdCheckIntervalMs: 500, metricsListen: "127.0.0.1:0" },
  });
  try {
    const urls = cluster.brokers.map((b) => b.metrics?.url);
    assert.equal(new Set(urls).size, 2, `each broker serves its own metrics: ${urls}`);
    const text = await (await fetch(urls[0]!)).text();
    assert.match(text, /^# (HELP|TYPE) /m);
  } finally {
    await cluster.close();
  }
});

test("startLocalCluster's broker.listen is bound by its brokers; a fixed port several brokers would bind is refused", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const port = await freePort();
  const one = await startLocalCluster({ dir: path.join(dir, "one"), broker: { flush: "async", listen: `tcp://127.0.0.1:${port}` } });
  try {
    assert.equal(one.brokers[0]!.address, `tcp://127.0.0.1:${port}`);
  } finally {
    await one.close();
  }
  // every broker binds it: a fixed port would be taken by the first only
  for (const opts of [{ brokers: 2 }, { slavesPerBroker: 1 }])
    await assert.rejects(
      startLocalCluster({ dir: path.join(dir, "two"), ...opts, broker: { flush: "async", listen: `tcp://127.0.0.1:${port}` } }).then(
        async (c) => {
          await c.close();
          assert.fail("started");
        },
      ),
      (e) =>
        isMQError(e, "ILLEGAL_ARGUMENT") &&
        /^broker\.listen tcp:\/\/127\.0\.0\.1:\d+ has a fixed port, but 2 brokers bind it/.test(e.message),
      JSON.stringify(opts),
    );
  // brokerListen takes the first broker, broker.listen (port *) the others, slaves included
  const two = await startLocalCluster({
    dir: path.join(dir, "three"),
    brokers: 2,
    slavesPerBroker: 1,
    brokerListen: `tcp://127.0.0.1:${port}`,
    broker: { flush: "async", listen: "tcp://127.0.0.1:*" },
  });
  try {
    const addrs = two.brokers.map((b) => b.address);
    assert.equal(addrs[0], `tcp://127.0.0.1:${port}`);
    assert.equal(new Set(addrs).size, 4);
  } finally {
    await two.close();
  }
});
