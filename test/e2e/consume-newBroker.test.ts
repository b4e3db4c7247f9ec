/**
 * A broker group joins a topic two members consume. The first member to learn the new route
 * heartbeats the new broker before the other has: the new broker lists only that member, and a
 * rebalance that believed it would take every queue (taking the other's queues over after the
 * hand-over timeout while the other still pulls them). The member list is the union of every
 * broker's, so it takes its share only.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Broker, NameServer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const TOPIC = "NewBroker";

test("a member that heard of a new broker first takes its share of the queues, not all of them", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-consume-newbroker-");
  const closers: (() => Promise<unknown>)[] = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
    await cleanup();
  });
  const ns = await NameServer.start({ listen: EPHEMERAL });
  closers.push(() => ns.close());
  const nameservers = [ns.address];
  const brokerA = await Broker.start({ brokerName: "broker-a", listen: EPHEMERAL, nameservers, storeDir: path.join(dir, "a") });
  closers.push(() => brokerA.close());
  const admin = await Admin.start({ nameservers });
  closers.push(() => admin.close());
  await admin.createTopic({ topic: TOPIC, brokers: ["broker-a"], readQueueNums: 4, writeQueueNums: 4 });

  const member = async (instanceName: string, pollNameServerIntervalMs: number, rebalanceIntervalMs: number) => {
    const c = await PushConsumer.start({
      group: "cgNewBroker",
      nameservers,
      instanceName,
      pollNameServerIntervalMs,
      rebalanceIntervalMs,
      subscriptions: { [TOPIC]: "*" },
      listener: async () => "CONSUME_SUCCESS",
    });
    closers.push(() => c.close());
    return c;
  };
  // client ids sort by instance name: "m1" first. m2 learns routes at once and rebalances often;
  // m1 does not hear of the new broker during the test
  const slow = await member("m1", 600_000, 20_000);
  const fast = await member("m2", 100, 200);
  const held = (c: PushConsumer) =>
    c
      .assignment()
      .filter((q) => q.topic === TOPIC)
      .map((q) => `${q.brokerName}:${q.queueId}`)
      .sort();
  await waitFor(() => held(slow).length === 2 && held(fast).length === 2, 15_000, "two queues each");
  assert.deepEqual(held(slow), ["broker-a:0", "broker-a:1"]);

  const brokerB = await Broker.start({ brokerName: "broker-b", listen: EPHEMERAL, nameservers, storeDir: path.join(dir, "b") });
  closers.push(() => brokerB.close());
  await admin.createTopic({ topic: TOPIC, brokers: ["broker-b"], readQueueNums: 4, writeQueueNums: 4 });

  let most = 0;
  const watch = () => {
    most = Math.max(most, held(fast).length);
    return true;
  };
  await waitFor(() => watch() && held(fast).some((q) => q.startsWith("broker-b:")), 15_000, "m2 holds queues of broker-b");
  // broker-b lists only m2 for a while; over ten more rounds m2 must never count itself alone
  const rebalancer = (fast as unknown as { rebalancer: { rounds: number } }).rebalancer;
  const rounds = rebalancer.rounds;
  await waitFor(() => watch() && rebalancer.rounds >= rounds + 10, 15_000, "ten more rebalance rounds of m2");
  assert.ok(most <= 4, `m2 held up to ${most} of the 8 queues: it counted itself the only member`);
  assert.deepEqual(held(fast), ["broker-b:0", "broker-b:1", "broker-b:2", "broker-b:3"]);
  assert.deepEqual(held(slow), ["broker-a:0", "broker-a:1"], "m1 keeps its queues");
});
