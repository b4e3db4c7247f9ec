import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fromCallback } from "xstate";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { parseSubscription } from "../../../filter/index.ts";
import { decodeRecords } from "../../../transport/messageRecord.ts";
import {
  BrokerActor,
  CLIENT_ACTOR,
  type ConsumerConnectionReply,
  ConsumptionActorFor,
  type HeartbeatRequest,
  isMQError,
  type MessageModel,
} from "../../../transport/protocol.ts";
import { fakeWallClock, waitFor } from "../../helpers.ts";
import { type Fixture, startFixture } from "./consumptionFixture.ts";

/** A client process: its own node hosting the `client` actor, recording notifications. */
interface FakeClient {
  id: string;
  node: ActorNode;
  notes: string[];
  heartbeat(
    f: Fixture,
    group: string,
    subs: Record<string, string>,
    model?: MessageModel,
    subVersion?: number,
    info?: Partial<HeartbeatRequest>,
  ): Promise<void>;
  unregister(f: Fixture, group: string): Promise<void>;
}

const clients: FakeClient[] = [];

async function fakeClient(id: string): Promise<FakeClient> {
  const node = await ActorNode.start({ listen: null });
  const notes: string[] = [];
  node.spawn(
    CLIENT_ACTOR,
    fromCallback<{ type: string; consumerGroup?: string }>(({ receive }) => {
      receive((e) => {
        if (e.type === "NOTIFY_CONSUMER_IDS_CHANGED") notes.push(String(e.consumerGroup));
      });
    }),
  );
  const c: FakeClient = {
    id,
    node,
    notes,
    async heartbeat(f, group, subs, model = "CLUSTERING", subVersion = 1, info = {}) {
      const hb: HeartbeatRequest = {
        ...info,
        clientID: id,
        producerDataSet: [],
        consumerDataSet: [
          {
            groupName: group,
            consumeType: "CONSUME_PASSIVELY",
            messageModel: model,
            consumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
            subscriptionDataSet: Object.entries(subs).map(([t, e]) => parseSubscription(t, e, subVersion)),
          },
        ],
      };
      await node.ref(f.broker.address, ConsumptionActorFor.HEART_BEAT).ask({ type: "HEART_BEAT", ...hb });
    },
    async unregister(f, group) {
      await node
        .ref(f.broker.address, ConsumptionActorFor.UNREGISTER_CLIENT)
        .ask({ type: "UNREGISTER_CLIENT", clientID: id, consumerGroup: group });
    },
  };
  clients.push(c);
  return c;
}

async function members(f: Fixture, group: string): Promise<string[]> {
  const r = await f.ask<{ consumerIdList: string[] }>("GET_CONSUMER_LIST_BY_GROUP", { consumerGroup: group });
  return [...r.fields.consumerIdList].sort();
}

let f: Fixture;

before(async () => {
  f = await startFixture();
  await f.broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
});
after(async () => {
  for (const c of clients) await c.node.close();
  await f?.close();
});

test("heartbeats register members; a join notifies every member; the list names them", async () => {
  const c1 = await fakeClient("10.0.0.1@1");
  const c2 = await fakeClient("10.0.0.2@1");
  await c1.heartbeat(f, "G1", { T: "*" });
  assert.deepEqual(await members(f, "G1"), ["10.0.0.1@1"]);
  await c2.heartbeat(f, "G1", { T: "*" });
  assert.deepEqual(await members(f, "G1"), ["10.0.0.1@1", "10.0.0.2@1"]);
  await waitFor(() => c1.notes.length >= 2 && c2.notes.length >= 1, 3000, "notifications");
  assert.deepEqual(new Set(c1.notes), new Set(["G1"]));
  // a heartbeat that changes nothing notifies nobody
  const g1Notes = (c: FakeClient) => c.notes.filter((n) => n === "G1").length;
  const before = [g1Notes(c1), g1Notes(c2)];
  await c1.heartbeat(f, "G1", { T: "*" });
  await c2.heartbeat(f, "G1", { T: "*" });
  // then both join a marker group: its notices reach each client after any the no-op heartbeats sent
  await c1.heartbeat(f, "G1mark", { T: "*" });
  await c2.heartbeat(f, "G1mark", { T: "*" });
  await waitFor(() => c1.notes.filter((n) => n === "G1mark").length >= 2 && c2.notes.includes("G1mark"), 3000, "marker notifications");
  assert.deepEqual([g1Notes(c1), g1Notes(c2)], before);
  // the group's retry topic exists once it heartbeats
  assert.ok(f.broker.ctx.topics.get("%RETRY%G1"));
});

test("GET_CONSUMER_CONNECTION_LIST lists each member with its address, language, version and last heartbeat, and the group's subscriptions; a heartbeat without them (an older client) is listed with blanks", async () => {
  const modern = await fakeClient("10.0.5.1@1");
  const old = await fakeClient("10.0.5.2@1");
  const t0 = Date.now();
  await modern.heartbeat(f, "Gconn", { T: "TagA || TagB" }, "CLUSTERING", 1, {
    clientAddr: "10.0.5.1:0",
    language: "NODE",
    version: "0.1.0",
  });
  await old.heartbeat(f, "Gconn", { T: "TagA || TagB" });
  const r = await f.ask<ConsumerConnectionReply>("GET_CONSUMER_CONNECTION_LIST", { consumerGroup: "Gconn" });
  const [a, b] = r.fields.connectionSet;
  assert.deepEqual(
    { ...a, lastUpdateTimestamp: 0 },
    {
      clientId: "10.0.5.1@1",
      clientAddr: "10.0.5.1:0",
      language: "NODE",
      version: "0.1.0",
      lastUpdateTimestamp: 0,
    },
  );
  assert.ok(a!.lastUpdateTimestamp >= t0 && a!.lastUpdateTimestamp <= Date.now(), "last heartbeat is wall-clock time");
  assert.deepEqual(
    { ...b, lastUpdateTimestamp: 0 },
    { clientId: "10.0.5.2@1", clientAddr: "", language: "", version: "", lastUpdateTimestamp: 0 },
  );
  assert.equal(r.fields.consumeType, "CONSUME_PASSIVELY");
  assert.equal(r.fields.messageModel, "CLUSTERING");
  assert.equal(r.fields.consumeFromWhere, "CONSUME_FROM_LAST_OFFSET");
  assert.deepEqual(Object.keys(r.fields.subscriptionTable), ["T"]);
  assert.equal(r.fields.subscriptionTable.T!.subString, "TagA || TagB");
  // a later heartbeat moves the time on; junk in the new fields is left out, not stored
  await new Promise((res) => setImmediate(res));
  await modern.heartbeat(f, "Gconn", { T: "TagA || TagB" }, "CLUSTERING", 1, { version: 42 as never, language: "x".repeat(300) });
  const again = await f.ask<ConsumerConnectionReply>("GET_CONSUMER_CONNECTION_LIST", { consumerGroup: "Gconn" });
  assert.equal(again.fields.connectionSet[0]!.version, "0.1.0");
  assert.equal(again.fields.connectionSet[0]!.language, "NODE");
  await assert.rejects(
    f.ask("GET_CONSUMER_CONNECTION_LIST", { consumerGroup: "NobodyHere" }),
    (e) => isMQError(e, "CONSUMER_NOT_ONLINE") && /NobodyHere.*not online/.test(e.message),
  );
  await assert.rejects(f.ask("GET_CONSUMER_CONNECTION_LIST", {}), (e) => isMQError(e, "INVALID_PARAMETER"));
});

test("a pull without a subscription uses the registered one; an older broker copy is SUBSCRIPTION_NOT_LATEST", async () => {
  const c = await fakeClient("10.0.0.3@1");
  await c.heartbeat(f, "Tagged", { T: "TagA" }, "CLUSTERING", 5);
  await f.send("T", 1, [
    { tags: "TagA", body: "a" },
    { tags: "TagB", body: "b" },
  ]);
  const r = await f.pull({ consumerGroup: "Tagged", queueId: 1, sysFlag: 0, subVersion: 5 });
  assert.equal(r.fields.status, "SUCCESS");
  assert.deepEqual(
    decodeRecords(r.body!, "a").map((m) => m.body.toString()),
    ["a"],
  );
  await assert.rejects(f.pull({ consumerGroup: "Tagged", queueId: 1, sysFlag: 0, subVersion: 6 }), (e: unknown) =>
    isMQError(e, "SUBSCRIPTION_NOT_LATEST"),
  );
});

test("UNREGISTER_CLIENT removes the member and notifies the rest; an empty group has no consumer list", async () => {
  const a = await fakeClient("10.0.1.1@1");
  const b = await fakeClient("10.0.1.2@1");
  await a.heartbeat(f, "G2", { T: "*" });
  await b.heartbeat(f, "G2", { T: "*" });
  await waitFor(() => a.notes.length >= 2, 3000, "join notifications");
  const n = a.notes.length;
  await b.unregister(f, "G2");
  assert.deepEqual(await members(f, "G2"), ["10.0.1.1@1"]);
  await waitFor(() => a.notes.length > n, 3000, "leave notification");
  await a.unregister(f, "G2");
  await assert.rejects(members(f, "G2"), (e: unknown) => isMQError(e, "SYSTEM_ERROR") && /no consumer/.test(e.message));
});

test("broadcasting groups are not notified", async () => {
  const a = await fakeClient("10.0.2.1@1");
  const b = await fakeClient("10.0.2.2@1");
  await a.heartbeat(f, "B1", { T: "*" }, "BROADCASTING");
  await b.heartbeat(f, "B1", { T: "*" }, "BROADCASTING");
  assert.deepEqual(await members(f, "B1"), ["10.0.2.1@1", "10.0.2.2@1"]);
  // a clustering group joined after it is notified: proof notifications flow to these nodes
  await a.heartbeat(f, "C1", { T: "*" });
  await waitFor(() => a.notes.includes("C1"), 3000, "clustering notification");
  assert.ok(!a.notes.includes("B1") && !b.notes.includes("B1"));
});

test("a clustering group too long for its retry topic is refused with ILLEGAL_ARGUMENT and not registered; broadcasting registers without one", async () => {
  const c = await fakeClient("10.0.4.1@1");
  const tooLong = "g".repeat(121);
  await assert.rejects(
    c.heartbeat(f, tooLong, { T: "*" }),
    (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /too long for its retry topic/.test(e.message) && /127/.test(e.message),
  );
  await assert.rejects(members(f, tooLong), (e: unknown) => isMQError(e, "SYSTEM_ERROR"));
  const broadcast = "b".repeat(200);
  await c.heartbeat(f, broadcast, { T: "*" }, "BROADCASTING");
  assert.deepEqual(await members(f, broadcast), ["10.0.4.1@1"]);
  assert.equal(f.broker.ctx.topics.get(`%RETRY%${broadcast}`), undefined);
  const longest = "g".repeat(120);
  await c.heartbeat(f, longest, { T: "*" });
  assert.deepEqual(await members(f, longest), ["10.0.4.1@1"]);
  assert.equal(f.broker.ctx.topics.get(`%RETRY%${longest}`)?.topicName.length, 127);
});

test("a subscription group config the broker could not use is refused with INVALID_PARAMETER; the group's heartbeats keep registering", async () => {
  const c = await fakeClient("10.0.5.1@1");
  const admin = f.client.ref(f.broker.address, BrokerActor.BROKER);
  const bad: [string, unknown][] = [
    ["retryQueueNums", 2000],
    ["retryQueueNums", "two"],
    ["retryQueueNums", -1],
    ["retryMaxTimes", -2],
    ["retryMaxTimes", 1.5],
    ["consumeEnable", "false"],
    ["consumeMessageOrderly", 1],
    ["brokerId", -1],
    ["whichBrokerWhenConsumeSlowly", null],
    ["consumeTimeoutMinute", "15"],
  ];
  for (const [field, value] of bad)
    await assert.rejects(
      admin.ask({ type: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", groupName: "Cfg", [field]: value }),
      (e: unknown) => isMQError(e, "INVALID_PARAMETER") && e.message.includes(field) && e.message.includes('"Cfg"'),
      `${field} ${JSON.stringify(value)}`,
    );
  assert.equal(f.broker.ctx.groups.get("Cfg"), undefined, "nothing stored");
  // an existing group keeps its config when an update is refused
  await admin.ask({ type: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", groupName: "Cfg", retryQueueNums: 3, retryMaxTimes: -1 });
  await assert.rejects(admin.ask({ type: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", groupName: "Cfg", retryQueueNums: 2000 }), (e: unknown) =>
    isMQError(e, "INVALID_PARAMETER"),
  );
  assert.equal(f.broker.ctx.groups.get("Cfg")?.retryQueueNums, 3);
  await c.heartbeat(f, "Cfg", { T: "*" });
  assert.deepEqual(await members(f, "Cfg"), ["10.0.5.1@1"]);
  assert.equal(f.broker.ctx.topics.get("%RETRY%Cfg")?.writeQueueNums, 3);
});

test("a wall clock step forward does not expire a member that just sent its heartbeat", async () => {
  const s = await startFixture({ channelExpiredTimeoutMs: 2000, clientScanIntervalMs: 50 });
  const clock = fakeWallClock();
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
    const a = await fakeClient("10.0.3.5@1");
    const b = await fakeClient("10.0.3.6@1");
    await a.heartbeat(s, "G3c", { T: "*" });
    await b.heartbeat(s, "G3c", { T: "*" });
    clock.jump(5 * 60_000);
    // b falls silent: once its 2 s run out, scans have run past the step
    const beat = setInterval(() => void a.heartbeat(s, "G3c", { T: "*" }).catch(() => {}), 1500);
    try {
      await waitFor(async () => (await members(s, "G3c")).length < 2, 5000, "b expired");
    } finally {
      clearInterval(beat);
    }
    assert.deepEqual(await members(s, "G3c"), ["10.0.3.5@1"]);
  } finally {
    clock.restore();
    await s.close();
  }
});

test("a member silent past the expiry is removed by the scan and the survivors are notified", async () => {
  const s = await startFixture({ channelExpiredTimeoutMs: 300, clientScanIntervalMs: 50 });
  try {
    await s.broker.createTopic({ topic: "T", readQueueNums: 2, writeQueueNums: 2 });
    const live = await fakeClient("10.0.3.1@1");
    const silent = await fakeClient("10.0.3.2@1");
    await live.heartbeat(s, "G3", { T: "*" });
    await silent.heartbeat(s, "G3", { T: "*" });
    await waitFor(() => live.notes.length >= 2, 3000, "join notifications");
    const n = live.notes.length;
    const t0 = Date.now();
    const beat = setInterval(() => void live.heartbeat(s, "G3", { T: "*" }).catch(() => {}), 100);
    try {
      await waitFor(async () => (await members(s, "G3")).length === 1, 3000, "expiry");
    } finally {
      clearInterval(beat);
    }
    assert.ok(Date.now() - t0 >= 250, "not removed before its expiry");
    assert.deepEqual(await members(s, "G3"), ["10.0.3.1@1"]);
    await waitFor(() => live.notes.length > n, 3000, "expiry notification");
  } finally {
    await s.close();
  }
});

test("a heartbeat of several groups, one of them refused, registers every other one (as RocketMQ's heartbeat does) and names the refused one", async () => {
  const c = await fakeClient("10.0.6.1@1");
  const group = (groupName: string, model: MessageModel = "CLUSTERING") => ({
    groupName,
    consumeType: "CONSUME_PASSIVELY" as const,
    messageModel: model,
    consumeFromWhere: "CONSUME_FROM_LAST_OFFSET" as const,
    subscriptionDataSet: [parseSubscription("T", "*", 1)],
  });
  const hb: HeartbeatRequest = {
    clientID: c.id,
    producerDataSet: [],
    consumerDataSet: [group("Mixed1"), group("bad group!"), group("g".repeat(121)), group("Mixed2")],
  };
  await assert.rejects(
    c.node.ref(f.broker.address, ConsumptionActorFor.HEART_BEAT).ask({ type: "HEART_BEAT", ...hb }),
    (e: unknown) =>
      isMQError(e, "INVALID_PARAMETER") && e.message.includes('"bad group!"') && /2 groups of this heartbeat refused/.test(e.message),
  );
  assert.deepEqual(await members(f, "Mixed1"), [c.id]);
  assert.deepEqual(await members(f, "Mixed2"), [c.id], "the group after the refused ones is registered too");
  assert.ok(f.broker.ctx.topics.get("%RETRY%Mixed2"));
  await assert.rejects(members(f, "bad group!"), (e: unknown) => isMQError(e, "SYSTEM_ERROR"));
  assert.equal(f.broker.ctx.groups.get("bad group!"), undefined);
});

test("with autoCreateSubscriptionGroup off, a heartbeat group whose name is not valid is refused and not registered; its other groups are", async () => {
  const s = await startFixture({ autoCreateSubscriptionGroup: false });
  try {
    const c = await fakeClient("10.0.6.2@1");
    const group = (groupName: string) => ({
      groupName,
      consumeType: "CONSUME_PASSIVELY" as const,
      messageModel: "BROADCASTING" as const,
      consumeFromWhere: "CONSUME_FROM_LAST_OFFSET" as const,
      subscriptionDataSet: [parseSubscription("T", "*", 1)],
    });
    const hb: HeartbeatRequest = { clientID: c.id, producerDataSet: [], consumerDataSet: [group("bad group!"), group("NoAuto1")] };
    await assert.rejects(
      c.node.ref(s.broker.address, ConsumptionActorFor.HEART_BEAT).ask({ type: "HEART_BEAT", ...hb }),
      (e: unknown) =>
        isMQError(e, "INVALID_PARAMETER") && e.message.includes('"bad group!"') && /1 group of this heartbeat refused/.test(e.message),
    );
    await assert.rejects(members(s, "bad group!"), (e: unknown) => isMQError(e, "SYSTEM_ERROR"));
    assert.deepEqual(await members(s, "NoAuto1"), [c.id]);
  } finally {
    await s.close();
  }
});

test("a heartbeat group whose messageModel, consumeType or consumeFromWhere is not one RocketMQ knows is refused and not registered; its other groups are", async () => {
  const c = await fakeClient("10.0.7.1@1");
  const group = (groupName: string, fields: Record<string, unknown> = {}) => ({
    groupName,
    consumeType: "CONSUME_PASSIVELY",
    messageModel: "CLUSTERING",
    consumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
    subscriptionDataSet: [parseSubscription("T", "*", 1)],
    ...fields,
  });
  const cases: [string, Record<string, unknown>][] = [
    ["messageModel", { messageModel: "FOO" }],
    ["consumeType", { consumeType: "PUSH" }],
    ["consumeFromWhere", { consumeFromWhere: 3 }],
  ];
  for (const [field, bad] of cases) {
    const name = `Enum_${field}`;
    await assert.rejects(
      c.node
        .ref(f.broker.address, ConsumptionActorFor.HEART_BEAT)
        .ask({ type: "HEART_BEAT", clientID: c.id, producerDataSet: [], consumerDataSet: [group(name, bad), group(`${name}_ok`)] }),
      (e: unknown) =>
        isMQError(e, "INVALID_PARAMETER") &&
        e.message.includes(field) &&
        e.message.includes(`"${name}"`) &&
        /1 group of this heartbeat refused/.test(e.message),
      field,
    );
    await assert.rejects(members(f, name), (e: unknown) => isMQError(e, "SYSTEM_ERROR"), `${field}: not registered`);
    assert.deepEqual(await members(f, `${name}_ok`), [c.id], `${field}: the other group is`);
  }
  // a known group's member sending a bad value keeps the group's registered values
  await c.heartbeat(f, "EnumKept", { T: "*" }, "BROADCASTING");
  await assert.rejects(
    c.node
      .ref(f.broker.address, ConsumptionActorFor.HEART_BEAT)
      .ask({ type: "HEART_BEAT", clientID: c.id, producerDataSet: [], consumerDataSet: [group("EnumKept", { messageModel: "FOO" })] }),
    (e: unknown) => isMQError(e, "INVALID_PARAMETER"),
  );
  const r = await f.ask<ConsumerConnectionReply>("GET_CONSUMER_CONNECTION_LIST", { consumerGroup: "EnumKept" });
  assert.equal(r.fields.messageModel, "BROADCASTING");
});
