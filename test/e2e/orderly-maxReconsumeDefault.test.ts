/**
 * maxReconsumeTimes -1 is RocketMQ's "default": 16 for a concurrent consumer, unlimited for an
 * orderly one. An orderly consumer given -1 retries a suspended message in place instead of
 * dead-lettering it at once; values below -1 or not integers are refused at start.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { effectiveMaxReconsumeTimes } from "../../actors/client/pushConsumer.ts";
import { Admin, MQError, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("orderly maxReconsumeTimes -1: a suspended message is redelivered in place, not dead-lettered", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-max-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgOrdMax", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let c: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "OrdMax", readQueueNums: 1, writeQueueNums: 1 });
    for (const body of ["a", "b"]) await producer.send({ topic: "OrdMax", body });
    const seen: string[] = [];
    c = await PushConsumer.start({
      group: "cgOrdMax",
      nameservers: cluster.nameservers,
      subscriptions: { OrdMax: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly: true,
      maxReconsumeTimes: -1,
      suspendCurrentQueueTimeMillis: 10,
      listener: async (msgs) => {
        for (const m of msgs) seen.push(`${m.body.toString()}${m.reconsumeTimes}`);
        return msgs.some((m) => m.body.toString() === "a" && m.reconsumeTimes < 2) ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "SUCCESS";
      },
    });
    await waitFor(() => seen.includes("b0"), 10_000, "b consumed");
    assert.deepEqual(seen, ["a0", "a1", "a2", "b0"], "a retried in place twice, then b");
    assert.equal(c.orderlyService!.stats.deadLettered, 0);
  } finally {
    await c?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("maxReconsumeTimes: -1 and unset mean 16 (concurrent) or unlimited (orderly); other values below 0 are refused", async () => {
  assert.equal(effectiveMaxReconsumeTimes(-1, false), 16);
  assert.equal(effectiveMaxReconsumeTimes(undefined, false), 16);
  assert.equal(effectiveMaxReconsumeTimes(-1, true), 2_147_483_647);
  assert.equal(effectiveMaxReconsumeTimes(0, true), 0);
  for (const bad of [-2, 1.5, Number.NaN, 2 ** 31]) {
    await assert.rejects(
      PushConsumer.start({
        group: "cgOrdMaxBad",
        nameservers: ["tcp://127.0.0.1:1"],
        subscriptions: { OrdMax: "*" },
        orderly: true,
        maxReconsumeTimes: bad,
        listener: async () => "SUCCESS",
      }),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.includes("maxReconsumeTimes"),
      `maxReconsumeTimes ${bad}`,
    );
  }
});
