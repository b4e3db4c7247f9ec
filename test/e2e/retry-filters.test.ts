/**
 * Retries with filtered subscriptions: a message a tag or SQL92 subscriber failed comes back to
 * that group through `%RETRY%<group>` (which the consumer subscribes with "*", as RocketMQ does),
 * with its tags and properties, while the messages the subscription does not select are never
 * delivered, neither first nor as another group's retry.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { MessageConst } from "../../transport/protocol.ts";
import { SHORT_DELAY_LEVELS, tempDir, waitFor } from "../helpers.ts";

const TOPIC = "RetryFiltered";

test("tag and SQL92 subscribers get their failed messages again through the retry topic, and never the ones they do not select", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-retry-filters-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", messageDelayLevel: SHORT_DELAY_LEVELS } });
  const producer = await Producer.start({ group: "filter-pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const consumers: PushConsumer[] = [];
  t.after(async () => {
    for (const c of consumers) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  });
  await admin.createTopic({ topic: TOPIC, readQueueNums: 1, writeQueueNums: 1 });

  const got = new Map<string, MessageExt[]>();
  const start = async (group: string, expr: string | { sql92: string }) => {
    got.set(group, []);
    consumers.push(
      await PushConsumer.start({
        group,
        nameservers: cluster.nameservers,
        subscriptions: { [TOPIC]: expr },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        listener: async (msgs) => {
          got.get(group)!.push(...msgs.map((m) => ({ ...m, properties: { ...m.properties } })));
          // every message but the sentinel fails its first delivery
          return msgs.some((m) => m.reconsumeTimes === 0 && !m.body.toString().startsWith("end")) ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
        },
      }),
    );
  };
  await start("tag-cg", "TagA || TagB");
  await start("sql-cg", { sql92: "region = 'eu' AND n > 1" });

  const send = (body: string, tags: string, region: string, n: number) =>
    producer.send({ topic: TOPIC, body, tags, properties: { region, n: String(n) } });
  await send("a-eu-2", "TagA", "eu", 2); // both groups
  await send("c-eu-5", "TagC", "eu", 5); // SQL92 only
  await send("b-us-3", "TagB", "us", 3); // tags only
  await send("a-eu-1", "TagA", "eu", 1); // tags only (n > 1 fails)
  // selected by both and never failed: once each group has it, every earlier message was pulled
  await send("end", "TagA", "eu", 10);

  const bodies = (group: string, times: number) =>
    got
      .get(group)!
      .filter((m) => m.reconsumeTimes === times)
      .map((m) => m.body.toString())
      .sort();
  const tagRetried = ["a-eu-1", "a-eu-2", "b-us-3"];
  const sqlRetried = ["a-eu-2", "c-eu-5"];
  for (const group of got.keys()) await waitFor(() => bodies(group, 0).includes("end"), 10_000, `the sentinel at ${group}`);
  await waitFor(() => bodies("tag-cg", 1).length >= tagRetried.length, 15_000, "tag-cg's retries");
  await waitFor(() => bodies("sql-cg", 1).length >= sqlRetried.length, 15_000, "sql-cg's retries");

  assert.deepEqual(bodies("tag-cg", 0), [...tagRetried, "end"].sort());
  assert.deepEqual(bodies("tag-cg", 1), tagRetried);
  assert.deepEqual(bodies("sql-cg", 0), [...sqlRetried, "end"].sort());
  assert.deepEqual(bodies("sql-cg", 1), sqlRetried);
  for (const [group, msgs] of got) {
    for (const m of msgs.filter((x) => x.reconsumeTimes === 1)) {
      assert.equal(m.topic, TOPIC, `${group}: the original topic restored`);
      assert.equal(m.properties[MessageConst.RETRY_TOPIC], TOPIC);
      const first = msgs.find((x) => x.reconsumeTimes === 0 && x.msgId === m.msgId)!;
      assert.ok(first, `${group}: the retry of ${m.body.toString()} is the message first delivered`);
      assert.equal(m.tags, first.tags, `${group}: tags kept`);
      assert.equal(m.properties.region, first.properties.region);
      assert.equal(m.properties.n, first.properties.n);
    }
  }
});
