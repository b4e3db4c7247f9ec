/**
 * Names that are also members of Object.prototype: tables keyed by topic travel as msgpack maps
 * decoded to objects, so "constructor" and "toString" must work as topics end to end, and
 * "__proto__" (which such an object cannot hold as a key) is refused with a clear error, as a
 * topic, a broker or a consumer group name.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, Broker, type MessageExt, NameServer, Producer, PushConsumer } from "../../index.ts";
import { MQError } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

test("topics named after Object.prototype members are routed, stored and consumed; __proto__ is refused", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const ns = await NameServer.start({ listen: EPHEMERAL });
  t.after(() => ns.close());
  await assert.rejects(
    Broker.start({ brokerName: "__proto__", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir }),
    (e) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /reserved/.test(e.message),
  );
  const broker = await Broker.start({
    brokerName: "b1",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    autoCreateTopic: false,
  });
  t.after(() => broker.close());
  const admin = await Admin.start({ nameservers: [ns.address] });
  t.after(() => admin.close());
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address] });
  t.after(() => producer.close());

  await assert.rejects(
    admin.createTopic({ topic: "__proto__", brokers: ["b1"] }),
    (e) => e instanceof MQError && e.code === "MESSAGE_ILLEGAL" && /reserved/.test(e.message),
  );
  await assert.rejects(producer.send({ topic: "__proto__", body: "x" }), (e) => e instanceof MQError && e.code === "MESSAGE_ILLEGAL");

  await assert.rejects(
    PushConsumer.start({
      group: "__proto__",
      nameservers: [ns.address],
      subscriptions: { constructor: "*" },
      listener: async () => "CONSUME_SUCCESS",
    }),
    (e) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /reserved/.test(e.message),
  );

  const topics = ["constructor", "toString", "hasOwnProperty"];
  for (const topic of topics) await admin.createTopic({ topic, brokers: ["b1"], readQueueNums: 2, writeQueueNums: 2 });
  for (const topic of topics) assert.equal((await producer.send({ topic, body: `to ${topic}` })).status, "SEND_OK");
  const got: MessageExt[] = [];
  const consumer = await PushConsumer.start({
    group: "valueOf",
    nameservers: [ns.address],
    subscriptions: Object.fromEntries(topics.map((topic) => [topic, "*"])),
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      got.push(...msgs);
      return "CONSUME_SUCCESS";
    },
  });
  t.after(() => consumer.close());
  await waitFor(() => got.length >= topics.length, 15_000, "one message of each topic");
  assert.deepEqual(got.map((m) => `${m.topic}: ${m.body.toString()}`).sort(), topics.map((topic) => `${topic}: to ${topic}`).sort());
});
