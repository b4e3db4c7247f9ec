import assert from "node:assert/strict";
import { test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { Producer } from "../../../actors/client/index.ts";
import { PullConsumer } from "../../../actors/client/pullConsumer.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../../helpers.ts";

function sample(text: string, name: string, topic: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(`topic="${topic}"`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

test("messages and bytes out count what pulls read, not the delay scheduler's scans of SCHEDULE_TOPIC_XXXX", async (t) => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({
    brokerName: "m",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async",
    messageDelayLevel: "1s",
    metricsListen: "127.0.0.1:0",
  });
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address] });
  const consumer = await PullConsumer.start({ group: "cg", nameservers: [ns.address] });
  t.after(async () => {
    await consumer.close();
    await producer.close();
    await broker.close();
    await ns.close();
    await cleanup();
  });
  await broker.createTopic({ topic: "Out", readQueueNums: 1, writeQueueNums: 1 });
  for (let i = 0; i < 5; i++) await producer.send({ topic: "Out", body: `delayed ${i}`, delayLevel: 1 });
  await waitFor(() => broker.store.getMaxOffset("Out", 0) === 5, 10_000, "the delayed messages delivered");
  const scrape = async () => (await fetch(broker.metrics!.url)).text();
  assert.equal(sample(await scrape(), "actormq_messages_out_total", "SCHEDULE_TOPIC_XXXX"), undefined, "no pull read the schedule topic");

  await consumer.assign([{ topic: "Out", brokerName: "m", queueId: 0 }]);
  let got = 0;
  await waitFor(async () => (got += (await consumer.poll(200)).length) >= 5, 10_000, "5 messages pulled");
  const text = await scrape();
  assert.equal(sample(text, "actormq_messages_out_total", "Out"), 5);
  assert.ok((sample(text, "actormq_bytes_out_total", "Out") ?? 0) > 5 * "delayed 0".length, text);
  assert.equal(sample(text, "actormq_messages_out_total", "SCHEDULE_TOPIC_XXXX"), undefined);
});
