import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Producer } from "../../actors/client/index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killServer, type ServerChild, spawnServer, stopServer } from "./fixtures/children.ts";

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
