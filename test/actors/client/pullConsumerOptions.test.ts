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
