/**
 * PullConsumer.start refuses options it cannot work with (NaN, 0, fractions, out of range) with
 * ILLEGAL_ARGUMENT naming the option, before it connects to anything.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MQError, PullConsumer, type PullConsumerOptions } from "../../../index.ts";

const base: PullConsumerOptions = { group: "cgOpts", nameservers: ["tcp://127.0.0.1:1"] };

test("pull consumer options out of range are refused with ILLEGAL_ARGUMENT naming the option", async () => {
  const bad: [keyof PullConsumerOptions, unknown][] = [
    ["pullBatchSize", Number.NaN],
    ["pullBatchSize", 0],
    ["pullBatchSize", 1.5],
    ["pullBatchSize", 1025],
    ["autoCommitIntervalMs", Number.NaN],
    ["autoCommitIntervalMs", 0],
    ["autoCommitIntervalMs", 2 ** 31],
    ["autoCommit", "no"],
    ["pullThresholdForQueue", 0],
    ["pullThresholdSizeForQueue", Number.NaN],
    ["brokerSuspendMaxTimeMillis", -1],
    // its pull timeout, 15 s longer, would be past the longest timer Node keeps and fire at once
    ["brokerSuspendMaxTimeMillis", 2 ** 31 - 1],
    ["rebalanceIntervalMs", Number.NaN],
    ["consumeTimestamp", Number.NaN],
    ["consumeFromWhere", "CONSUME_FROM_NOWHERE"],
  ];
  for (const [name, value] of bad) {
    await assert.rejects(
      PullConsumer.start({ ...base, [name]: value }),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.startsWith(name),
      `${name}: ${String(value)}`,
    );
  }
});

test("a string value is shown quoted in the error, so it does not read as the number or boolean it spells", async () => {
  for (const [name, value] of [
    ["pullBatchSize", "10"],
    ["autoCommit", "true"],
  ] as const)
    await assert.rejects(
      PullConsumer.start({ ...base, [name]: value }),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.endsWith(`got "${value}".`),
      name,
    );
});

test("PullConsumer.start without an options object, and assign() without an array of queues, are refused with ILLEGAL_ARGUMENT", async () => {
  for (const options of [undefined, null, "cg"])
    await assert.rejects(
      PullConsumer.start(options as never),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /group.*nameservers/.test(e.message),
      String(options),
    );
  const pc = await PullConsumer.start({ ...base, group: "cgAssignArgs" });
  try {
    for (const queues of ["T", undefined, [null], [{ topic: "T" }], [{ topic: "T", brokerName: "b", queueId: "0" }]])
      await assert.rejects(
        pc.assign(queues as never),
        (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /^assign takes an array of queues/.test(e.message),
        JSON.stringify(queues),
      );
    // a refused assign leaves the consumer free to subscribe
    assert.deepEqual(pc.assignment(), []);
  } finally {
    await pc.close();
  }
});

test("poll refuses a timeout that is not a number of ms from 0 up with ILLEGAL_ARGUMENT; 0 returns at once", async () => {
  const pc = await PullConsumer.start({ ...base, group: "cgPollArgs" });
  try {
    for (const timeoutMs of [-1, Number.NaN, Number.NEGATIVE_INFINITY, "100", null, {}])
      await assert.rejects(
        pc.poll(timeoutMs as never),
        (e: unknown) =>
          e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /^poll timeoutMs must be a number of ms >= 0/.test(e.message),
        String(timeoutMs),
      );
    assert.deepEqual(await pc.poll(0), []);
  } finally {
    await pc.close();
  }
});
