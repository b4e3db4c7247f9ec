/**
 * Orderly broadcasting with consumeMessageBatchMaxSize 4: every member gets every message of each
 * queue, in queue order, in batches of up to 4 consecutive offsets, with no broker lock (RocketMQ
 * locks only clustering orderly queues). A suspended batch comes again whole, with reconsumeTimes
 * + 1, before anything after it. A member killed with -9 and started again with the same instance
 * name resumes from its offsets file: no gap, nothing out of order, not from the start.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { Admin, type MessageExt, type MessageQueue, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { type ChildBatch, orderlyChild } from "./fixtures/children.ts";

const PER_QUEUE = 120;
const SUSPENDED_AT = 40;

test("orderly broadcasting, batches of 4: every member gets each queue in order, a suspended batch again whole, and a member killed with -9 resumes from its offsets file", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-bcast-");
  const cluster = await startLocalCluster({ dir: path.join(dir, "cluster"), broker: { flush: "async" } as object });
  const producer = await Producer.start({ group: "pgOrdBcast", nameservers: cluster.nameservers });
  const topic = "OrdBcast";
  const group = "cgOrdBcast";
  const offsetDir = path.join(dir, "offsets");
  const xBatches: { queueId: number; offsets: number[]; reconsumeTimes: number[] }[] = [];
  const suspended = new Set<number>();
  let x: PushConsumer | undefined;
  const yBatches: ChildBatch[] = [];
  const env = {
    NAMESRV: cluster.nameservers[0]!,
    GROUP: group,
    TOPIC: topic,
    DELAY_MS: "20",
    MODEL: "BROADCASTING",
    BATCH: "4",
    OFFSET_DIR: offsetDir,
  };
  let y = orderlyChild("Y", env, yBatches);
  try {
    const admin = await Admin.start({ nameservers: cluster.nameservers });
    await admin.createTopic({ topic, readQueueNums: 2, writeQueueNums: 2 });
    await admin.close();
    x = await PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      instanceName: "bcast-X",
      subscriptions: { [topic]: "*" },
      model: "BROADCASTING",
      orderly: true,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      consumeMessageBatchMaxSize: 4,
      suspendCurrentQueueTimeMillis: 100,
      offsetStoreDir: offsetDir,
      listener: async (msgs: MessageExt[], ctx) => {
        const queueId = (ctx as { messageQueue: MessageQueue }).messageQueue.queueId;
        xBatches.push({ queueId, offsets: msgs.map((m) => m.queueOffset), reconsumeTimes: msgs.map((m) => m.reconsumeTimes) });
        if (msgs.some((m) => m.queueOffset === SUSPENDED_AT) && !suspended.has(queueId)) {
          suspended.add(queueId);
          return "SUSPEND_CURRENT_QUEUE_A_MOMENT";
        }
        return "SUCCESS";
      },
    });
    assert.equal(x.queueLocks, null, "a broadcasting orderly consumer takes no broker locks");
    await y.ready();
    for (let q = 0; q < 2; q++) {
      const msgs = Array.from({ length: PER_QUEUE }, (_, i) => ({ topic, body: `${q}:${i}` }));
      const r = await producer.sendBatch(msgs, { selector: (mqs: MessageQueue[]) => mqs.find((m) => m.queueId === q)!, arg: q });
      assert.equal(r.queueOffset, 0, "a new topic's queues start at offset 0");
    }
    const last = PER_QUEUE - 1;
    const yOffsets = (q: number) => yBatches.filter((b) => b.queueId === q).flatMap((b) => b.offsets);

    // Y killed once its offsets file holds progress on both queues
    const file = path.join(offsetDir, `${hostname()}@Y`, group, "offsets.json");
    const stored = async (): Promise<Record<string, number> | undefined> => {
      const t = await readFile(file, "utf8").catch(() => undefined);
      return t ? (JSON.parse(t) as { offsetTable: Record<string, number> }).offsetTable : undefined;
    };
    const storedOf = (table: Record<string, number> | undefined, q: number) =>
      Object.entries(table ?? {}).find(([k]) => k.startsWith(`${topic}@`) && k.endsWith(`@${q}`))?.[1] ?? -1;
    const before = await waitFor(
      async () => {
        const t = await stored();
        return [0, 1].every((q) => storedOf(t, q) >= 20) ? t : undefined;
      },
      20_000,
      "Y's offsets file past 20 messages of each queue",
    );
    y.proc.kill("SIGKILL");
    await y.exited;
    const killedAt = [0, 1].map((q) => yOffsets(q).length);
    y = orderlyChild("Y", env, yBatches);
    await y.ready();
    await waitFor(() => [0, 1].every((q) => yOffsets(q).at(-1) === last), 30_000, "Y (restarted) consuming every message");
    await waitFor(
      () => [0, 1].every((q) => xBatches.some((b) => b.queueId === q && b.offsets.includes(last))),
      30_000,
      "X consuming every message",
    );

    for (let q = 0; q < 2; q++) {
      const mine = xBatches.filter((b) => b.queueId === q);
      for (const b of mine) {
        assert.ok(b.offsets.length >= 1 && b.offsets.length <= 4, `X queue ${q}: a batch of ${b.offsets.length}`);
        assert.deepEqual(
          b.offsets,
          b.offsets.map((_, i) => b.offsets[0]! + i),
          `X queue ${q}: a batch of consecutive offsets`,
        );
      }
      const i = mine.findIndex((b) => b.offsets.includes(SUSPENDED_AT));
      assert.ok(i >= 0, `X queue ${q}: the batch with offset ${SUSPENDED_AT}`);
      // ...came again next, whole, one retry more; and everything else once, in order
      assert.deepEqual(mine[i + 1]!.offsets, mine[i]!.offsets, `X queue ${q}: the suspended batch again, whole`);
      assert.deepEqual(
        mine[i + 1]!.reconsumeTimes,
        mine[i]!.reconsumeTimes.map((n) => n + 1),
        `X queue ${q}: reconsumeTimes + 1`,
      );
      const flat = mine.filter((_, j) => j !== i).flatMap((b) => b.offsets);
      assert.deepEqual(
        flat,
        Array.from({ length: PER_QUEUE }, (_, k) => k),
        `X queue ${q}: every message once, in order`,
      );

      const all = yOffsets(q);
      const pre = all.slice(0, killedAt[q]);
      const post = all.slice(killedAt[q]);
      assert.deepEqual(
        pre,
        Array.from({ length: pre.length }, (_, k) => k),
        `Y queue ${q}: in order before the kill`,
      );
      assert.ok(post[0]! >= storedOf(before, q), `Y queue ${q}: resumed at ${post[0]}, behind its stored ${storedOf(before, q)}`);
      assert.ok(post[0]! <= pre.at(-1)! + 1, `Y queue ${q}: resumed at ${post[0]} after ${pre.at(-1)}: a gap`);
      assert.deepEqual(
        post,
        Array.from({ length: post.length }, (_, k) => post[0]! + k),
        `Y queue ${q}: in order after the restart`,
      );
    }
  } finally {
    if (y.proc.exitCode === null && y.proc.signalCode === null) {
      y.proc.kill("SIGKILL");
      await y.exited;
    }
    await x?.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
