/**
 * A failed message whose broker dies before it can be sent back is still retried: the send-back
 * to broker A (killed with kill -9) fails, and the consumer sends its own copy to `%RETRY%<group>`
 * on broker B (RocketMQ's sendMessageBack fallback), which redelivers it through its retry queue
 * with reconsumeTimes 1. A group whose retries are used up (maxReconsumeTimes 0) gets the copy in
 * `%DLQ%<group>` on broker B. The consumers' local retry is set far beyond the test's waits, so a
 * redelivery can only come through broker B.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Broker, type MessageExt, NameServer, Producer, PushConsumer } from "../../index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { MessageConst } from "../../transport/protocol.ts";
import { EPHEMERAL, SHORT_DELAY_LEVELS, tempDir, waitFor } from "../helpers.ts";
import { killServer, spawnServer, stopServer } from "./fixtures/children.ts";

const TOPIC = "SendBackDown";
/** Far beyond every wait below: the message is not consumed again locally within the test. */
const LOCAL_RETRY_MS = 600_000;

test("kill -9 of the message's broker before the send-back: the consumer's own copy is retried through the other broker's retry queue, or dead-lettered there", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-sendback-down-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const brokerOpts = (name: string) => ({
    brokerName: name,
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: path.join(dir, name),
    flush: "async" as const,
    messageDelayLevel: SHORT_DELAY_LEVELS,
    registerIntervalMs: 300,
  });
  const a = await spawnServer("broker", brokerOpts("broker-a"));
  const b = await Broker.start(brokerOpts("broker-b"));
  const admin = await Admin.start({ nameservers: [ns.address] });
  const producer = await Producer.start({ group: "down-pg", nameservers: [ns.address] });
  const consumers: PushConsumer[] = [];
  t.after(async () => {
    for (const c of consumers) await c.close();
    await producer.close();
    await admin.close();
    await stopServer(a);
    await b.close();
    await ns.close();
    await cleanup();
  });
  await admin.createTopic({ topic: TOPIC, readQueueNums: 1, writeQueueNums: 1 });

  let aGone!: () => void;
  const brokerAKilled = new Promise<void>((resolve) => (aGone = resolve));
  const deliveries = new Map<string, MessageExt[]>();
  const start = async (group: string, maxReconsumeTimes?: number) => {
    deliveries.set(group, []);
    consumers.push(
      await PushConsumer.start({
        group,
        nameservers: [ns.address],
        subscriptions: { [TOPIC]: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        reconsumeLaterDelayMs: LOCAL_RETRY_MS,
        ...(maxReconsumeTimes === undefined ? {} : { maxReconsumeTimes }),
        listener: async (msgs) => {
          deliveries.get(group)!.push(...msgs.map((m) => ({ ...m, properties: { ...m.properties } })));
          if (msgs.some((m) => m.reconsumeTimes > 0)) return "CONSUME_SUCCESS";
          // the first delivery fails once its broker is gone: the send-back has nowhere to go
          await brokerAKilled;
          return "RECONSUME_LATER";
        },
      }),
    );
  };
  await start("down-cg");
  await start("down-dead-cg", 0);
  // each member's heartbeat made its group's retry topic on both brokers
  for (const group of ["down-cg", "down-dead-cg"])
    await waitFor(
      async () => {
        const route = await admin.topicRoute(`%RETRY%${group}`).catch(() => undefined);
        return route?.queueDatas.some((q) => q.brokerName === "broker-b");
      },
      10_000,
      `%RETRY%${group} on broker-b in the route`,
    );

  const sent = await producer.send(
    { topic: TOPIC, body: "down-1", tags: "TagA" },
    { selector: (qs) => qs.find((q) => q.brokerName === "broker-a") },
  );
  assert.equal(sent.queue.brokerName, "broker-a");
  await waitFor(
    () => deliveries.get("down-cg")!.length >= 1 && deliveries.get("down-dead-cg")!.length >= 1,
    10_000,
    "the first deliveries",
  );
  await killServer(a);
  aGone();

  // retried through broker B's %RETRY%down-cg, at level 3
  const retried = await waitFor(() => deliveries.get("down-cg")![1], 15_000, "the redelivery through broker-b");
  const first = deliveries.get("down-cg")![0]!;
  assert.equal(first.brokerName, "broker-a");
  assert.equal(first.reconsumeTimes, 0);
  assert.equal(retried.brokerName, "broker-b", "pulled from broker-b's retry queue");
  assert.equal(retried.reconsumeTimes, 1);
  assert.equal(retried.topic, TOPIC, "the listener sees the original topic");
  assert.equal(retried.msgId, sent.msgId);
  assert.equal(retried.body.toString(), "down-1");
  assert.equal(retried.tags, "TagA");
  assert.equal(retried.properties[MessageConst.RETRY_TOPIC], TOPIC);
  assert.equal(retried.properties[MessageConst.ORIGIN_MESSAGE_ID], sent.msgId);
  assert.equal(b.store.getMaxOffset("%RETRY%down-cg", 0), 1);

  // maxReconsumeTimes 0: the copy lands in broker B's %DLQ%down-dead-cg, not in its retry topic
  await waitFor(() => b.store.getMaxOffset("%DLQ%down-dead-cg", 0) === 1, 15_000, "the dead letter on broker-b");
  const r = b.store.getMessage("t", "%DLQ%down-dead-cg", 0, 0, 1);
  const dead = decodeRecords(r.buffers[0]!, "broker-b")[0]!;
  assert.equal(dead.body.toString(), "down-1");
  assert.equal(dead.reconsumeTimes, 1);
  assert.equal(dead.properties[MessageConst.RETRY_TOPIC], TOPIC);
  assert.equal(dead.properties[MessageConst.ORIGIN_MESSAGE_ID], sent.msgId);
  assert.equal(dead.properties[MessageConst.DELAY], undefined);
  assert.equal(b.store.getMaxOffset("%RETRY%down-dead-cg", 0), 0);
  assert.equal(deliveries.get("down-dead-cg")!.length, 1, "not delivered again");
});
