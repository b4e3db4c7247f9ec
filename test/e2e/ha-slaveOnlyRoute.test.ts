import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Broker, NameServer, Producer, PushConsumer } from "../../index.ts";
import { Perm } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

test("a master stopped with its slave alive: the route lists the slave with read-only queues; a new consumer reads the backlog from the slave, a producer does not send there", async () => {
  const { dir, cleanup } = await tempDir("actormq-slave-route-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const common = { brokerName: "so", listen: EPHEMERAL, nameservers: [ns.address], flush: "async" as const };
  const master = await Broker.start({ ...common, storeDir: path.join(dir, "m") });
  const slave = await Broker.start({ ...common, brokerId: 1, role: "SLAVE", masterAddress: master.address, storeDir: path.join(dir, "s") });
  let masterOpen = true;
  const admin = await Admin.start({ nameservers: [ns.address] });
  const producer = await Producer.start({ group: "so-pg", nameservers: [ns.address], sendTimeoutMs: 1000 });
  let consumer: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "SO", readQueueNums: 2, writeQueueNums: 2 });
    const sent = new Set<string>();
    for (let i = 0; i < 10; i++) {
      await producer.send({ topic: "SO", body: `m${i}` });
      sent.add(`m${i}`);
    }
    await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "the slave holds every message");
    await master.close();
    masterOpen = false;

    const route = await waitFor(
      async () => {
        const r = await admin.topicRoute("SO");
        return r.brokerDatas[0]?.brokerAddrs["0"] === undefined ? r : undefined;
      },
      10_000,
      "the master out of the route",
    );
    assert.deepEqual(route.brokerDatas[0]!.brokerAddrs, { "1": slave.address });
    assert.equal(route.queueDatas[0]!.perm, Perm.READ, "the slave's queues are readable, not writable");

    const got = new Set<string>();
    consumer = await PushConsumer.start({
      group: "so-cg",
      nameservers: [ns.address],
      subscriptions: { SO: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs) => {
        for (const m of msgs) got.add(m.body.toString());
        return "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => got.size === sent.size, 20_000, "the backlog consumed from the slave");
    assert.deepEqual([...got].sort(), [...sent].sort());
    await assert.rejects(producer.send({ topic: "SO", body: "nowhere" }), "no writable queue: the slave is never sent to");
  } finally {
    await consumer?.close();
    await producer.close();
    await admin.close();
    await slave.close();
    if (masterOpen) await master.close();
    await ns.close();
    await cleanup();
  }
});
