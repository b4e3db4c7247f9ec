import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { consumerTableOf } from "../../../actors/broker/consumerManager.ts";
import { haClientOf } from "../../../actors/broker/haClient.ts";
import { suggestPullingFromSlave } from "../../../actors/broker/haTuning.ts";
import { findBrokerAddressInSubscribe } from "../../../actors/client/pullService.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { PushConsumer } from "../../../index.ts";
import { BrokerActor, type PullMessageReply, PullSysFlag, type SendMessageReply } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../../helpers.ts";

let ns: NameServer;
let raw: ActorNode;
let master: Broker;
let slave: Broker;
let cleanup: () => Promise<void>;

/** 40 % of this "memory" is 40 000 bytes: a consumer that far behind reads from the slave. */
const MEMORY = 100_000;

before(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir("actormq-ha-read-"));
  ns = await NameServer.start({ listen: EPHEMERAL });
  raw = await ActorNode.start({ listen: null });
  const common = {
    brokerName: "hr",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    flush: "async",
    slaveReadEnable: true,
    physicalMemoryBytes: MEMORY,
  };
  master = await Broker.start({ ...common, storeDir: path.join(dir, "m") } as never);
  slave = await Broker.start({ ...common, brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "s") } as never);
  for (let i = 0; i < 100; i++) {
    const r = await raw
      .ref(master.address, BrokerActor.BROKER)
      .ask<SendMessageReply>(
        { type: "SEND_MESSAGE", producerGroup: "pg", topic: "Slow", queueId: 0, sysFlag: 0, bornTimestamp: Date.now() },
        { body: Buffer.alloc(1000, i) },
      );
    assert.equal(r.fields.status, "SEND_OK");
  }
  await waitFor(
    () => slave.store.maxPhyOffset === master.store.maxPhyOffset && slave.ctx.topics.get("Slow"),
    10_000,
    "slave caught up with the topic",
  );
});
after(async () => {
  await slave.close();
  await master.close();
  await raw.close();
  await ns.close();
  await cleanup();
});

function pull(b: Broker, queueOffset: number, queueId = 0): Promise<PullMessageReply> {
  return raw
    .ref(b.address, BrokerActor.PULL)
    .ask<PullMessageReply>({
      type: "PULL_MESSAGE",
      consumerGroup: "slowGroup",
      topic: "Slow",
      queueId,
      queueOffset,
      maxMsgNums: 4,
      sysFlag: PullSysFlag.SUBSCRIPTION,
      commitOffset: 0,
      suspendTimeoutMillis: 0,
      subscription: "*",
      subVersion: 0,
      expressionType: "TAG",
    })
    .then((r) => r.fields);
}

test("the 40 % rule: a pull far behind the log's end is told to use the slave (whichBrokerWhenConsumeSlowly = 1); one near the end stays on the master", async () => {
  const behind = await pull(master, 0);
  assert.equal(behind.status, "SUCCESS");
  assert.equal(behind.suggestWhichBrokerId, 1, "more than 40 000 bytes behind");
  const near = await pull(master, 90);
  assert.equal(near.status, "SUCCESS");
  assert.equal(near.suggestWhichBrokerId, 0, "less than 40 000 bytes behind");
});

test("the rule itself: behind by more than ratio × memory, never for an empty result", () => {
  const t = { accessMessageInMemoryMaxRatio: 40, physicalMemoryBytes: 1000 };
  assert.equal(suggestPullingFromSlave(1000, 599, t), true);
  assert.equal(suggestPullingFromSlave(1000, 600, t), false);
  assert.equal(suggestPullingFromSlave(1000, -1, t), false);
});

test("a slave serves pulls of what it replicated, and never moves the consumer's offset", async () => {
  const found = await pull(slave, 10);
  assert.equal(found.status, "SUCCESS");
  assert.equal(found.messageCount, 4);
  assert.equal(found.nextBeginOffset, 14);
  const tooFar = await pull(slave, 500);
  assert.equal(tooFar.status, "PULL_RETRY_IMMEDIATELY", "OFFSET_MOVED on a slave becomes a retry");
  assert.equal(tooFar.nextBeginOffset, 500, "the offset stays where the consumer had it");
  assert.equal(tooFar.suggestWhichBrokerId, 0, "and it is sent back to the master");
});

test("a slave with its master online sends a pull it has no messages for back to the master at once, not held (PULL_RETRY_IMMEDIATELY)", async () => {
  await waitFor(() => haClientOf(slave.ctx).status.connected, 10_000, "slave connected to its master");
  const t0 = Date.now();
  const r = await raw
    .ref(slave.address, BrokerActor.PULL)
    .ask<PullMessageReply>({
      type: "PULL_MESSAGE",
      consumerGroup: "slowGroup",
      topic: "Slow",
      queueId: 0,
      queueOffset: 100,
      maxMsgNums: 4,
      sysFlag: PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND,
      commitOffset: 0,
      suspendTimeoutMillis: 5_000,
      subscription: "*",
      subVersion: 0,
      expressionType: "TAG",
    })
    .then((x) => x.fields);
  assert.ok(Date.now() - t0 < 2_000, "answered without holding the pull");
  assert.deepEqual([r.status, r.suggestWhichBrokerId, r.nextBeginOffset], ["PULL_RETRY_IMMEDIATELY", 0, 100]);
});

test("client broker choice: the suggested broker, else the master, else any slave", () => {
  const book: Record<string, Record<string, string>> = { a: { "0": "m", "1": "s1" }, b: { "2": "s2" } };
  const host = { brokerAddress: (name: string, id = 0) => book[name]?.[String(id)] };
  assert.deepEqual(findBrokerAddressInSubscribe(host, "a", 1), { addr: "s1", brokerId: 1 });
  assert.deepEqual(findBrokerAddressInSubscribe(host, "a", 3), { addr: "m", brokerId: 0 });
  assert.deepEqual(findBrokerAddressInSubscribe(host, "b", 0), { addr: "s2", brokerId: 2 }, "master down: a slave");
  assert.equal(findBrokerAddressInSubscribe(host, "c", 0), undefined);

  // a master whose connection is lost (killed, still in the route): a reachable slave of its name
  const down = new Set(["m"]);
  const watching = { ...host, isBrokerUnreachable: (addr: string) => down.has(addr) };
  assert.deepEqual(findBrokerAddressInSubscribe(watching, "a", 0), { addr: "s1", brokerId: 1 }, "master unreachable: its slave");
  assert.deepEqual(findBrokerAddressInSubscribe(watching, "a", 1), { addr: "s1", brokerId: 1 });
  down.add("s1");
  assert.deepEqual(findBrokerAddressInSubscribe(watching, "a", 0), { addr: "m", brokerId: 0 }, "none reachable: the usual choice");
  assert.deepEqual(findBrokerAddressInSubscribe(watching, "a", 1), { addr: "s1", brokerId: 1 });
  down.clear();
  down.add("s1");
  assert.deepEqual(
    findBrokerAddressInSubscribe(watching, "a", 1),
    { addr: "m", brokerId: 0 },
    "the suggested slave unreachable: the master",
  );
});

test("a consumer that closes is removed from the slave's consumer table as from the master's (it heartbeats to both), not left there until expiry", async () => {
  const consumer = await PushConsumer.start({
    group: "leaving-cg",
    nameservers: [ns.address],
    subscriptions: { Slow: "*" },
    listener: async () => "CONSUME_SUCCESS",
  });
  const members = (b: Broker) => consumerTableOf(b.ctx).group("leaving-cg")?.clients.size ?? 0;
  try {
    await waitFor(() => members(master) === 1 && members(slave) === 1, 15_000, "the consumer registered on master and slave");
  } finally {
    await consumer.close();
  }
  assert.equal(members(master), 0, "the master forgot the closed consumer");
  assert.equal(members(slave), 0, "the slave forgot the closed consumer");
});
