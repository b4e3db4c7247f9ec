/**
 * A concurrent member cut off from its broker (a network partition, simulated by a TCP proxy that
 * blackholes its connections) while another member of the group is not. The broker expires the
 * cut-off member (channelExpiredTimeoutMs) and the other takes its queues over and consumes them;
 * when the partition heals, the rebalance gives the queues back. The member kept them all along
 * (its rebalances got no member list while cut off), with the offsets it had at the cut: it must
 * read the broker's committed offset again before it commits or pulls them, and go on from the
 * other member's, which is further. Checked: the group's committed offset of every queue never
 * moves back, the cut-off member consumes nothing again that the other consumed past what it had
 * pulled before the cut, and nothing is lost.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Broker, type BrokerOptions, type MessageExt, NameServer, Producer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { freePort, TcpProxy } from "./fixtures/tcpProxy.ts";

const TOPIC = "Partition";
const GROUP = "cgPartition";

test("a concurrent member cut off from the broker resumes its queues from the other member's offset, never moving it back", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-partition-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const port = await freePort();
  const proxy = await TcpProxy.start(port);
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: `tcp://127.0.0.1:${port}`,
    advertise: proxy.address,
    nameservers: [ns.address],
    storeDir: path.join(dir, "a"),
    flush: "async",
    // the cut-off member is dropped from the group within ~3 s (ZeroMQ notices the lost link in 5 s)
    channelExpiredTimeoutMs: 3000,
    clientScanIntervalMs: 250,
  } as BrokerOptions);
  const admin = await Admin.start({ nameservers: [ns.address] });
  const consumers: PushConsumer[] = [];
  let producer: Producer | undefined;
  let sending = false;
  let sampling = true;
  try {
    await admin.createTopic({ topic: TOPIC, readQueueNums: 4, writeQueueNums: 4 });
    /** "queueId:queueOffset" -> members that consumed it, in order */
    const consumed = new Map<string, string[]>();
    const bodies = new Set<string>();
    const member = (name: string) =>
      PushConsumer.start({
        group: GROUP,
        nameservers: [ns.address],
        instanceName: `partition-${name}`,
        subscriptions: { [TOPIC]: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        // back in the group soon after the heal; no rebalance round of its own while it is cut off
        // (rebalanceIntervalMs stays 20 s: a round that spans the heal may hear the member list before
        // the member is back in it and let its queues go, the graceful path), so it keeps its queues
        heartbeatBrokerIntervalMs: 300,
        persistConsumerOffsetIntervalMs: 200,
        listener: async (msgs: MessageExt[]) => {
          for (const m of msgs) {
            const k = `${m.queueId}:${m.queueOffset}`;
            const by = consumed.get(k) ?? [];
            by.push(name);
            consumed.set(k, by);
            bodies.add(m.body.toString());
          }
          return "CONSUME_SUCCESS";
        },
      });
    // c1's connections to the broker are the ones the proxy accepts while it starts
    const c1From = proxy.accepted;
    const c1 = await member("c1");
    consumers.push(c1);
    const c1To = proxy.accepted;
    assert.ok(c1To > c1From, "c1 reached the broker through the proxy");
    const c2 = await member("c2");
    consumers.push(c2);
    const held = (c: PushConsumer) =>
      c
        .assignment()
        .filter((q) => q.topic === TOPIC)
        .map((q) => q.queueId)
        .sort();
    await waitFor(() => held(c1).length === 2 && held(c2).length === 2, 15_000, "c1 and c2 hold 2 queues each");

    producer = await Producer.start({ group: "pgPartition", nameservers: [ns.address] });
    const p = producer;
    const acked = new Set<string>();
    sending = true;
    const sender = (async () => {
      for (let i = 0; sending; i++) {
        const body = `m${i}`;
        await p.send({ topic: TOPIC, body }).then(
          () => acked.add(body),
          () => {},
        );
        await new Promise((r) => setTimeout(r, 2));
      }
    })();

    // the group's committed offset of each queue, sampled all along: it must never move back
    const committed = new Map<number, number>();
    const movedBack: string[] = [];
    const sampler = (async () => {
      while (sampling) {
        const progress = await admin.consumerProgress(GROUP).catch(() => []);
        for (const e of progress) {
          if (e.topic !== TOPIC) continue;
          const before = committed.get(e.queueId) ?? 0;
          if (e.consumerOffset < before) movedBack.push(`queue ${e.queueId}: ${before} -> ${e.consumerOffset}`);
          else committed.set(e.queueId, e.consumerOffset);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const cut = held(c1);
    await waitFor(() => cut.every((q) => (committed.get(q) ?? 0) > 50), 15_000, "c1 committed on its queues");
    const pullErrors = c1.pullService.stats.errors;
    proxy.blackhole(c1From, c1To);
    // c1 notices the lost link (its pulls in flight fail), the broker drops it, c2 takes its queues
    await waitFor(() => c1.pullService.stats.errors > pullErrors, 15_000, "c1 noticed its lost connection");
    await waitFor(() => held(c2).length === 4, 15_000, "c2 took c1's queues over");
    // c1 pulled nothing since the cut: what it has pulled of its queues ends here
    const pulledTo = new Map(c1.processQueueStats().flatMap((s) => (s.mq.topic === TOPIC ? [[s.mq.queueId, s.nextOffset]] : [])));
    assert.deepEqual([...pulledTo.keys()].sort(), cut, "c1 still holds its queues, cut off");
    await waitFor(
      () => cut.every((q) => (committed.get(q) ?? 0) >= pulledTo.get(q)! + 100),
      20_000,
      "c2 consumed c1's queues past what c1 had pulled",
    );

    proxy.heal();
    await waitFor(
      () => JSON.stringify(held(c1)) === JSON.stringify(cut) && held(c2).length === 2,
      20_000,
      "c1 got its queues back after the heal",
    );
    // c1 consumes its queues again
    const consumedBy = (name: string, q: number) => [...consumed].filter(([k, by]) => k.startsWith(`${q}:`) && by.includes(name)).length;
    const c1Before = new Map(cut.map((q) => [q, consumedBy("c1", q)]));
    await waitFor(() => cut.every((q) => consumedBy("c1", q) > c1Before.get(q)! + 50), 20_000, "c1 consumed its queues after the heal");
    sending = false;
    await sender;
    await waitFor(
      async () => {
        const progress = (await admin.consumerProgress(GROUP)).filter((e) => e.topic === TOPIC);
        return progress.length === 4 && progress.every((e) => e.lag === 0);
      },
      20_000,
      "everything sent consumed and committed",
    );
    sampling = false;
    await sampler;

    assert.deepEqual(movedBack, [], "the group's committed offsets never moved back");
    // consumed by both: only what c1 had pulled before the cut (c2 started at c1's last commit)
    const again: string[] = [];
    for (const [k, by] of consumed) {
      const [q, offset] = k.split(":").map(Number) as [number, number];
      if (!cut.includes(q) || offset < pulledTo.get(q)!) continue;
      if (by.includes("c1") && by.includes("c2")) again.push(`${k} by ${by.join(", ")}`);
    }
    assert.deepEqual(again.slice(0, 10), [], `${again.length} messages consumed again by c1 after c2 consumed them`);
    const lost = [...acked].filter((b) => !bodies.has(b));
    assert.deepEqual(lost.slice(0, 10), [], `${lost.length} acknowledged messages never consumed`);
  } finally {
    sending = false;
    sampling = false;
    await Promise.all(consumers.map((c) => c.close()));
    await producer?.close();
    await admin.close();
    await broker.close();
    await ns.close();
    await proxy.close();
    await cleanup();
  }
});
