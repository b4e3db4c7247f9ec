import assert from "node:assert/strict";
import { test } from "node:test";
import { computePullFromWhere, isRetryTopic } from "../../../actors/client/pullFromWhere.ts";
import { type ConsumeFromWhere, type MessageQueue, MQError } from "../../../transport/protocol.ts";

const mq: MessageQueue = { topic: "T", brokerName: "b", queueId: 0 };
const retry: MessageQueue = { topic: "%RETRY%g", brokerName: "b", queueId: 0 };

function lookups(read: number, max = 500, search = 123) {
  const calls: string[] = [];
  return {
    calls,
    l: {
      readOffset: async () => {
        calls.push("read");
        return read;
      },
      maxOffset: async () => {
        calls.push("max");
        return max;
      },
      searchOffset: async (_: MessageQueue, ts: number) => {
        calls.push(`search:${ts}`);
        return search;
      },
    },
  };
}

const run = (mode: ConsumeFromWhere, q: MessageQueue, read: number, max?: number, search?: number) => {
  const x = lookups(read, max, search);
  return computePullFromWhere(mode, 42, q, x.l).then((v) => ({ v, calls: x.calls }));
};

test("a committed offset wins in every mode", async () => {
  for (const mode of ["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"] as const) {
    assert.deepEqual(await run(mode, mq, 77), { v: 77, calls: ["read"] });
    assert.deepEqual(await run(mode, mq, 0), { v: 0, calls: ["read"] });
  }
});

test("never consumed: LAST = max offset (retry topic: 0), FIRST = 0, TIMESTAMP = search (retry topic: max)", async () => {
  assert.deepEqual(await run("CONSUME_FROM_LAST_OFFSET", mq, -1), { v: 500, calls: ["read", "max"] });
  assert.deepEqual(await run("CONSUME_FROM_LAST_OFFSET", retry, -1), { v: 0, calls: ["read"] });
  assert.deepEqual(await run("CONSUME_FROM_FIRST_OFFSET", mq, -1), { v: 0, calls: ["read"] });
  assert.deepEqual(await run("CONSUME_FROM_FIRST_OFFSET", retry, -1), { v: 0, calls: ["read"] });
  assert.deepEqual(await run("CONSUME_FROM_TIMESTAMP", mq, -1), { v: 123, calls: ["read", "search:42"] });
  assert.deepEqual(await run("CONSUME_FROM_TIMESTAMP", retry, -1), { v: 500, calls: ["read", "max"] });
});

test("an unreadable offset or a negative answer skips the queue with an MQError", async () => {
  await assert.rejects(run("CONSUME_FROM_LAST_OFFSET", mq, -2), (e) => e instanceof MQError && e.code === "QUERY_NOT_FOUND");
  // -1 from a master look-up: the message says the master could not be asked, not "unexpected offset"
  await assert.rejects(
    run("CONSUME_FROM_LAST_OFFSET", mq, -1, -1),
    (e) => e instanceof MQError && e.code === "SYSTEM_ERROR" && /max offset .* could not be read from the master of/.test(e.message),
  );
  await assert.rejects(
    run("CONSUME_FROM_TIMESTAMP", mq, -1, 5, -1),
    (e) => e instanceof MQError && e.code === "SYSTEM_ERROR" && /offset by timestamp .* master/.test(e.message),
  );
});

test("retry topics are recognised by their prefix", () => {
  assert.equal(isRetryTopic("%RETRY%g"), true);
  assert.equal(isRetryTopic("T"), false);
});
