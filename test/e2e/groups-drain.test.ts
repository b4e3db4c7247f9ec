/**
 * Operating groups and brokers at runtime: a group's members as the brokers list them; a broker
 * drained by making it read only (UPDATE_BROKER_CONFIG brokerPermission 4), which producers leave
 * without failing a send and without isolating it, while consumers still read what it holds, and
 * which a restart keeps; a group whose consumption is disabled stops, logs once, and resumes once
 * enabled again.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { CLIENT_VERSION } from "../../actors/client/clientInstance.ts";
import type { LatencyFaultTolerance } from "../../actors/client/faultTolerance.ts";
import { pullLog } from "../../actors/client/pullService.ts";
import { Admin, Broker, NameServer, Producer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

test("members are listed with their fields; a broker drained read only is left by producers without errors or isolation, still consumed, and stays read only over a restart", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-drain-");
  const closers: (() => Promise<unknown>)[] = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
    await cleanup();
  });
  const ns = await NameServer.start({ listen: EPHEMERAL });
  closers.push(() => ns.close());
  const nameservers = [ns.address];
  const startA = (listen = EPHEMERAL) => Broker.start({ brokerName: "broker-a", listen, nameservers, storeDir: path.join(dir, "a") });
  let brokerA = await startA();
  closers.push(() => brokerA.close());
  const brokerB = await Broker.start({ brokerName: "broker-b", listen: EPHEMERAL, nameservers, storeDir: path.join(dir, "b") });
  closers.push(() => brokerB.close());
  const admin = await Admin.start({ nameservers });
  closers.push(() => admin.close());
  await admin.createTopic({ topic: "Drain", readQueueNums: 4, writeQueueNums: 4 });
  const permOf = async (broker: string) => (await admin.topicRoute("Drain")).queueDatas.find((q) => q.brokerName === broker)?.perm;

  const producer = await Producer.start({ group: "pg-drain", nameservers });
  closers.push(() => producer.close());
  const before = new Set<string>();
  for (let i = 0; i < 20; i++) before.add((await producer.send({ topic: "Drain", body: `before-${i}` })).queue.brokerName);
  assert.deepEqual([...before].sort(), ["broker-a", "broker-b"]);

  // every outcome the producer records for its fault strategy
  const faults = (producer as unknown as { faults: LatencyFaultTolerance }).faults;
  const outcomes: { broker: string; isolation: boolean }[] = [];
  const update = faults.update.bind(faults);
  faults.update = (broker, latency, isolation) => {
    outcomes.push({ broker, isolation });
    update(broker, latency, isolation);
  };

  assert.deepEqual(await admin.updateBrokerConfig("broker-a", { brokerPermission: 4 }), {
    updated: { brokerPermission: 4 },
    previous: { brokerPermission: 6 },
  });
  assert.equal(await permOf("broker-a"), 4, "routed read only at once");
  // the producer's cached route still names broker-a writable: its sends there are refused and retried on broker-b
  for (let i = 0; i < 40; i++) {
    const r = await producer.send({ topic: "Drain", body: `after-${i}` });
    assert.equal(r.status, "SEND_OK");
    assert.equal(r.queue.brokerName, "broker-b", `send ${i} went to ${r.queue.brokerName}`);
  }
  const onA = outcomes.filter((o) => o.broker === "broker-a");
  assert.ok(onA.length >= 1, "some send tried broker-a (NO_PERMISSION) before the route was refreshed");
  assert.deepEqual(
    onA.filter((o) => o.isolation),
    [],
    "a read-only broker is not isolated",
  );
  assert.ok(faults.isAvailable("broker-a"));

  // consumers still read the drained broker: everything sent, before and after
  const got = new Set<string>();
  const consumer = await PushConsumer.start({
    group: "cg-drain",
    nameservers,
    subscriptions: { Drain: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) got.add(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  closers.push(() => consumer.close());
  await waitFor(() => got.size === 60, 20_000, "all 60 messages consumed");

  const info = await admin.examineConsumerConnectionInfo("cg-drain");
  assert.equal(info.group, "cg-drain");
  assert.equal(info.connections.length, 1);
  const [member] = info.connections;
  assert.match(member!.clientId, new RegExp(`@${process.pid}@`));
  assert.match(member!.clientAddr, /^\d+\.\d+\.\d+\.\d+:0$/);
  assert.equal(member!.language, "NODE");
  assert.equal(member!.version, CLIENT_VERSION);
  assert.ok(Math.abs(Date.now() - member!.lastUpdateTimestamp) < 60_000, "last heartbeat is recent wall-clock time");
  assert.deepEqual(member!.brokers.sort(), ["broker-a", "broker-b"]);
  assert.equal(info.consumeType, "CONSUME_PASSIVELY");
  assert.equal(info.messageModel, "CLUSTERING");
  assert.equal(info.consumeFromWhere, "CONSUME_FROM_FIRST_OFFSET");
  assert.equal(info.subscriptions.Drain?.subString, "*");
  assert.ok((await admin.groupList()).some((g) => g.group === "cg-drain" && Object.keys(g.configs).length === 2));

  // a restart keeps the permission set at runtime
  await consumer.close();
  const addrA = brokerA.address;
  await brokerA.close();
  brokerA = await startA(addrA);
  assert.equal((await admin.brokerConfig("broker-a")).brokerConfig.brokerPermission, 4);
  assert.equal(await permOf("broker-a"), 4);
  await admin.updateBrokerConfig("broker-a", { brokerPermission: 6 });
  assert.equal(await permOf("broker-a"), 6);
});

test("a group whose consumption is disabled stops with one log line; enabled again, it resumes", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-groupoff-");
  const closers: (() => Promise<unknown>)[] = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
    await cleanup();
  });
  const ns = await NameServer.start({ listen: EPHEMERAL });
  closers.push(() => ns.close());
  const nameservers = [ns.address];
  const broker = await Broker.start({ brokerName: "broker-a", listen: EPHEMERAL, nameservers, storeDir: dir });
  closers.push(() => broker.close());
  const admin = await Admin.start({ nameservers });
  closers.push(() => admin.close());
  await admin.createTopic({ topic: "Off", readQueueNums: 4, writeQueueNums: 4 });
  const producer = await Producer.start({ group: "pg-off", nameservers });
  closers.push(() => producer.close());

  const warnings: string[] = [];
  t.mock.method(pullLog(), "warn", (_f: object, msg: string) => void warnings.push(msg));
  const got: string[] = [];
  const consumer = await PushConsumer.start({
    group: "cg-off",
    nameservers,
    subscriptions: { Off: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) got.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  closers.push(() => consumer.close());
  await producer.send({ topic: "Off", body: "first" });
  await waitFor(() => got.length === 1, 15_000, "the first message consumed");

  const updated = await admin.updateSubscriptionGroup({ groupName: "cg-off", consumeEnable: false });
  assert.deepEqual(
    updated.map((u) => [u.brokerName, u.config.consumeEnable]),
    [["broker-a", false]],
  );
  for (let i = 0; i < 8; i++) await producer.send({ topic: "Off", body: `held-${i}` });
  // the held pulls are woken by the arrivals and refused; then each queue is retried every 3 s
  const stats = consumer.pullService.stats;
  const errors0 = stats.errors;
  await waitFor(() => stats.errors >= errors0 + 8, 15_000, "every queue's pull refused twice (retried after 3 s)");
  assert.deepEqual(got, ["first"], "nothing consumed while disabled");
  const refusals = warnings.filter((w) => /NO_PERMISSION/.test(w));
  assert.equal(refusals.length, 1, `one line for the group's four queues, got:\n${refusals.join("\n")}`);
  assert.match(refusals[0]!, /Pulls of group cg-off are refused with NO_PERMISSION by broker broker-a/);
  assert.match(refusals[0]!, /consumption is disabled/);

  await admin.updateSubscriptionGroup({ groupName: "cg-off", consumeEnable: true });
  await waitFor(() => got.length === 9, 15_000, "the held messages consumed once enabled");
  assert.deepEqual(got.slice(1).sort(), [...Array(8).keys()].map((i) => `held-${i}`).sort());
});
