import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as hdr from "hdr-histogram-js";
import { Admin, Producer, PushConsumer } from "../index.ts";
import { BODY_BYTES, drain, sendBatches } from "./_load.ts";
import { startServer, stopServer } from "./_server.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

/** the throughput goal set for consumption (Redis Streams' class on this machine) */
const TARGET_CONSUME_MSGS_PER_SEC = 300_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function latency(
  nameservers: string[],
  p: Producer,
  rate: number,
  seconds: number,
): Promise<{ p50: number; p99: number; count: number }> {
  const topic = "BenchLatency";
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let received = 0;
  const c = await PushConsumer.start({
    group: "bench-latency",
    nameservers,
    instanceName: "bench-latency",
    subscriptions: { [topic]: "*" },
    listener: async (msgs) => {
      const now = performance.now();
      for (const m of msgs) h.recordValue(Math.max(1, Math.round((now - m.body.readDoubleBE(0)) * 1000)));
      received += msgs.length;
      return "CONSUME_SUCCESS";
    },
  });
  await sleep(300);
  const total = rate * seconds;
  const tickMs = 10;
  const perTick = (rate * tickMs) / 1000;
  const t0 = performance.now();
  let sent = 0;
  const pending: Promise<unknown>[] = [];
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate) + perTick);
    while (sent < due) {
      const body = Buffer.alloc(BODY_BYTES, 98);
      body.writeDoubleBE(performance.now(), 0);
      pending.push(p.send({ topic, body }));
      sent++;
    }
    if (pending.length > 512) await Promise.all(pending.splice(0));
    await sleep(tickMs);
  }
  await Promise.all(pending);
  const deadline = Date.now() + 30_000;
  while (received < total && Date.now() < deadline) await sleep(20);
  await c.close();
  return { p50: h.getValueAtPercentile(50) / 1000, p99: h.getValueAtPercentile(99) / 1000, count: received };
}

async function longPollWake(nameservers: string[], p: Producer, rounds: number): Promise<number> {
  const topic = "BenchWake";
  const admin = await Admin.start({ nameservers });
  await admin.createTopic({ topic, readQueueNums: 1, writeQueueNums: 1 });
  await admin.close();
  const samples: number[] = [];
  let arrived: (() => void) | null = null;
  const c = await PushConsumer.start({
    group: "bench-wake",
    nameservers,
    instanceName: "bench-wake",
    subscriptions: { [topic]: "*" },
    listener: async () => {
      arrived?.();
      return "CONSUME_SUCCESS";
    },
  });
  await sleep(300);
  for (let i = 0; i < rounds; i++) {
    const got = new Promise<void>((r) => (arrived = r));
    const t0 = performance.now();
    await p.send({ topic, body: Buffer.alloc(BODY_BYTES, 99) });
    await got;
    samples.push(performance.now() - t0);
    await sleep(30);
  }
  await c.close();
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "actormq-bench-consume-"));
  const log = (s: string) => opts.verbose && console.log(s);
  const n = opts.quick ? 20_000 : 100_000;
  const server = await startServer(path.join(tmp, "store"));
  const nameservers = [server.nameserver];
  try {
    const admin = await Admin.start({ nameservers });
    for (const topic of ["BenchConsume", "BenchGroup", "BenchLatency"])
      await admin.createTopic({ topic, readQueueNums: 4, writeQueueNums: 4 });
    await admin.close();
    const p = await Producer.start({ group: "bench-consume-producer", nameservers });
    await sendBatches(p, "BenchConsume", n);
    await sendBatches(p, "BenchGroup", n);
    log(`stored ${n} messages in each of BenchConsume and BenchGroup`);
    const consumeMsgsPerSec = Math.round(await drain(nameservers, "BenchConsume", "bench-one", n));
    log(`one consumer: ${consumeMsgsPerSec} msg/s`);
    const groupConsumeMsgsPerSec = Math.round(await drain(nameservers, "BenchGroup", "bench-group", n, { consumers: 2 }));
    log(`two consumers: ${groupConsumeMsgsPerSec} msg/s`);
    const lat = await latency(nameservers, p, 2000, opts.quick ? 3 : 10);
    log(`latency p50 ${lat.p50} ms, p99 ${lat.p99} ms over ${lat.count} messages`);
    const wake = await longPollWake(nameservers, p, opts.quick ? 10 : 50);
    log(`long-poll wake p50 ${wake.toFixed(2)} ms`);
    await p.close();
    return {
      workload: "consume",
      metrics: {
        consumeMsgsPerSec,
        groupConsumeMsgsPerSec,
        e2eLatencyP50Ms: Number(lat.p50.toFixed(3)),
        e2eLatencyP99Ms: Number(lat.p99.toFixed(3)),
        longPollWakeP50Ms: Number(wake.toFixed(3)),
      },
      baseline: { targetConsumeMsgsPerSec: TARGET_CONSUME_MSGS_PER_SEC },
      ratio: { consumeVsTarget: Number((consumeMsgsPerSec / TARGET_CONSUME_MSGS_PER_SEC).toFixed(3)) },
      notes: [
        `${n} x ${BODY_BYTES} B stored before consuming; broker = \`actormq start\` (async flush) in a child process`,
        "listener batches of 1 (consumeMessageBatchMaxSize default); latency from send call to listener call at 2 000 msg/s",
      ],
    };
  } finally {
    await stopServer(server);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
