/**
 * Delay workload: 10 000 messages sent with delay levels 1-3 of short custom levels
 * ("1s 2s 3s"), 256 sends in flight, one push consumer; name server, broker, producer and
 * consumer in this process (`startLocalCluster`, async flush).
 * `metrics.delayedDeliveryLagP99Ms`: listener time minus due time (the scheduled record's store
 * time + the level's delay), 99th percentile. Also the broker's part alone (re-store time minus
 * due time). Baseline: the same messages without a delay level, listener time minus store time.
 */
import { Admin, type LocalCluster, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../index.ts";
import { tempDir } from "../test/helpers.ts";
import { decodeRecords, parseOffsetMsgId } from "../transport/messageRecord.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

const LEVEL_MS = [1_000, 2_000, 3_000];
const LEVELS = `${LEVEL_MS.map((ms) => `${ms}ms`).join(" ")} 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s`;
const IN_FLIGHT = 256;
const BODY = Buffer.alloc(128, 120);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Run {
  /** listener time minus due time, per message */
  lag: number[];
  /** broker re-store time minus due time, per message */
  restoreLag: number[];
  sendSeconds: number;
}

async function runOnce(cluster: LocalCluster, topic: string, count: number, delayed: boolean, verbose: boolean): Promise<Run> {
  const broker = cluster.brokers[0]!;
  const dueAt = new Map<string, number>();
  const received: { at: number; msg: MessageExt }[] = [];
  let done: () => void = () => {};
  const all = new Promise<void>((r) => (done = r));
  const consumer = await PushConsumer.start({
    group: `${topic}-cg`,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    consumeThreads: 64,
    listener: async (msgs) => {
      const at = Date.now();
      for (const m of msgs) received.push({ at, msg: m });
      if (received.length >= count) done();
      return "CONSUME_SUCCESS";
    },
  });
  const producer = await Producer.start({ group: `${topic}-pg`, nameservers: cluster.nameservers });
  const t0 = Date.now();
  let next = 0;
  const sender = async () => {
    while (next < count) {
      const i = next++;
      const level = (i % LEVEL_MS.length) + 1;
      const r = await producer.send({ topic, body: BODY, ...(delayed ? { delayLevel: level } : {}) });
      const rec = broker.store.viewMessage(parseOffsetMsgId(r.offsetMsgId).commitLogOffset)!;
      const stored = decodeRecords(rec, broker.brokerName)[0]!;
      dueAt.set(r.msgId, stored.storeTimestamp + (delayed ? LEVEL_MS[level - 1]! : 0));
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, sender));
  const sendSeconds = (Date.now() - t0) / 1000;
  if (verbose) console.log(`${topic}: sent ${count} in ${sendSeconds.toFixed(2)} s`);
  const timeout = setTimeout(done, 60_000 + 2 * LEVEL_MS[LEVEL_MS.length - 1]!);
  await all;
  clearTimeout(timeout);
  await producer.close();
  await consumer.close();
  const lag: number[] = [];
  const restoreLag: number[] = [];
  for (const { at, msg } of received) {
    const due = dueAt.get(msg.msgId);
    if (due === undefined) continue;
    lag.push(at - due);
    restoreLag.push(msg.storeTimestamp - due);
  }
  if (received.length < count) throw new Error(`${topic}: only ${received.length} of ${count} messages arrived`);
  lag.sort((a, b) => a - b);
  restoreLag.sort((a, b) => a - b);
  return { lag, restoreLag, sendSeconds };
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const count = opts.quick ? 1_000 : 10_000;
  process.env.ACTORMQ_LOG_LEVEL ??= "warn";
  const { dir, cleanup } = await tempDir("actormq-bench-delay-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", messageDelayLevel: LEVELS, logLevel: "warn" } });
  try {
    const admin = await Admin.start({ nameservers: cluster.nameservers });
    for (const t of ["BenchDelayed", "BenchPlain"]) await admin.createTopic({ topic: t, readQueueNums: 4, writeQueueNums: 4 });
    await admin.close();
    const delayed = await runOnce(cluster, "BenchDelayed", count, true, opts.verbose);
    const plain = await runOnce(cluster, "BenchPlain", count, false, opts.verbose);
    const early = delayed.restoreLag.filter((x) => x < 0).length;
    const p99 = percentile(delayed.lag, 99);
    const plainP99 = percentile(plain.lag, 99);
    return {
      workload: "delay",
      metrics: {
        delayedDeliveryLagP99Ms: p99,
        delayedDeliveryLagP50Ms: percentile(delayed.lag, 50),
        delayedDeliveryLagMaxMs: delayed.lag[delayed.lag.length - 1]!,
        restoreLagP99Ms: percentile(delayed.restoreLag, 99),
        deliveredBeforeDue: early,
        messages: count,
      },
      baseline: { plainDeliveryLagP99Ms: plainP99 },
      ratio: { delayedVsPlainLagP99: plainP99 > 0 ? p99 / plainP99 : Number.NaN },
      notes: [
        `levels ${LEVEL_MS.join("/")} ms, ${IN_FLIGHT} single sends in flight (delayed: ${delayed.sendSeconds.toFixed(2)} s, plain: ${plain.sendSeconds.toFixed(2)} s to send)`,
        "lag = listener time - (scheduled store time + level delay); plain = listener time - store time",
      ],
    };
  } finally {
    await cluster.close();
    await cleanup();
  }
}
