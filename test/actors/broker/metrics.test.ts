import assert from "node:assert/strict";
import { readlinkSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { Producer } from "../../../actors/client/index.ts";
import { PullConsumer } from "../../../actors/client/pullConsumer.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { segmentIo } from "../../../store/segment.ts";
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

test("a failed commit-log fdatasync (flush async) is logged at error level with its file and range and counted in actormq_store_flush_errors_total", async (t) => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({
    brokerName: "f",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir: dir,
    flush: "async",
    metricsListen: "127.0.0.1:0",
  });
  const producer = await Producer.start({ group: "pg", nameservers: [ns.address] });
  const real = segmentIo.fdatasync;
  t.after(async () => {
    segmentIo.fdatasync = real;
    await producer.close();
    await broker.close();
    await ns.close();
    await cleanup();
  });
  await broker.createTopic({ topic: "Flushed", readQueueNums: 1, writeQueueNums: 1 });
  const logged: Array<Record<string, unknown>> = [];
  const error = broker.ctx.logger.error.bind(broker.ctx.logger);
  broker.ctx.logger.error = ((obj: Record<string, unknown>, msg?: string) => {
    logged.push({ ...obj, msg });
    error(obj, msg);
  }) as typeof broker.ctx.logger.error;
  let failures = 1;
  segmentIo.fdatasync = (fd) => {
    if (failures === 0 || !readlinkSync(`/proc/self/fd/${fd}`).includes(`${path.sep}commitlog${path.sep}`)) return real(fd);
    failures--;
    return Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
  };
  await producer.send({ topic: "Flushed", body: "acknowledged before its flush" });
  const entry = await waitFor(
    () => logged.find((l) => typeof l.file === "string" && l.file.includes("commitlog")),
    10_000,
    "the flush error logged",
  );
  assert.ok(typeof entry.from === "number" && typeof entry.to === "number" && entry.to > entry.from, JSON.stringify(entry));
  assert.equal(entry.code, "SYSTEM_ERROR");
  const text = await (await fetch(broker.metrics!.url)).text();
  assert.match(text, /^actormq_store_flush_errors_total\{[^}]*\} 1$/m);
  // a disk that keeps failing: every failure counted, one line per file per 30 s (not one per flush)
  for (let i = 2; i <= 3; i++) {
    failures = 1;
    await producer.send({ topic: "Flushed", body: `acknowledged before its flush ${i}` });
    await waitFor(() => broker.store.flushErrors === i, 10_000, `flush error ${i}`);
  }
  assert.equal(logged.filter((l) => typeof l.file === "string" && l.file.includes("commitlog")).length, 1);
  const again = await (await fetch(broker.metrics!.url)).text();
  assert.match(again, /^actormq_store_flush_errors_total\{[^}]*\} 3$/m);
});
