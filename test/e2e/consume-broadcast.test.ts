/**
 * Broadcasting: every member of the group gets every message; offsets live in each member's own
 * file, so a member restarted resumes where it left off.
 */
import assert from "node:assert/strict";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { LocalFileOffsetStore, offsetLog } from "../../actors/client/offsetStore.ts";
import { Admin, isMQError, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
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

test("broadcasting: a member whose offsets files are both damaged refuses to start (MALFORMED) instead of skipping what was sent while it was down", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-bcast-damaged-");
  const offsetStoreDir = path.join(dir, "offsets");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgD", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const seen: string[] = [];
  const start = () =>
    PushConsumer.start({
      group: "cgBD",
      nameservers: cluster.nameservers,
      instanceName: "d",
      model: "BROADCASTING",
      offsetStoreDir,
      subscriptions: { BcastD: "*" },
      listener: async (msgs: MessageExt[]) => {
        for (const m of msgs) seen.push(m.body.toString());
        return "CONSUME_SUCCESS";
      },
    });
  let c: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "BcastD", readQueueNums: 1, writeQueueNums: 1 });
    c = await start();
    await producer.send({ topic: "BcastD", body: "a" });
    await waitFor(() => seen.length === 1, 10_000, "consumed");
    await c.persistOffsets();
    await c.persistOffsets();
    await c.close();
    c = undefined;
    const file = path.join(offsetStoreDir, `${hostname()}@d`, "cgBD", "offsets.json");
    const saved = await readFile(file);
    await writeFile(file, Buffer.alloc(64));
    await writeFile(`${file}.bak`, '{ "offsetTable": {');
    const refused = await start().then(
      async (m) => {
        await m.close();
        return null;
      },
      (e: unknown) => e,
    );
    assert.ok(isMQError(refused, "MALFORMED") && refused.message.includes(file), `refused: ${String(refused)}`);
    // the client it made is let go: a member started afterwards (its files restored) works
    await writeFile(file, saved);
    await producer.send({ topic: "BcastD", body: "b" });
    c = await start();
    await waitFor(() => seen.length === 2, 10_000, "resumed from the restored file");
    assert.deepEqual(seen, ["a", "b"]);
  } finally {
    await c?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("broadcasting: an offsets file that cannot be written is logged at warn, naming the file, and again at close", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-consume-bcast-unwritable-");
  // a regular file where the offsets directory should be: every write fails
  const offsetStoreDir = path.join(dir, "offsets-here");
  await writeFile(offsetStoreDir, "not a directory");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgU", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const warns: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(offsetLog(), "warn", (fields: Record<string, unknown>, msg: string) => void warns.push({ fields, msg }));
  let c: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "BcastU", readQueueNums: 1, writeQueueNums: 1 });
    let n = 0;
    c = await PushConsumer.start({
      group: "cgBU",
      nameservers: cluster.nameservers,
      instanceName: "u",
      model: "BROADCASTING",
      offsetStoreDir,
      persistConsumerOffsetIntervalMs: 100,
      subscriptions: { BcastU: "*" },
      listener: async (msgs: MessageExt[]) => {
        n += msgs.length;
        return "CONSUME_SUCCESS";
      },
    });
    await producer.send({ topic: "BcastU", body: "m" });
    await waitFor(() => n === 1, 10_000, "consumed");
    const file = path.join(offsetStoreDir, `${hostname()}@u`, "cgBU", "offsets.json");
    await waitFor(() => warns.length > 0, 10_000, "a warning of the periodic persist");
    assert.equal(warns[0]!.fields.file, file);
    assert.match(warns[0]!.msg, new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
    assert.match(String(warns[0]!.fields.error), /ENOTDIR|EEXIST/);
    // several periodic persists later: still the one line (throttled)
    const persists = t.mock.method(c.offsetStore, "persistAll");
    await waitFor(() => persists.mock.callCount() >= 3, 10_000, "more periodic persists");
    assert.equal(warns.length, 1, "logged once per interval");
    await c.close();
    c = undefined;
    assert.equal(warns.length, 2, "the write at close is always reported");
    assert.equal(warns[1]!.fields.closing, true);
  } finally {
    await c?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("broadcasting: an offset the broker moved whose write fails is logged, and the queue resumes at the moved offset", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-consume-bcast-moved-");
  const offsetStoreDir = path.join(dir, "offsets");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgM", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const warns: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(offsetLog(), "warn", (fields: Record<string, unknown>, msg: string) => void warns.push({ fields, msg }));
  let c: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "BcastM", readQueueNums: 1, writeQueueNums: 1 });
    await producer.send({ topic: "BcastM", body: "m0" });
    const brokerName = (await admin.topicRoute("BcastM")).brokerDatas[0]!.brokerName;
    // the member's file says offset 100, past the queue's end: its first pull is moved back to 1
    const file = path.join(offsetStoreDir, `${hostname()}@m`, "cgBM", "offsets.json");
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, JSON.stringify({ offsetTable: { [`BcastM@${brokerName}@0`]: 100 } }));
    // and the moved offset cannot be written
    t.mock.method(LocalFileOffsetStore.prototype as unknown as { write(): Promise<void> }, "write", async () => {
      throw new Error("EIO: i/o error, write");
    });
    const got: number[] = [];
    c = await PushConsumer.start({
      group: "cgBM",
      nameservers: cluster.nameservers,
      instanceName: "m",
      model: "BROADCASTING",
      offsetStoreDir,
      subscriptions: { BcastM: "*" },
      listener: async (msgs: MessageExt[]) => {
        for (const m of msgs) got.push(m.queueOffset);
        return "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => c!.pullService.stats.offsetIllegal >= 1 && warns.length > 0, 10_000, "the moved offset and its failed write");
    assert.equal(warns[0]!.fields.file, file);
    assert.match(String(warns[0]!.fields.error), /EIO/);
    await producer.send({ topic: "BcastM", body: "m1" });
    await waitFor(() => got.includes(1), 10_000, "the next message, at the moved offset");
    assert.deepEqual(got, [1]);
  } finally {
    await c?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
