/** RocketMQ's reserved default groups are refused before a client connects anywhere. */
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
