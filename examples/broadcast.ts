/**
 * Broadcasting vs clustering. In a CLUSTERING group (the default) the queues are shared out, so
 * each message reaches one member. In a BROADCASTING group every member gets every message, and
 * each member keeps its own offsets in a local file instead of on the broker.
 * Run: npx tsx examples/broadcast.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../index.ts";

const dir = await mkdtemp(path.join(tmpdir(), "actormq-broadcast-"));
const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;
const admin = await Admin.start({ nameservers });
await admin.createTopic({ topic: "PriceUpdates", readQueueNums: 4, writeQueueNums: 4 });

// 1. Three members per group. Members of one process need distinct `instanceName`s: the instance
//    name is part of the client id the broker tells members apart by.
const MEMBERS = 3;
const N = 12;
const counts = { BROADCASTING: [0, 0, 0], CLUSTERING: [0, 0, 0] };
const consumers: PushConsumer[] = [];
for (const model of ["BROADCASTING", "CLUSTERING"] as const) {
  for (let i = 0; i < MEMBERS; i++) {
    consumers.push(
      await PushConsumer.start({
        group: `prices-${model.toLowerCase()}`,
        nameservers,
        model,
        instanceName: `${model}-${i}`,
        // broadcasting offsets live here, one file per member
        offsetStoreDir: path.join(dir, "offsets"),
        subscriptions: { PriceUpdates: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs: MessageExt[]) => {
          counts[model][i]! += msgs.length;
          return "CONSUME_SUCCESS";
        },
      }),
    );
  }
}

// 2. Each clustering member rebalances until the four queues are split among the three members;
//    each broadcasting member holds all four. (A clustering member also holds a queue of its
//    group's retry topic, %RETRY%<group>, where failed messages come back: not counted here.)
const topicQueues = (c: PushConsumer) => c.assignment().filter((q) => q.topic === "PriceUpdates").length;
const clustering = consumers.slice(MEMBERS);
for (let t = 0; clustering.reduce((n, c) => n + topicQueues(c), 0) !== 4 || clustering.some((c) => topicQueues(c) === 0); t++) {
  if (t > 200) throw new Error("the clustering group did not settle within 10 s");
  await new Promise((r) => setTimeout(r, 50));
}
console.log(`broadcasting assignment: ${consumers.slice(0, MEMBERS).map(topicQueues).join(", ")} queues`);
console.log(`clustering assignment: ${clustering.map(topicQueues).join(", ")} queues`);

// 3. Send N messages and wait until both groups consumed them all.
const producer = await Producer.start({ group: "prices-producer", nameservers });
for (let i = 0; i < N; i++) await producer.send({ topic: "PriceUpdates", body: `price-${i}` });
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
for (let t = 0; sum(counts.BROADCASTING) < MEMBERS * N || sum(counts.CLUSTERING) < N; t++) {
  if (t > 500) throw new Error("the messages were not all consumed within 10 s");
  await new Promise((r) => setTimeout(r, 20));
}

console.log(`broadcasting: each member got ${counts.BROADCASTING.join(", ")} of ${N}`);
console.log(`clustering: members got ${counts.CLUSTERING.join(", ")} (total ${sum(counts.CLUSTERING)})`);

await producer.close();
for (const c of consumers) await c.close();
await admin.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
