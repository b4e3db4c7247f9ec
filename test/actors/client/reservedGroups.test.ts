/**
 * Group names a client cannot use are refused before it connects anywhere: RocketMQ's reserved
 * default groups, and clustering groups too long for their retry topic.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Producer, PullConsumer, PushConsumer } from "../../../index.ts";
import { isMQError } from "../../../transport/protocol.ts";

// nothing listens there: a client that got past its checks would wait for routes instead of failing
const nameservers = ["tcp://127.0.0.1:1"];
const refused = (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /reserved default/.test((e as Error).message);

test("DEFAULT_PRODUCER and DEFAULT_CONSUMER are refused as group names", async () => {
  await assert.rejects(Producer.start({ group: "DEFAULT_PRODUCER", nameservers }), refused);
  await assert.rejects(
    PushConsumer.start({ group: "DEFAULT_CONSUMER", nameservers, subscriptions: { T: "*" }, listener: async () => "CONSUME_SUCCESS" }),
    refused,
  );
  await assert.rejects(PullConsumer.start({ group: "DEFAULT_CONSUMER", nameservers }), refused);
});

test("a clustering group longer than 120 characters is refused: its retry topic %RETRY%<group> would pass 127", async () => {
  const tooLong = (e: unknown) =>
    isMQError(e, "ILLEGAL_ARGUMENT") &&
    /group name is too long for its retry topic/.test((e as Error).message) &&
    /%RETRY%<group> must fit 127 characters/.test((e as Error).message) &&
    !/is \d+ characters long; at most/.test((e as Error).message);
  for (const n of [121, 255]) {
    const group = "g".repeat(n);
    await assert.rejects(
      PushConsumer.start({ group, nameservers, subscriptions: { T: "*" }, listener: async () => "CONSUME_SUCCESS" }),
      tooLong,
      `push, ${n} characters`,
    );
    await assert.rejects(PullConsumer.start({ group, nameservers }), tooLong, `pull, ${n} characters`);
  }
});
