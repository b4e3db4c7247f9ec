import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { setup } from "xstate";
import { CLUSTER_REQUEST_TIMEOUT_MS, wireClusterSource } from "../../../actors/inspector/clusterView.ts";
import { ActorNode, type Replier } from "../../../actors/runtime/index.ts";
import { Admin, Producer, PushConsumer, startLocalCluster } from "../../../index.ts";
import { BrokerActor, NAMESRV_ACTOR } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../../helpers.ts";

test("the cluster view lists a clustering group's lag and leaves a broadcasting group out (its offsets are its members'), reporting no error", async () => {
  const { dir, cleanup } = await tempDir("actormq-clusterview-");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const producer = await Producer.start({ group: "pgView", nameservers: cluster.nameservers });
  const node = await ActorNode.start({ listen: null });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "ViewT", readQueueNums: 1, writeQueueNums: 1 });
    await producer.sendBatch([1, 2, 3].map((i) => ({ topic: "ViewT", body: `m${i}` })));
    const got = { cgViewB: 0, cgViewC: 0 };
    for (const group of ["cgViewB", "cgViewC"] as const)
      consumers.push(
        await PushConsumer.start({
          group,
          nameservers: cluster.nameservers,
          instanceName: group,
          model: group === "cgViewB" ? "BROADCASTING" : "CLUSTERING",
          offsetStoreDir: path.join(dir, "offsets"),
          consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
          subscriptions: { ViewT: "*" },
          listener: async (msgs) => {
            got[group] += msgs.length;
            return "CONSUME_SUCCESS";
          },
        }),
      );
    await waitFor(() => got.cgViewB >= 3 && got.cgViewC >= 3, 15_000, "both groups consumed the 3 messages");
    const view = await wireClusterSource({ node, nameservers: () => cluster.nameservers, assignments: () => [] })();
    assert.deepEqual(view.errors, []);
    const groups = view.groups.map((g) => g.group);
    assert.ok(groups.includes("cgViewC"), groups.join(" "));
    assert.ok(!groups.includes("cgViewB"), groups.join(" "));
  } finally {
    for (const c of consumers) await c.close();
    await node.close();
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("a broker that lists its topics and then answers no offset query holds the cluster view up for one request timeout, not one per queue", async () => {
  type Ev = { type: string; reply?: Replier };
  const fakeBroker = await ActorNode.start({ listen: EPHEMERAL });
  const fakeNs = await ActorNode.start({ listen: EPHEMERAL });
  const node = await ActorNode.start({ listen: null });
  try {
    const answer = (fields: (e: Ev) => Record<string, unknown> | undefined) =>
      setup({ types: { events: {} as Ev } }).createMachine({
        on: {
          "*": {
            actions: ({ event }) => {
              const f = fields(event);
              if (f) event.reply?.ok(f);
            },
          },
        },
      });
    const topicConfigTable = Object.fromEntries(
      ["HungA", "HungB"].map((t) => [t, { topicName: t, readQueueNums: 4, writeQueueNums: 4, perm: 6, order: false }]),
    );
    fakeBroker.spawn(
      BrokerActor.BROKER,
      answer((e) => (e.type === "GET_ALL_TOPIC_CONFIG" ? { topicConfigTable } : { subscriptionGroupTable: {} })),
    );
    // the offsets actor takes GET_MAX_OFFSET and never answers
    fakeBroker.spawn(
      BrokerActor.OFFSETS,
      answer(() => undefined),
    );
    fakeNs.spawn(
      NAMESRV_ACTOR,
      answer(() => ({
        brokerAddrTable: { hung: { cluster: "C", brokerName: "hung", brokerAddrs: { "0": fakeBroker.address } } },
        clusterAddrTable: { C: ["hung"] },
      })),
    );
    const began = performance.now();
    const view = await wireClusterSource({ node, nameservers: () => [fakeNs.address!], assignments: () => [] })();
    const took = performance.now() - began;
    assert.deepEqual(
      view.topics.map((t) => [t.topic, t.queues.length]),
      [
        ["HungA", 4],
        ["HungB", 4],
      ],
    );
    assert.equal(view.errors.filter((e) => e.startsWith("GET_MAX_OFFSET")).length, 8, view.errors.join("\n"));
    assert.ok(
      took < 3 * CLUSTER_REQUEST_TIMEOUT_MS,
      `built in ${Math.round(took)} ms (8 queues, ${CLUSTER_REQUEST_TIMEOUT_MS} ms timeout each)`,
    );
  } finally {
    await node.close();
    await fakeNs.close();
    await fakeBroker.close();
  }
});
