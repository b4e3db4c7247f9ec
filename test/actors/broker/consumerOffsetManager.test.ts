import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import {
  CONSUMER_OFFSET_FILE,
  ConsumerOffsetManager,
  MAX_MEMBERLESS_HOLDER_GROUPS,
  TOPIC_GROUP_SEPARATOR,
} from "../../../actors/broker/consumerOffsetManager.ts";
import { parseSubscription } from "../../../filter/index.ts";
import { JsonFile } from "../../../store/index.ts";
import { BrokerActor, type ConsumeStatsReply, isMQError, type MessageModel, PullSysFlag } from "../../../transport/protocol.ts";
import { waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";

let f: Fixture;

before(async () => {
  f = await startFixture({ flushConsumerOffsetIntervalMs: 100 });
  await f.broker.createTopic({ topic: "T", readQueueNums: 4, writeQueueNums: 4 });
});
after(async () => {
  await f?.close();
});

const offsetFile = () => path.join(f.dir, "config", "consumerOffset.json");

async function query(group: string, queueId: number, topic = "T"): Promise<number | string> {
  try {
    const r = await f.ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: group, topic, queueId });
    return r.fields.offset;
  } catch (e) {
    if (isMQError(e)) return e.code;
    throw e;
  }
}

test("no stored offset: 0 while the queue starts at 0 with its first message there, else QUERY_NOT_FOUND", async () => {
  // a queue never written: start at 0 so the first messages are not skipped
  assert.equal(await query("Fresh", 0), 0);
  await f.send("T", 0, [{}, {}]);
  assert.equal(await query("Fresh", 0), 0);
  // the client may ask for "not found" instead of 0
  await assert.rejects(
    f.ask("QUERY_CONSUMER_OFFSET", { consumerGroup: "Fresh", topic: "T", queueId: 0, setZeroIfNotFound: false }),
    (e: unknown) => isMQError(e, "QUERY_NOT_FOUND"),
  );
  // a topic the store has never seen starts at 0 too
  assert.equal(await query("Fresh", 0, "NoSuchTopic"), 0);
});

test("once the queue's first messages are deleted: QUERY_NOT_FOUND, and a pull below the min offset is moved up", async () => {
  const s = await startFixture({ segmentBytes: 4096 });
  try {
    await s.broker.createTopic({ topic: "Old", readQueueNums: 1, writeQueueNums: 1 });
    for (let i = 0; i < 4; i++) await s.send("Old", 0, [{ body: "x".repeat(1500) }]);
    assert.ok(s.broker.store.deleteExpiredFiles(Date.now() + 1000 * 3600_000) > 0, "old segments deleted");
    const min = s.broker.store.getMinOffset("Old", 0);
    assert.ok(min > 0, `min offset ${min}`);
    await assert.rejects(s.ask("QUERY_CONSUMER_OFFSET", { consumerGroup: "Late", topic: "Old", queueId: 0 }), (e: unknown) =>
      isMQError(e, "QUERY_NOT_FOUND"),
    );
    const r = await s.pull({ consumerGroup: "Late", topic: "Old", queueId: 0, queueOffset: 0 });
    assert.deepEqual([r.fields.status, r.fields.nextBeginOffset, r.fields.minOffset], ["PULL_OFFSET_MOVED", min, min]);
  } finally {
    await s.close();
  }
});

test("no stored offset: QUERY_NOT_FOUND once offset 0 is no longer in memory (40 % of RAM behind the commit log's end)", async () => {
  // 40 % of 100 KiB: a message is "on disk" once the commit log has grown 40 KiB past it
  const s = await startFixture({ physicalMemoryBytes: 100 * 1024 });
  try {
    await s.broker.createTopic({ topic: "Hist", readQueueNums: 2, writeQueueNums: 2 });
    const q = (queueId: number) => s.ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: "New", topic: "Hist", queueId });
    await s.send("Hist", 0, [{ body: "x".repeat(1024) }]);
    assert.equal((await q(0)).fields.offset, 0, "a young queue: a new group reads it from 0");
    for (let i = 0; i < 50; i++) await s.send("Hist", 0, [{ body: "x".repeat(1024) }]);
    await assert.rejects(q(0), (e: unknown) => isMQError(e, "QUERY_NOT_FOUND"), "offset 0 is 50 KiB behind: on disk");
    // the rule is the distance from the commit log's end, not the queue's length
    await s.send("Hist", 1, [{}]);
    assert.equal((await q(1)).fields.offset, 0, "a queue whose message 0 was just written");
  } finally {
    await s.close();
  }
});

test("UPDATE_CONSUMER_OFFSET is kept in memory, written every interval and at close, read back after a restart", async () => {
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 1, commitOffset: 7 });
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 2, commitOffset: 3 });
  assert.equal(await query("G", 1), 7);
  // a smaller commit overwrites (monotonicity is the client's job)
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 2, commitOffset: 2 });
  assert.equal(await query("G", 2), 2);
  const stored = await waitFor(
    () => {
      try {
        const j = JSON.parse(readFileSync(offsetFile(), "utf8")) as { offsetTable: Record<string, Record<string, number>> };
        return j.offsetTable["T@G"]?.["2"] === 2 ? j : undefined;
      } catch {
        return undefined;
      }
    },
    3000,
    "periodic persist",
  );
  assert.deepEqual(stored.offsetTable["T@G"], { "1": 7, "2": 2 });
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 3, commitOffset: 11 });
  await f.restart();
  assert.equal(await query("G", 1), 7);
  assert.equal(await query("G", 3), 11, "the last commit before close survives the restart");
  await assert.rejects(
    f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "NoSuchTopic", queueId: 0, commitOffset: 1 }),
    (e: unknown) => isMQError(e, "TOPIC_NOT_EXIST") && /`actormq topic create NoSuchTopic`/.test((e as Error).message),
  );
  await assert.rejects(f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 0 }), (e: unknown) =>
    isMQError(e, "INVALID_PARAMETER"),
  );
  // an offset no queue has (another client's): stored, every pull from it would be refused
  for (const commitOffset of [-5, 2 ** 53, -0.5])
    await assert.rejects(
      f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 3, commitOffset }),
      (e: unknown) => isMQError(e, "INVALID_PARAMETER"),
      `commitOffset ${commitOffset}`,
    );
  assert.equal(await query("G", 3), 11, "a refused commit leaves the offset");
  // a member releasing a queue it has no offset for says -1
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 3, commitOffset: -1, clientId: "c1", release: true });
  assert.equal(await query("G", 3), 11);
});

test("commits acknowledged while the broker closes (after the offsets actor's close-time persist) survive a restart", async () => {
  const s = await startFixture({ flushConsumerOffsetIntervalMs: 60_000 });
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
    await s.send("T", 0, [{}, {}, {}]);
    await s.send("T", 1, [{}, {}, {}]);
    // a put held in flight keeps the close waiting on the store's drain, which comes after the
    // offsets actor's SHUTDOWN; the node serves requests until then
    const store = s.broker.store;
    const putGroup = store.putMessagesGroup.bind(store);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let held = false;
    store.putMessagesGroup = (batches) => {
      held = true;
      return batches.map((_, i) => gate.then(() => putGroup([batches[i]!])[0]!));
    };
    void s.send("T", 0, [{ body: "in flight" }]).catch(() => undefined); // its answer may not leave the closing node
    await waitFor(() => held, 3000, "the put in flight");
    const closing = s.broker.close();
    const offsetsActor = s.broker.ctx.node.actorOf(BrokerActor.OFFSETS)!;
    await waitFor(() => offsetsActor.getSnapshot().value === "closed", 3000, "the offsets actor's close-time persist");
    await s.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId: 0, commitOffset: 2 });
    await s.pull({
      consumerGroup: "G",
      queueId: 1,
      queueOffset: 3,
      sysFlag: PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET,
      commitOffset: 3,
    });
    release();
    await closing;
    await s.restart();
    const q = async (queueId: number) =>
      (await s.ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: "G", topic: "T", queueId })).fields.offset;
    assert.equal(await q(0), 2, "UPDATE_CONSUMER_OFFSET");
    assert.equal(await q(1), 3, "the offset a pull committed");
  } finally {
    await s.close();
  }
});

test("max, min, earliest store time and search by timestamp", async () => {
  const before = Date.now();
  await f.send("T", 3, [{}, {}, {}]);
  await new Promise((r) => setTimeout(r, 5));
  const mid = Date.now();
  await new Promise((r) => setTimeout(r, 5));
  await f.send("T", 3, [{}, {}]);
  const max = await f.ask<{ offset: number }>("GET_MAX_OFFSET", { topic: "T", queueId: 3 });
  const min = await f.ask<{ offset: number }>("GET_MIN_OFFSET", { topic: "T", queueId: 3 });
  assert.deepEqual([min.fields.offset, max.fields.offset], [0, 5]);
  const earliest = await f.ask<{ timestamp: number }>("GET_EARLIEST_MSG_STORETIME", { topic: "T", queueId: 3 });
  assert.ok(earliest.fields.timestamp >= before && earliest.fields.timestamp <= mid);
  const byTime = await f.ask<{ offset: number }>("SEARCH_OFFSET_BY_TIMESTAMP", { topic: "T", queueId: 3, timestamp: mid });
  assert.equal(byTime.fields.offset, 3);
  const early = await f.ask<{ offset: number }>("SEARCH_OFFSET_BY_TIMESTAMP", { topic: "T", queueId: 3, timestamp: 0 });
  assert.equal(early.fields.offset, 0);
});

test("consume stats: broker offset, consumer offset and last consumed store time per queue", async () => {
  await f.send("T", 0, [{}, {}, {}]);
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "Stats", topic: "T", queueId: 0, commitOffset: 2 });
  const r = await f.ask<ConsumeStatsReply>("GET_CONSUME_STATS", { consumerGroup: "Stats", topic: "T" });
  assert.equal(r.fields.offsetTable.length, 4);
  const q0 = r.fields.offsetTable.find((q) => q.queueId === 0)!;
  const brokerMax = f.broker.store.getMaxOffset("T", 0);
  assert.deepEqual([q0.brokerName, q0.brokerOffset, q0.consumerOffset], ["a", brokerMax, 2]);
  assert.equal(q0.lastTimestamp, f.broker.store.getStoreTime("T", 0, 1));
  const q1 = r.fields.offsetTable.find((q) => q.queueId === 1)!;
  assert.deepEqual([q1.consumerOffset, q1.lastTimestamp], [0, 0]);
  // without a topic: every topic the group committed to
  const all = await f.ask<ConsumeStatsReply>("GET_CONSUME_STATS", { consumerGroup: "Stats" });
  assert.deepEqual([...new Set(all.fields.offsetTable.map((q) => q.topic))], ["T"]);
});

test("reset and consume stats of a group the broker does not know (a typo, an invalid name): SUBSCRIPTION_GROUP_NOT_EXIST, no offsets made", async () => {
  await f.broker.createTopic({ topic: "Phantom", readQueueNums: 2, writeQueueNums: 2 });
  await f.send("Phantom", 0, [{}, {}]);
  for (const group of ["typo-group", "not a group!"]) {
    await assert.rejects(
      f.ask("INVOKE_BROKER_TO_RESET_OFFSET", { topic: "Phantom", group, timestamp: 0 }),
      // the message says what to do: list the groups that exist
      (e: unknown) =>
        isMQError(e, "SUBSCRIPTION_GROUP_NOT_EXIST") && e.message.includes(group) && e.message.includes("`actormq group list`"),
    );
    // still unknown after the refused reset: it made no offsets (a group with offsets is known)
    await assert.rejects(f.ask("GET_CONSUME_STATS", { consumerGroup: group }), (e: unknown) =>
      isMQError(e, "SUBSCRIPTION_GROUP_NOT_EXIST"),
    );
  }
  // a group that committed is known: its reset goes through
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "Real", topic: "Phantom", queueId: 0, commitOffset: 2 });
  const reset = await f.ask<{ offsetTable: { queueId: number; offset: number }[] }>("INVOKE_BROKER_TO_RESET_OFFSET", {
    topic: "Phantom",
    group: "Real",
    timestamp: 0,
  });
  assert.deepEqual(reset.fields.offsetTable, [
    { queueId: 0, offset: 0 },
    { queueId: 1, offset: 0 },
  ]);
});

test("reset by timestamp: committed at once, answered once to the next pull as PULL_OFFSET_MOVED", async () => {
  await f.broker.createTopic({ topic: "R", readQueueNums: 1, writeQueueNums: 1 });
  await f.send("R", 0, [{}, {}, {}, {}]);
  await new Promise((r) => setTimeout(r, 5));
  const ts = Date.now();
  await new Promise((r) => setTimeout(r, 5));
  await f.send("R", 0, [{}, {}, {}]);
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "RG", topic: "R", queueId: 0, commitOffset: 7 });
  const reset = await f.ask<{ offsetTable: { queueId: number; offset: number }[] }>("INVOKE_BROKER_TO_RESET_OFFSET", {
    topic: "R",
    group: "RG",
    timestamp: ts,
  });
  assert.deepEqual(reset.fields.offsetTable, [{ queueId: 0, offset: 4 }]);
  assert.equal(await query("RG", 0, "R"), 4);
  // commits are ignored while the reset waits for its pull, including the one the pull carries
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "RG", topic: "R", queueId: 0, commitOffset: 7 });
  const moved = await f.pull({
    consumerGroup: "RG",
    topic: "R",
    queueId: 0,
    queueOffset: 7,
    sysFlag: PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET,
    commitOffset: 7,
  });
  assert.deepEqual([moved.fields.status, moved.fields.nextBeginOffset], ["PULL_OFFSET_MOVED", 4]);
  assert.equal(await query("RG", 0, "R"), 4);
  // answered once: the next pull reads from the reset offset
  const next = await f.pull({ consumerGroup: "RG", topic: "R", queueId: 0, queueOffset: 4 });
  assert.deepEqual([next.fields.status, next.fields.messageCount, next.fields.nextBeginOffset], ["SUCCESS", 3, 7]);
  await assert.rejects(
    f.ask("INVOKE_BROKER_TO_RESET_OFFSET", { topic: "Nope", group: "RG", timestamp: ts }),
    (e: unknown) => isMQError(e, "TOPIC_NOT_EXIST") && /`actormq topic create Nope`/.test((e as Error).message),
  );
});

/** A heartbeat of one member of `group` subscribed to `topic`, then (unless `stay`) its goodbye. */
async function visit(clientID: string, group: string, topic: string, messageModel: MessageModel, stay = false): Promise<void> {
  await f.ask("HEART_BEAT", {
    clientID,
    producerDataSet: [],
    consumerDataSet: [
      {
        groupName: group,
        consumeType: "CONSUME_PASSIVELY",
        messageModel,
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        subscriptionDataSet: [parseSubscription(topic, "*", 1)],
      },
    ],
  });
  if (!stay) await f.ask("UNREGISTER_CLIENT", { clientID, consumerGroup: group });
}

test("a broadcasting group is refused a reset with its members offline too, after a broker restart as well; no pending reset is made", async () => {
  await f.broker.createTopic({ topic: "BR", readQueueNums: 2, writeQueueNums: 2 });
  await f.send("BR", 0, [{}, {}, {}]);
  const refused = (e: unknown) =>
    isMQError(e, "NO_PERMISSION") && /broadcasting mode/.test(e.message) && e.message.includes("BG/offsets.json");
  const reset = () => f.ask<{ offsetTable: unknown[] }>("INVOKE_BROKER_TO_RESET_OFFSET", { topic: "BR", group: "BG", timestamp: 0 });
  await visit("10.0.9.1@m1", "BG", "BR", "BROADCASTING", true);
  await assert.rejects(reset(), refused, "online");
  await f.ask("UNREGISTER_CLIENT", { clientID: "10.0.9.1@m1", consumerGroup: "BG" });
  await assert.rejects(reset(), refused, "offline");
  assert.equal(f.broker.ctx.groups.get("BG")?.messageModel, "BROADCASTING");
  await f.restart();
  await assert.rejects(reset(), refused, "offline, broker restarted");
  // no member's pull is answered a reset
  const pulled = await f.pull({ consumerGroup: "BG", topic: "BR", queueId: 0, queueOffset: 3 });
  assert.notEqual(pulled.fields.status, "PULL_OFFSET_MOVED");
  // the latest heartbeat's model wins: restarted as clustering, the group's offsets are the broker's
  await visit("10.0.9.1@m1", "BG", "BR", "CLUSTERING");
  assert.equal((await reset()).fields.offsetTable.length, 2);
});

test("a reset left pending by a clustering group whose members came back broadcasting is not answered to one member", async () => {
  await f.broker.createTopic({ topic: "SW", readQueueNums: 1, writeQueueNums: 1 });
  await f.send("SW", 0, [{}, {}, {}]);
  await visit("10.0.9.2@c1", "SWG", "SW", "CLUSTERING");
  await f.ask("UPDATE_CONSUMER_OFFSET", { consumerGroup: "SWG", topic: "SW", queueId: 0, commitOffset: 3 });
  await f.ask("INVOKE_BROKER_TO_RESET_OFFSET", { topic: "SW", group: "SWG", timestamp: 0 });
  await visit("10.0.9.2@b1", "SWG", "SW", "BROADCASTING", true);
  const pulled = await f.pull({ consumerGroup: "SWG", topic: "SW", queueId: 0, queueOffset: 3 });
  assert.deepEqual([pulled.fields.status, pulled.fields.nextBeginOffset], ["PULL_NOT_FOUND", 3]);
  await f.ask("UNREGISTER_CLIENT", { clientID: "10.0.9.2@b1", consumerGroup: "SWG" });
});

test("consume stats of a broadcasting group, its members online or not: NO_PERMISSION saying where its offsets are, not a lag of everything", async () => {
  await f.broker.createTopic({ topic: "BS", readQueueNums: 1, writeQueueNums: 1 });
  await f.send("BS", 0, [{}, {}]);
  const refused = (e: unknown) =>
    isMQError(e, "NO_PERMISSION") && /broadcasting mode/.test(e.message) && e.message.includes("BSG/offsets.json");
  await visit("10.0.9.3@m1", "BSG", "BS", "BROADCASTING", true);
  await assert.rejects(f.ask("GET_CONSUME_STATS", { consumerGroup: "BSG" }), refused, "online");
  await assert.rejects(f.ask("GET_CONSUME_STATS", { consumerGroup: "BSG", topic: "BS" }), refused, "online, one topic");
  await f.ask("UNREGISTER_CLIENT", { clientID: "10.0.9.3@m1", consumerGroup: "BSG" });
  await assert.rejects(f.ask("GET_CONSUME_STATS", { consumerGroup: "BSG" }), refused, "offline");
  // restarted as clustering: its progress is the broker's again
  await visit("10.0.9.3@m1", "BSG", "BS", "CLUSTERING");
  const r = await f.ask<ConsumeStatsReply>("GET_CONSUME_STATS", { consumerGroup: "BSG", topic: "BS" });
  assert.deepEqual(
    r.fields.offsetTable.map((q) => [q.topic, q.brokerOffset]),
    [["BS", 2]],
  );
});

test("queue holders of groups whose last member left are bounded; the newest still refuse a stale member's late release", () => {
  const om = new ConsumerOffsetManager(path.join(f.dir, "unused", CONSUMER_OFFSET_FILE));
  const members = new Map<string, Set<string>>();
  om.isMember = (g, c) => members.get(g)?.has(c) === true;
  om.hasMembers = (g) => (members.get(g)?.size ?? 0) > 0;
  const join = (g: string, c: string) => members.set(g, (members.get(g) ?? new Set()).add(c));
  const leave = (g: string, c: string) => {
    members.get(g)?.delete(c);
    if (members.get(g)?.size === 0) members.delete(g);
    om.memberLeft(g, c);
  };
  const holders = (om as unknown as { holders: Map<string, unknown> }).holders;
  /** groups of one short-lived consumer each, pulling 4 queues, then gone */
  const churn = (from: number, n: number) => {
    for (let i = from; i < from + n; i++) {
      join(`g${i}`, `c${i}`);
      for (let q = 0; q < 4; q++) om.notePuller(`g${i}`, "T", q, `c${i}`);
      leave(`g${i}`, `c${i}`);
    }
  };
  // A holds the queue and is dropped by the expiry scan, keeping a release it could not send; B
  // takes over, consumes to 30, lets go and leaves: the group's last member
  join("G", "A");
  om.notePuller("G", "T", 0, "A");
  om.commitOffset("G", "T", 0, 10);
  leave("G", "A");
  join("G", "B");
  om.takeOver("G", "T", 0, "B", 1000, () => {});
  om.commitOffset("G", "T", 0, 30);
  assert.equal(om.release("G", "T", 0, "B", 30), true);
  leave("G", "B");
  churn(0, MAX_MEMBERLESS_HOLDER_GROUPS - 1);
  // A is back and sends its kept release
  join("G", "A");
  assert.equal(om.release("G", "T", 0, "A", 10), false, "the stale release is refused");
  assert.equal(om.queryOffset("G", "T", 0), 30, "the offset did not move back");
  churn(MAX_MEMBERLESS_HOLDER_GROUPS, 2 * MAX_MEMBERLESS_HOLDER_GROUPS);
  assert.ok(holders.size <= MAX_MEMBERLESS_HOLDER_GROUPS + 1, `${holders.size} topic@group holder tables kept`);
  assert.ok(holders.has(`T${TOPIC_GROUP_SEPARATOR}G`), "a group with a member keeps its holders");
});

test("a write asked for while the periodic write is in flight goes after it: the file ends with the newer table", async () => {
  const file = path.join(f.dir, "ordered", CONSUMER_OFFSET_FILE);
  const om = new ConsumerOffsetManager(file);
  om.commitOffset("G", "T", 0, 10);
  const errors: unknown[] = [];
  om.persistInBackground((e) => errors.push(e)); // copies {0: 10}, writes on the thread pool
  om.commitOffset("G", "T", 0, 20);
  await om.persist();
  assert.deepEqual(errors, []);
  const stored = JSON.parse(readFileSync(file, "utf8")) as { offsetTable: Record<string, Record<string, number>> };
  assert.deepEqual(stored.offsetTable[`T${TOPIC_GROUP_SEPARATOR}G`], { "0": 20 });
  assert.equal(ConsumerOffsetManager.load(file).queryOffset("G", "T", 0), 20);
});

test("the periodic write is not started again while one is in flight; a failed one is told and leaves the table to write again", async (t) => {
  const file = path.join(f.dir, "periodic", CONSUMER_OFFSET_FILE);
  const om = new ConsumerOffsetManager(file);
  const real = JsonFile.writeAsync;
  let fail = false;
  const writes = t.mock.method(JsonFile, "writeAsync", (file: string, value: unknown) =>
    fail ? Promise.reject(new Error("disk full")) : real(file, value),
  );
  const errors: unknown[] = [];
  om.commitOffset("G", "T", 0, 10);
  om.persistInBackground((e) => errors.push(e));
  om.commitOffset("G", "T", 0, 11);
  om.persistInBackground((e) => errors.push(e)); // the first is still writing: skipped
  assert.equal(writes.mock.callCount(), 1);
  await om.persist(); // waits for it, then writes 11
  fail = true;
  om.commitOffset("G", "T", 0, 12);
  om.persistInBackground((e) => errors.push(e));
  await waitFor(() => errors.length === 1, 5000, "the failed write told");
  assert.match(String(errors[0]), /disk full/);
  fail = false;
  om.persistInBackground((e) => errors.push(e)); // still dirty: written again
  assert.equal(writes.mock.callCount(), 3);
  await om.persist();
  assert.equal(ConsumerOffsetManager.load(file).queryOffset("G", "T", 0), 12);
});
