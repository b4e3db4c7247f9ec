/**
 * Deleting a topic and a consumer group on a master and its slave: routes gone at once, the topic
 * created again starts empty and is consumed from its start, the group's offsets dropped; a slave
 * that missed the deletion follows its master's.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { Admin, type Broker, type LocalCluster, MQError, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { BrokerActor } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let admin: Admin;
let producer: Producer;
let master: Broker;
let slave: Broker;

before(async () => {
  const t = await tempDir("actormq-topic-delete-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, slavesPerBroker: 1, broker: { flush: "async" } });
  [master, slave] = cluster.brokers as [Broker, Broker];
  admin = await Admin.start({ nameservers: cluster.nameservers });
  producer = await Producer.start({ group: "pgDel", nameservers: cluster.nameservers });
});

after(async () => {
  await producer?.close();
  await admin?.close();
  await cluster?.close();
  await cleanup();
});

const total = (b: Broker, topic: string) => [0, 1].reduce((n, q) => n + b.ctx.store.getMaxOffset(topic, q), 0);
const code = (c: string) => (e: unknown) => e instanceof MQError && e.code === c;

/** Consumes `topic` with `group` from its first offset until `n` messages came; closes the consumer. */
async function consume(group: string, topic: string, n: number): Promise<string[]> {
  const got: string[] = [];
  const c = await PushConsumer.start({
    group,
    nameservers: cluster.nameservers,
    subscriptions: { [topic]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) got.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  try {
    await waitFor(() => got.length >= n, 30_000, `${n} messages of ${topic} consumed by ${group}`);
  } finally {
    await c.close();
  }
  return got.sort();
}

test("a deleted topic leaves master, slave and routes; created again it starts empty and its group reads it from the start", async () => {
  await admin.createTopic({ topic: "Del", readQueueNums: 2, writeQueueNums: 2 });
  for (let i = 0; i < 10; i++) await producer.send({ topic: "Del", body: `old-${i}`, keys: "k" });
  assert.equal((await consume("cgDel", "Del", 10)).length, 10);
  await waitFor(() => total(slave, "Del") === 10, 20_000, "the slave to copy the old messages");
  assert.ok(consumerOffsetsOf(master.ctx).offsetsOf("cgDel", "Del"), "the group committed offsets");

  const r = await admin.deleteTopic("Del");
  assert.deepEqual(r.brokers.sort(), [master.address, slave.address].sort());
  await assert.rejects(admin.topicRoute("Del"), code("TOPIC_NOT_EXIST"), "the route is gone at once");
  assert.ok(!(await admin.topicList()).includes("Del"));
  for (const b of [master, slave]) {
    assert.equal(b.ctx.topics.get("Del"), undefined, `topic config on ${b.address}`);
    assert.equal(total(b, "Del"), 0, `messages on ${b.address}`);
    assert.equal(consumerOffsetsOf(b.ctx).offsetsOf("cgDel", "Del"), undefined, `offsets on ${b.address}`);
  }
  await assert.rejects(admin.deleteTopic("Del"), code("TOPIC_NOT_EXIST"));

  await admin.createTopic({ topic: "Del", readQueueNums: 2, writeQueueNums: 2 });
  for (let i = 0; i < 3; i++) await producer.send({ topic: "Del", body: `new-${i}`, keys: "k" });
  assert.equal(total(master, "Del"), 3, "the topic created again starts at offset 0");
  // the group's old offsets (5 per queue) would start it past the 3 new messages
  assert.deepEqual(await consume("cgDel", "Del", 3), ["new-0", "new-1", "new-2"]);
  await waitFor(() => total(slave, "Del") === 3, 20_000, "the slave to copy the new messages only");
  const found = await admin.queryMessageByKey("Del", "k");
  assert.deepEqual(found.map((m) => m.body.toString()).sort(), ["new-0", "new-1", "new-2"]);
});

test("deleting a group drops its config, its offsets (--clean-offset) and its retry topic", async () => {
  await admin.createTopic({ topic: "DelG", readQueueNums: 2, writeQueueNums: 2 });
  for (let i = 0; i < 4; i++) await producer.send({ topic: "DelG", body: `m-${i}` });
  await consume("cgGone", "DelG", 4);
  await waitFor(() => slave.ctx.groups.get("cgGone") !== undefined, 20_000, "the slave to copy the group");
  assert.ok(consumerOffsetsOf(master.ctx).offsetsOf("cgGone", "DelG"));

  const r = await admin.deleteSubscriptionGroup("cgGone", { cleanOffset: true });
  assert.ok(r.brokers.includes(master.address), JSON.stringify(r));
  assert.ok(r.offsetsRemoved >= 1, JSON.stringify(r));
  assert.ok(r.topicsDeleted.includes("%RETRY%cgGone"), JSON.stringify(r));
  for (const b of [master, slave]) {
    assert.equal(b.ctx.groups.get("cgGone"), undefined, `group config on ${b.address}`);
    assert.equal(consumerOffsetsOf(b.ctx).offsetsOf("cgGone", "DelG"), undefined, `offsets on ${b.address}`);
    assert.equal(b.ctx.topics.get("%RETRY%cgGone"), undefined, `retry topic on ${b.address}`);
  }
  await assert.rejects(admin.consumerProgress("cgGone"), code("SUBSCRIPTION_GROUP_NOT_EXIST"));
  await assert.rejects(admin.deleteSubscriptionGroup("cgGone"), code("SUBSCRIPTION_GROUP_NOT_EXIST"));
  // the group starts over: from the first offset again
  assert.equal((await consume("cgGone", "DelG", 4)).length, 4);
});

test("system, retry and dead-letter topics are refused; a slave that missed a deletion follows its master's", async () => {
  for (const t of ["TBW102", "SCHEDULE_TOPIC_XXXX", "%RETRY%cg", "%DLQ%cg"])
    await assert.rejects(admin.deleteTopic(t), code("INVALID_PARAMETER"), t);
  await assert.rejects(admin.deleteTopic("Del", { cluster: "NoSuchCluster" }), code("ILLEGAL_ARGUMENT"));

  await admin.createTopic({ topic: "DelS", readQueueNums: 2, writeQueueNums: 2 });
  for (let i = 0; i < 5; i++) await producer.send({ topic: "DelS", body: `s-${i}` });
  await waitFor(() => total(slave, "DelS") === 5, 20_000, "the slave to copy the messages");
  // deleted on the master alone, as when the slave was down during the admin's deletion
  await admin.instance.refAt(master.address, BrokerActor.BROKER).ask({ type: "DELETE_TOPIC_IN_BROKER", topic: "DelS" });
  await waitFor(
    () => slave.ctx.store.deletedTopics().DelS === master.ctx.store.deletedTopics().DelS,
    20_000,
    "the slave to delete the topic at its master's offset",
  );
  assert.equal(total(slave, "DelS"), 0);
  assert.equal(slave.ctx.topics.get("DelS"), undefined);
});
