import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Producer, type SendResult } from "../../actors/client/index.ts";
import { MessageStore } from "../../store/index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { EPHEMERAL, tempDir } from "../helpers.ts";
import { spawnServer, stopServer } from "./fixtures/children.ts";

test("10 000 messages over 8 queues of two broker processes are stored as sent", async () => {
  const { dir, cleanup } = await tempDir();
  const ns = await spawnServer("nameserver", { listen: EPHEMERAL });
  const brokers = await Promise.all(
    ["a", "b"].map((name) =>
      spawnServer("broker", {
        brokerName: `broker-${name}`,
        listen: EPHEMERAL,
        nameservers: [ns.address],
        storeDir: path.join(dir, name),
        flush: "async",
      }),
    ),
  );
  const producer = await Producer.start({ group: "e2e", nameservers: [ns.address] });
  const admin = await Admin.start({ nameservers: [ns.address] });
  try {
    await admin.createTopic({ topic: "E2E", readQueueNums: 4, writeQueueNums: 4 });
    const total = 10_000;
    const results: { r: SendResult; i: number }[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < total) {
          const i = next++;
          const r = await producer.send({ topic: "E2E", body: `body-${i}`, tags: `Tag${i % 3}`, keys: [`k${i}`, `id-${i}`] });
          assert.equal(r.status, "SEND_OK");
          results.push({ r, i });
        }
      }),
    );
    assert.equal(results.length, total);
    const perQueue = new Map<string, number>();
    for (const { r } of results)
      perQueue.set(`${r.queue.brokerName}/${r.queue.queueId}`, (perQueue.get(`${r.queue.brokerName}/${r.queue.queueId}`) ?? 0) + 1);
    assert.equal(perQueue.size, 8, `queues used: ${[...perQueue.keys()]}`);
    for (const [q, n] of perQueue) assert.ok(n > total / 8 / 2, `queue ${q} got only ${n}`);
    const ids = new Set(results.map(({ r }) => r.msgId));
    assert.equal(ids.size, total, "msgIds are unique");

    for (const b of brokers) assert.equal(await stopServer(b), 0);
    for (const name of ["a", "b"]) {
      const store = await MessageStore.open({ dir: path.join(dir, name), flush: "async" });
      try {
        for (const { r, i } of results.filter(({ r }) => r.queue.brokerName === `broker-${name}`)) {
          const got = store.getMessage("check", "E2E", r.queue.queueId, r.queueOffset, 1);
          assert.equal(got.status, "FOUND");
          const m = decodeRecords(Buffer.concat(got.buffers), `broker-${name}`)[0]!;
          assert.equal(m.body.toString(), `body-${i}`);
          assert.equal(m.tags, `Tag${i % 3}`);
          assert.equal(m.keys, `k${i} id-${i}`);
          assert.equal(m.msgId, r.msgId);
          assert.equal(m.queueOffset, r.queueOffset);
        }
      } finally {
        await store.close();
      }
    }
  } finally {
    await producer.close();
    await admin.close();
    for (const b of brokers) await stopServer(b);
    await stopServer(ns);
    await cleanup();
  }
});
