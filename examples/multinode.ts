/**
 * Multi-node: a name server and two brokers as separate processes (what `actormq cluster up`
 * does), a producer and a consumer in this process, then everything stopped again.
 * Run: npx tsx examples/multinode.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { clusterDown, clusterUp } from "../actors/cluster/index.ts";
import { Admin, Producer, PushConsumer } from "../index.ts";

// 1. Spawn the processes. Each gets its own ports, data dir and log file under `dir`, and
//    `dir/cluster.json` lists them (try `npx tsx bin/actormq.ts cluster status --dir <dir>`).
const dir = await mkdtemp(path.join(tmpdir(), "actormq-multinode-"));
console.log(`cluster dir: ${dir}`);
// Ctrl-C (or SIGTERM): the processes are detached and would outlive this one, so stop them first.
const interrupt = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => interrupt.abort(sig));
async function exitOnSignal(): Promise<never> {
  // an aborted clusterUp has already stopped what it spawned (and left no cluster file)
  await clusterDown(dir).catch(() => {});
  await rm(dir, { recursive: true, force: true });
  process.exit(128 + os.constants.signals[interrupt.signal.reason as NodeJS.Signals]);
}
const cluster = await clusterUp({
  dir,
  nameservers: 1,
  brokers: 2,
  logLevel: "warn",
  signal: interrupt.signal,
  onProgress: (n, total, p) => console.log(`ready ${n}/${total}: ${p.name} ${p.address}`),
}).catch((e) => (interrupt.signal.aborted ? exitOnSignal() : Promise.reject(e)));
if (interrupt.signal.aborted) await exitOnSignal();
interrupt.signal.addEventListener("abort", exitOnSignal);
const nameservers = cluster.nameservers;

try {
  // 2. A topic with 2 queues on each broker: 4 queues the producer spreads messages over.
  const admin = await Admin.start({ nameservers });
  await admin.createTopic({ topic: "Orders", readQueueNums: 2, writeQueueNums: 2 });
  await admin.close();

  // 3. Consume and produce across the processes.
  const perBroker = new Map<string, number>();
  let seen = 0;
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const consumer = await PushConsumer.start({
    group: "multinode-group",
    nameservers,
    subscriptions: { Orders: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) perBroker.set(m.brokerName, (perBroker.get(m.brokerName) ?? 0) + 1);
      seen += msgs.length;
      if (seen >= 20) finish();
      return "CONSUME_SUCCESS";
    },
  });
  const producer = await Producer.start({ group: "multinode-producer", nameservers });
  for (let i = 0; i < 20; i++) await producer.send({ topic: "Orders", body: `order-${i}` });
  await done;
  console.log("consumed per broker:", Object.fromEntries(perBroker));
  await producer.close();
  await consumer.close();
} catch (e) {
  // interrupted: the requests to the processes being stopped fail; that is not this run's error
  if (!interrupt.signal.aborted) throw e;
} finally {
  // interrupted: exitOnSignal stops the processes and exits with the signal's code
  if (interrupt.signal.aborted) await new Promise<never>(() => {});
  // 4. Stop exactly the processes this cluster file names.
  const { stopped } = await clusterDown(dir);
  console.log(`stopped ${stopped.length} processes`);
  await rm(dir, { recursive: true, force: true });
}
console.log("multinode done");
