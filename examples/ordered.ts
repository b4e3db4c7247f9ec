/**
 * Ordered messages. RocketMQ keeps order per queue, so: (1) the producer sends every message of
 * one order to the same queue, chosen by a selector from a sharding key (the order id); (2) the
 * consumer is `orderly: true`, which consumes each queue one batch at a time, holding the queue's
 * lock on the broker so no other member of the group reads it meanwhile. Different orders still
 * progress in parallel on different queues.
 * Run: npx tsx examples/ordered.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Admin, type MessageExt, Producer, PushConsumer, selectByHash, startLocalCluster } from "../index.ts";

const dir = await mkdtemp(path.join(tmpdir(), "actormq-ordered-"));
const cluster = await startLocalCluster({ dir, broker: { logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;
const admin = await Admin.start({ nameservers });
await admin.createTopic({ topic: "OrderSteps", readQueueNums: 4, writeQueueNums: 4 });

const ORDERS = ["order-1", "order-2", "order-3", "order-4", "order-5", "order-6"];
const STEPS = ["created", "paid", "packed", "shipped"];

// 1. Two orderly members of one group share the four queues; each queue is consumed by the
//    member holding its lock, one batch at a time. The steps seen per order are recorded.
const seen = new Map<string, string[]>();
let suspendedOnce = false;
let allSeen!: () => void;
const done = new Promise<void>((r) => (allSeen = r));
const listener = async (msgs: MessageExt[]) => {
  for (const m of msgs) {
    // a transient failure: SUSPEND_CURRENT_QUEUE_A_MOMENT pauses this queue and redelivers the
    // same batch, so the steps after it wait too and the order is kept
    if (!suspendedOnce && m.body.toString() === "order-3:paid") {
      suspendedOnce = true;
      console.log("order-3:paid failed once; its queue waits and retries it");
      return "SUSPEND_CURRENT_QUEUE_A_MOMENT" as const;
    }
  }
  for (const m of msgs) {
    const [order, step] = m.body.toString().split(":") as [string, string];
    seen.set(order, [...(seen.get(order) ?? []), step]);
  }
  if ([...seen.values()].reduce((n, s) => n + s.length, 0) === ORDERS.length * STEPS.length) allSeen();
  return "SUCCESS" as const;
};
const consumers: PushConsumer[] = [];
for (let i = 0; i < 2; i++) {
  consumers.push(
    await PushConsumer.start({
      group: "order-steps-group",
      nameservers,
      instanceName: `orderly-${i}`,
      orderly: true,
      subscriptions: { OrderSteps: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      suspendCurrentQueueTimeMillis: 200,
      listener,
    }),
  );
}

// 2. Send the steps interleaved across orders (created of all orders, then paid of all, ...).
//    selectByHash picks queue = hash(arg) mod queue count: one order, one queue.
const producer = await Producer.start({ group: "order-steps-producer", nameservers });
const queueOf = new Map<string, number>();
for (const step of STEPS) {
  for (const order of ORDERS) {
    const r = await producer.send({ topic: "OrderSteps", body: `${order}:${step}`, keys: order }, { selector: selectByHash, arg: order });
    queueOf.set(order, r.queue.queueId);
  }
}
console.log(`queues by order: ${ORDERS.map((o) => `${o}->${queueOf.get(o)}`).join(", ")}`);

await done;
for (const order of ORDERS) console.log(`${order}: ${seen.get(order)!.join(" -> ")}`);
const inOrder = ORDERS.every((o) => seen.get(o)!.join() === STEPS.join());
console.log(`every order's steps in sending order: ${inOrder}`);

await producer.close();
for (const c of consumers) await c.close();
await admin.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
