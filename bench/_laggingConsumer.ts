/**
 * A push consumer that falls behind on purpose, in its own process so its RSS is its own: the
 * listener takes `listenerMs` per message, and every `sampleMs` the process prints one JSON line
 * with its memory and its process queues' cache. Used by `bench/memory.ts`; SIGTERM closes it.
 *
 * Usage: node --import tsx bench/_laggingConsumer.ts '<json of LaggingConsumerArgs>'
 */
import { PushConsumer } from "../index.ts";

export interface LaggingConsumerArgs {
  nameserver: string;
  topic: string;
  group: string;
  /** time the listener takes per message */
  listenerMs: number;
  pullThresholdForQueue?: number;
  consumeConcurrentlyMaxSpan?: number;
  sampleMs: number;
}

/** One line the consumer prints. */
export interface LaggingSample {
  rssMiB: number;
  heapUsedMiB: number;
  externalMiB: number;
  /** messages cached over the topic's held queues, and in the fullest one */
  cached: number;
  cachedMaxQueue: number;
  cachedBodyMiB: number;
  queues: number;
  consumed: number;
  /** pulls put off by any of the three flow controls (count, size, span) */
  flowControlled: number;
}

const MIB = 1024 * 1024;
const args = JSON.parse(process.argv[2] ?? "{}") as LaggingConsumerArgs;
let consumed = 0;
const c = await PushConsumer.start({
  group: args.group,
  nameservers: [args.nameserver],
  instanceName: `${args.group}-lagging`,
  subscriptions: { [args.topic]: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  ...(args.pullThresholdForQueue ? { pullThresholdForQueue: args.pullThresholdForQueue } : {}),
  ...(args.consumeConcurrentlyMaxSpan ? { consumeConcurrentlyMaxSpan: args.consumeConcurrentlyMaxSpan } : {}),
  listener: async () => {
    await new Promise((r) => setTimeout(r, args.listenerMs));
    consumed++;
    return "CONSUME_SUCCESS";
  },
});
const timer = setInterval(() => {
  const m = process.memoryUsage();
  const pqs = c.processQueueStats().filter((q) => q.mq.topic === args.topic); // not the retry topic's
  const s: LaggingSample = {
    rssMiB: m.rss / MIB,
    heapUsedMiB: m.heapUsed / MIB,
    externalMiB: (m.external + m.arrayBuffers) / MIB,
    cached: pqs.reduce((a, q) => a + q.msgCount, 0),
    cachedMaxQueue: pqs.reduce((a, q) => Math.max(a, q.msgCount), 0),
    cachedBodyMiB: pqs.reduce((a, q) => a + q.msgSize, 0) / MIB,
    queues: pqs.length,
    consumed,
    flowControlled: c.pullService.stats.flowControlCount + c.pullService.stats.flowControlSize + c.pullService.stats.flowControlSpan,
  };
  process.stdout.write(`${JSON.stringify(s)}\n`);
}, args.sampleMs);
process.once("SIGTERM", () => {
  clearInterval(timer);
  void c.close().finally(() => process.exit(0));
});
