/**
 * Orderly consumption with a master/slave pair (reference §15, §18): locks live on the master
 * only, so while it is down no member consumes (a slave grants no lock the group can rely on);
 * once the master is back the queues are locked again and consumption goes on in queue order,
 * never by two members at once, with nothing lost. With slaveReadEnable, a consumer far behind is
 * sent to the slave (the 40 % rule) and keeps its queue order.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { brokerStatsOf } from "../../actors/broker/brokerStats.ts";
import { Admin, Broker, type MessageQueue, NameServer, Producer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const QUEUES = 4;

test("orderly with a slave: nothing consumed while the master is down, per-queue order and single ownership after it returns", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-slave-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const common = {
    brokerName: "os",
    nameservers: [ns.address],
    flush: "async" as const,
    registerIntervalMs: 300,
    haHoldMs: 500,
    haReconnectMs: 100,
    slaveSyncIntervalMs: 300,
    lockMaxLiveTimeMs: 3000,
  };
  let master = await Broker.start({ ...common, listen: EPHEMERAL, storeDir: path.join(dir, "m") } as never);
  const masterListen = master.address;
  const slave = await Broker.start({
    ...common,
    listen: EPHEMERAL,
    brokerId: 1,
    role: "SLAVE",
    masterAddress: masterListen,
    storeDir: path.join(dir, "s"),
  } as never);
  const clientTiming = { nameservers: [ns.address], pollNameServerIntervalMs: 200 };
  const admin = await Admin.start(clientTiming);
  const producer = await Producer.start({ group: "os-pg", ...clientTiming });
  const consumers: PushConsumer[] = [];
  const seen: { client: string; q: number; off: number; t: number }[] = [];
  const inside = new Map<number, string>();
  const overlaps: string[] = [];
  /** when each batch began (ms) */
  const starts: number[] = [];
  try {
    await admin.createTopic({ topic: "OrdSlave", readQueueNums: QUEUES, writeQueueNums: QUEUES });
    const sendTo = async (q: number, n: number) => {
      const msgs = Array.from({ length: n }, (_, i) => ({ topic: "OrdSlave", body: `${q}:${i}` }));
      await producer.sendBatch(msgs, { selector: (mqs: MessageQueue[]) => mqs.find((m) => m.queueId === q), arg: q });
    };
    for (let q = 0; q < QUEUES; q++) await sendTo(q, 40);
    await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "slave caught up");

    const start = async (name: string) => {
      const c = await PushConsumer.start({
        group: "os-cg",
        ...clientTiming,
        instanceName: `os-${name}`,
        subscriptions: { OrdSlave: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly: true,
        persistConsumerOffsetIntervalMs: 200,
        rebalanceIntervalMs: 500,
        heartbeatBrokerIntervalMs: 300,
        rebalanceLockIntervalMs: 300,
        rebalanceLockMaxLiveTimeMs: 1500,
        brokerSuspendMaxTimeMillis: 500,
        listener: async (msgs, ctx) => {
          const q = ctx.messageQueue.queueId;
          const other = inside.get(q);
          if (other !== undefined) overlaps.push(`${name} in queue ${q} while ${other}`);
          inside.set(q, name);
          starts.push(Date.now());
          try {
            await new Promise((r) => setTimeout(r, 20));
            for (const m of msgs) seen.push({ client: name, q, off: m.queueOffset, t: Date.now() });
          } finally {
            inside.delete(q);
          }
          return "SUCCESS" as const;
        },
      });
      consumers.push(c);
    };
    await start("A");
    await start("B");
    await waitFor(() => seen.length >= 40, 15_000, "some consumed");

    await master.close();
    const downAt = Date.now();
    // past the life of the locks the consumers held (1.5 s), with the slave still serving pulls
    await waitFor(() => Date.now() - downAt > 3000, 5000, "the master down for 3 s");
    const upAt = Date.now();
    master = await Broker.start({ ...common, listen: masterListen, storeDir: path.join(dir, "m") } as never);
    for (let q = 0; q < QUEUES; q++) await sendTo(q, 10);
    await waitFor(
      () => {
        for (let q = 0; q < QUEUES; q++) {
          const offs = new Set(seen.filter((s) => s.q === q).map((s) => s.off));
          if (offs.size < 50) return false;
        }
        return true;
      },
      30_000,
      "everything consumed after the master returned",
    );
    assert.deepEqual(overlaps, []);
    const whileDown = starts.filter((t) => t > downAt + 1600 && t < upAt);
    assert.deepEqual(whileDown, [], "no batch began once the locks lapsed with the master down");
    for (let q = 0; q < QUEUES; q++) {
      const offs = seen.filter((s) => s.q === q).map((s) => s.off);
      // every rewind goes back no further than where a member consumed from; each run ascends by one
      for (let i = 1; i < offs.length; i++)
        if (offs[i] !== offs[i - 1]! + 1) assert.ok(offs[i]! <= offs[i - 1]!, `queue ${q}: gap ${offs[i - 1]} -> ${offs[i]}`);
    }
  } finally {
    for (const c of consumers) await c.close();
    await producer.close();
    await admin.close();
    await slave.close();
    await master.close();
    await ns.close();
    await cleanup();
  }
});

test("orderly with slaveReadEnable: a consumer far behind reads from the slave, in queue order, and comes back to the master", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-slaveread-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const common = {
    brokerName: "osr",
    nameservers: [ns.address],
    flush: "async" as const,
    haHoldMs: 500,
    haReconnectMs: 100,
    slaveReadEnable: true,
    physicalMemoryBytes: 100_000,
  };
  const master = await Broker.start({ ...common, listen: EPHEMERAL, storeDir: path.join(dir, "m") } as never);
  const slave = await Broker.start({
    ...common,
    listen: EPHEMERAL,
    brokerId: 1,
    role: "SLAVE",
    masterAddress: master.address,
    storeDir: path.join(dir, "s"),
  } as never);
  const clientTiming = { nameservers: [ns.address], pollNameServerIntervalMs: 200 };
  const admin = await Admin.start(clientTiming);
  const producer = await Producer.start({ group: "osr-pg", ...clientTiming });
  let consumer: PushConsumer | undefined;
  const offs: number[][] = Array.from({ length: 2 }, () => []);
  try {
    await admin.createTopic({ topic: "OrdSlaveRead", readQueueNums: 2, writeQueueNums: 2 });
    for (let q = 0; q < 2; q++)
      for (let b = 0; b < 5; b++) {
        const msgs = Array.from({ length: 20 }, () => ({ topic: "OrdSlaveRead", body: Buffer.alloc(1000, q) }));
        await producer.sendBatch(msgs, { selector: (mqs: MessageQueue[]) => mqs.find((m) => m.queueId === q), arg: q });
      }
    await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "slave caught up");
    consumer = await PushConsumer.start({
      group: "osr-cg",
      ...clientTiming,
      subscriptions: { OrdSlaveRead: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly: true,
      pullBatchSize: 8,
      listener: async (msgs, ctx) => {
        for (const m of msgs) offs[ctx.messageQueue.queueId]!.push(m.queueOffset);
        return "SUCCESS" as const;
      },
    });
    await waitFor(() => offs.every((o) => new Set(o).size === 100), 20_000, "all consumed");
    for (const o of offs)
      for (let i = 1; i < o.length; i++) assert.ok(o[i] === o[i - 1]! + 1 || o[i]! <= o[i - 1]!, `order ${o[i - 1]} -> ${o[i]}`);
    assert.ok(brokerStatsOf(slave.ctx).getTotal > 0, "the slave served pulls the master pointed to it");
  } finally {
    await consumer?.close();
    await producer.close();
    await admin.close();
    await slave.close();
    await master.close();
    await ns.close();
    await cleanup();
  }
});
