/**
 * The pull consumer: the application decides when to fetch. Assign queues yourself (or subscribe
 * and let the group share them out), poll for batches, seek to replay, commit offsets when the
 * work is done.
 * Run: npx tsx examples/pull-consumer.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Admin, Producer, PullConsumer, startLocalCluster } from "../index.ts";

const dir = await mkdtemp(path.join(tmpdir(), "actormq-pull-"));
const cluster = await startLocalCluster({ dir, broker: { logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;
const admin = await Admin.start({ nameservers });
await admin.createTopic({ topic: "Invoices", readQueueNums: 2, writeQueueNums: 2 });
const producer = await Producer.start({ group: "invoices-producer", nameservers });
// one request, one queue: a batch lands on one queue, so send two batches
for (let b = 0; b < 2; b++)
  await producer.sendBatch(Array.from({ length: 10 }, (_, i) => ({ topic: "Invoices", body: `invoice-${b * 10 + i}` })));

// 1. Manual assignment and manual commit: take both queues of the topic, starting from the first
//    message (a group with no committed offset starts where consumeFromWhere says).
const pc = await PullConsumer.start({
  group: "invoices-batch",
  nameservers,
  autoCommit: false,
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
});
const queues = await pc.fetchMessageQueues("Invoices");
await pc.assign(queues);
const seen = new Set<string>();
for (let t = 0; seen.size < 20; t++) {
  if (t > 50) throw new Error("not every invoice was polled");
  // poll resolves with what arrived within the timeout (possibly nothing)
  for (const m of await pc.poll(200)) seen.add(m.body.toString());
}
console.log(`polled ${seen.size} invoices from ${queues.length} queues`);
// the offsets of what poll returned are committed to the broker only now
await pc.commit();

// 2. Seek: go back to offset 5 of the first queue and read from there again.
const q = queues[0]!;
await pc.seek(q, 5);
const replayed: number[] = [];
for (let t = 0; replayed.length < 5; t++) {
  if (t > 50) throw new Error("the replay did not come");
  for (const m of await pc.poll(200)) replayed.push(m.queueOffset);
}
console.log(`after seek to 5 on queue ${q.queueId}: offsets ${replayed.join(", ")}`);
// a seek moves the position that commit stores, so commit again once the replay is handled
await pc.commit();
await pc.close();

// 3. The committed progress, as `actormq progress --group invoices-batch` shows it.
for (const p of (await admin.consumerProgress("invoices-batch")).filter((p) => p.topic === "Invoices")) {
  console.log(`queue ${p.queueId}: broker offset ${p.brokerOffset}, committed ${p.consumerOffset}, lag ${p.lag}`);
}

await producer.close();
await admin.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
