import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { consumerTableOf } from "../../actors/broker/consumerManager.ts";
import { ActorNode } from "../../actors/runtime/index.ts";
import { Admin, PushConsumer, startLocalCluster } from "../../index.ts";
import { BrokerActor, NAMESRV_ACTOR, PERM_READ_WRITE, RETRY_GROUP_TOPIC_PREFIX, type SendMessageReply } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

/** An address nothing listens on: a port the OS handed out, then freed. */
async function deadAddress(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `tcp://127.0.0.1:${port}`;
}

test("consumer progress shows the retry-queue backlog of a broker that does not serve the group's topic, and is not failed by a dead broker off the group's retry route", async () => {
  const { dir, cleanup } = await tempDir("actormq-progress-retry-");
  const cluster = await startLocalCluster({ dir, brokers: 2, broker: { flush: "async" } });
  const [a, b] = cluster.brokers as [(typeof cluster.brokers)[0], (typeof cluster.brokers)[0]];
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const raw = await ActorNode.start({ listen: null });
  const group = "pr-cg";
  const retryTopic = RETRY_GROUP_TOPIC_PREFIX + group;
  try {
    await admin.createTopic({ topic: "PR", brokers: [a.brokerName], readQueueNums: 1, writeQueueNums: 1 });
    // the group's retry topic on the other broker (its main topic's broker was moved, say), with a message waiting
    await b.ctx.topics.createOrUpdate({ topicName: retryTopic, readQueueNums: 1, writeQueueNums: 1, perm: PERM_READ_WRITE, order: false });
    const consumer = await PushConsumer.start({
      group,
      nameservers: cluster.nameservers,
      subscriptions: { PR: "*" },
      listener: async () => "CONSUME_SUCCESS",
    });
    await waitFor(() => consumerTableOf(b.ctx).group(group), 20_000, "the group known on the retry topic's broker");
    await consumer.close();
    const r = await raw
      .ref(b.address, BrokerActor.BROKER)
      .ask<SendMessageReply>(
        { type: "SEND_MESSAGE", producerGroup: "pg", topic: retryTopic, queueId: 0, sysFlag: 0, bornTimestamp: Date.now() },
        { body: Buffer.from("waiting") },
      );
    assert.equal(r.fields.status, "SEND_OK");
    // a master of another cluster on the same name servers, dead but still registered, that never
    // served the group: it has none of its queues, and does not fail its progress
    await raw.ref(cluster.nameservers[0]!, NAMESRV_ACTOR).ask({
      type: "REGISTER_BROKER",
      clusterName: "OtherCluster",
      brokerName: "other-x",
      brokerAddr: await deadAddress(),
      brokerId: 0,
      topicConfigTable: {},
      dataVersion: 1,
    });
    const progress = await admin.consumerProgress(group);
    const retry = progress.find((q) => q.topic === retryTopic && q.brokerName === b.brokerName);
    assert.ok(retry, JSON.stringify(progress));
    assert.equal(retry.lag, 1);
    assert.ok(
      progress.some((q) => q.topic === "PR" && q.brokerName === a.brokerName),
      JSON.stringify(progress),
    );
  } finally {
    await raw.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});
