/**
 * Broadcasting: every member of the group gets every message; offsets live in each member's own
 * file, so a member restarted resumes where it left off.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("broadcasting: 3 consumers each get all messages; a restarted one resumes from its own file", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-bcast-");
  const cluster = await startLocalCluster({ brokers: 2, dir: path.join(dir, "store"), broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const offsetStoreDir = path.join(dir, "offsets");
  const seen = [new Map<string, number>(), new Map<string, number>(), new Map<string, number>()];
  const start = (i: number) =>
    PushConsumer.start({
      group: "cgB",
      nameservers: cluster.nameservers,
      instanceName: `b${i}`,
      model: "BROADCASTING",
      offsetStoreDir,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      subscriptions: { Bcast: "*" },
      listener: async (msgs: MessageExt[]) => {
        for (const m of msgs) seen[i]!.set(m.body.toString(), (seen[i]!.get(m.body.toString()) ?? 0) + 1);
        return "CONSUME_SUCCESS";
      },
    });
  const cs: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "Bcast", readQueueNums: 2, writeQueueNums: 2 });
    for (let i = 0; i < 3; i++) cs.push(await start(i));
    for (const c of cs) assert.equal(c.assignment().length, 4, "each member holds every queue");
    const N = 500;
    for (let i = 0; i < N; i += 50) await producer.sendBatch(Array.from({ length: 50 }, (_, j) => ({ topic: "Bcast", body: `a${i + j}` })));
    await waitFor(() => seen.every((s) => s.size === N), 20_000, "every member got every message");

    // member 0 leaves; its file holds its offsets
    await cs[0]!.close();
    const file = path.join(offsetStoreDir, `${hostname()}@b0`, "cgB", "offsets.json");
    const saved = JSON.parse(await readFile(file, "utf8")) as { offsetTable: Record<string, number> };
    assert.equal(
      Object.values(saved.offsetTable).reduce((a, b) => a + b, 0),
      N,
      "the file records all consumed",
    );

    for (let i = N; i < N + 100; i += 50)
      await producer.sendBatch(Array.from({ length: 50 }, (_, j) => ({ topic: "Bcast", body: `a${i + j}` })));
    const before = seen[0]!.size;
    cs[0] = await start(0);
    await waitFor(() => seen.every((s) => s.size === N + 100), 20_000, "every member got the later messages");
    assert.equal(before, N);
    const redelivered = [...seen[0]!.values()].filter((v) => v > 1).length;
    assert.equal(redelivered, 0, "the restarted member resumed from its file, no message twice");
  } finally {
    for (const c of cs) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
