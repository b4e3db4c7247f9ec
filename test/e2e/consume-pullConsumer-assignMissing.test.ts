/**
 * PullConsumer.assign of a queue the topic does not have: refused at once, naming the queue and the
 * topic's queue count there, rather than pulled and refused by the broker every second for good.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { pullLog } from "../../actors/client/pullService.ts";
import { Admin, isMQError, Producer, PullConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("pull consumer: assign of a queue id past the topic's read queues is refused and changes nothing; a topic grown since its route was cached is looked up again", async (t) => {
  const { dir, cleanup } = await tempDir();
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const { nameservers } = cluster;
  const brokerName = cluster.brokers[0]!.brokerName;
  const admin = await Admin.start({ nameservers });
  const producer = await Producer.start({ group: "pg", nameservers });
  // pulls held 1 s: the queue's next pull after the shrink comes soon
  const pc = await PullConsumer.start({
    group: "cgMissing",
    nameservers,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    brokerSuspendMaxTimeMillis: 1000,
  });
  t.after(async () => {
    await pc.close();
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  });
  await admin.createTopic({ topic: "Few", readQueueNums: 4, writeQueueNums: 4 });
  const q = (queueId: number) => ({ topic: "Few", brokerName, queueId });
  await pc.assign([q(0)]);
  const missing = (e: unknown) =>
    isMQError(e, "ILLEGAL_ARGUMENT") &&
    /This queue does not exist, so nothing was assigned: Few@.*@7: topic Few has 4 read queues on broker .* \(ids 0 to 3\)/.test(
      e.message,
    ) &&
    /fetchMessageQueues/.test(e.message);
  await assert.rejects(pc.assign([q(0), q(7)]), missing);
  assert.deepEqual(pc.assignment(), [q(0)], "a refused assign changes nothing");
  await assert.rejects(pc.assign([q(-1)]), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /-1/.test(String(e)));
  assert.deepEqual(pc.assignment(), [q(0)]);

  // grown after the consumer cached its route: queue 6 exists now, and is taken
  await admin.createTopic({ topic: "Few", readQueueNums: 8, writeQueueNums: 8 });
  await pc.assign([q(6)]);
  assert.deepEqual(pc.assignment(), [q(6)]);
  const [six] = (await producer.fetchPublishQueues("Few")).filter((x) => x.queueId === 6);
  await producer.send({ topic: "Few", body: "on six" }, { selector: () => six! });
  const got: string[] = [];
  await waitFor(
    async () => {
      for (const m of await pc.poll(100)) got.push(m.body.toString());
      return got.length > 0;
    },
    10_000,
    "queue 6 polled",
  );
  assert.deepEqual(got, ["on six"]);

  // shrunk after the assign: the broker's refusal of its pulls is logged with the code, once per interval
  const warned: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(pullLog(), "warn", (fields: Record<string, unknown>, msg: string) => void warned.push({ fields, msg }));
  await admin.createTopic({ topic: "Few", readQueueNums: 4, writeQueueNums: 4 });
  await waitFor(() => warned.some((w) => w.fields.code === "INVALID_PARAMETER"), 10_000, "the refusal logged");
  const line = warned.find((w) => w.fields.code === "INVALID_PARAMETER")!;
  assert.equal(line.fields.queueId, 6);
  assert.match(line.msg, /queueId\[6\] is illegal/);
  assert.deepEqual(await pc.poll(0), []);
});
