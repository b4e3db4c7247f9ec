/**
 * Retries and the dead-letter queue. A listener that returns RECONSUME_LATER (or throws) hands
 * the message back to the broker, which redelivers it later through the group's retry topic
 * `%RETRY%<group>`, waiting at delay level 3, then 4, 5, ... After `maxReconsumeTimes` failed
 * redeliveries the message goes to `%DLQ%<group>`, where it waits for a person or a program to
 * look at it: it is a topic like any other.
 * The broker gets 100 ms delay levels here so the example finishes in a few seconds.
 * Run: npx tsx examples/retry-dlq.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../index.ts";

// 1. 18 levels of 100 ms steps: the first retry waits at level 3 (300 ms), the second at 4 (400 ms).
const LEVELS = Array.from({ length: 18 }, (_, i) => `${(i + 1) * 100}ms`).join(" ");
const dir = await mkdtemp(path.join(tmpdir(), "actormq-retry-dlq-"));
const cluster = await startLocalCluster({ dir, broker: { messageDelayLevel: LEVELS, logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;
const admin = await Admin.start({ nameservers });
await admin.createTopic({ topic: "Payments", readQueueNums: 1, writeQueueNums: 1 });

// 2. The listener fails "flaky" once and "poison" every time. reconsumeTimes counts redeliveries.
const GROUP = "payments-group";
let flakyDone!: () => void;
const flakyOk = new Promise<void>((r) => (flakyDone = r));
const consumer = await PushConsumer.start({
  group: GROUP,
  nameservers,
  subscriptions: { Payments: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  // two redeliveries, then the DLQ (RocketMQ's default is 16)
  maxReconsumeTimes: 2,
  listener: async (msgs: MessageExt[]) => {
    for (const m of msgs) {
      const body = m.body.toString();
      console.log(`delivery of ${body}, reconsumeTimes ${m.reconsumeTimes}`);
      if (body === "poison") throw new Error("cannot parse this payment");
      if (body === "flaky" && m.reconsumeTimes === 0) return "RECONSUME_LATER";
      if (body === "flaky") flakyDone();
    }
    return "CONSUME_SUCCESS";
  },
});

const producer = await Producer.start({ group: "payments-producer", nameservers });
await producer.send({ topic: "Payments", body: "flaky", keys: "payment-1" });
const poison = await producer.send({ topic: "Payments", body: "poison", keys: "payment-2" });
await flakyOk;
console.log("flaky succeeded on its first retry");

// 3. A second consumer reads the dead letters. The DLQ is created by the broker when the first
//    message goes there, so this reader polls the route until it exists.
const dlq = `%DLQ%${GROUP}`;
for (let t = 0; ; t++) {
  if (
    await admin.topicRoute(dlq).then(
      () => true,
      () => false,
    )
  )
    break;
  if (t > 100) throw new Error(`${dlq} was not created within 10 s`);
  await new Promise((r) => setTimeout(r, 100));
}
let deadLetter!: (m: MessageExt) => void;
const dead = new Promise<MessageExt>((r) => (deadLetter = r));
const dlqReader = await PushConsumer.start({
  group: "payments-dlq-reader",
  nameservers,
  subscriptions: { [dlq]: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  listener: async (msgs) => {
    for (const m of msgs) deadLetter(m);
    return "CONSUME_SUCCESS";
  },
});
const m = await dead;
// the dead letter keeps the original message id and says where it came from
console.log(
  `dead letter: ${m.body.toString()} from ${m.properties.RETRY_TOPIC}, reconsumeTimes ${m.reconsumeTimes}, same id: ${m.msgId === poison.msgId}`,
);

await dlqReader.close();
await consumer.close();
await producer.close();
await admin.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
