/**
 * A broker that could not read a send before its producer gave up (TIMEOUT) does not store it when
 * it reads it later: the producer has failed the send, and may have sent it again. Here the broker
 * process is frozen (SIGSTOP) while the send waits in its socket buffers, as an overloaded broker's
 * backlog waits.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Producer } from "../../actors/client/index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import { isMQError } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { type ServerChild, spawnServer, stopServer } from "./fixtures/children.ts";

test("a send that timed out while the broker was frozen is not stored when the broker resumes", async (t) => {
  const { dir, cleanup } = await tempDir();
  const children: ServerChild[] = [];
  t.after(async () => {
    for (const c of children.reverse()) {
      c.child.kill("SIGCONT");
      await stopServer(c);
    }
    await cleanup();
  });
  const ns = await spawnServer("nameserver", { listen: EPHEMERAL });
  children.push(ns);
  const broker = await spawnServer("broker", {
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: path.join(dir, "a"),
  });
  children.push(broker);
  let brokerOut = "";
  broker.child.stdout!.on("data", (d: Buffer) => {
    brokerOut += d.toString();
  });
  // one client instance (same name servers and instance name): both producers send on one connection,
  // so the broker reads the marker after the frozen send
  const producer = await Producer.start({ group: "frozen", nameservers: [ns.address] });
  const hasty = await Producer.start({ group: "frozenHasty", nameservers: [ns.address], sendTimeoutMs: 1000, retryTimesWhenSendFailed: 0 });
  const admin = await Admin.start({ nameservers: [ns.address] });
  t.after(async () => {
    await admin.close();
    await hasty.close();
    await producer.close();
  });
  await admin.createTopic({ topic: "Frozen", readQueueNums: 1, writeQueueNums: 1 });
  await admin.createTopic({ topic: "Warm", readQueueNums: 1, writeQueueNums: 1 });
  await waitFor(async () => (await hasty.fetchPublishQueues("Frozen")).length === 1, 10_000, "the route of Frozen");
  // the connection has carried requests that waited nowhere: the broker knows its quickest lag
  for (let i = 0; i < 3; i++) await producer.send({ topic: "Warm", body: `warm ${i}` });

  broker.child.kill("SIGSTOP");
  const sentAt = monotonicNow();
  try {
    await assert.rejects(hasty.send({ topic: "Frozen", body: "late" }), (e: unknown) => isMQError(e, "TIMEOUT"));
    // the asker gave up a while ago by the time the broker reads the send
    await waitFor(() => monotonicNow() - sentAt >= 1100, 5000, "the send to be 100 ms past its timeout");
  } finally {
    broker.child.kill("SIGCONT");
  }
  const marker = await producer.send({ topic: "Frozen", body: "marker" });
  assert.equal(marker.queueOffset, 0, "the timed-out send was not stored before the marker (the topic held nothing)");
  await waitFor(() => /overloaded: requests are dropped unserved/.test(brokerOut), 5000, "the broker's warning");
  const line = JSON.parse(brokerOut.split("\n").find((l) => l.includes("dropped unserved"))!) as Record<string, unknown>;
  assert.equal(line.dropped, 1);
  assert.equal(line.event, "SEND_MESSAGE");
  assert.ok((line.timeoutMs as number) > 900 && (line.timeoutMs as number) <= 1000, `timeoutMs ${line.timeoutMs}`);
});
