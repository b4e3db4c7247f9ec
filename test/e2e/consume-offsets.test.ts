/**
 * Where consumption starts: consumeFromWhere variants on a queue whose oldest segments were
 * deleted (so the broker has no "start at 0" answer), and OFFSET_ILLEGAL moving a consumer that
 * asked for a deleted offset to the broker's min offset.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type ConsumeFromWhere, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("consumeFromWhere LAST / FIRST / TIMESTAMP, and OFFSET_ILLEGAL after old segments are deleted", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-offsets-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", segmentBytes: 64 * 1024 } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "Aged", readQueueNums: 1, writeQueueNums: 1 });
    const body = (s: string) => Buffer.concat([Buffer.from(`${s}|`), Buffer.alloc(1024, 120)]);
    for (let i = 0; i < 400; i += 20)
      await producer.sendBatch(Array.from({ length: 20 }, (_, j) => ({ topic: "Aged", body: body(`old${i + j}`) })));
    const store = cluster.brokers[0]!.store;
    assert.ok(store.deleteExpiredFiles(Date.now() + 1000 * 3600_000) > 0, "old segments deleted");
    const minOffset = store.getMinOffset("Aged", 0);
    assert.ok(minOffset > 0, `min offset ${minOffset} moved past 0`);
    await sleep(30);
    const ts = Date.now();
    await sleep(30);
    for (let i = 0; i < 100; i += 20)
      await producer.sendBatch(Array.from({ length: 20 }, (_, j) => ({ topic: "Aged", body: body(`mid${i + j}`) })));

    const got = new Map<string, MessageExt[]>();
    const start = async (group: string, consumeFromWhere: ConsumeFromWhere) => {
      got.set(group, []);
      const c = await PushConsumer.start({
        group,
        nameservers: cluster.nameservers,
        instanceName: group,
        subscriptions: { Aged: "*" },
        consumeFromWhere,
        consumeTimestamp: ts,
        listener: async (msgs) => {
          got.get(group)!.push(...msgs);
          return "CONSUME_SUCCESS";
        },
      });
      consumers.push(c);
      return c;
    };
    const first = await start("cgFirst", "CONSUME_FROM_FIRST_OFFSET");
    const last = await start("cgLast", "CONSUME_FROM_LAST_OFFSET");
    await start("cgTs", "CONSUME_FROM_TIMESTAMP");
    await sleep(100);
    for (let i = 0; i < 5; i++) await producer.send({ topic: "Aged", body: body(`new${i}`) });
    const maxOffset = store.getMaxOffset("Aged", 0);
    const names = (g: string) => got.get(g)!.map((m) => m.body.toString().split("|")[0]!);

    // FIRST: asked for 0, told OFFSET_MOVED, continued from the broker's min offset
    await waitFor(() => got.get("cgFirst")!.length >= maxOffset - minOffset, 15_000, "cgFirst caught up");
    assert.ok(first.pullService.stats.offsetIllegal >= 1, "the broker answered PULL_OFFSET_MOVED");
    const firstOffsets = got
      .get("cgFirst")!
      .map((m) => m.queueOffset)
      .sort((a, b) => a - b);
    assert.equal(firstOffsets[0], minOffset);
    assert.equal(new Set(firstOffsets).size, maxOffset - minOffset);
    // LAST: only what arrived after it started
    await waitFor(() => names("cgLast").length >= 5, 10_000, "cgLast got the new messages");
    await sleep(100);
    assert.deepEqual(names("cgLast"), ["new0", "new1", "new2", "new3", "new4"]);
    assert.equal(last.pullService.stats.offsetIllegal, 0);
    // TIMESTAMP: everything stored at or after ts
    await waitFor(() => names("cgTs").length >= 105, 10_000, "cgTs got mid and new");
    const tsNames = names("cgTs");
    assert.ok(
      tsNames.every((n) => !n.startsWith("old")),
      "nothing stored before the timestamp",
    );
    assert.equal(tsNames.length, 105);
  } finally {
    for (const c of consumers) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
