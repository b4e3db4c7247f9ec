/**
 * Queue hand-over (internals §6.5), the benchmark's W2 shape: 4 queues with a stored backlog,
 * member A drains, member B joins mid-drain, later A leaves (close) while more messages arrive.
 * Every message is consumed exactly once across A and B: the member that loses a queue commits
 * what its listener finished and releases it before the member taking it over reads the offset.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const TOPIC = "HandOver";
const GROUP = "cgHandOver";

test("a member joins mid-drain and another leaves mid-stream: every message exactly once", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-handover-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgHandOver", nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  try {
    const admin = await Admin.start({ nameservers: cluster.nameservers });
    await admin.createTopic({ topic: TOPIC, readQueueNums: 4, writeQueueNums: 4 });
    await admin.close();
    const send = async (from: number, n: number): Promise<void> => {
      for (let i = from; i < from + n; i += 500) {
        const batches: Promise<unknown>[] = [];
        for (let j = i; j < Math.min(from + n, i + 500); j += 100) {
          batches.push(
            producer.sendBatch(Array.from({ length: Math.min(100, from + n - j) }, (_, k) => ({ topic: TOPIC, body: `m${j + k}` }))),
          );
        }
        await Promise.all(batches);
      }
    };
    const STORED = 30_000;
    const MORE = 10_000;
    await send(0, STORED);

    /** body -> how many times consumed; queue key -> members that consumed from it */
    const counts = new Map<string, number>();
    const byQueue = new Map<number, Set<string>>();
    const member = (name: string) =>
      PushConsumer.start({
        group: GROUP,
        nameservers: cluster.nameservers,
        instanceName: name,
        subscriptions: { [TOPIC]: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs: MessageExt[]) => {
          // a little work per message, so the drain is still going when the group changes
          await new Promise((r) => setImmediate(r));
          for (const m of msgs) {
            const b = m.body.toString();
            counts.set(b, (counts.get(b) ?? 0) + 1);
            const s = byQueue.get(m.queueId) ?? new Set<string>();
            byQueue.set(m.queueId, s);
            s.add(name);
          }
          return "CONSUME_SUCCESS";
        },
      });

    const a = await member("A");
    consumers.push(a);
    await waitFor(() => counts.size >= 3_000, 30_000, "A drained 3000 messages");
    const b = await member("B");
    consumers.push(b);
    const held = (c: PushConsumer) => c.assignment().filter((q) => q.topic === TOPIC);
    await waitFor(() => held(a).length === 2 && held(b).length === 2, 15_000, "A and B hold 2 queues each");
    assert.ok(counts.size < STORED, `B joined mid-drain (${counts.size} of ${STORED} consumed by then)`);
    await waitFor(() => counts.size === STORED, 60_000, `all ${STORED} stored messages`);
    // the queues B took over were consumed by both: they moved mid-drain
    for (const q of held(b))
      assert.deepEqual([...(byQueue.get(q.queueId) ?? [])].sort(), ["A", "B"], `queue ${q.queueId} moved from A to B`);

    // A leaves while more messages arrive
    const sending = send(STORED, MORE);
    await waitFor(() => counts.size >= STORED + 2_000, 30_000, "2000 of the new messages");
    await a.close();
    await sending;
    await waitFor(() => held(b).length === 4, 15_000, "B holds all 4 queues");
    await waitFor(() => counts.size === STORED + MORE, 60_000, `all ${STORED + MORE} messages`);
    // let deliveries still on their way land, so a late duplicate would be counted
    await new Promise((r) => setTimeout(r, 300));

    const missing = [];
    for (let i = 0; i < STORED + MORE; i++) if (!counts.has(`m${i}`)) missing.push(i);
    const duplicates = [...counts.values()].reduce((s, v) => s + (v - 1), 0);
    assert.deepEqual(missing, [], "nothing missing");
    assert.equal(duplicates, 0, "nothing consumed twice");
    assert.equal(counts.size, STORED + MORE);
  } finally {
    await Promise.all(consumers.map((c) => c.close().catch(() => {})));
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
