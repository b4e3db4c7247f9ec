import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { decodeRecords } from "../../../transport/messageRecord.ts";
import { isMQError, PullSysFlag } from "../../../transport/protocol.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";

let f: Fixture;
let strict: Fixture;

before(async () => {
  f = await startFixture();
  strict = await startFixture({ autoCreateSubscriptionGroup: false, enablePropertyFilter: false });
  await f.broker.createTopic({ topic: "T", readQueueNums: 4, writeQueueNums: 4 });
  await strict.broker.createTopic({ topic: "T", readQueueNums: 4, writeQueueNums: 4 });
});
after(async () => {
  await f?.close();
  await strict?.close();
});

async function rejects(p: Promise<unknown>, code: string, re?: RegExp) {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(isMQError(e), `expected MQError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    if (re) assert.match(e.message, re);
    return true;
  });
}

test("every pull status with its next offset, min and max", async () => {
  // empty queue at 0: nothing yet; at another offset: moved back to 0
  let r = await f.pull({ queueId: 1, queueOffset: 0 });
  assert.deepEqual([r.fields.status, r.fields.nextBeginOffset, r.fields.minOffset, r.fields.maxOffset], ["PULL_NOT_FOUND", 0, 0, 0]);
  r = await f.pull({ queueId: 1, queueOffset: 7 });
  assert.deepEqual([r.fields.status, r.fields.nextBeginOffset], ["PULL_OFFSET_MOVED", 0]);

  await f.send("T", 1, [{ body: "a" }, { body: "b" }, { body: "c" }, { body: "d" }, { body: "e" }]);
  r = await f.pull({ queueId: 1, queueOffset: 0 });
  assert.equal(r.fields.status, "SUCCESS");
  assert.deepEqual(
    [r.fields.nextBeginOffset, r.fields.minOffset, r.fields.maxOffset, r.fields.messageCount, r.fields.suggestWhichBrokerId],
    [5, 0, 5, 5, 0],
  );
  const msgs = decodeRecords(r.body!, "a");
  assert.deepEqual(
    msgs.map((m) => m.body.toString()),
    ["a", "b", "c", "d", "e"],
  );
  assert.deepEqual(
    msgs.map((m) => m.queueOffset),
    [0, 1, 2, 3, 4],
  );

  r = await f.pull({ queueId: 1, queueOffset: 2, maxMsgNums: 2 });
  assert.deepEqual([r.fields.status, r.fields.nextBeginOffset, r.fields.messageCount], ["SUCCESS", 4, 2]);
  // at the end: nothing new, offset unchanged
  r = await f.pull({ queueId: 1, queueOffset: 5 });
  assert.deepEqual([r.fields.status, r.fields.nextBeginOffset], ["PULL_NOT_FOUND", 5]);
  // beyond the end: moved back to the max offset
  r = await f.pull({ queueId: 1, queueOffset: 42 });
  assert.deepEqual([r.fields.status, r.fields.nextBeginOffset], ["PULL_OFFSET_MOVED", 5]);
});

test("tag filter by tag hash: only matching messages, a batch of none asks to retry at once past them", async () => {
  await f.send("T", 2, [
    { tags: "TagA", body: "1" },
    { tags: "TagB", body: "2" },
    { body: "3" },
    { tags: "TagC", body: "4" },
    { tags: "TagA", body: "5" },
  ]);
  let r = await f.pull({ queueId: 2, subscription: "TagA || TagC" });
  assert.equal(r.fields.status, "SUCCESS");
  assert.deepEqual(
    decodeRecords(r.body!, "a").map((m) => `${m.tags}:${m.body}`),
    ["TagA:1", "TagC:4", "TagA:5"],
  );
  assert.equal(r.fields.nextBeginOffset, 5);
  r = await f.pull({ queueId: 2, subscription: "TagZ" });
  assert.deepEqual([r.fields.status, r.fields.nextBeginOffset, r.body], ["PULL_RETRY_IMMEDIATELY", 5, undefined]);
  r = await f.pull({ queueId: 2, subscription: "*" });
  assert.equal(r.fields.messageCount, 5);
});

test("SQL92 subscriptions are evaluated on the properties; a bad one is SUBSCRIPTION_PARSE_FAILED", async () => {
  await f.send("T", 3, [{ properties: { a: "1" } }, { properties: { a: "7", b: "x" } }, { properties: { a: "9", b: "y" } }]);
  const r = await f.pull({ queueId: 3, subscription: "a > 5 AND b = 'x'", expressionType: "SQL92" });
  assert.equal(r.fields.status, "SUCCESS");
  assert.deepEqual(
    decodeRecords(r.body!, "a").map((m) => m.queueOffset),
    [1],
  );
  await rejects(f.pull({ queueId: 3, subscription: "a > AND", expressionType: "SQL92" }), "SUBSCRIPTION_PARSE_FAILED");
  await rejects(f.pull({ queueId: 3, subscription: " || " }), "SUBSCRIPTION_PARSE_FAILED");
});

test("a broker with property filtering disabled answers that SQL92 is not supported", async () => {
  await strict.broker.ctx.groups.createOrUpdate({ groupName: "G" });
  await rejects(strict.pull({ subscription: "a > 5", expressionType: "SQL92" }), "SYSTEM_ERROR", /SQL92/);
  const r = await strict.pull({ subscription: "*" });
  assert.equal(r.fields.status, "PULL_NOT_FOUND");
});

test("checks come in RocketMQ's order", async () => {
  // unknown group with auto-create off wins over an unknown topic and a bad queue id
  await rejects(strict.pull({ consumerGroup: "Nobody", topic: "NoSuchTopic", queueId: 99 }), "SUBSCRIPTION_GROUP_NOT_EXIST", /Nobody/);
  // a group with consumption disabled wins over an unknown topic
  await f.broker.ctx.groups.createOrUpdate({ groupName: "Disabled", consumeEnable: false });
  await rejects(f.pull({ consumerGroup: "Disabled", topic: "NoSuchTopic" }), "NO_PERMISSION", /Disabled/);
  // unknown topic wins over a bad queue id
  await rejects(
    f.pull({ topic: "NoSuchTopic", queueId: 99 }),
    "TOPIC_NOT_EXIST",
    /^topic\[NoSuchTopic\] not exist, apply first please! Create it with `actormq topic create NoSuchTopic`/,
  );
  // a topic that is not readable
  await f.broker.createTopic({ topic: "WriteOnly", readQueueNums: 2, writeQueueNums: 2, perm: 2 });
  await rejects(f.pull({ topic: "WriteOnly", queueId: 99 }), "NO_PERMISSION", /WriteOnly/);
  // queue id out of range, then a bad subscription
  await rejects(f.pull({ queueId: 4, subscription: " || " }), "INVALID_PARAMETER", /queueId\[4\]/);
  await rejects(f.pull({ queueId: -1 }), "INVALID_PARAMETER");
  // without the SUBSCRIPTION flag the group must have registered by heartbeat
  await rejects(f.pull({ consumerGroup: "Silent", sysFlag: 0 }), "SUBSCRIPTION_NOT_EXIST");
});

test("a broadcasting group with consumeBroadcastEnable false is refused NO_PERMISSION, with or without the SUBSCRIPTION flag", async () => {
  await f.broker.ctx.groups.createOrUpdate({ groupName: "NoBroadcast", consumeBroadcastEnable: false });
  const heartbeat = (messageModel: string) =>
    f.ask("HEART_BEAT", {
      clientID: "bc1",
      producerDataSet: [],
      consumerDataSet: [
        {
          groupName: "NoBroadcast",
          consumeType: "CONSUME_PASSIVELY",
          messageModel,
          consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
          subscriptionDataSet: [{ topic: "T", subString: "*", tagsSet: [], codeSet: [], subVersion: 1, expressionType: "TAG" }],
        },
      ],
    });
  await heartbeat("BROADCASTING");
  // actormq's consumers always send the SUBSCRIPTION flag; RocketMQ's push consumer does not
  for (const sysFlag of [PullSysFlag.SUBSCRIPTION, 0])
    await rejects(f.pull({ consumerGroup: "NoBroadcast", clientId: "bc1", sysFlag, subVersion: 1 }), "NO_PERMISSION", /broadcasting/);
  // the same group consuming in clustering mode is served
  await heartbeat("CLUSTERING");
  const r = await f.pull({ consumerGroup: "NoBroadcast", clientId: "bc1", sysFlag: PullSysFlag.SUBSCRIPTION });
  assert.ok(r.fields.status === "SUCCESS" || r.fields.status === "PULL_NOT_FOUND", r.fields.status);
});

test('a consumer group named "__proto__" is refused ILLEGAL_ARGUMENT, not auto-created', async () => {
  // the group table is listed and persisted as an object keyed by name, where this key is the prototype
  await rejects(f.pull({ consumerGroup: "__proto__" }), "ILLEGAL_ARGUMENT", /__proto__/);
  await rejects(
    f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "__proto__", topic: "T", queueId: 0, commitOffset: 1 }),
    "ILLEGAL_ARGUMENT",
  );
  await rejects(f.broker.ctx.groups.createOrUpdate({ groupName: "__proto__" }), "ILLEGAL_ARGUMENT");
  assert.equal(f.broker.ctx.groups.get("__proto__"), undefined);
});

test("a pull carrying a commit offset updates the group's offset", async () => {
  await f.send("T", 0, [{}, {}, {}]);
  const r = await f.pull({
    consumerGroup: "Committer",
    queueId: 0,
    queueOffset: 3,
    sysFlag: PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET,
    commitOffset: 2,
  });
  assert.equal(r.fields.status, "PULL_NOT_FOUND");
  const q = await f.ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: "Committer", topic: "T", queueId: 0 });
  assert.equal(q.fields.offset, 2);
  // without the flag the offset it carries is ignored
  await f.pull({ consumerGroup: "Committer", queueId: 0, queueOffset: 3, commitOffset: 3 });
  const q2 = await f.ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: "Committer", topic: "T", queueId: 0 });
  assert.equal(q2.fields.offset, 2);
});

test("a commit offset that is not an integer >= 0 is refused INVALID_PARAMETER and not stored (the group's offset would be unusable)", async () => {
  for (const commitOffset of [1.5, Number.POSITIVE_INFINITY, -1, "2"]) {
    await assert.rejects(
      f.pull({
        consumerGroup: "BadCommitter",
        queueId: 0,
        queueOffset: 0,
        sysFlag: PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET,
        commitOffset: commitOffset as number,
      }),
      (e) => isMQError(e, "INVALID_PARAMETER") && /integer commitOffset/.test((e as Error).message),
      String(commitOffset),
    );
  }
  const q = await f.ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: "BadCommitter", topic: "T", queueId: 0 }).then(
    (r) => r.fields.offset,
    (e: unknown) => (e as { code?: string }).code,
  );
  assert.ok(q === "QUERY_NOT_FOUND" || q === -1 || q === 0, `nothing was committed: ${q}`);
});
