import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Admin, Producer } from "../actors/client/index.ts";
import { prepareBatch } from "../actors/client/messageBuilder.ts";
import { MessageStore } from "../store/index.ts";
import { BATCH, CONCURRENT_BATCHES, messages, sendBatches } from "./_load.ts";
import { startServer, stopServer } from "./_server.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

const SINGLE_IN_FLIGHT = 256;
const QUEUES = 8;

async function measureSingles(p: Producer, topic: string, total: number): Promise<number> {
  const msg = messages(topic, 1)[0]!;
  let sent = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: SINGLE_IN_FLIGHT }, async () => {
      while (sent < total) {
        sent++;
        const r = await p.send(msg);
        if (r.status !== "SEND_OK") throw new Error(`send: ${r.status}`);
      }
    }),
  );
  return sent / ((performance.now() - t0) / 1000);
}

async function runAgainst(flush: "sync" | "async", dataDir: string, counts: { batch: number; single: number }, log: (s: string) => void) {
  const server = await startServer(dataDir, flush);
  const producer = await Producer.start({ group: "bench-produce", nameservers: [server.nameserver] });
  const admin = await Admin.start({ nameservers: [server.nameserver] });
  try {
    await admin.createTopic({ topic: "BenchProduce", readQueueNums: QUEUES, writeQueueNums: QUEUES });
    await sendBatches(producer, "BenchProduce", Math.min(counts.batch, 20_000)); // warm-up
    const batchRate = await sendBatches(producer, "BenchProduce", counts.batch);
    log(`${flush} flush: sendBatch ${CONCURRENT_BATCHES}x${BATCH} in flight: ${batchRate.toFixed(0)} msg/s`);
    const singleRate = await measureSingles(producer, "BenchProduce", counts.single);
    log(`${flush} flush: send, ${SINGLE_IN_FLIGHT} in flight: ${singleRate.toFixed(0)} msg/s`);
    return { batchRate, singleRate };
  } finally {
    await producer.close();
    await admin.close();
    await stopServer(server);
  }
}

async function storeBaseline(dir: string, total: number): Promise<number> {
  const store = await MessageStore.open({ dir, flush: "async", cleanIntervalMs: 0 });
  try {
    const body = prepareBatch(messages("BenchProduce", BATCH)).body;
    const t0 = performance.now();
    for (let i = 0; i < total / BATCH; i++) {
      await store.putMessages({ topic: "BenchProduce", queueId: i % QUEUES, bornTimestamp: Date.now(), bornHost: "127.0.0.1:1", body });
    }
    return total / ((performance.now() - t0) / 1000);
  } finally {
    await store.close();
  }
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "actormq-bench-produce-"));
  const log = (s: string) => opts.verbose && console.log(s);
  const asyncCounts = opts.quick ? { batch: 40_000, single: 10_000 } : { batch: 300_000, single: 60_000 };
  const syncCounts = opts.quick ? { batch: 20_000, single: 5_000 } : { batch: 100_000, single: 30_000 };
  try {
    const a = await runAgainst("async", path.join(tmp, "async"), asyncCounts, log);
    const s = await runAgainst("sync", path.join(tmp, "sync"), syncCounts, log);
    const storeRate = await storeBaseline(path.join(tmp, "baseline"), asyncCounts.batch);
    log(`baseline: store append in-process ${storeRate.toFixed(0)} msg/s`);
    return {
      workload: "produce",
      metrics: {
        produceMsgsPerSec: Math.round(a.batchRate),
        produceSyncFlushMsgsPerSec: Math.round(s.batchRate),
        produceSingleMsgsPerSec: Math.round(a.singleRate),
        produceSingleSyncFlushMsgsPerSec: Math.round(s.singleRate),
      },
      baseline: { storeAppendMsgsPerSec: Math.round(storeRate) },
      ratio: { produceVsStoreAppend: Number((a.batchRate / storeRate).toFixed(3)) },
      notes: [
        `1 KiB bodies, ${QUEUES} queues, one producer; batches: ${CONCURRENT_BATCHES} concurrent sendBatch of ${BATCH}; singles: ${SINGLE_IN_FLIGHT} concurrent send`,
        "broker = `actormq start` in a child process; baseline = MessageStore.putMessages of the same batches in this process",
      ],
    };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
