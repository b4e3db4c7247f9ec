import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { segmentIo } from "../../store/segment.ts";
import { encodeMessageBatch, encodeProperties } from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

const SEG = 8192;
const small = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: SEG,
  consumeQueueEntries: 16,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  fileReservedTimeHours: 1,
  ...o,
});
const batch = (topic: string, queueId: number, body: string) => ({
  topic,
  queueId,
  bornTimestamp: Date.now(),
  bornHost: "10.1.2.3:4000",
  body: encodeMessageBatch([{ body: Buffer.from(body), properties: encodeProperties({}) }]),
});
/** past every segment's reserved time */
const expired = () => Date.now() + 2 * 3600_000;
const first = "0".repeat(20);

/** Makes deleting `file` fail with EPERM (an immutable file, a sticky directory) until the returned function is called. */
function failRemoveOf(file: string): () => void {
  const real = segmentIo.rmSync;
  segmentIo.rmSync = (f, o) => {
    if (f === file) throw Object.assign(new Error(`EPERM: operation not permitted, unlink '${f}'`), { code: "EPERM" });
    real(f, o);
  };
  return () => {
    segmentIo.rmSync = real;
  };
}

test("a commit-log segment that cannot be deleted is dropped all the same: later expired segments go, the run fails naming it, the next run deletes it", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  for (let i = 0; i < 60; i++) await s.putMessages(batch("E", 0, "y".repeat(400)));
  const logDir = path.join(dir, "commitlog");
  const segments = fs.readdirSync(logDir).sort();
  assert.ok(segments.length >= 4, `${segments.length} segments`);
  const restore = failRemoveOf(path.join(logDir, first));
  t.after(restore);
  const failed = (e: unknown) => e instanceof MQError && e.code === "SYSTEM_ERROR" && e.message.includes(path.join(logDir, first));
  assert.throws(() => s.deleteExpiredFiles(expired()), failed);
  // the store no longer reads it: every other expired segment went, min offsets moved with them
  assert.deepEqual(fs.readdirSync(logDir).sort(), [first, segments.at(-1)]);
  assert.equal(s.minPhyOffset, Number(segments.at(-1)));
  const min = s.getMinOffset("E", 0);
  assert.ok(min > 0);
  assert.equal(s.getMessage("g", "E", 0, 0, 32).status, "OFFSET_TOO_SMALL");
  assert.equal(s.getMessage("g", "E", 0, min, 32).status, "FOUND");
  // retried at every run, and said again while it fails
  assert.throws(() => s.deleteExpiredFiles(expired()), failed);
  restore();
  assert.equal(s.deleteExpiredFiles(expired()), 0);
  assert.deepEqual(fs.readdirSync(logDir), [segments.at(-1)]);
  assert.equal((await s.putMessages(batch("E", 0, "after"))).status, "PUT_OK");
});

test("a commit-log segment that could not be deleted, found again at the next open before a gap below every queue's entries, is deleted then, not read again nor reported as missing log", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir));
  for (let i = 0; i < 60; i++) await s.putMessages(batch("E", 0, "y".repeat(400)));
  const logDir = path.join(dir, "commitlog");
  const last = fs.readdirSync(logDir).sort().at(-1)!;
  const restore = failRemoveOf(path.join(logDir, first));
  t.after(restore);
  const failed = (e: unknown) => e instanceof MQError && e.code === "SYSTEM_ERROR" && e.message.includes(path.join(logDir, first));
  assert.throws(() => s.deleteExpiredFiles(expired()), failed);
  const min = s.getMinOffset("E", 0);
  await s.close();
  // still not deletable at the open: not read, kept to delete at the next clean-up
  s = await MessageStore.open(small(dir));
  assert.deepEqual(s.recovery.missingLog, []);
  assert.equal(s.minPhyOffset, Number(last));
  assert.equal(s.getMinOffset("E", 0), min);
  assert.equal(s.getMessage("g", "E", 0, min, 32).status, "FOUND");
  assert.throws(() => s.deleteExpiredFiles(expired()), failed);
  await s.close();
  // deletable again: the next open deletes it
  restore();
  s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  assert.deepEqual(fs.readdirSync(logDir), [last]);
  assert.deepEqual(s.recovery.missingLog, []);
  assert.equal(s.minPhyOffset, Number(last));
  assert.equal(s.deleteExpiredFiles(expired()), 0);
});

test("a commit-log segment that could not be deleted, found again at an open that rebuilds the queues from the log, is deleted then: its expired records are not dispatched again, nothing is reported as missing log", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir));
  for (let i = 0; i < 60; i++) await s.putMessages(batch("E", 0, "y".repeat(400)));
  const logDir = path.join(dir, "commitlog");
  const last = fs.readdirSync(logDir).sort().at(-1)!;
  const restore = failRemoveOf(path.join(logDir, first));
  t.after(restore);
  assert.throws(() => s.deleteExpiredFiles(expired()));
  const min = s.getMinOffset("E", 0);
  await s.close();
  restore();
  // it was dropped as expired: older than fileReservedTime
  const old = new Date(Date.now() - 2 * 3600_000);
  fs.utimesSync(path.join(logDir, first), old, old);
  fs.rmSync(path.join(dir, "checkpoint"));
  s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  assert.match(String(s.recovery.rebuilt), /no checkpoint/);
  assert.deepEqual(s.recovery.missingLog, []);
  assert.deepEqual(fs.readdirSync(logDir), [last]);
  assert.equal(s.minPhyOffset, Number(last));
  assert.equal(s.getMinOffset("E", 0), min);
  assert.equal(s.getMessage("g", "E", 0, 0, 32).status, "OFFSET_TOO_SMALL");
  assert.equal(s.getMessage("g", "E", 0, min, 32).status, "FOUND");
});

test("at an open that rebuilds the queues from the log, a segment before a missing one that has not expired is kept and read, the gap reported as missing log", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir));
  for (let i = 0; i < 60; i++) await s.putMessages(batch("E", 0, "y".repeat(400)));
  await s.close();
  const logDir = path.join(dir, "commitlog");
  fs.rmSync(path.join(logDir, String(SEG).padStart(20, "0")));
  fs.rmSync(path.join(dir, "checkpoint"));
  s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  assert.deepEqual(s.recovery.missingLog, [{ from: SEG, to: 2 * SEG }]);
  assert.ok(fs.existsSync(path.join(logDir, first)));
  assert.equal(s.minPhyOffset, 0);
  assert.equal(s.getMessage("g", "E", 0, 0, 32).status, "FOUND");
});

test("a consume-queue file that cannot be deleted does not stop the clean-up of the other queues and the index", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  for (let i = 0; i < 60; i++) for (const q of [0, 1]) await s.putMessages(batch("E", q, "y".repeat(180)));
  const cq = (q: number) => path.join(dir, "consumequeue", "E", String(q));
  const files = fs.readdirSync(cq(1)).length;
  const restore = failRemoveOf(path.join(cq(0), first));
  t.after(restore);
  assert.throws(
    () => s.deleteExpiredFiles(expired()),
    (e: unknown) => e instanceof MQError && e.message.includes(path.join(cq(0), first)),
  );
  for (const q of [0, 1]) {
    const min = s.getMinOffset("E", q);
    assert.ok(min >= 16, `queue ${q} min ${min}`);
    assert.equal(s.getMessage("g", "E", q, min, 32).status, "FOUND");
    assert.equal(s.getMessage("g", "E", q, 0, 32).status, "OFFSET_TOO_SMALL");
  }
  assert.ok(fs.readdirSync(cq(1)).length < files, "queue 1 lost its old files");
  assert.ok(!fs.readdirSync(cq(1)).includes(first));
  restore();
  s.deleteExpiredFiles(expired());
  assert.ok(!fs.readdirSync(cq(0)).includes(first), "deleted by the next run");
});

test("above diskCleanForciblyPercent, a segment that could not be deleted stops further forced deletes until it is: they would drop unexpired messages and free nothing", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { diskUsedPercent: () => 95, diskCleanForciblyPercent: 85, diskFullPercent: 99 }));
  t.after(() => s.close());
  for (let i = 0; i < 60; i++) await s.putMessages(batch("E", 0, "y".repeat(400)));
  const logDir = path.join(dir, "commitlog");
  const restore = failRemoveOf(path.join(logDir, first));
  t.after(restore);
  assert.throws(() => s.deleteExpiredFiles(), /EPERM/);
  assert.equal(s.minPhyOffset, SEG, "one segment dropped, then the loop stopped");
  assert.throws(() => s.deleteExpiredFiles(), /EPERM/);
  assert.equal(s.minPhyOffset, SEG, "no more while it stays");
  restore();
  assert.equal(s.deleteExpiredFiles(), 2, "once it is deleted, forced deletes go on (the last segment is kept)");
  assert.ok(!fs.readdirSync(logDir).includes(first));
});

/** Holds every segment fdatasync until the returned release is called; `calls` counts them. */
function holdSyncs(): { calls: () => number; release: () => void; restore: () => void } {
  const real = segmentIo.fdatasync;
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let calls = 0;
  segmentIo.fdatasync = async (fd) => {
    calls++;
    await gate;
    return real(fd);
  };
  return {
    calls: () => calls,
    release,
    restore: () => {
      segmentIo.fdatasync = real;
    },
  };
}

test("a segment deleted forcibly while its fdatasync is in flight: no EBADF flush error, and the puts in the next segment are flushed and acknowledged", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let used = 50;
  const errors: string[] = [];
  const s = await MessageStore.open(
    small(dir, { diskUsedPercent: () => used, diskCleanForciblyPercent: 85, onFlushError: (f) => void errors.push(f.error.message) }),
  );
  t.after(() => s.close());
  // the first segment nearly full
  while (s.maxPhyOffset < SEG - 1200) await s.putMessages(batch("E", 0, "y".repeat(400)));
  const held = holdSyncs();
  t.after(held.restore);
  const last = s.putMessages(batch("E", 0, "y".repeat(400)));
  await waitFor(() => held.calls() === 1, 5000, "the first segment's fdatasync");
  const next = s.putMessages(batch("E", 0, "z".repeat(800)));
  assert.ok(s.maxPhyOffset > SEG, "the second put rolled into the next segment");
  used = 95;
  assert.equal(s.deleteExpiredFiles(), 1);
  held.release();
  held.restore();
  const [a, b] = await Promise.allSettled([last, next]);
  assert.deepEqual(errors, [], "no flush error");
  assert.equal(s.flushErrors, 0);
  assert.equal(a.status, "fulfilled");
  assert.equal(b.status === "fulfilled" && b.value.status, "PUT_OK");
});

test("a topic deleted while a checkpoint's consume-queue fdatasync is in flight: no EBADF flush error, the checkpoint is written", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const errors: string[] = [];
  const s = await MessageStore.open(small(dir, { onFlushError: (f) => void errors.push(f.error.message) }));
  t.after(() => s.close());
  for (let i = 0; i < 5; i++) await s.putMessages(batch("E", 0, "x"));
  const held = holdSyncs();
  t.after(held.restore);
  const cp = s.checkpoint();
  await waitFor(() => held.calls() >= 1, 5000, "the checkpoint's fdatasyncs");
  const deleting = s.deleteTopics(["E"]);
  held.release();
  held.restore();
  await assert.doesNotReject(cp);
  assert.equal(await deleting, 1);
  assert.deepEqual(errors, [], "no flush error");
});
