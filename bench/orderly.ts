import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Admin, type MessageExt, Producer } from "../index.ts";
import { BODY_BYTES, drain, sendBatches } from "./_load.ts";
import { startServer, stopServer } from "./_server.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

const QUEUES = 8;
const CONSUMERS = 2;

/** Drains `total` stored messages with CONSUMERS consumers; returns msg/s and whether per-queue order held. */
async function drainChecked(nameservers: string[], topic: string, group: string, orderly: boolean, total: number) {
  let inOrder = true;
  const lastOffset = new Map<number, number>();
  const rate = await drain(nameservers, topic, group, total, {
    consumers: CONSUMERS,
    orderly,
    onMessages: (msgs: MessageExt[]) => {
      for (const m of msgs) {
        const prev = lastOffset.get(m.queueId);
        if (prev !== undefined && m.queueOffset <= prev) inOrder = false;
        lastOffset.set(m.queueId, m.queueOffset);
      }
    },
  });
  return { rate: Math.round(rate), inOrder };
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
    await sendBatches(p, "BenchOrderly", n);
    await sendBatches(p, "BenchConcurrent", n);
    await p.close();
    log(`stored ${n} messages in each of BenchOrderly and BenchConcurrent (${QUEUES} queues)`);
    const orderly = await drainChecked(nameservers, "BenchOrderly", "bench-orderly", true, n);
    log(`orderly, ${CONSUMERS} consumers: ${orderly.rate} msg/s (per-queue order held: ${orderly.inOrder})`);
    const concurrent = await drainChecked(nameservers, "BenchConcurrent", "bench-concurrent", false, n);
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
