/**
 * SQL92 filter: the broker and client only deliver messages whose properties match an
 * expression (RocketMQ's grammar: comparisons, BETWEEN, IN, IS NULL, AND/OR/NOT).
 * Run: npx tsx examples/sql-filter.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Producer, PushConsumer, startLocalCluster } from "../index.ts";

const dir = await mkdtemp(path.join(tmpdir(), "actormq-sql-"));
const cluster = await startLocalCluster({ dir, broker: { logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;

// Properties are strings on the wire; numeric comparisons convert them the way RocketMQ does.
const producer = await Producer.start({ group: "sql-producer", nameservers });
for (let i = 0; i < 10; i++) {
  await producer.send({ topic: "Readings", body: `reading-${i}`, properties: { value: String(i), region: i % 2 ? "north" : "south" } });
}

// Only region = 'north' AND value > 4: readings 5, 7 and 9.
const got: string[] = [];
let finish!: () => void;
const done = new Promise<void>((r) => (finish = r));
const consumer = await PushConsumer.start({
  group: "sql-group",
  nameservers,
  subscriptions: { Readings: { sql92: "region = 'north' AND value > 4" } },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  listener: async (msgs) => {
    for (const m of msgs) got.push(m.body.toString());
    if (got.length >= 3) finish();
    return "CONSUME_SUCCESS";
  },
});
await done;
console.log("matched:", got.sort().join(", "));
await consumer.close();
await producer.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
console.log("sql-filter done");
