/**
 * Quickstart: a name server and a broker embedded in this process, a producer and a consumer.
 * Run: npx tsx examples/quickstart.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Producer, PushConsumer, startLocalCluster } from "../index.ts";

// 1. A cluster in this process: one name server, one broker storing under a temp dir. Servers
//    log JSON lines at "info" by default; "warn" keeps this example's output to its own lines.
const dir = await mkdtemp(path.join(tmpdir(), "actormq-quickstart-"));
const cluster = await startLocalCluster({ dir, broker: { logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;

// 2. A producer: the topic is created on its first send (autoCreateTopic); each send resolves
//    once the broker has the message on disk.
const producer = await Producer.start({ group: "quickstart-producer", nameservers });
for (const text of ["hello", "from", "actormq"]) {
  const r = await producer.send({ topic: "Greetings", body: text, tags: "demo" });
  console.log(`sent ${text}: ${r.status} ${r.msgId}`);
}

// 3. A push consumer: it joins group "quickstart-group", is given the topic's queues and
//    calls the listener with each message, from the first one (CONSUME_FROM_FIRST_OFFSET).
//    CONSUME_SUCCESS commits it. (A consumer started before its topic exists waits for it, and
//    logs a warning saying so.)
const received: string[] = [];
let allReceived!: () => void;
const done = new Promise<void>((r) => (allReceived = r));
const consumer = await PushConsumer.start({
  group: "quickstart-group",
  nameservers,
  subscriptions: { Greetings: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  listener: async (msgs) => {
    for (const m of msgs) {
      received.push(m.body.toString());
      console.log(`received ${m.body.toString()} from ${m.brokerName}:${m.queueId}@${m.queueOffset}`);
    }
    if (received.length === 3) allReceived();
    return "CONSUME_SUCCESS";
  },
});

// 4. Wait for the consumer, then close everything (close resolves once sockets and files are released).
await done;
await producer.close();
await consumer.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
console.log(`quickstart done: ${received.length} messages`);
