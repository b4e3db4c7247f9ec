/**
 * Memory: the broker's RSS during a W1-like burst (produce, then drain), and the RSS of a push
 * consumer that is far behind — with backlogs of different sizes, and with a larger
 * pullThresholdForQueue — to show that what a lagging consumer holds follows its flow-control
 * thresholds, not the backlog. The consumer runs in its own process (`_laggingConsumer.ts`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Admin, Producer } from "../index.ts";
import type { LaggingConsumerArgs, LaggingSample } from "./_laggingConsumer.ts";
import { drain, sendBatches } from "./_load.ts";
import { startServer, stopServer } from "./_server.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

/** the bound for the broker's RSS during W1 (README, Performance) */
const BROKER_RSS_TARGET_MIB = 300;
const QUEUES = 4;
const SAMPLE_MS = 100;
const here = path.dirname(fileURLToPath(import.meta.url));

/** VmHWM of a process (its peak resident set since it started), MiB; Linux only. */
function peakRssMiB(pid: number): number {
  const s = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = /VmHWM:\s+(\d+) kB/.exec(s)?.[1];
  if (!kb) throw new Error(`no VmHWM in /proc/${pid}/status: this bench needs Linux`);
  return Number(kb) / 1024;
}

interface LagCase {
  name: string;
  backlog: number;
  pullThresholdForQueue?: number;
  consumeConcurrentlyMaxSpan?: number;
}

/** The sample fields whose highest value over the measured seconds is reported. */
const PEAK_FIELDS = ["rssMiB", "heapUsedMiB", "externalMiB", "cached", "cachedMaxQueue", "cachedBodyMiB"] as const;
type Peaks = Pick<LaggingSample, (typeof PEAK_FIELDS)[number]>;

interface LagResult {
  peak: Peaks;
  /** consumed by the end of measuring; the rest of the backlog (cached included) is behind */
  consumed: number;
}

/** Runs the lagging consumer on `topic` until its flow control engaged, then samples it for `seconds`. */
async function lagging(nameserver: string, topic: string, c: LagCase, seconds: number): Promise<LagResult> {
  const args: LaggingConsumerArgs = {
    nameserver,
    topic,
    group: `bench-mem-${c.name}`,
    listenerMs: 50,
    pullThresholdForQueue: c.pullThresholdForQueue,
    consumeConcurrentlyMaxSpan: c.consumeConcurrentlyMaxSpan,
    sampleMs: SAMPLE_MS,
  };
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", path.join(here, "_laggingConsumer.ts"), JSON.stringify(args)], {
    cwd: path.join(here, ".."),
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((r) => child.once("exit", r));
  // a consumer that stops printing is killed, which ends the read loop below with an error
  const watchdog = setTimeout(() => child.kill("SIGKILL"), (90 + seconds) * 1000);
  const peak = Object.fromEntries(PEAK_FIELDS.map((k) => [k, 0])) as Peaks;
  let consumed = 0;
  try {
    // measuring starts when every queue is held and (with a backlog) flow control has engaged
    // on each of them at least twice, or the whole backlog is in the consumer; an empty topic
    // measures the consumer's own footprint
    let measureFrom = 0;
    let complete = false;
    const deadline = Date.now() + 60_000;
    for await (const line of createInterface({ input: child.stdout! })) {
      const s = JSON.parse(line) as LaggingSample;
      if (!measureFrom) {
        const settled = c.backlog === 0 || s.flowControlled >= 2 * QUEUES || s.cached + s.consumed >= c.backlog;
        if (s.queues === QUEUES && settled) measureFrom = Date.now();
        else if (Date.now() > deadline) throw new Error(`the lagging consumer did not settle in 60 s: ${line}`);
        continue;
      }
      for (const k of PEAK_FIELDS) peak[k] = Math.max(peak[k], s[k]);
      consumed = s.consumed;
      if (Date.now() - measureFrom >= seconds * 1000) {
        complete = true;
        break;
      }
    }
    if (!complete) throw new Error(`the lagging consumer stopped ${measureFrom ? "while measured" : "before it settled"}`);
    return { peak, consumed };
  } finally {
    clearTimeout(watchdog);
    child.kill("SIGTERM");
    const stuck = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(stuck);
  }
}

const round = (x: number, d = 1) => Number(x.toFixed(d));

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "actormq-bench-memory-"));
  const log = (s: string) => opts.verbose && console.log(s);
  const w1 = opts.quick ? 20_000 : 100_000;
  const small = opts.quick ? 5_000 : 50_000;
  const large = opts.quick ? 80_000 : 400_000;
  const seconds = opts.quick ? 3 : 8;
  const server = await startServer(path.join(tmp, "store"));
  const nameservers = [server.nameserver];
  const brokerPid = server.child.pid!;
  try {
    const admin = await Admin.start({ nameservers });
    const p = await Producer.start({ group: "bench-memory-producer", nameservers });

    // the broker during W1: 1 KiB messages into one queue with 8 x 32 in flight, then one drain
    await admin.createTopic({ topic: "BenchMemW1", readQueueNums: 1, writeQueueNums: 1 });
    const produced = Math.round(await sendBatches(p, "BenchMemW1", w1));
    const consumed = Math.round(await drain(nameservers, "BenchMemW1", "bench-mem-w1", w1));
    // W1 is the server's first work, so its peak since start is its peak during W1
    const brokerW1PeakMiB = peakRssMiB(brokerPid);
    log(`W1 ${w1} x 1 KiB: produce ${produced} msg/s, drain ${consumed} msg/s; broker RSS peak ${brokerW1PeakMiB.toFixed(1)} MiB`);

    const cases: LagCase[] = [
      { name: "idle", backlog: 0 },
      { name: "small", backlog: small },
      { name: "large", backlog: large },
      // the span limit (2 000 by default) would bind before a 10 000-message threshold
      { name: "large-10x-threshold", backlog: large, pullThresholdForQueue: 10_000, consumeConcurrentlyMaxSpan: 20_000 },
    ];
    const results = new Map<string, LagResult>();
    for (const c of cases) {
      const topic = `BenchMemLag-${c.name}`;
      await admin.createTopic({ topic, readQueueNums: QUEUES, writeQueueNums: QUEUES });
      if (c.backlog > 0) await sendBatches(p, topic, c.backlog);
      const r = await lagging(server.nameserver, topic, c, seconds);
      results.set(c.name, r);
      log(
        `lagging consumer, ${c.name} (backlog ${c.backlog}, pullThresholdForQueue ${c.pullThresholdForQueue ?? 1000}, ` +
          `consumeConcurrentlyMaxSpan ${c.consumeConcurrentlyMaxSpan ?? 2000}): ` +
          `RSS peak ${r.peak.rssMiB.toFixed(1)} MiB (heap ${r.peak.heapUsedMiB.toFixed(1)}, external ${r.peak.externalMiB.toFixed(1)}), ` +
          `cached ${r.peak.cached} (${r.peak.cachedBodyMiB.toFixed(1)} MiB of bodies, fullest queue ${r.peak.cachedMaxQueue}), ` +
          `${r.consumed} consumed, ${c.backlog - r.consumed} behind`,
      );
    }
    const brokerPeakMiB = peakRssMiB(brokerPid);
    await p.close();
    await admin.close();
    const get = (n: string) => results.get(n)!;
    return {
      workload: "memory",
      metrics: {
        brokerW1RssPeakMiB: round(brokerW1PeakMiB),
        brokerRssPeakMiB: round(brokerPeakMiB),
        consumerIdleRssPeakMiB: round(get("idle").peak.rssMiB),
        consumerSmallBacklogRssPeakMiB: round(get("small").peak.rssMiB),
        consumerLargeBacklogRssPeakMiB: round(get("large").peak.rssMiB),
        consumerLargeBacklog10xThresholdRssPeakMiB: round(get("large-10x-threshold").peak.rssMiB),
        consumerSmallBacklogCachedPeak: get("small").peak.cached,
        consumerLargeBacklogCachedPeak: get("large").peak.cached,
        consumerLargeBacklog10xThresholdCachedPeak: get("large-10x-threshold").peak.cached,
        consumerLargeBacklogBehind: large - get("large").consumed,
      },
      baseline: { brokerRssTargetMiB: BROKER_RSS_TARGET_MIB, pullThresholdForQueue: 1000 },
      ratio: {
        brokerW1VsTarget: round(brokerW1PeakMiB / BROKER_RSS_TARGET_MIB, 3),
        consumerLargeVsSmallBacklog: round(get("large").peak.rssMiB / get("small").peak.rssMiB, 3),
      },
      notes: [
        `broker = \`actormq start\` (async flush) in a child process; W1 = ${w1} x 1 KiB into 1 queue (8 x 32 in flight), then one drain`,
        `lagging consumer: its own process, ${QUEUES} queues, a listener taking 50 ms per message (20 consume threads), ` +
          `measured for ${seconds} s once flow control engaged; backlogs ${small} and ${large} x 1 KiB`,
      ],
    };
  } finally {
    await stopServer(server);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
