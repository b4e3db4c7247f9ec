/**
 * Bad input on the consumption path: an unparsable subscription fails start (not later), an
 * unknown group is refused when auto-creation is off, a pull for a queue id out of range is
 * answered INVALID_PARAMETER; nothing crashes.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ActorNode, Admin, type LocalCluster, MQError, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await tempDir("actormq-consume-bad-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, broker: { flush: "async", autoCreateSubscriptionGroup: false } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  await admin.createTopic({ topic: "Bad", readQueueNums: 2, writeQueueNums: 2 });
  await admin.close();
});

after(async () => {
  await cluster?.close();
  await cleanup?.();
});

test("an unparsable subscription fails start with SUBSCRIPTION_PARSE_FAILED", async () => {
  for (const expr of ["||", " || ", { sql92: "a >" }, { sql92: "" }]) {
    await assert.rejects(
      PushConsumer.start({
        group: "cgBadSub",
        nameservers: cluster.nameservers,
        subscriptions: { Bad: expr },
        listener: async () => "CONSUME_SUCCESS",
      }),
      (e: unknown) => e instanceof MQError && e.code === "SUBSCRIPTION_PARSE_FAILED",
      `expression ${JSON.stringify(expr)}`,
    );
  }
  // the failed starts left nothing behind: a good one starts under the same group
  const c = await PushConsumer.start({
    group: "cgBadSub",
    nameservers: cluster.nameservers,
    subscriptions: { Bad: "*" },
    listener: async () => "CONSUME_SUCCESS",
  });
  await c.close();
});

test("an unknown group with autoCreateSubscriptionGroup off consumes nothing and reports why", async () => {
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  let consumed = 0;
  const c = await PushConsumer.start({
    group: "cgUnknown",
    nameservers: cluster.nameservers,
    subscriptions: { Bad: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    rebalanceIntervalMs: 500,
    listener: async (msgs) => {
      consumed += msgs.length;
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await producer.send({ topic: "Bad", body: "x" });
    await waitFor(() => c.pullService.stats.errors > 0, 10_000, "a refused pull");
    const err = c.pullService.stats.lastError;
    assert.ok(err instanceof MQError && err.code === "SUBSCRIPTION_GROUP_NOT_EXIST", `pull refused: ${String(err)}`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(consumed, 0);
    // once the group exists the same consumer proceeds on its own (pulls are retried after 1 s)
    const node = await ActorNode.start({ listen: null });
    await node.ref(cluster.brokers[0]!.address, "broker").ask({ type: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", groupName: "cgUnknown" });
    await node.close();
    await waitFor(() => consumed === 1, 10_000, "the message once the group exists");
  } finally {
    await c.close();
    await producer.close();
  }
});

test("a pull for a queue id out of range is answered INVALID_PARAMETER", async () => {
  const node = await ActorNode.start({ listen: null });
  try {
    await node.ref(cluster.brokers[0]!.address, "broker").ask({ type: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", groupName: "cgRange" });
    const pull = node.ref(cluster.brokers[0]!.address, "pull");
    await assert.rejects(
      pull.ask({
        type: "PULL_MESSAGE",
        consumerGroup: "cgRange",
        topic: "Bad",
        queueId: 99,
        queueOffset: 0,
        maxMsgNums: 32,
        sysFlag: 0,
        commitOffset: 0,
        suspendTimeoutMillis: 0,
        subVersion: 0,
      }),
      (e: unknown) => e instanceof MQError && e.code === "INVALID_PARAMETER",
    );
  } finally {
    await node.close();
  }
});
