/**
 * Delayed messages: a message sent with `delayLevel` is held by the broker and delivered once its
 * level's time has passed (RocketMQ's delay levels; the default levels run from 1 s to 2 h).
 * Here the broker gets short levels of its own so the example finishes in about a second.
 * Run: npx tsx examples/delay.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Admin, Producer, PushConsumer, startLocalCluster } from "../index.ts";

// 1. Level n waits the n-th duration of `messageDelayLevel` (ms, s, m, h units are accepted).
const LEVELS = "200ms 500ms 1s";
const dir = await mkdtemp(path.join(tmpdir(), "actormq-delay-"));
const cluster = await startLocalCluster({ dir, broker: { messageDelayLevel: LEVELS, logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;
const admin = await Admin.start({ nameservers });
await admin.createTopic({ topic: "Reminders", readQueueNums: 1, writeQueueNums: 1 });

// 2. The consumer notes when each message arrives, relative to when it was sent (bornTimestamp).
const arrivals = new Map<string, number>();
let allArrived!: () => void;
const done = new Promise<void>((r) => (allArrived = r));
const consumer = await PushConsumer.start({
  group: "delay-group",
  nameservers,
  subscriptions: { Reminders: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  listener: async (msgs) => {
    for (const m of msgs) {
      const waited = Date.now() - m.bornTimestamp;
      arrivals.set(m.body.toString(), waited);
      console.log(`received ${m.body.toString()} after ${waited} ms`);
    }
    if (arrivals.size === 3) allArrived();
    return "CONSUME_SUCCESS";
  },
});

// 3. One message without a delay, one at level 1 (200 ms) and one at level 3 (1 s). The broker
//    parks delayed ones in SCHEDULE_TOPIC_XXXX and its scheduler re-stores them in "Reminders"
//    when due; the consumer never sees the parking topic.
const producer = await Producer.start({ group: "delay-producer", nameservers });
await producer.send({ topic: "Reminders", body: "now" });
await producer.send({ topic: "Reminders", body: "in-200ms", delayLevel: 1 });
await producer.send({ topic: "Reminders", body: "in-1s", delayLevel: 3 });

await done;
const order = [...arrivals.entries()].sort((a, b) => a[1] - b[1]).map(([body]) => body);
console.log(`arrival order: ${order.join(", ")}`);
console.log(`in-1s waited at least 1000 ms: ${arrivals.get("in-1s")! >= 1000}`);

await producer.close();
await consumer.close();
await admin.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
