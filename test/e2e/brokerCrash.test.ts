import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { Admin, Broker, isMQError, NameServer, Producer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killServer, type ServerChild, spawnServer, stopServer } from "./fixtures/children.ts";

// The two tests wait on request timeouts and a restart far more than they compute, each with its own
// name server, brokers and store: they run side by side.
describe("broker crash", { concurrency: true }, () => {
  test("kill -9 of one broker while sending: sends keep succeeding, the dead broker leaves the route, a restart brings it back", async (t) => {
    const { dir, cleanup } = await tempDir();
    // children started so far are stopped whatever fails (a failed start must not leave the file hanging)
    const children: ServerChild[] = [];
    t.after(async () => {
      for (const c of children.reverse()) await stopServer(c);
      await cleanup();
    });
    const started = async (...args: Parameters<typeof spawnServer>) => {
      const c = await spawnServer(...args);
      children.push(c);
      return c;
    };
    const ns = await started("nameserver", { listen: EPHEMERAL, scanIntervalMs: 100 });
    const brokerOpts = (name: string) => ({
      brokerName: name,
      listen: EPHEMERAL,
      nameservers: [ns.address],
      storeDir: path.join(dir, name),
      flush: "sync",
      registerIntervalMs: 300,
      heartbeatTimeoutMs: 1500,
    });
    await started("broker", brokerOpts("broker-a"));
    let b: ServerChild = await started("broker", brokerOpts("broker-b"));
    const producer = await Producer.start({
      group: "crash",
      nameservers: [ns.address],
      pollNameServerIntervalMs: 200,
      notAvailableDuration: [0, 0, 200, 300, 300, 300, 500],
    });
    const admin = await Admin.start({ nameservers: [ns.address] });
    const failures: unknown[] = [];
    const landed: string[] = [];
    let running = true;
    const senders = Array.from({ length: 4 }, async () => {
      while (running) {
        try {
          const r = await producer.send({ topic: "Crash", body: "x" });
          landed.push(r.queue.brokerName);
        } catch (e) {
          failures.push(e);
        }
      }
    });
    const countSince = (mark: number, name: string) => landed.slice(mark).filter((n) => n === name).length;
    try {
      await admin.createTopic({ topic: "Crash", readQueueNums: 4, writeQueueNums: 4 });
      await waitFor(() => countSince(0, "broker-a") > 20 && countSince(0, "broker-b") > 20, 10_000, "sends on both brokers");

      await killServer(b);
      const afterKill = landed.length;
      await waitFor(() => countSince(afterKill, "broker-a") > 100, 15_000, "sends continuing on broker-a");
      await waitFor(
        async () => !(await admin.topicRoute("Crash")).queueDatas.some((q) => q.brokerName === "broker-b"),
        10_000,
        "broker-b dropped from the route",
      );
      await waitFor(
        async () => !(await producer.fetchPublishQueues("Crash")).some((q) => q.brokerName === "broker-b"),
        5_000,
        "producer route without broker-b",
      );
      const afterExpiry = landed.length;
      await waitFor(() => landed.length - afterExpiry > 200, 10_000, "sends after expiry");
      assert.equal(countSince(afterExpiry, "broker-b"), 0, "the dead broker is not chosen once its route expired");

      b = await started("broker", brokerOpts("broker-b"));
      const afterRestart = landed.length;
      await waitFor(() => countSince(afterRestart, "broker-b") > 20, 15_000, "sends on the restarted broker-b");
      assert.deepEqual(failures, [], "every send succeeded within the retry budget");
    } finally {
      running = false;
      await Promise.all(senders);
      await producer.close();
      await admin.close();
    }
  });

  test("kill -9 of a broker still registered: viewMessage of a message on a live broker finds it; consumer progress names the broker that did not answer", async () => {
    const { dir, cleanup } = await tempDir();
    // default expiry: the killed broker stays in the name server's table for the whole test
    const ns = await NameServer.start({ listen: EPHEMERAL });
    const a = await Broker.start({
      brokerName: "broker-a",
      listen: EPHEMERAL,
      nameservers: [ns.address!],
      storeDir: path.join(dir, "a"),
      flush: "async",
    });
    const b = await spawnServer("broker", {
      brokerName: "broker-b",
      listen: EPHEMERAL,
      nameservers: [ns.address],
      storeDir: path.join(dir, "b"),
      flush: "async",
    });
    const admin = await Admin.start({ nameservers: [ns.address!] });
    const producer = await Producer.start({ group: "dead-pg", nameservers: [ns.address!] });
    try {
      await admin.createTopic({ topic: "OnA", brokers: ["broker-a"], readQueueNums: 1, writeQueueNums: 1 });
      await admin.createTopic({ topic: "OnBoth", readQueueNums: 1, writeQueueNums: 1 });
      const r = await producer.send({ topic: "OnA", body: "on broker-a" });
      let consumed = 0;
      const consumer = await PushConsumer.start({
        group: "dead-cg",
        nameservers: [ns.address!],
        subscriptions: { OnA: "*", OnBoth: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs) => {
          consumed += msgs.length;
          return "CONSUME_SUCCESS";
        },
      });
      for (const q of await producer.fetchPublishQueues("OnBoth"))
        await producer.send({ topic: "OnBoth", body: "both" }, { selector: () => q });
      await waitFor(() => consumed >= 3, 10_000, "the messages consumed");
      await consumer.close();
      const onA = () => consumerOffsetsOf(a.ctx).offsetsOf("dead-cg", "OnBoth")?.get(0);
      assert.equal(onA(), 1);

      await killServer(b);
      assert.ok((await admin.clusterInfo()).brokerAddrTable["broker-b"], "the killed broker is still registered");
      // the offset msg id names broker-a's address: broker-b is not asked
      assert.equal((await admin.viewMessage(r.offsetMsgId))?.body.toString(), "on broker-a");
      assert.equal((await admin.viewMessage(r.msgId))?.body.toString(), "on broker-a");
      // an id naming no registered broker: every broker is asked, and one down does not fail the others' "none"
      assert.equal(await admin.viewMessage(`0A0000FE00002710${r.offsetMsgId.slice(16)}`), null);
      // progress cannot leave broker-b's queues out unsaid: the error names it
      await assert.rejects(
        admin.consumerProgress("dead-cg"),
        (e) => isMQError(e, "TIMEOUT") && e.message.includes("broker-b") && e.message.includes(b.address),
      );
      // a reset needs every master: refused before anything is reset, not broker-a's offsets moved alone
      await assert.rejects(
        admin.resetOffsetByTimestamp("dead-cg", "OnBoth", 0),
        (e) => isMQError(e, "SERVICE_NOT_AVAILABLE") && e.message.includes("broker-b") && /nothing was reset/.test(e.message),
      );
      assert.equal(onA(), 1, "broker-a's offset not moved");
    } finally {
      await killServer(b);
      await producer.close();
      await admin.close();
      await a.close();
      await ns.close();
      await cleanup();
    }
  });
});
