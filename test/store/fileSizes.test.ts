import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";
import { tempDir } from "../helpers.ts";

const opts = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: 8192,
  consumeQueueEntries: 16,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  flush: "async",
  onDamage: () => {},
  ...o,
});

async function fill(s: MessageStore, topic: string, n: number, bytes: number): Promise<void> {
  for (let i = 0; i < n; i++)
    await s.putMessage({ topic, queueId: 0, body: Buffer.alloc(bytes, 65 + (i % 26)), bornTimestamp: 1, bornHost: "1.1.1.1:1" });
}

function readAll(s: MessageStore, topic: string): string[] {
  const out: string[] = [];
  for (let off = s.getMinOffset(topic, 0); ; ) {
    const g = s.getMessage("g", topic, 0, off, 32);
    if (g.status !== "FOUND") return out;
    out.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString().slice(0, 1)));
    off = g.nextBeginOffset;
  }
}

function fileSizes(dir: string): number[] {
  return fs.readdirSync(dir).map((f) => fs.statSync(path.join(dir, f)).size);
}

const refused = (setting: string, written: string) => (e: unknown) =>
  e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.includes(setting) && e.message.includes(written);

test("a commit log written with another segment size is refused, never cut; the right size still reads everything", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await fill(s, "T", 30, 500);
  const before = readAll(s, "T");
  assert.equal(before.length, 30);
  await s.close();
  const logDir = path.join(dir, "commitlog");
  const sizes = fileSizes(logDir);
  assert.ok(sizes.length >= 2);
  // smaller, dividing the old size: every file is longer than a segment
  await assert.rejects(MessageStore.open(opts(dir, { commitLogSegmentBytes: 4096 })), refused("commitLogSegmentBytes", "8192"));
  // larger: the second file does not start at a multiple of it
  await assert.rejects(MessageStore.open(opts(dir, { commitLogSegmentBytes: 16384 })), refused("commitLogSegmentBytes", "8192"));
  assert.deepEqual(fileSizes(logDir), sizes, "no file was resized");
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.deepEqual(readAll(s, "T"), before);
});

test("consume queues written with another consumeQueueEntries are refused, never cut; the right value still reads everything", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const o = { commitLogSegmentBytes: 1 << 20 };
  let s = await MessageStore.open(opts(dir, o));
  await fill(s, "A", 5, 10); // one file: refused all the same for a larger value
  await fill(s, "B", 40, 10); // three files
  await s.close();
  const cqDir = path.join(dir, "consumequeue", "B", "0");
  const sizes = fileSizes(cqDir);
  await assert.rejects(MessageStore.open(opts(dir, { ...o, consumeQueueEntries: 8 })), refused("consumeQueueEntries", "16 entries"));
  await assert.rejects(MessageStore.open(opts(dir, { ...o, consumeQueueEntries: 32 })), refused("consumeQueueEntries", "16"));
  assert.deepEqual(fileSizes(cqDir), sizes, "no file was resized");
  assert.deepEqual(fileSizes(path.join(dir, "consumequeue", "A", "0")), [16 * 20], "a refused open extends nothing");
  // without a checkpoint the queues would be rebuilt from the log: refused all the same, not rebuilt over
  fs.rmSync(path.join(dir, "checkpoint"), { force: true });
  await assert.rejects(MessageStore.open(opts(dir, { ...o, consumeQueueEntries: 8 })), refused("consumeQueueEntries", "16 entries"));
  assert.deepEqual(fileSizes(cqDir), sizes, "no file was rebuilt at another size");
  s = await MessageStore.open(opts(dir, o));
  t.after(() => s.close());
  assert.equal(readAll(s, "A").length, 5);
  assert.equal(readAll(s, "B").length, 40);
});

test("a segment file left short by a crash while it was created opens, and the log goes on in it", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await fill(s, "T", 10, 500);
  await s.close();
  // the next segment's file was created (empty) and the process died before sizing it
  fs.writeFileSync(path.join(dir, "commitlog", String(8192).padStart(20, "0")), "");
  fs.writeFileSync(path.join(dir, "abort"), "1");
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(readAll(s, "T").length, 10);
  await fill(s, "T", 20, 500);
  assert.equal(readAll(s, "T").length, 30);
});

test("a store with one commit-log segment and one file per queue is refused at a larger size too, and nothing is resized", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await fill(s, "T", 5, 500);
  await s.close();
  const logDir = path.join(dir, "commitlog");
  const cqDir = path.join(dir, "consumequeue", "T", "0");
  assert.deepEqual(fileSizes(logDir), [8192]);
  // the one segment would be taken for one left short by a crash, and grown to the larger size
  await assert.rejects(MessageStore.open(opts(dir, { commitLogSegmentBytes: 1 << 20 })), refused("commitLogSegmentBytes", "8192"));
  await assert.rejects(MessageStore.open(opts(dir, { consumeQueueEntries: 32 })), refused("consumeQueueEntries", "16"));
  assert.deepEqual(fileSizes(logDir), [8192], "no file was resized");
  assert.deepEqual(fileSizes(cqDir), [16 * 20], "no file was resized");
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(readAll(s, "T").length, 5);
});

test("the last segment left short by a crash while its tail was zeroed opens, and the log goes on in it", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await fill(s, "T", 5, 500);
  const end = s.maxPhyOffset;
  await s.close();
  // zeroFrom truncates to the valid end, then extends again: the process died in between
  fs.truncateSync(path.join(dir, "commitlog", "0".repeat(20)), end);
  fs.writeFileSync(path.join(dir, "abort"), "1");
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(readAll(s, "T").length, 5);
  await fill(s, "T", 20, 500);
  assert.equal(readAll(s, "T").length, 25);
});

test("a store from before fileSizes.json is checked by its files and gets the record once a segment has the configured size", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await fill(s, "T", 5, 500);
  await s.close();
  const record = path.join(dir, "fileSizes.json");
  assert.deepEqual(JSON.parse(fs.readFileSync(record, "utf8")), { commitLogSegmentBytes: 8192, consumeQueueEntries: 16 });
  fs.rmSync(record);
  s = await MessageStore.open(opts(dir));
  await s.close();
  assert.deepEqual(JSON.parse(fs.readFileSync(record, "utf8")), { commitLogSegmentBytes: 8192 });
  await assert.rejects(MessageStore.open(opts(dir, { commitLogSegmentBytes: 1 << 20 })), refused("commitLogSegmentBytes", "8192"));
});
