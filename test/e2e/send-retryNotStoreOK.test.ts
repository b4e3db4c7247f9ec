/**
 * retryAnotherBrokerWhenNotStoreOK (RocketMQ's DefaultMQProducer option, default false). broker-a is
 * a SYNC_MASTER without a slave: it stores every message but answers SLAVE_NOT_AVAILABLE; broker-b
 * is an ASYNC_MASTER answering SEND_OK. By default a send that lands on broker-a returns
 * SLAVE_NOT_AVAILABLE; with the option it is sent again to broker-b and returns SEND_OK there,
 * within retryTimesWhenSendFailed; when every attempt answers other than SEND_OK, the last answer is
 * returned, not an error.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { Admin, Broker, MQError, NameServer, Producer, type SendResult } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const TOPIC = "NotStoreOK";
/** exists on broker-a only: every attempt answers SLAVE_NOT_AVAILABLE */
const TOPIC_A_ONLY = "NotStoreOKOnlyA";

let ns: NameServer;
let brokerA: Broker;
let brokerB: Broker;
let admin: Admin;
let cleanup: () => Promise<void>;
let nameservers: string[];

before(async () => {
  const t = await tempDir("actormq-notstoreok-");
  cleanup = t.cleanup;
  ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  nameservers = [ns.address];
  const common = { listen: EPHEMERAL, nameservers, flush: "async", autoCreateTopic: false, logLevel: "silent" } as const;
  brokerA = await Broker.start({ ...common, brokerName: "broker-a", role: "SYNC_MASTER", storeDir: path.join(t.dir, "a") });
  brokerB = await Broker.start({ ...common, brokerName: "broker-b", storeDir: path.join(t.dir, "b") });
  await brokerA.createTopic({ topic: TOPIC, readQueueNums: 2, writeQueueNums: 2 });
  await brokerB.createTopic({ topic: TOPIC, readQueueNums: 2, writeQueueNums: 2 });
  await brokerA.createTopic({ topic: TOPIC_A_ONLY, readQueueNums: 1, writeQueueNums: 1 });
  admin = await Admin.start({ nameservers });
  await waitFor(
    async () => (await admin.topicRoute(TOPIC).catch(() => undefined))?.queueDatas.length === 2,
    10_000,
    "both brokers in the route",
  );
});

after(async () => {
  await admin?.close();
  await brokerA?.close();
  await brokerB?.close();
  await ns?.close();
  await cleanup?.();
});

/** Messages stored per broker for `topic` (sum of its queues' max offsets). */
async function storedPerBroker(topic: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const q of await admin.examineTopicStats(topic)) out[q.brokerName] = (out[q.brokerName] ?? 0) + q.maxOffset;
  return out;
}

/** 8 sends round robin over the 4 queues: each broker's queues are chosen first 4 times. */
async function sendEight(p: Producer, tag: string): Promise<SendResult[]> {
  const results: SendResult[] = [];
  for (let i = 0; i < 8; i++) results.push(await p.send({ topic: TOPIC, body: `${tag}-${i}` }));
  return results;
}

test("by default a send broker-a stored but answered SLAVE_NOT_AVAILABLE returns that status; nothing is sent again", async () => {
  const before = await storedPerBroker(TOPIC);
  const p = await Producer.start({ group: "pgNotStoreOkDefault", nameservers });
  try {
    const results = await sendEight(p, "default");
    const onA = results.filter((r) => r.queue.brokerName === "broker-a");
    const onB = results.filter((r) => r.queue.brokerName === "broker-b");
    assert.ok(onA.length > 0, "round robin reached broker-a");
    for (const r of onA) assert.equal(r.status, "SLAVE_NOT_AVAILABLE");
    for (const r of onB) assert.equal(r.status, "SEND_OK");
    // one copy per send: none was sent again
    await waitFor(
      async () => {
        const now = await storedPerBroker(TOPIC);
        return (
          (now["broker-a"] ?? 0) - (before["broker-a"] ?? 0) === onA.length &&
          (now["broker-b"] ?? 0) - (before["broker-b"] ?? 0) === onB.length
        );
      },
      10_000,
      "one stored copy per send",
    );
  } finally {
    await p.close();
  }
});

test("retryAnotherBrokerWhenNotStoreOK: a send broker-a answered SLAVE_NOT_AVAILABLE is sent again to broker-b and returns SEND_OK there", async () => {
  const before = await storedPerBroker(TOPIC);
  const p = await Producer.start({ group: "pgNotStoreOkRetry", nameservers, retryAnotherBrokerWhenNotStoreOK: true });
  try {
    const results = await sendEight(p, "retry");
    for (const r of results) {
      assert.equal(r.status, "SEND_OK", JSON.stringify(r));
      assert.equal(r.queue.brokerName, "broker-b");
    }
    // broker-a kept the copies of the first attempts that went to it (as in RocketMQ)
    await waitFor(
      async () => {
        const now = await storedPerBroker(TOPIC);
        return (now["broker-b"] ?? 0) - (before["broker-b"] ?? 0) === 8 && (now["broker-a"] ?? 0) > (before["broker-a"] ?? 0);
      },
      10_000,
      "every message on broker-b, first attempts on broker-a",
    );
  } finally {
    await p.close();
  }
});

test("retryAnotherBrokerWhenNotStoreOK without retries left (retryTimesWhenSendFailed 0) returns broker-a's SLAVE_NOT_AVAILABLE", async () => {
  const p = await Producer.start({
    group: "pgNotStoreOkNoRetry",
    nameservers,
    retryAnotherBrokerWhenNotStoreOK: true,
    retryTimesWhenSendFailed: 0,
  });
  try {
    const results = await sendEight(p, "noretry");
    const onA = results.filter((r) => r.queue.brokerName === "broker-a");
    assert.ok(onA.length > 0, "round robin reached broker-a");
    for (const r of onA) assert.equal(r.status, "SLAVE_NOT_AVAILABLE");
  } finally {
    await p.close();
  }
});

test("retryAnotherBrokerWhenNotStoreOK with no other broker: 1 + retryTimesWhenSendFailed attempts, then the last SLAVE_NOT_AVAILABLE is returned", async () => {
  const before = (await storedPerBroker(TOPIC_A_ONLY))["broker-a"] ?? 0;
  const p = await Producer.start({
    group: "pgNotStoreOkOnlyA",
    nameservers,
    retryAnotherBrokerWhenNotStoreOK: true,
    retryTimesWhenSendFailed: 2,
  });
  try {
    const r = await p.send({ topic: TOPIC_A_ONLY, body: "only-a" });
    assert.equal(r.status, "SLAVE_NOT_AVAILABLE");
    assert.equal(r.queue.brokerName, "broker-a");
    await waitFor(async () => ((await storedPerBroker(TOPIC_A_ONLY))["broker-a"] ?? 0) - before === 3, 10_000, "three attempts stored");
    assert.equal(r.queueOffset, before + 2, "the result is the last attempt's");
  } finally {
    await p.close();
  }
});

test("retryAnotherBrokerWhenNotStoreOK must be true or false", async () => {
  for (const v of ["true", 1, null]) {
    await assert.rejects(
      Producer.start({ group: "pgNotStoreOkBad", nameservers, retryAnotherBrokerWhenNotStoreOK: v as never }),
      (e: unknown) =>
        e instanceof MQError &&
        e.code === "ILLEGAL_ARGUMENT" &&
        e.message.startsWith("retryAnotherBrokerWhenNotStoreOK must be true or false"),
      String(v),
    );
  }
});
