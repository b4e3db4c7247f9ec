import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Admin, type MessageExt, Producer, PushConsumer } from "../index.ts";
import { startServer, stopServer } from "./_server.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

const BODY_BYTES = 1024;
const QUEUES = 8;
const CONSUMERS = 2;

async function fill(p: Producer, topic: string, n: number): Promise<void> {
  const body = Buffer.alloc(BODY_BYTES, 97);
  const batch = Array.from({ length: 32 }, () => ({ topic, body }));
  const inflight: Promise<unknown>[] = [];
  for (let i = 0; i < n; i += 32) {
    inflight.push(p.sendBatch(i + 32 <= n ? batch : batch.slice(0, n - i)));
    if (inflight.length >= 8) await Promise.all(inflight.splice(0));
  }
  await Promise.all(inflight);
}

/** Drains `total` stored messages with CONSUMERS consumers; returns msg/s and whether per-queue order held. */
async function drain(
  nameservers: string[],
  topic: string,
  group: string,
  orderly: boolean,
  total: number,
): Promise<{ rate: number; inOrder: boolean }> {
  let consumed = 0;
  let inOrder = true;
  const lastOffset = new Map<number, number>();
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const listener = async (msgs: MessageExt[]) => {
    for (const m of msgs) {
      const prev = lastOffset.get(m.queueId);
      if (prev !== undefined && m.queueOffset <= prev) inOrder = false;
      lastOffset.set(m.queueId, m.queueOffset);
    }
    consumed += msgs.length;
    if (consumed >= total) done();
    return orderly ? ("SUCCESS" as const) : ("CONSUME_SUCCESS" as const);
  };
  const t0 = performance.now();
  const cs = await Promise.all(
    Array.from({ length: CONSUMERS }, (_, i) =>
      PushConsumer.start({
        group,
        nameservers,
        instanceName: `${group}-${i}`,
        subscriptions: { [topic]: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly,
        listener,
      }),
    ),
  );
  await finished;
  const secs = (performance.now() - t0) / 1000;
  await Promise.all(cs.map((c) => c.close()));
  return { rate: Math.round(total / secs), inOrder };
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "actormq-bench-orderly-"));
  const log = (s: string) => opts.verbose && console.log(s);
  const n = opts.quick ? 10_000 : 50_000;
  const server = await startServer(path.join(tmp, "store"));
  const nameservers = [server.nameserver];
  try {
    const admin = await Admin.start({ nameservers });
    for (const topic of ["BenchOrderly", "BenchConcurrent"])
      await admin.createTopic({ topic, readQueueNums: QUEUES, writeQueueNums: QUEUES });
    await admin.close();
    const p = await Producer.start({ group: "bench-orderly-producer", nameservers });
    await fill(p, "BenchOrderly", n);
    await fill(p, "BenchConcurrent", n);
    await p.close();
    log(`stored ${n} messages in each of BenchOrderly and BenchConcurrent (${QUEUES} queues)`);
    const orderly = await drain(nameservers, "BenchOrderly", "bench-orderly", true, n);
    log(`orderly, ${CONSUMERS} consumers: ${orderly.rate} msg/s (per-queue order held: ${orderly.inOrder})`);
    const concurrent = await drain(nameservers, "BenchConcurrent", "bench-concurrent", false, n);
    log(`concurrent, ${CONSUMERS} consumers: ${concurrent.rate} msg/s`);
    return {
      workload: "orderly",
      metrics: { orderlyConsumeMsgsPerSec: orderly.rate, orderlyPerQueueOrderHeld: orderly.inOrder ? 1 : 0 },
      baseline: { concurrentConsumeMsgsPerSec: concurrent.rate },
      ratio: { orderlyVsConcurrent: Number((orderly.rate / concurrent.rate).toFixed(3)) },
      notes: [
        `${n} x ${BODY_BYTES} B stored on ${QUEUES} queues before consuming; ${CONSUMERS} consumers of one group in the bench process; broker = \`actormq start\` (async flush) in a child process`,
        "one listener call per message (consumeMessageBatchMaxSize 1); rate from consumer start (locks, offsets) to the last message",
      ],
    };
  } finally {
    await stopServer(server);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
