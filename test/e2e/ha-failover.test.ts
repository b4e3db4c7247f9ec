import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { Admin, Broker, type MessageExt, NameServer, Producer, PushConsumer } from "../../index.ts";
import { parseOffsetMsgId } from "../../transport/messageRecord.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killServer, type ServerChild, spawnServer, stopServer } from "./fixtures/children.ts";

// Each test waits on a kill -9, a failover and restarts far more than it computes (about 18 s of CPU
// in 36 s one after the other), with its own name server, brokers and stores: they run side by side.
describe("HA failover", { concurrency: true }, () => {
  test("kill -9 of a SYNC_MASTER while producing: every acknowledged message is consumed from the slave; after a restart the group continues with nothing lost", async () => {
    const { dir, cleanup } = await tempDir("actormq-ha-e2e-");
    const ns = await spawnServer("nameserver", { listen: EPHEMERAL, scanIntervalMs: 100 });
    const common = {
      brokerName: "hf",
      listen: EPHEMERAL,
      nameservers: [ns.address],
      flush: "sync",
      registerIntervalMs: 300,
      heartbeatTimeoutMs: 1500,
      haHoldMs: 1000,
      haReconnectMs: 200,
    };
    const masterOpts = { ...common, role: "SYNC_MASTER", storeDir: path.join(dir, "master") };
    let master: ServerChild = await spawnServer("broker", masterOpts);
    // no masterAddress: the slave finds its master through the name server, also after the master comes back on a new port
    const slave = await spawnServer("broker", { ...common, brokerId: 1, storeDir: path.join(dir, "slave") });

    // admin, producer and consumer share one client instance: the first to start sets its route polling
    const clientTiming = { nameservers: [ns.address], pollNameServerIntervalMs: 200 };
    const admin = await Admin.start(clientTiming);
    const producer = await Producer.start({ group: "hfp", ...clientTiming, sendTimeoutMs: 2000, retryTimesWhenSendFailed: 0 });
    const acked = new Set<string>();
    const consumed = new Set<string>();
    let consumedAfterKill = 0;
    let killed = false;
    let consumer: PushConsumer | undefined;
    let producing = true;
    let seq = 0;
    const produceLoop = async () => {
      while (producing) {
        const body = `m-${seq++}`;
        try {
          const r = await producer.send({ topic: "HaFail", body });
          if (r.status === "SEND_OK") acked.add(body);
        } catch {
          await new Promise((r) => setTimeout(r, 50)); // the master is down: no acknowledgement, try again shortly
        }
      }
    };
    let loop: Promise<void> | undefined;
    try {
      await admin.createTopic({ topic: "HaFail", readQueueNums: 2, writeQueueNums: 2 });
      await waitFor(
        async () => (await producer.send({ topic: "HaFail", body: "probe" }).catch(() => null))?.status === "SEND_OK",
        15_000,
        "the slave confirms sends",
      );

      consumer = await PushConsumer.start({
        group: "hfg",
        ...clientTiming,
        subscriptions: { HaFail: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        brokerSuspendMaxTimeMillis: 1000,
        persistConsumerOffsetIntervalMs: 500,
        listener: async (msgs: MessageExt[]) => {
          for (const m of msgs) {
            consumed.add(m.body.toString());
            if (killed) consumedAfterKill++;
          }
          return "CONSUME_SUCCESS";
        },
      });
      loop = produceLoop();
      await waitFor(() => acked.size >= 150 && consumed.size >= 100, 20_000, "messages produced and consumed");

      // a backlog the consumer can only read from the slave once the master is gone
      await consumer.suspend();
      const mark = acked.size;
      await waitFor(() => acked.size >= mark + 150, 20_000, "a backlog while the consumer is suspended");
      await killServer(master);
      killed = true;
      const ackedAtKill = new Set(acked);
      await consumer.resume();
      await waitFor(() => [...ackedAtKill].every((b) => consumed.has(b)), 30_000, "every acknowledged message consumed from the slave");
      assert.ok(consumedAfterKill > 0, "messages were consumed after the master died");
      producing = false;
      await loop;
      assert.deepEqual(
        [...acked].filter((b) => !consumed.has(b)),
        [],
        "nothing acknowledged is missing",
      );

      master = await spawnServer("broker", masterOpts);
      // offsets committed while the master was down (to the slave) reach the master again from the consumer
      await waitFor(
        async () => {
          // progress is read from the slave while no master is registered: wait for the master's
          if (!(await admin.clusterInfo()).brokerAddrTable.hf?.brokerAddrs["0"]) return false;
          const progress = (await admin.consumerProgress("hfg").catch(() => [])).filter((q) => q.topic === "HaFail");
          return progress.length === 2 && progress.every((q) => q.lag === 0 && q.brokerOffset > 0);
        },
        15_000,
        "the restarted master holds the offsets consumed from the slave",
      );
      producing = true;
      const beforeRestart = acked.size;
      loop = produceLoop();
      await waitFor(() => acked.size >= beforeRestart + 100, 30_000, "sends acknowledged by the restarted master and its slave");
      producing = false;
      await loop;
      await waitFor(() => [...acked].every((b) => consumed.has(b)), 30_000, "every acknowledged message consumed after the restart");
    } finally {
      producing = false;
      await loop;
      await consumer?.close();
      await producer.close();
      await admin.close();
      await stopServer(slave);
      await stopServer(master);
      await stopServer(ns);
      await cleanup();
    }
  });

  test("kill -9 of a master with default broker timings: a consumer reads the backlog from the slave within seconds, not once the name server drops the master (120 s)", async () => {
    const { dir, cleanup } = await tempDir("actormq-ha-k9-");
    const ns = await spawnServer("nameserver", { listen: EPHEMERAL });
    // default registration and expiry (heartbeatTimeoutMs 120 s): the route lists the dead master for two minutes
    const common = { brokerName: "k9", listen: EPHEMERAL, nameservers: [ns.address], flush: "sync" };
    const master = await spawnServer("broker", { ...common, role: "SYNC_MASTER", storeDir: path.join(dir, "master") });
    const slave = await spawnServer("broker", { ...common, brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "slave") });
    const clientTiming = { nameservers: [ns.address], pollNameServerIntervalMs: 1000 };
    const admin = await Admin.start(clientTiming);
    const producer = await Producer.start({ group: "k9p", ...clientTiming, retryTimesWhenSendFailed: 0 });
    const got = new Set<string>();
    let consumer: PushConsumer | undefined;
    try {
      await admin.createTopic({ topic: "K9", readQueueNums: 2, writeQueueNums: 2 });
      await waitFor(
        async () => (await producer.send({ topic: "K9", body: "warm" }).catch(() => null))?.status === "SEND_OK",
        15_000,
        "the slave confirms sends",
      );
      consumer = await PushConsumer.start({
        group: "k9g",
        ...clientTiming,
        subscriptions: { K9: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs: MessageExt[]) => {
          for (const m of msgs) got.add(m.body.toString());
          return "CONSUME_SUCCESS";
        },
      });
      await waitFor(() => got.has("warm"), 20_000, "warm-up consumed");
      await consumer.suspend();
      // SYNC_MASTER: SEND_OK means the slave holds the message
      for (let i = 0; i < 20; i++) assert.equal((await producer.send({ topic: "K9", body: `b${i}` })).status, "SEND_OK");
      await killServer(master);
      const t0 = Date.now();
      await consumer.resume();
      await waitFor(() => got.size >= 21, 30_000, "the backlog consumed from the slave", 200);
      const took = Date.now() - t0;
      assert.ok(took < 30_000, `consumed from the slave ${took} ms after the kill`);
    } finally {
      await consumer?.close();
      await producer.close();
      await admin.close();
      await stopServer(slave);
      await stopServer(ns);
      await cleanup();
    }
  });

  test("kill -9 of a master still registered: admin lookups and consumer progress read its slave, also from an admin that never reached the master", async () => {
    const { dir, cleanup } = await tempDir("actormq-ha-admin-");
    // default expiry: the killed master stays registered for the whole test
    const ns = await NameServer.start({ listen: EPHEMERAL });
    const common = { brokerName: "ka", listen: EPHEMERAL, nameservers: [ns.address], flush: "async" };
    const master = await spawnServer("broker", { ...common, storeDir: path.join(dir, "master") });
    const slave = await Broker.start({
      ...common,
      brokerId: 1,
      role: "SLAVE",
      masterAddress: master.address,
      storeDir: path.join(dir, "slave"),
      slaveSyncIntervalMs: 200,
    } as never);
    const admin = await Admin.start({ nameservers: [ns.address] });
    const producer = await Producer.start({ group: "ka-pg", nameservers: [ns.address] });
    let fresh: Admin | undefined;
    try {
      await admin.createTopic({ topic: "KA", readQueueNums: 1, writeQueueNums: 1 });
      const r = await producer.send({ topic: "KA", body: "hello", keys: "k1" });
      let consumed = 0;
      const consumer = await PushConsumer.start({
        group: "ka-cg",
        nameservers: [ns.address],
        subscriptions: { KA: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs) => {
          consumed += msgs.length;
          return "CONSUME_SUCCESS";
        },
      });
      await waitFor(() => consumed >= 1, 10_000, "the message consumed");
      await consumer.close();
      await waitFor(
        () =>
          slave.store.maxPhyOffset > parseOffsetMsgId(r.offsetMsgId).commitLogOffset &&
          consumerOffsetsOf(slave.ctx).queryOffset("ka-cg", "KA", 0) === 1,
        10_000,
        "the slave holds the message and the group's offset",
      );
      // the admin has talked to the master: it sees its connection lost
      assert.equal((await admin.consumerProgress("ka-cg")).find((q) => q.topic === "KA")?.lag, 0);

      await killServer(master);
      assert.ok((await admin.clusterInfo()).brokerAddrTable.ka?.brokerAddrs["0"], "the killed master is still registered");
      fresh = await Admin.start({ nameservers: [ns.address] });
      for (const a of [admin, fresh]) {
        assert.deepEqual(
          (await a.queryMessageByKey("KA", "k1")).map((m) => m.body.toString()),
          ["hello"],
        );
        assert.equal((await a.viewMessage(r.offsetMsgId))?.body.toString(), "hello");
        assert.equal((await a.viewMessage(r.msgId))?.body.toString(), "hello");
        const progress = (await a.consumerProgress("ka-cg")).filter((q) => q.topic === "KA");
        assert.deepEqual(
          progress.map((q) => [q.brokerName, q.queueId, q.brokerOffset, q.consumerOffset, q.lag]),
          [["ka", 0, 1, 1, 0]],
        );
      }
    } finally {
      await fresh?.close();
      await producer.close();
      await admin.close();
      await killServer(master);
      await slave.close();
      await ns.close();
      await cleanup();
    }
  });
});
