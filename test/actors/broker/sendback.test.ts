/**
 * CONSUMER_SEND_MSG_BACK on the broker (reference §12.2): retry copies go through the delay levels
 * to `%RETRY%<group>`, exhausted ones to `%DLQ%<group>`; the checks answer with their codes.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";
import pino from "pino";
import { type BrokerConfig, defaultBrokerOptions } from "../../../actors/broker/brokerConfig.ts";
import type { BrokerContext } from "../../../actors/broker/brokerContext.ts";
import { DLQ_LOG_INTERVAL_MS, processSendBack } from "../../../actors/broker/sendback.ts";
import { SubscriptionGroupManager } from "../../../actors/broker/subscriptionGroupManager.ts";
import { TopicConfigManager } from "../../../actors/broker/topicConfigManager.ts";
import { MessageStore } from "../../../store/index.ts";
import { decodeRecords, encodeProperties, MAX_SEND_PROPERTIES_BYTES, type MessageExt } from "../../../transport/messageRecord.ts";
import { isMQError, MessageConst, PERM_READ_WRITE, SCHEDULE_TOPIC } from "../../../transport/protocol.ts";
import { tempDir } from "../../helpers.ts";

const LEVELS = "1s 2s 3s 4s 5s 6s";

let store: MessageStore;
let ctx: BrokerContext;
let cleanup: () => Promise<void>;

async function makeCtx(overrides: Partial<BrokerConfig> = {}, autoCreateSubscriptionGroup = true): Promise<void> {
  const t = await tempDir("actormq-sendback-");
  cleanup = t.cleanup;
  store = await MessageStore.open({ dir: t.dir, flush: "async", messageDelayLevel: LEVELS });
  const config = {
    ...defaultBrokerOptions(),
    brokerName: "b1",
    nameservers: [],
    storeDir: t.dir,
    messageDelayLevel: LEVELS,
    ...overrides,
  } as BrokerConfig;
  const topics = await TopicConfigManager.load({ storeDir: t.dir, autoCreateTopic: true, defaultQueueNums: 4 });
  const groups = await SubscriptionGroupManager.load({ storeDir: t.dir, autoCreateSubscriptionGroup });
  ctx = {
    config,
    store,
    topics,
    groups,
    logger: pino({ level: "silent" }),
    put: (b) => store.putMessages(b),
  } as Partial<BrokerContext> as BrokerContext;
}

beforeEach(() => makeCtx());
afterEach(async () => {
  await store.close();
  await cleanup();
});

async function original(reconsumeTimes = 0): Promise<{ offset: number; msg: MessageExt }> {
  const r = await store.putMessage({
    topic: "Orders",
    queueId: 1,
    body: Buffer.from("hello"),
    flag: 7,
    properties: { [MessageConst.UNIQ_KEY]: "U1", [MessageConst.TAGS]: "TagA", [MessageConst.KEYS]: "k1" },
    bornTimestamp: 1_000,
    bornHost: "10.0.0.1:5000",
    reconsumeTimes,
  });
  return { offset: r.commitLogOffset, msg: readOne("Orders", 1, r.firstQueueOffset) };
}

function readOne(topic: string, queueId: number, offset: number): MessageExt {
  const r = store.getMessage("t", topic, queueId, offset, 1);
  assert.equal(r.status, "FOUND", `${topic}/${queueId}@${offset}`);
  return decodeRecords(r.buffers[0]!, "b1")[0]!;
}

test("first send-back: a copy for %RETRY%<group> waits at level 3 in SCHEDULE_TOPIC_XXXX with reconsumeTimes 1 and the origin kept", async () => {
  const { offset, msg } = await original();
  const out = await processSendBack(ctx, {
    group: "g1",
    offset,
    delayLevel: 0,
    originMsgId: "U1",
    originTopic: "Orders",
    maxReconsumeTimes: 16,
  });
  assert.deepEqual(out, { topic: "%RETRY%g1", toDLQ: false, delayLevel: 3, reconsumeTimes: 1 });
  const retryTc = ctx.topics.get("%RETRY%g1")!;
  assert.equal(retryTc.readQueueNums, 1);
  assert.equal(retryTc.perm, PERM_READ_WRITE);
  assert.equal(store.getMaxOffset(SCHEDULE_TOPIC, 2), 1, "level 3 = schedule queue 2");
  const copy = readOne(SCHEDULE_TOPIC, 2, 0);
  assert.equal(copy.reconsumeTimes, 1);
  assert.equal(copy.body.toString(), "hello");
  assert.equal(copy.flag, 7);
  assert.equal(copy.bornTimestamp, msg.bornTimestamp);
  assert.equal(copy.bornHost, "10.0.0.1:5000");
  assert.equal(copy.properties[MessageConst.REAL_TOPIC], "%RETRY%g1");
  assert.equal(copy.properties[MessageConst.REAL_QUEUE_ID], "0");
  assert.equal(copy.properties[MessageConst.DELAY], "3");
  assert.equal(copy.properties[MessageConst.RETRY_TOPIC], "Orders");
  assert.equal(copy.properties[MessageConst.ORIGIN_MESSAGE_ID], "U1");
  assert.equal(copy.properties[MessageConst.UNIQ_KEY], "U1");
  assert.equal(copy.tags, "TagA");
  assert.equal(copy.keys, "k1");
});

test("a message with properties at the send limit, on the longest topic and group, is sent back and dead-lettered; a longer origin id gives way to the offset id", async () => {
  const topic = "T".repeat(127);
  const group = "g".repeat(120);
  // a foreign client's UNIQ_KEY longer than the 32 characters the send limit keeps room for
  const uniq = "U".repeat(40);
  const base = encodeProperties({ [MessageConst.UNIQ_KEY]: uniq, big: "" }).length;
  const properties = { [MessageConst.UNIQ_KEY]: uniq, big: "v".repeat(MAX_SEND_PROPERTIES_BYTES - base) };
  assert.equal(Buffer.byteLength(encodeProperties(properties)), MAX_SEND_PROPERTIES_BYTES);
  const r = await store.putMessage({ topic, queueId: 0, body: Buffer.from("x"), properties, bornTimestamp: 1, bornHost: "10.0.0.1:1" });
  const msg = readOne(topic, 0, r.firstQueueOffset);
  const ask = { group, offset: r.commitLogOffset, delayLevel: 0, originMsgId: uniq, originTopic: topic, maxReconsumeTimes: 1 };
  assert.equal((await processSendBack(ctx, ask)).toDLQ, false);
  const copy = readOne(SCHEDULE_TOPIC, 2, 0);
  assert.equal(copy.properties[MessageConst.REAL_TOPIC], `%RETRY%${group}`);
  assert.equal(copy.properties[MessageConst.RETRY_TOPIC], topic);
  assert.equal(copy.properties[MessageConst.ORIGIN_MESSAGE_ID], msg.offsetMsgId);
  assert.equal(copy.properties.big, properties.big);
  const dead = await processSendBack(ctx, { ...ask, offset: copy.commitLogOffset, delayLevel: -1 });
  assert.equal(dead.toDLQ, true);
  assert.equal(readOne(`%DLQ%${group}`, 0, 0).properties[MessageConst.ORIGIN_MESSAGE_ID], msg.offsetMsgId);
});

test("a retry message sent back again keeps RETRY_TOPIC and ORIGIN_MESSAGE_ID and waits one level longer", async () => {
  const { offset } = await original();
  await processSendBack(ctx, { group: "g1", offset, delayLevel: 0, originMsgId: "U1", originTopic: "Orders", maxReconsumeTimes: 16 });
  const scheduled = readOne(SCHEDULE_TOPIC, 2, 0);
  // what the scheduler would store under the retry topic
  const props = { ...scheduled.properties };
  delete props[MessageConst.DELAY];
  const r = await store.putMessage({
    topic: "%RETRY%g1",
    queueId: 0,
    body: scheduled.body,
    properties: props,
    bornTimestamp: 1_000,
    bornHost: "10.0.0.1:5000",
    reconsumeTimes: 1,
  });
  const out = await processSendBack(ctx, {
    group: "g1",
    offset: r.commitLogOffset,
    delayLevel: 0,
    originMsgId: "ignored",
    originTopic: "Orders",
    maxReconsumeTimes: 16,
  });
  assert.deepEqual(out, { topic: "%RETRY%g1", toDLQ: false, delayLevel: 4, reconsumeTimes: 2 });
  const copy = readOne(SCHEDULE_TOPIC, 3, 0);
  assert.equal(copy.properties[MessageConst.RETRY_TOPIC], "Orders");
  assert.equal(copy.properties[MessageConst.ORIGIN_MESSAGE_ID], "U1");
  assert.equal(copy.properties[MessageConst.REAL_TOPIC], "%RETRY%g1");
});

test("levels beyond the configured ones are clamped to the highest", async () => {
  const { offset } = await original(10);
  const out = await processSendBack(ctx, {
    group: "g1",
    offset,
    delayLevel: 0,
    originMsgId: "U1",
    originTopic: "Orders",
    maxReconsumeTimes: 16,
  });
  assert.equal(out.delayLevel, 6);
  assert.equal(store.getMaxOffset(SCHEDULE_TOPIC, 5), 1);
});

test("reconsumeTimes >= maxReconsumeTimes: straight to %DLQ%<group>, queue 0, created on demand with one READ|WRITE queue", async () => {
  const { offset } = await original(3);
  const out = await processSendBack(ctx, {
    group: "g2",
    offset,
    delayLevel: 0,
    originMsgId: "U1",
    originTopic: "Orders",
    maxReconsumeTimes: 3,
  });
  assert.deepEqual(out, { topic: "%DLQ%g2", toDLQ: true, delayLevel: 0, reconsumeTimes: 4 });
  const dlq = ctx.topics.get("%DLQ%g2")!;
  assert.deepEqual([dlq.readQueueNums, dlq.writeQueueNums, dlq.perm], [1, 1, PERM_READ_WRITE]);
  const copy = readOne("%DLQ%g2", 0, 0);
  assert.equal(copy.reconsumeTimes, 4);
  assert.equal(copy.properties[MessageConst.DELAY], undefined);
  assert.equal(copy.properties[MessageConst.RETRY_TOPIC], "Orders");
  for (let q = 0; q < 6; q++) assert.equal(store.getMaxOffset(SCHEDULE_TOPIC, q), 0, "nothing scheduled");
});

test("dead-lettered messages: one warn line per group per interval with a sample msgId, each message at debug", async (t) => {
  const warned: Record<string, unknown>[] = [];
  const debugged: Record<string, unknown>[] = [];
  ctx.logger.level = "debug";
  t.mock.method(ctx.logger, "warn", (fields: Record<string, unknown>) => void warned.push(fields));
  t.mock.method(ctx.logger, "debug", (fields: Record<string, unknown>) => void debugged.push(fields));
  const ask = { delayLevel: -1, originTopic: "Orders", maxReconsumeTimes: 16 };
  for (let i = 0; i < 5; i++) await processSendBack(ctx, { ...ask, group: "g7", offset: (await original()).offset });
  for (let i = 0; i < 2; i++) await processSendBack(ctx, { ...ask, group: "g8", offset: (await original()).offset });
  assert.equal(store.getMaxOffset("%DLQ%g7", 0), 5);
  assert.deepEqual(
    warned.map((w) => [w.group, w.dlq]),
    [
      ["g7", "%DLQ%g7"],
      ["g8", "%DLQ%g8"],
    ],
    `one line per group per ${DLQ_LOG_INTERVAL_MS} ms`,
  );
  assert.equal(typeof warned[0]!.msgId, "string");
  assert.equal(debugged.length, 7, "every message at debug");
  assert.deepEqual(
    debugged.map((d) => d.group),
    ["g7", "g7", "g7", "g7", "g7", "g8", "g8"],
  );
});

test("without a maxReconsumeTimes in the request the group's retryMaxTimes decides; delayLevel -1 goes to the DLQ at once", async () => {
  await ctx.groups.createOrUpdate({ groupName: "g3", retryMaxTimes: 2 });
  const a = await original(2);
  assert.equal((await processSendBack(ctx, { group: "g3", offset: a.offset, delayLevel: 0 })).toDLQ, true);
  const b = await original(1);
  assert.equal((await processSendBack(ctx, { group: "g3", offset: b.offset, delayLevel: 0 })).toDLQ, false);
  const c = await original(0);
  assert.equal((await processSendBack(ctx, { group: "g3", offset: c.offset, delayLevel: -1, maxReconsumeTimes: 16 })).toDLQ, true);
  assert.equal(store.getMaxOffset("%DLQ%g3", 0), 2);
});

test("a client's reconsumeTimes (orderly, retried in place) counts when larger than the stored one; absent, the stored one does", async () => {
  const a = await original(0);
  const out = await processSendBack(ctx, { group: "g5", offset: a.offset, delayLevel: -1, maxReconsumeTimes: 3, reconsumeTimes: 3 });
  assert.deepEqual(out, { topic: "%DLQ%g5", toDLQ: true, delayLevel: 0, reconsumeTimes: 4 });
  assert.equal(readOne("%DLQ%g5", 0, 0).reconsumeTimes, 4);
  const b = await original(5);
  assert.equal(
    (await processSendBack(ctx, { group: "g5", offset: b.offset, delayLevel: 0, maxReconsumeTimes: 16, reconsumeTimes: 2 })).reconsumeTimes,
    6,
  );
  const c = await original(2);
  const retried = await processSendBack(ctx, { group: "g5", offset: c.offset, delayLevel: 0, maxReconsumeTimes: 16 });
  assert.deepEqual([retried.reconsumeTimes, retried.delayLevel], [3, 5]);
  const d = await original(0);
  assert.equal(
    (await processSendBack(ctx, { group: "g5", offset: d.offset, delayLevel: 0, maxReconsumeTimes: 3, reconsumeTimes: 3 })).toDLQ,
    true,
  );
  for (const bad of [-1, 1.5, "3", 2 ** 31]) {
    await rejectsWith(
      processSendBack(ctx, { group: "g5", offset: d.offset, delayLevel: 0, reconsumeTimes: bad }),
      "INVALID_PARAMETER",
      /reconsumeTimes is .*: when given it must be an integer from 0 .*leave it out to count from the stored message/,
    );
  }
});

test("retryQueueNums 0 disables retries: success, nothing stored", async () => {
  await ctx.groups.createOrUpdate({ groupName: "g4", retryQueueNums: 0 });
  const { offset } = await original();
  const out = await processSendBack(ctx, { group: "g4", offset, delayLevel: 0, maxReconsumeTimes: 16 });
  assert.equal(out.topic, "");
  for (let q = 0; q < 6; q++) assert.equal(store.getMaxOffset(SCHEDULE_TOPIC, q), 0);
});

/** Rejects with `code`, and a remark that says what went wrong and what to do when `says` is given. */
async function rejectsWith(p: Promise<unknown>, code: string, ...says: RegExp[]): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(isMQError(e), String(e));
    assert.equal(e.code, code);
    for (const r of says) assert.match(e.message, r);
    return true;
  });
}

test("bad requests answer with their codes", async () => {
  const { offset } = await original();
  await rejectsWith(
    processSendBack(ctx, { group: "g1", offset: store.maxPhyOffset + 1000, delayLevel: 0 }),
    "SYSTEM_ERROR",
    /^No message at commit-log offset \d+ on broker b1: .*deleted.* cannot be sent back for group g1\. The message is gone from this broker/,
  );
  await rejectsWith(
    processSendBack(ctx, { group: "g1", offset: -1, delayLevel: 0 }),
    "INVALID_PARAMETER",
    /offset is -1: send the commit-log offset of the message as it was pulled \(MessageExt\.commitLogOffset/,
  );
  await rejectsWith(processSendBack(ctx, { group: "g1", offset: "x", delayLevel: 0 }), "INVALID_PARAMETER", /offset is "x"/);
  await rejectsWith(
    processSendBack(ctx, { offset, delayLevel: 0 }),
    "INVALID_PARAMETER",
    /carries no consumer group \(field group is undefined\): the client must name the group/,
  );
  await rejectsWith(
    processSendBack(ctx, { group: "g1", offset, delayLevel: 1.5 }),
    "INVALID_PARAMETER",
    /delayLevel is 1\.5, not an integer: send 0 .*-1 \(the dead-letter queue\)/,
  );
  // %RETRY%<group> must fit a topic name (127 characters)
  await rejectsWith(processSendBack(ctx, { group: "g".repeat(121), offset, delayLevel: 0 }), "ILLEGAL_ARGUMENT");
  // a retry topic made read only
  ctx.topics.createIfAbsent("%RETRY%ro", 1, 4);
  await rejectsWith(
    processSendBack(ctx, { group: "ro", offset, delayLevel: 0 }),
    "NO_PERMISSION",
    /^The retry topic %RETRY%ro is not writable on broker b1 \(perm 4\), so the message cannot be sent back for group ro: give it write permission/,
  );
  for (let q = 0; q < 6; q++) assert.equal(store.getMaxOffset(SCHEDULE_TOPIC, q), 0, "nothing stored by a rejected request");
  // a put that does not end PUT_OK names its status
  const put = ctx.put;
  (ctx as { put: unknown }).put = async () => ({ status: "OS_PAGECACHE_BUSY" });
  try {
    await rejectsWith(
      processSendBack(ctx, { group: "g1", offset, delayLevel: 0 }),
      "SYSTEM_ERROR",
      /^Storing the copy for %RETRY%g1 on broker b1 failed with OS_PAGECACHE_BUSY, so the message was not sent back for group g1: the consumer keeps it/,
    );
  } finally {
    (ctx as { put: unknown }).put = put;
  }
});

test("an unknown group without auto-creation, a slave and a read-only broker refuse", async () => {
  await store.close();
  await cleanup();
  await makeCtx({}, false);
  const { offset } = await original();
  await rejectsWith(
    processSendBack(ctx, { group: "nobody", offset, delayLevel: 0 }),
    "SUBSCRIPTION_GROUP_NOT_EXIST",
    /^Subscription group nobody does not exist on broker b1, so the message cannot be sent back for it: check the consumer's group name, then create the group/,
    /autoCreateSubscriptionGroup/,
  );
  (ctx.config as { role: string }).role = "SLAVE";
  await rejectsWith(
    processSendBack(ctx, { group: "nobody", offset, delayLevel: 0 }),
    "NO_PERMISSION",
    /^Broker b1 is a slave .*send the message of group nobody back to the master of b1/,
  );
  (ctx.config as { role: string }).role = "ASYNC_MASTER";
  (ctx.config as { brokerPermission: number }).brokerPermission = 4;
  await rejectsWith(
    processSendBack(ctx, { group: "nobody", offset, delayLevel: 0 }),
    "NO_PERMISSION",
    /^Broker b1 is not writable \(brokerPermission 4: .*retry topic on another broker, or make this one writable again \(`actormq broker-config set b1 brokerPermission 6`\)/,
  );
});
