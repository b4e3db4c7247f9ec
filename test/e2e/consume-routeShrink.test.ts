/**
 * The only name server drops broker-b under a running consumer (as one restarted while broker-b
 * could not reach it), and broker-b registers again only later, so for a while the route lists
 * broker-a alone and the consumer lets broker-b's queues go. Their final offsets must reach broker-b as they are let go (the consumer
 * still knows its address), so when broker-b is back the consumer takes its queues again from
 * where it left them: nothing is consumed twice by the group's only member (internals §6.5).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { Broker, NameServer, Producer, PushConsumer } from "../../index.ts";
import { NAMESRV_ACTOR, type UnregisterBrokerRequest } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const TOPIC = "RouteShrink";
const GROUP = "cgRouteShrink";

test("a consumer whose route loses a broker for a while commits that broker's queues as it lets them go and consumes nothing twice", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-consume-routeshrink-");
  const closers: (() => Promise<unknown>)[] = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
    await cleanup();
  });
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  closers.push(() => ns.close());
  const nameservers = [ns.address];
  const start = (brokerName: string, registerIntervalMs: number) =>
    Broker.start({
      brokerName,
      listen: EPHEMERAL,
      nameservers,
      storeDir: path.join(dir, brokerName),
      flush: "async",
      registerIntervalMs,
      // above the registration interval, as a broker requires
      heartbeatTimeoutMs: Math.max(120_000, 2 * registerIntervalMs),
      logLevel: "silent",
    });
  const a = await start("broker-a", 200);
  closers.push(() => a.close());
  // registers again only when told to below
  const b = await start("broker-b", 600_000);
  closers.push(() => b.close());
  await a.createTopic({ topic: TOPIC, readQueueNums: 2, writeQueueNums: 2 });
  await b.createTopic({ topic: TOPIC, readQueueNums: 2, writeQueueNums: 2 });

  const consumed = new Map<string, string[]>();
  const consumer = await PushConsumer.start({
    group: GROUP,
    nameservers,
    pollNameServerIntervalMs: 200,
    rebalanceIntervalMs: 600_000,
    // offsets reach the brokers only when a queue is let go (and at close)
    persistConsumerOffsetIntervalMs: 600_000,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    subscriptions: { [TOPIC]: "*" },
    listener: async (msgs) => {
      for (const m of msgs) {
        const k = m.body.toString();
        consumed.set(k, [...(consumed.get(k) ?? []), `${m.brokerName}:${m.queueId}@${m.queueOffset}`]);
      }
      return "CONSUME_SUCCESS";
    },
  });
  closers.push(() => consumer.close());
  const producer = await Producer.start({ group: "pgRouteShrink", nameservers, instanceName: "routeShrinkProducer" });
  closers.push(() => producer.close());
  const held = () => consumer.assignment().filter((q) => q.topic === TOPIC);
  await waitFor(() => held().length === 4, 10_000, "all four queues held");

  let sent = 0;
  const send = async (n: number) => {
    for (let i = 0; i < n; i++) await producer.send({ topic: TOPIC, body: `m${sent++}` });
  };
  await send(40);
  await waitFor(() => consumed.size === sent, 10_000, `the first ${sent} messages consumed`);

  // a broker re-registers with a name server as soon as its connection to it is back, so a
  // restart would not leave the route without broker-b: the name server is told it left instead
  await b.ctx.node.ref(ns.address, NAMESRV_ACTOR).ask({
    type: "UNREGISTER_BROKER",
    clusterName: b.ctx.config.clusterName,
    brokerName: "broker-b",
    brokerAddr: b.address,
    brokerId: 0,
  } satisfies UnregisterBrokerRequest & { type: string });
  await waitFor(() => held().length === 2 && held().every((q) => q.brokerName === "broker-a"), 10_000, "broker-b's queues let go");
  // the final offsets of the queues let go are on broker-b, though no route names it now
  const committed = (q: number) => consumerOffsetsOf(b.ctx).offsetsOf(GROUP, TOPIC)?.get(q);
  await waitFor(
    () => [0, 1].every((q) => committed(q) === b.store.getMaxOffset(TOPIC, q)),
    5_000,
    "broker-b's queues committed at their end as they were let go",
  );

  await b.ctx.registerNow();
  await waitFor(() => held().length === 4, 10_000, "broker-b's queues held again");
  await send(40);
  await waitFor(() => consumed.size === sent, 10_000, `all ${sent} messages consumed`);
  // a queue taken again from an older offset delivers its old messages before the new ones
  const twice = [...consumed].filter(([, by]) => by.length > 1);
  assert.deepEqual(twice, [], "no message consumed twice by the group's only member");
});
