import assert from "node:assert/strict";
import path from "node:path";
import { type TestContext, test } from "node:test";
import { Admin, Broker, isMQError, type MQError, NameServer, Producer, PushConsumer } from "../../index.ts";
import { Perm } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

/**
 * A name server, a master of broker `name` and its slave, an admin and a producer (1 s send
 * timeout), closed after the test; `stopMaster()` closes the master.
 */
async function masterWithSlave(t: TestContext, name: string) {
  const { dir, cleanup } = await tempDir(`actormq-${name}-`);
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const common = { brokerName: name, listen: EPHEMERAL, nameservers: [ns.address], flush: "async" as const };
  const master = await Broker.start({ ...common, storeDir: path.join(dir, "m") });
  const slave = await Broker.start({ ...common, brokerId: 1, role: "SLAVE", masterAddress: master.address, storeDir: path.join(dir, "s") });
  let masterOpen = true;
  const admin = await Admin.start({ nameservers: [ns.address] });
  const producer = await Producer.start({ group: `${name}-pg`, nameservers: [ns.address], sendTimeoutMs: 1000 });
  t.after(async () => {
    await producer.close();
    await admin.close();
    await slave.close();
    if (masterOpen) await master.close();
    await ns.close();
    await cleanup();
  });
  const stopMaster = async () => {
    await master.close();
    masterOpen = false;
  };
  return { ns, master, slave, admin, producer, stopMaster };
}

test("a master stopped with its slave alive: the route lists the slave with read-only queues; a new consumer reads the backlog from the slave, a producer does not send there", async (t) => {
  const { ns, master, slave, admin, producer, stopMaster } = await masterWithSlave(t, "so");
  let consumer: PushConsumer | undefined;
  t.after(() => consumer?.close());
  await admin.createTopic({ topic: "SO", readQueueNums: 2, writeQueueNums: 2 });
  const sent = new Set<string>();
  for (let i = 0; i < 10; i++) {
    await producer.send({ topic: "SO", body: `m${i}` });
    sent.add(`m${i}`);
  }
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "the slave holds every message");
  await stopMaster();

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
});

test("a send while the topic's only master is down and its slave still listed is NO_ROUTE naming the broker without a master, not a permission to change", async (t) => {
  const { admin, producer, stopMaster } = await masterWithSlave(t, "md");
  await admin.createTopic({ topic: "MD", readQueueNums: 2, writeQueueNums: 2 });
  await producer.send({ topic: "MD", body: "before" });
  await stopMaster();
  await waitFor(
    async () => (await admin.topicRoute("MD")).brokerDatas[0]?.brokerAddrs["0"] === undefined,
    10_000,
    "the master out of the route",
  );
  // a send on the producer's old route fails on the lost connection and refreshes the route
  const e = await waitFor(
    () =>
      producer.send({ topic: "MD", body: "while down" }).then(
        () => assert.fail("sent with no master"),
        (err: unknown) => (/connection/.test((err as Error).message) ? undefined : err),
      ),
    10_000,
    "a send refused on the new route",
  );
  assert.ok(isMQError(e, "NO_ROUTE"), String(e));
  assert.equal((e as MQError).retriable, true, "sends resume once the master registers");
  assert.match((e as Error).message, /no master/);
  assert.match((e as Error).message, /\bmd\b/, "names the broker");
  assert.doesNotMatch((e as Error).message, /change its perm/, "the topic's perm is not the problem");
});
