/**
 * Your own actor in the pipeline. actormq's parts are xstate actors hosted on an ActorNode; your
 * code can be one too. Here an "enricher" machine (states idle -> processing -> idle) sits
 * between two topics: a PushConsumer hands it each batch of "Orders" as one event, it looks the
 * customer up, produces the enriched orders to "EnrichedOrders" and answers the event; the
 * listener returns CONSUME_SUCCESS only after that answer, so an order is committed only once its
 * enriched copy is stored. Batches that arrive while it is busy wait in its context.
 * Run: npx tsx examples/custom-actor.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { assign, fromPromise, setup } from "xstate";
import { ActorNode, Admin, MQError, Producer, PushConsumer, type Replier, startLocalCluster } from "../index.ts";

interface Order {
  orderId: string;
  customerId: string;
  amount: number;
}
/** One batch of orders; `reply` is present because the consumer asks (request/reply). */
type EnrichBatch = { type: "ENRICH"; orders: Order[]; reply?: Replier };
type EnricherEvent = EnrichBatch;
interface EnricherContext {
  producer: Producer;
  customers: Record<string, string>;
  /** batches received while processing, handled in arrival order */
  pending: EnrichBatch[];
  current: EnrichBatch | null;
  enriched: number;
}

// 1. The machine: pure transitions; the side effect (sending to the broker) is an invoked promise
//    actor, so a test could swap it with `enricherMachine.provide({ actors: { publish: ... } })`.
const enricherMachine = setup({
  types: {
    context: {} as EnricherContext,
    events: {} as EnricherEvent,
    input: {} as { producer: Producer; customers: Record<string, string> },
  },
  actors: {
    publish: fromPromise<number, { producer: Producer; customers: Record<string, string>; orders: Order[] }>(async ({ input }) => {
      const out = input.orders.map((o) => ({
        topic: "EnrichedOrders",
        keys: o.orderId,
        body: JSON.stringify({ ...o, customerName: input.customers[o.customerId] ?? "unknown" }),
      }));
      // one request for the whole batch
      await input.producer.sendBatch(out);
      return out.length;
    }),
  },
  actions: {
    enqueue: assign({ pending: ({ context, event }) => [...context.pending, event] }),
    takeNext: assign(({ context }) => ({ current: context.pending[0] ?? null, pending: context.pending.slice(1) })),
    answer: assign(({ context, event }) => {
      const n = (event as unknown as { output: number }).output;
      context.current?.reply?.ok({ enriched: n });
      return { enriched: context.enriched + n, current: null };
    }),
    fail: assign(({ context, event }) => {
      const err = (event as unknown as { error: unknown }).error;
      context.current?.reply?.fail(err instanceof MQError ? err : new MQError("SYSTEM_ERROR", `enrichment failed: ${String(err)}`));
      return { current: null };
    }),
  },
  guards: {
    hasPending: ({ context }) => context.pending.length > 0,
  },
}).createMachine({
  id: "enricher",
  context: ({ input }) => ({ producer: input.producer, customers: input.customers, pending: [], current: null, enriched: 0 }),
  initial: "idle",
  states: {
    idle: {
      always: { guard: "hasPending", target: "processing" },
      on: { ENRICH: { actions: "enqueue", target: "processing" } },
    },
    processing: {
      entry: "takeNext",
      invoke: {
        src: "publish",
        input: ({ context }) => ({ producer: context.producer, customers: context.customers, orders: context.current?.orders ?? [] }),
        onDone: { target: "idle", actions: "answer" },
        onError: { target: "idle", actions: "fail" },
      },
      on: { ENRICH: { actions: "enqueue" } },
    },
  },
});

// 2. A cluster, the two topics, and a node for our own actors. `listen: null`: the enricher is
//    reached from this process only; with an address, other processes could ask it too.
const dir = await mkdtemp(path.join(tmpdir(), "actormq-custom-actor-"));
const cluster = await startLocalCluster({ dir, broker: { logLevel: "warn" }, nameserver: { logLevel: "warn" } });
const { nameservers } = cluster;
const admin = await Admin.start({ nameservers });
for (const topic of ["Orders", "EnrichedOrders"]) await admin.createTopic({ topic, readQueueNums: 2, writeQueueNums: 2 });
const producer = await Producer.start({ group: "orders-producer", nameservers });
const node = await ActorNode.start({ listen: null });
node.spawn("enricher", enricherMachine, { input: { producer, customers: { c1: "Ada", c2: "Grace", c3: "Linus" } } });

// 3. Watch the enricher's transitions through the node's inspection stream (what the visual
//    debugger draws).
const transitions = new Map<string, number>();
let lastState = "idle";
node.inspect((r) => {
  if (r.kind !== "snapshot" || r.actorName !== "enricher" || typeof r.value !== "string") return;
  if (r.value !== lastState) transitions.set(`${lastState} -> ${r.value}`, (transitions.get(`${lastState} -> ${r.value}`) ?? 0) + 1);
  lastState = r.value;
});

// 4. The consumer of "Orders" forwards each batch to the enricher as one event and waits for its answer.
const enricher = node.ref(null, "enricher");
const orders = await PushConsumer.start({
  group: "enricher-group",
  nameservers,
  subscriptions: { Orders: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  consumeMessageBatchMaxSize: 8,
  listener: async (msgs) => {
    const batch: Order[] = msgs.map((m) => JSON.parse(m.body.toString()) as Order);
    await enricher.ask({ type: "ENRICH", orders: batch }, { timeoutMs: 10_000 });
    return "CONSUME_SUCCESS";
  },
});

// 5. Downstream: a consumer of "EnrichedOrders" that stops the example once all have arrived.
const N = 20;
const names = new Map<string, string>();
let allEnriched!: () => void;
const done = new Promise<void>((r) => (allEnriched = r));
const downstream = await PushConsumer.start({
  group: "enriched-reader",
  nameservers,
  subscriptions: { EnrichedOrders: "*" },
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  listener: async (msgs) => {
    for (const m of msgs) {
      const o = JSON.parse(m.body.toString()) as Order & { customerName: string };
      names.set(o.orderId, o.customerName);
    }
    if (names.size === N) allEnriched();
    return "CONSUME_SUCCESS";
  },
});

for (let i = 0; i < N; i++) {
  const order: Order = { orderId: `o${i}`, customerId: `c${(i % 3) + 1}`, amount: 10 * i };
  await producer.send({ topic: "Orders", keys: order.orderId, body: JSON.stringify(order) });
}
await done;
// the downstream copy can arrive before the enricher has its answer: wait for it to be idle again
for (let t = 0; lastState !== "idle"; t++) {
  if (t > 100) throw new Error("the enricher did not finish within 5 s");
  await new Promise((r) => setTimeout(r, 50));
}
console.log(`enriched ${names.size} orders: o0=${names.get("o0")}, o1=${names.get("o1")}, o2=${names.get("o2")}`);
console.log(`enricher transitions: ${[...transitions.entries()].map(([t, n]) => `${t} x${n}`).join(", ")}`);

await orders.close();
await downstream.close();
await node.close();
await producer.close();
await admin.close();
await cluster.close();
await rm(dir, { recursive: true, force: true });
