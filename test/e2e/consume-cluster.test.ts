/**
 * Clustering: 2 brokers x 4 queues, 3 consumers of one group. While membership is stable every
 * message is consumed exactly once; a member joining and another leaving (close) mid-stream lose
 * nothing and duplicate nothing: each queue that moves is handed over (internals §6.5).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Admin, type LocalCluster, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let producer: Producer;

before(async () => {
  const t = await tempDir("actormq-consume-cluster-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ brokers: 2, dir: t.dir, broker: { flush: "async" } });
  producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  for (const topic of ["Stable", "Churn"]) await admin.createTopic({ topic, readQueueNums: 4, writeQueueNums: 4 });
  await admin.close();
});

after(async () => {
  await producer?.close();
  await cluster?.close();
  await cleanup?.();
});

/** Sends `n` messages with bodies `<prefix><i>`, 64 per batch. */
async function sendAll(topic: string, prefix: string, from: number, n: number): Promise<void> {
  const batches: Promise<unknown>[] = [];
  for (let i = from; i < from + n; i += 64) {
    const msgs = [];
    for (let j = i; j < Math.min(from + n, i + 64); j++) msgs.push({ topic, body: `${prefix}${j}` });
    batches.push(producer.sendBatch(msgs));
    if (batches.length >= 8) await Promise.all(batches.splice(0));
  }
  await Promise.all(batches);
}

function counter() {
  const counts = new Map<string, number>();
  return {
    counts,
    listener: async (msgs: MessageExt[]) => {
      for (const m of msgs) {
        const b = m.body.toString();
        counts.set(b, (counts.get(b) ?? 0) + 1);
      }
      return "CONSUME_SUCCESS" as const;
    },
  };
}

function startMember(topic: string, group: string, name: string, listener: (msgs: MessageExt[]) => Promise<"CONSUME_SUCCESS">) {
  return PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    instanceName: name,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener,
  });
}

function assignedOf(cs: PushConsumer[], topic: string): string[] {
  return cs
    .flatMap((c) =>
      c
        .assignment()
        .filter((q) => q.topic === topic)
        .map((q) => `${q.brokerName}:${q.queueId}`),
    )
    .sort();
}

test("3 consumers, 8 queues, 20 000 messages: each consumed exactly once while membership is stable", async () => {
  const { counts, listener } = counter();
  const cs = [
    await startMember("Stable", "cgStable", "s1", listener),
    await startMember("Stable", "cgStable", "s2", listener),
    await startMember("Stable", "cgStable", "s3", listener),
  ];
  try {
    // wait until the group has settled: 8 queues, each held by exactly one member
    await waitFor(
      () => {
        const all = assignedOf(cs, "Stable");
        return all.length === 8 && new Set(all).size === 8;
      },
      15_000,
      "a stable assignment of 8 queues over 3 members",
    );
    const sizes = cs.map((c) => c.assignment().filter((q) => q.topic === "Stable").length).sort();
    assert.deepEqual(sizes, [2, 3, 3]);
    const N = 20_000;
    await sendAll("Stable", "s", 0, N);
    await waitFor(() => counts.size === N, 30_000, `${N} distinct messages`);
    // let in-flight deliveries land so a late duplicate would be seen
    await new Promise((r) => setTimeout(r, 200));
    const dup = [...counts.values()].filter((v) => v !== 1).length;
    assert.equal(counts.size, N);
    assert.equal(dup, 0, "no message delivered twice");
  } finally {
    await Promise.all(cs.map((c) => c.close()));
  }
});

test("a member joins and another leaves mid-stream: nothing lost, nothing consumed twice", async () => {
  const { counts, listener } = counter();
  const slow = async (msgs: MessageExt[]) => {
    await new Promise((r) => setTimeout(r, 1));
    return listener(msgs);
  };
  const a = await startMember("Churn", "cgChurn", "c1", slow);
  const b = await startMember("Churn", "cgChurn", "c2", slow);
  let c: PushConsumer | null = null;
  let bClosed = false;
  try {
    const N = 6000;
    const sending = sendAll("Churn", "c", 0, N);
    await waitFor(() => counts.size >= 1000, 20_000, "first 1000 messages");
    c = await startMember("Churn", "cgChurn", "c3", slow);
    await waitFor(() => counts.size >= 3000, 20_000, "3000 messages");
    await b.close();
    bClosed = true;
    await sending;
    await waitFor(() => counts.size === N, 30_000, `all ${N} messages after the churn`);
    for (let i = 0; i < N; i++) assert.ok(counts.has(`c${i}`), `message c${i} consumed`);
    const duplicates = [...counts.values()].reduce((s, v) => s + (v - 1), 0);
    // graceful moves: the old holder commits what it consumed and releases before the new one starts
    assert.equal(duplicates, 0, `duplicates ${duplicates} after a join and a graceful leave`);
    assert.deepEqual(assignedOf(c ? [a, c] : [a], "Churn").length, 8);
  } finally {
    await a.close();
    if (!bClosed) await b.close();
    await c?.close();
  }
});
