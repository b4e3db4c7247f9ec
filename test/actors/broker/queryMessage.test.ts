/**
 * Message lookup end to end: QUERY_MESSAGE by key and by UNIQ_KEY, VIEW_MESSAGE_BY_ID by offset
 * msg id, through Admin against a two-broker local cluster; and the `query` actor's answers to
 * bad or unmatched requests.
 */
import assert from "node:assert/strict";
import net from "node:net";
import path from "node:path";
import { after, before, test } from "node:test";
import { Admin, Broker, isMQError, type LocalCluster, NameServer, Producer, type SendResult, startLocalCluster } from "../../../index.ts";
import { parseOffsetMsgId } from "../../../transport/messageRecord.ts";
import { QUERY_MESSAGE_ACTOR } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir } from "../../helpers.ts";

let cluster: LocalCluster;
let admin: Admin;
let producer: Producer;
let cleanup: () => Promise<void>;
const sent: { key: string; body: string; r: SendResult }[] = [];

before(async () => {
  const t = await tempDir("actormq-query-");
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ brokers: 2, dir: t.dir, broker: { flush: "async" } });
  admin = await Admin.start({ nameservers: cluster.nameservers });
  producer = await Producer.start({ group: "query-pg", nameservers: cluster.nameservers });
  await admin.createTopic({ topic: "Lookup", readQueueNums: 2, writeQueueNums: 2 });
  await admin.createTopic({ topic: "Other", readQueueNums: 1, writeQueueNums: 1 });
  // order-7 is sent four times (round robin spreads it over both brokers), the others once
  for (let i = 0; i < 12; i++) {
    const key = i % 3 === 0 ? "order-7" : `order-${100 + i}`;
    const body = `payload ${i}`;
    sent.push({ key, body, r: await producer.send({ topic: "Lookup", body, keys: [key, `user-${i}`] }) });
  }
  // the same key in another topic must not show up in Lookup's answers
  await producer.send({ topic: "Other", body: "elsewhere", keys: "order-7" });
});

after(async () => {
  await producer.close();
  await admin.close();
  await cluster.close();
  await cleanup();
});

test("queryMessageByKey finds every message of the topic with the key, on both brokers, newest first", async () => {
  const found = await admin.queryMessageByKey("Lookup", "order-7");
  const expected = sent.filter((s) => s.key === "order-7");
  assert.equal(found.length, expected.length);
  assert.deepEqual(found.map((m) => m.body.toString()).sort(), expected.map((s) => s.body).sort());
  assert.deepEqual(new Set(found.map((m) => m.brokerName)), new Set(expected.map((s) => s.r.queue.brokerName)));
  assert.ok(new Set(expected.map((s) => s.r.queue.brokerName)).size === 2, "the key's messages sit on both brokers");
  for (const m of found) {
    assert.equal(m.topic, "Lookup");
    assert.ok(m.keys?.split(" ").includes("order-7"));
  }
  for (let i = 1; i < found.length; i++) assert.ok(found[i - 1]!.storeTimestamp >= found[i]!.storeTimestamp);

  const second = await admin.queryMessageByKey("Lookup", "user-4");
  assert.deepEqual(
    second.map((m) => m.body.toString()),
    ["payload 4"],
  );
  assert.equal(second[0]!.msgId, sent[4]!.r.msgId);

  assert.equal((await admin.queryMessageByKey("Lookup", "order-7", { maxNum: 2 })).length, 2);
  assert.deepEqual(await admin.queryMessageByKey("Lookup", "no-such-key"), []);
  assert.deepEqual(
    (await admin.queryMessageByKey("Other", "order-7")).map((m) => m.body.toString()),
    ["elsewhere"],
  );
});

test("queryMessageByKey refuses a key with a space and options of the wrong shape with ILLEGAL_ARGUMENT, before any broker is asked", async () => {
  // keys are split at spaces when stored: no message has such a key, and [] would say "none sent"
  await assert.rejects(
    admin.queryMessageByKey("Lookup", "order-7 user-0"),
    (e) =>
      isMQError(e, "ILLEGAL_ARGUMENT") && /^queryMessageByKey: .*"order-7 user-0".* space/.test(e.message) && /"order-7"/.test(e.message),
  );
  for (const [opts, what] of [
    [{ maxNum: 0 }, /^queryMessageByKey: maxNum must be an integer >= 1, got 0/],
    [{ maxNum: -1 }, /^queryMessageByKey: maxNum must be an integer >= 1/],
    [{ maxNum: 1.5 }, /^queryMessageByKey: maxNum must be an integer >= 1/],
    [{ maxNum: Number.NaN }, /^queryMessageByKey: maxNum must be an integer >= 1/],
    [{ maxNum: "10" }, /^queryMessageByKey: maxNum must be an integer >= 1/],
    [{ beginTimestamp: -1 }, /^queryMessageByKey: beginTimestamp must be a time in ms since the epoch/],
    [{ beginTimestamp: "2025-01-31" }, /^queryMessageByKey: beginTimestamp must be a time in ms since the epoch/],
    [{ endTimestamp: new Date() }, /^queryMessageByKey: endTimestamp must be a time in ms since the epoch/],
    [{ endTimestamp: Number.POSITIVE_INFINITY }, /^queryMessageByKey: endTimestamp must be a time in ms since the epoch/],
    [{ beginTimestamp: 2000, endTimestamp: 1000 }, /^queryMessageByKey: beginTimestamp 2000 is after endTimestamp 1000/],
  ] as const)
    await assert.rejects(
      admin.queryMessageByKey("Lookup", "order-7", opts as never),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && what.test(e.message),
      JSON.stringify(opts),
    );
  // a window holding every message finds them all
  const all = await admin.queryMessageByKey("Lookup", "order-7", { beginTimestamp: 0, endTimestamp: Date.now() + 60_000 });
  assert.equal(all.length, sent.filter((s) => s.key === "order-7").length);
});

test("viewMessage finds a message by its offset msg id and by its UNIQ_KEY, with or without the topic", async () => {
  const s = sent[5]!;
  const byOffset = await admin.viewMessage(s.r.offsetMsgId);
  assert.ok(byOffset);
  assert.equal(byOffset.body.toString(), s.body);
  assert.equal(byOffset.brokerName, s.r.queue.brokerName);
  assert.equal(byOffset.queueOffset, s.r.queueOffset);

  const byUniq = await admin.viewMessage(s.r.msgId);
  assert.ok(byUniq);
  assert.equal(byUniq.msgId, s.r.msgId);
  assert.equal(byUniq.body.toString(), s.body);
  assert.equal((await admin.viewMessage(s.r.msgId, "Lookup"))?.body.toString(), s.body);
  // ids are hex: lower case names the same message, as it does for an offset msg id
  assert.equal((await admin.viewMessage(s.r.msgId.toLowerCase()))?.msgId, s.r.msgId);
  assert.equal((await admin.viewMessage(s.r.msgId.toLowerCase(), "Lookup"))?.msgId, s.r.msgId);
  assert.equal((await admin.viewMessage(s.r.offsetMsgId.toLowerCase()))?.msgId, s.r.msgId);
  assert.equal(await admin.viewMessage(s.r.msgId, "Other"), null);
  // a topic given holds either id to it, and an unknown one is refused as queryMessageByKey refuses it
  assert.equal((await admin.viewMessage(s.r.offsetMsgId, "Lookup"))?.body.toString(), s.body);
  assert.equal(await admin.viewMessage(s.r.offsetMsgId, "Other"), null);
  // a lookup in a topic no broker serves says to check the name, not to create the topic
  const lookupAdvice = (e: unknown) =>
    isMQError(e, "TOPIC_NOT_EXIST") && /NoSuchTopic.*actormq topic list/.test(String(e)) && !/topic create/.test(String(e));
  for (const id of [s.r.msgId, s.r.offsetMsgId]) await assert.rejects(admin.viewMessage(id, "NoSuchTopic"), lookupAdvice, id);
  await assert.rejects(admin.queryMessageByKey("NoSuchTopic", "k"), lookupAdvice);

  // a delayed message's offset id names its record in SCHEDULE_TOPIC_XXXX: still a message of its topic
  const delayed = await producer.send({ topic: "Lookup", body: "later", delayLevel: 18 });
  const record = await admin.viewMessage(delayed.offsetMsgId, "Lookup");
  assert.equal(record?.body.toString(), "later");
  assert.equal(await admin.viewMessage(delayed.offsetMsgId, "Other"), null);
  // and so does its msgId (UNIQ_KEY), indexed under SCHEDULE_TOPIC_XXXX until it is delivered
  assert.equal((await admin.viewMessage(delayed.msgId))?.body.toString(), "later");
  assert.equal((await admin.viewMessage(delayed.msgId, "Lookup"))?.body.toString(), "later");
  assert.equal(await admin.viewMessage(delayed.msgId, "Other"), null);

  assert.equal(await admin.viewMessage("00000000000000000000000000000000"), null);
  assert.equal(await admin.viewMessage("ffffffffffffffffffffffffffffffff"), null, "a well-formed id, lower case, of no message");
  // a malformed id is refused, not answered as a message that is not there
  for (const id of ["not-an-id", "zzz", "", `${s.r.msgId}0`, s.r.msgId.slice(1), ` ${s.r.msgId}`, 5])
    await assert.rejects(
      admin.viewMessage(id as string),
      (e: unknown) =>
        isMQError(e, "ILLEGAL_ARGUMENT") &&
        (e as Error).message.startsWith(`viewMessage: ${JSON.stringify(id)} is not a message id: an id is 32 hex characters, `) &&
        /offset msg id .*unique key id/.test((e as Error).message),
      String(id),
    );
  // an offset id whose offset is inside a record, not at its start, finds nothing
  const { commitLogOffset } = parseOffsetMsgId(s.r.offsetMsgId);
  const inside = s.r.offsetMsgId.slice(0, 16) + (commitLogOffset + 3).toString(16).toUpperCase().padStart(16, "0");
  assert.equal(await admin.viewMessage(inside), null);
});

test("the query actor answers bad and unmatched requests with coded errors", async () => {
  const ref = admin.instance.refAt(cluster.brokers[0]!.address, QUERY_MESSAGE_ACTOR);
  const code = (p: Promise<unknown>) =>
    p.then(
      () => "resolved",
      (e: unknown) => (isMQError(e) ? e.code : String(e)),
    );
  assert.equal(await code(ref.ask({ type: "QUERY_MESSAGE", topic: "Lookup" })), "INVALID_PARAMETER");
  assert.equal(await code(ref.ask({ type: "QUERY_MESSAGE", key: "k" })), "MESSAGE_ILLEGAL");
  assert.equal(await code(ref.ask({ type: "QUERY_MESSAGE", topic: "Lookup", key: "k", maxNum: -1 })), "INVALID_PARAMETER");
  assert.equal(await code(ref.ask({ type: "QUERY_MESSAGE", topic: "Lookup", key: "no-such-key" })), "QUERY_NOT_FOUND");
  assert.equal(await code(ref.ask({ type: "VIEW_MESSAGE_BY_ID", offset: "12" })), "INVALID_PARAMETER");
  assert.equal(await code(ref.ask({ type: "VIEW_MESSAGE_BY_ID", offset: 1 })), "QUERY_NOT_FOUND");
  assert.equal(await code(ref.ask({ type: "VIEW_MESSAGE_BY_ID", offset: 2 ** 50 })), "QUERY_NOT_FOUND");
  assert.equal(await code(ref.ask({ type: "PULL_MESSAGE" })), "REQUEST_CODE_NOT_SUPPORTED");

  const r = await ref.ask<{ count: number }>({ type: "VIEW_MESSAGE_BY_ID", offset: 0 });
  assert.ok(r.body && r.body.length > 0, "the record at offset 0 comes back as the body");
});

/** A port free on 127.0.0.1 a moment ago (brokers of several hosts share one, as every broker at :10911). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

test("brokers advertised by host name stamp its IPv4 address in offset msg ids: two on one port each answer with their own message", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-hostname-");
  t.after(cleanup);
  const ns = await NameServer.start({ listen: EPHEMERAL });
  t.after(() => ns.close());
  const port = await freePort();
  // "127.1" and "127.2" are host names to the broker (not dotted quads) that every resolver maps to 127.0.0.1 / 127.0.0.2
  const start = (name: string, ip: string, host: string) =>
    Broker.start({
      brokerName: name,
      nameservers: [ns.address!],
      storeDir: path.join(dir, name),
      listen: `tcp://${ip}:${port}`,
      advertise: `tcp://${host}:${port}`,
      flush: "async",
    });
  const a = await start("host-a", "127.0.0.1", "127.1");
  t.after(() => a.close());
  const b = await start("host-b", "127.0.0.2", "127.2");
  t.after(() => b.close());
  const adm = await Admin.start({ nameservers: [ns.address!] });
  t.after(() => adm.close());
  await adm.createTopic({ topic: "OnHostA", brokers: ["host-a"], readQueueNums: 1, writeQueueNums: 1 });
  await adm.createTopic({ topic: "OnHostB", brokers: ["host-b"], readQueueNums: 1, writeQueueNums: 1 });
  const p = await Producer.start({ group: "hostname-pg", nameservers: [ns.address!] });
  t.after(() => p.close());
  const ra = await p.send({ topic: "OnHostA", body: "on host-a" });
  const rb = await p.send({ topic: "OnHostB", body: "on host-b" });
  assert.equal(parseOffsetMsgId(ra.offsetMsgId).storeHost, `127.0.0.1:${port}`);
  assert.equal(parseOffsetMsgId(rb.offsetMsgId).storeHost, `127.0.0.2:${port}`);
  for (const [r, body] of [
    [ra, "on host-a"],
    [rb, "on host-b"],
  ] as const) {
    const m = await adm.viewMessage(r.offsetMsgId);
    assert.equal(m?.brokerName, r.queue.brokerName);
    assert.equal(m?.body.toString(), body);
    assert.equal(m?.storeHost, parseOffsetMsgId(r.offsetMsgId).storeHost);
  }
});

test("a broker whose address has no IPv4 address for offset msg ids is refused at start, not run with 0.0.0.0 or port 0", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-hostname-");
  t.after(cleanup);
  const ns = await NameServer.start({ listen: EPHEMERAL });
  t.after(() => ns.close());
  for (const advertise of ["tcp://[::1]:10911", "tcp://no-such-host.invalid:10911"]) {
    await assert.rejects(
      Broker.start({ brokerName: "nohost", nameservers: [ns.address!], storeDir: path.join(dir, "b"), listen: EPHEMERAL, advertise }),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && e.message.includes(advertise) && /IPv4/.test(e.message),
      advertise,
    );
  }
  // the refused starts released the store: a good start on the same directory works
  const ok = await Broker.start({ brokerName: "nohost", nameservers: [ns.address!], storeDir: path.join(dir, "b"), listen: EPHEMERAL });
  await ok.close();
});
