import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { ConsumeQueue } from "../../store/consumeQueue.ts";
import { dirIo, mkdirDurable } from "../../store/durableDir.ts";
import { type DiskSpaceChange, MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { statfsUsedPercent, usedPercent } from "../../store/messageStore.ts";
import { segmentIo } from "../../store/segment.ts";
import { monotonicNow } from "../../transport/clock.ts";
import { decodeRecords, encodeMessageBatch, encodeProperties, javaHashCode } from "../../transport/messageRecord.ts";
import { MQError, SCHEDULE_TOPIC } from "../../transport/protocol.ts";
import { runFixture, tempDir, waitFor } from "../helpers.ts";

const small = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: 8192,
  consumeQueueEntries: 16,
  cleanIntervalMs: 0,
  ...o,
});
const batch = (topic: string, queueId: number, msgs: Array<{ body: string; props?: Record<string, string> }>) => ({
  topic,
  queueId,
  bornTimestamp: Date.now(),
  bornHost: "10.1.2.3:4000",
  body: encodeMessageBatch(msgs.map((m) => ({ body: Buffer.from(m.body), properties: encodeProperties(m.props) }))),
});
const isCode = (code: string) => (e: unknown) => e instanceof MQError && e.code === code;

/** Makes every segment write to a file whose path holds `/<dirName>/` fail with ENOSPC (a full disk under it), or `code`, until the returned function is called. */
function failWritesUnder(dirName: string, code = "ENOSPC"): () => void {
  const real = segmentIo.writeSync;
  const part = `${path.sep}${dirName}${path.sep}`;
  segmentIo.writeSync = (fd, buf, off, len, pos) => {
    if (fs.readlinkSync(`/proc/self/fd/${fd}`).includes(part)) throw Object.assign(new Error(`failed (${code})`), { code });
    return real(fd, buf, off, len, pos);
  };
  return () => {
    segmentIo.writeSync = real;
  };
}

test("round trip across commit-log and consume-queue roll-over, before and after reopen", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir));
  const sent: string[] = [];
  for (let i = 0; i < 40; i++) {
    const msgs = [0, 1, 2].map((j) => ({ body: `m${i}-${j}-${"x".repeat(100)}`, props: { TAGS: j === 0 ? "A" : "B", KEYS: `key${i}` } }));
    const r = await s.putMessages(batch("RollTopic", 1, msgs));
    assert.equal(r.status, "PUT_OK");
    assert.equal(r.firstQueueOffset, i * 3);
    assert.equal(r.offsetMsgIds.split(",").length, 3);
    sent.push(...msgs.map((m) => m.body));
  }
  assert.ok(fs.readdirSync(path.join(dir, "commitlog")).length > 3, "several commit-log segments");
  const readAll = (st: MessageStore) => {
    const got: string[] = [];
    let off = 0;
    for (;;) {
      const g = st.getMessage("g", "RollTopic", 1, off, 32);
      if (g.status !== "FOUND") break;
      const ms = decodeRecords(Buffer.concat(g.buffers), "b");
      for (const [i, m] of ms.entries()) assert.equal(m.queueOffset, off + i);
      got.push(...ms.map((m) => m.body.toString()));
      off = g.nextBeginOffset;
    }
    return got;
  };
  assert.deepEqual(readAll(s), sent);
  await s.close();
  s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "normal");
  assert.deepEqual(readAll(s), sent);
  assert.equal(s.getMaxOffset("RollTopic", 1), 120);
  const r = await s.putMessages(batch("RollTopic", 1, [{ body: "after" }]));
  assert.equal(r.firstQueueOffset, 120);
  // key index and view by offset
  const byKey = s.queryMessageByKey("RollTopic", "key7", 10);
  assert.equal(byKey.length, 3);
  const viewed = s.viewMessage(r.commitLogOffset);
  assert.ok(viewed);
  assert.equal(decodeRecords(viewed, "b")[0]!.body.toString(), "after");
});

test("new segment files and new directories are fsync'ed in their parent directory (their names survive a power loss)", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const synced: string[] = [];
  const real = dirIo.fsync;
  dirIo.fsync = (d) => {
    synced.push(path.relative(dir, d) || ".");
    real(d);
  };
  t.after(() => {
    dirIo.fsync = real;
  });
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  const count = (d: string) => synced.filter((x) => x === d).length;
  assert.ok(count(".") >= 1, `the store directory holds the new commitlog directory: ${synced}`);
  const logSyncs = count("commitlog");
  assert.ok(logSyncs >= 1, `the first commit-log segment: ${synced}`);
  await s.putMessages(batch("DurableDirs", 2, [{ body: "x", props: { KEYS: "k" } }]));
  assert.ok(count("consumequeue") >= 1 && count(path.join("consumequeue", "DurableDirs")) >= 1, `the queue's new directories: ${synced}`);
  assert.ok(count(path.join("consumequeue", "DurableDirs", "2")) >= 1, `the queue's first segment: ${synced}`);
  synced.length = 0;
  for (let i = 0; i < 80; i++) await s.putMessages(batch("DurableDirs", 2, [{ body: "y".repeat(200) }]));
  assert.ok(count("commitlog") >= 2, `each rolled commit-log segment: ${synced}`);
  assert.ok(count(path.join("consumequeue", "DurableDirs", "2")) >= 4, `each rolled consume-queue segment: ${synced}`);
  synced.length = 0;
  await s.putMessages(batch("DurableDirs", 2, [{ body: "z" }]));
  assert.deepEqual(synced, [], "a put that creates no file syncs no directory");
});

/**
 * Makes the fsync of every directory fail with `code` until the returned function is called; the
 * directories whose fsync was tried are pushed to `tried`.
 */
function failDirFsyncs(code: string, tried: string[]): () => void {
  const real = fs.fsyncSync;
  fs.fsyncSync = (fd: number) => {
    if (!fs.fstatSync(fd).isDirectory()) return real(fd);
    tried.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
    throw Object.assign(new Error(`${code}: fsync`), { code });
  };
  return () => {
    fs.fsyncSync = real;
  };
}

test("a new segment whose directory fsync fails with EIO refuses the put; the retry creates it again and redoes the fsync", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const logDir = path.join(dir, "commitlog");
  let s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
  const big = "x".repeat(3000);
  await s.putMessages(batch("D", 0, [{ body: big }]));
  await s.putMessages(batch("D", 0, [{ body: big }]));
  const tried: string[] = [];
  const restore = failDirFsyncs("EIO", tried);
  t.after(restore);
  // the third does not fit the first segment: a new one is made
  await assert.rejects(s.putMessages(batch("D", 0, [{ body: big }])), isCode("SYSTEM_ERROR"));
  assert.ok(tried.includes(logDir), `the commit-log directory's fsync was tried: ${tried}`);
  restore();
  const synced: string[] = [];
  const realDirFsync = dirIo.fsync;
  dirIo.fsync = (d) => {
    synced.push(d);
    realDirFsync(d);
  };
  t.after(() => {
    dirIo.fsync = realDirFsync;
  });
  assert.equal((await s.putMessages(batch("D", 0, [{ body: big }]))).firstQueueOffset, 2);
  assert.ok(synced.includes(logDir), `the retry fsyncs the commit-log directory again: ${synced}`);
  await s.close();
  s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
  t.after(() => s.close());
  assert.equal(s.getMaxOffset("D", 0), 3);
});

test("a store whose new commit-log directory cannot be fsync'ed (EIO) is not opened (SYSTEM_ERROR); a retry makes and syncs it", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const tried: string[] = [];
  const restore = failDirFsyncs("EIO", tried);
  t.after(restore);
  await assert.rejects(MessageStore.open(small(dir)), isCode("SYSTEM_ERROR"));
  assert.equal(fs.existsSync(path.join(dir, "commitlog")), false, "the directory whose entry could not be synced is removed");
  restore();
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  assert.equal((await s.putMessages(batch("D", 0, [{ body: "x" }]))).status, "PUT_OK");
});

test("a file system that does not support directory fsync (EINVAL) does not stop puts", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const tried: string[] = [];
  const restore = failDirFsyncs("EINVAL", tried);
  t.after(restore);
  const s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
  t.after(() => s.close());
  for (let i = 0; i < 4; i++) assert.equal((await s.putMessages(batch("D", 0, [{ body: "x".repeat(3000) }]))).status, "PUT_OK");
  assert.ok(tried.length > 0, "directory fsyncs were tried");
});

test("mkdirDurable whose parent fsync fails with EIO removes the directories it made, so a retry makes and syncs them again", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const tried: string[] = [];
  const restore = failDirFsyncs("EIO", tried);
  t.after(restore);
  assert.throws(
    () => mkdirDurable(path.join(dir, "a", "b")),
    (e) => isCode("SYSTEM_ERROR")(e) && /EIO/.test((e as Error).message),
  );
  assert.equal(fs.existsSync(path.join(dir, "a")), false);
  restore();
  const synced: string[] = [];
  const real = dirIo.fsync;
  dirIo.fsync = (d) => {
    synced.push(path.relative(dir, d) || ".");
    real(d);
  };
  t.after(() => {
    dirIo.fsync = real;
  });
  mkdirDurable(path.join(dir, "a", "b"));
  assert.deepEqual(synced, ["a", "."]);
});

test("a directory the store may write in but not read (EACCES on opening it for an fsync) does not stop the store; EIO from the fsync does", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  // root reads every directory, so the refusal a non-root broker gets under a -wx parent is simulated
  const realOpen = fs.openSync;
  const openMock = t.mock.method(fs, "openSync", ((p: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode) => {
    if (p === dir) throw Object.assign(new Error(`EACCES: permission denied, open '${dir}'`), { code: "EACCES" });
    return realOpen(p, flags ?? "r", mode);
  }) as typeof fs.openSync);
  const s = await MessageStore.open(small(path.join(dir, "store"), { checkpointIntervalMs: 0 }));
  assert.equal((await s.putMessages(batch("Q", 0, [{ body: "a" }]))).status, "PUT_OK");
  await s.close();
  openMock.mock.restore();
  const fsyncMock = t.mock.method(fs, "fsyncSync", () => {
    throw Object.assign(new Error("i/o error"), { code: "EIO" });
  });
  assert.throws(
    () => mkdirDurable(path.join(dir, "other")),
    (e) => isCode("SYSTEM_ERROR")(e) && /i\/o error/.test((e as Error).message),
  );
  fsyncMock.mock.restore();
});

test("MessageStore.open on a dir that cannot be made (on /proc) fails at once with ILLEGAL_ARGUMENT naming it", async () => {
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "openStore.ts");
  for (const dir of ["/proc/actormq-store", "/proc/actormq-store/s"]) {
    // in a child, SIGKILLed after 30 s: Node's recursive mkdir spun forever on /proc, blocking the event loop
    const r = JSON.parse(await runFixture(fixture, [], { STORE_DIR: dir }, 30_000));
    assert.equal(r.code, "ILLEGAL_ARGUMENT", `${dir}: ${JSON.stringify(r)}`);
    assert.ok(r.message.startsWith(`The directory ${dir} cannot be made (ENOENT`), r.message);
  }
});

test("getMessage: statuses and next offsets (FOUND, OVERFLOW_ONE/BADLY, NO_MATCHED_MESSAGE, NO_MATCHED_LOGIC_QUEUE)", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  assert.equal(s.getMessage("g", "T", 0, 5, 32).status, "NO_MATCHED_LOGIC_QUEUE");
  for (let i = 0; i < 10; i++) await s.putMessages(batch("T", 0, [{ body: `b${i}`, props: { TAGS: i < 5 ? "A" : "B" } }]));
  let g = s.getMessage("g", "T", 0, 0, 4);
  assert.equal(g.status, "FOUND");
  assert.equal(g.messageCount, 4);
  assert.equal(g.nextBeginOffset, 4);
  assert.equal(g.maxOffset, 10);
  g = s.getMessage("g", "T", 0, 10, 32);
  assert.deepEqual([g.status, g.nextBeginOffset], ["OFFSET_OVERFLOW_ONE", 10]);
  g = s.getMessage("g", "T", 0, 15, 32);
  assert.deepEqual([g.status, g.nextBeginOffset], ["OFFSET_OVERFLOW_BADLY", 10]);
  g = s.getMessage("g", "T", 0, 0, 32, { tagsCodes: new Set([javaHashCode("B")]) });
  assert.equal(g.status, "FOUND");
  assert.deepEqual(
    decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.tags),
    ["B", "B", "B", "B", "B"],
  );
  assert.equal(g.nextBeginOffset, 10);
  g = s.getMessage("g", "T", 0, 0, 32, { tagsCodes: new Set([javaHashCode("C")]) });
  assert.deepEqual([g.status, g.nextBeginOffset], ["NO_MATCHED_MESSAGE", 10]);
  g = s.getMessage("g", "T", 0, 0, 32, { matchProperties: (p) => p.TAGS === "A" });
  assert.equal(g.messageCount, 5);
  // an empty queue: consume queue exists but nothing in it is impossible here; an unknown queue id answers NO_MATCHED_LOGIC_QUEUE
  assert.equal(s.getMessage("g", "T", 3, 0, 32).status, "NO_MATCHED_LOGIC_QUEUE");
  // byte limit: first message is always returned
  g = s.getMessage("g", "T", 0, 0, 32, null, 100);
  assert.equal(g.messageCount, 1);
  // store times and search by time
  const t0 = s.getStoreTime("T", 0, 0);
  assert.ok(t0 > 0);
  assert.equal(s.getEarliestMessageTime("T", 0), t0);
  assert.equal(s.searchOffsetByTime("T", 0, 0), 0);
  assert.equal(s.searchOffsetByTime("T", 0, Date.now() + 60_000), 10);
});

test("getMessage with a SQL92 filter reads on past refused records until the batch is full or 800 entries were scanned", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 1 << 20, consumeQueueEntries: 4096 }));
  t.after(() => s.close());
  for (let i = 0; i < 1000; i += 100) {
    const msgs = [];
    for (let j = i; j < i + 100; j++) msgs.push({ body: `b${j}`, props: { n: String(j) } });
    await s.putMessages(batch("F", 0, msgs));
  }
  const bodies = (g: { buffers: Buffer[] }) => decodeRecords(Buffer.concat(g.buffers), "g").map((m) => m.body.toString());
  // one match in every 10: a batch of 4 needs 40 records read, not the first 4
  let g = s.getMessage("g", "F", 0, 0, 4, { matchProperties: (p) => Number(p.n) % 10 === 9 });
  assert.equal(g.status, "FOUND");
  assert.deepEqual(bodies(g), ["b9", "b19", "b29", "b39"]);
  assert.equal(g.nextBeginOffset, 40);
  // nothing matches: the pull stops after 800 entries (16 000 bytes of consume queue), as RocketMQ's does
  g = s.getMessage("g", "F", 0, 0, 32, { matchProperties: (p) => p.n === "999" });
  assert.deepEqual([g.status, g.nextBeginOffset, g.messageCount], ["NO_MATCHED_MESSAGE", 800, 0]);
  g = s.getMessage("g", "F", 0, 800, 32, { matchProperties: (p) => p.n === "999" });
  assert.deepEqual([g.status, g.nextBeginOffset, bodies(g)], ["FOUND", 1000, ["b999"]]);
  // without a filter a full batch takes one consume-queue read of exactly its entries
  const cqRead = ConsumeQueue.prototype.read;
  const cqReads: number[] = [];
  ConsumeQueue.prototype.read = function (this: ConsumeQueue, from: number, max: number) {
    cqReads.push(max);
    return cqRead.call(this, from, max);
  };
  try {
    g = s.getMessage("g", "F", 0, 100, 32);
  } finally {
    ConsumeQueue.prototype.read = cqRead;
  }
  assert.deepEqual([g.messageCount, g.nextBeginOffset, cqReads], [32, 132, [32]]);
  // a nearly full batch followed by refused records: the records read on are read in batches, not
  // one read (and one consume-queue read) per record
  const realRead = segmentIo.readSync;
  let reads = 0;
  segmentIo.readSync = (fd, buf, off, len, pos) => {
    reads++;
    return realRead(fd, buf, off, len, pos);
  };
  try {
    g = s.getMessage("g", "F", 0, 0, 32, { matchProperties: (p) => Number(p.n) < 31 });
  } finally {
    segmentIo.readSync = realRead;
  }
  assert.deepEqual([g.messageCount, g.nextBeginOffset], [31, 800]);
  assert.ok(reads < 100, `${reads} reads for one pull`);
  // the byte limit holds across the records read on: only a batch's first record may exceed it
  const sizeAt = (o: number) => s.getMessage("g", "F", 0, o, 1).buffers[0]!.length;
  const nines = { matchProperties: (p: Record<string, string>) => Number(p.n) % 10 === 9 };
  g = s.getMessage("g", "F", 0, 0, 32, nines, sizeAt(9) + sizeAt(19));
  assert.deepEqual([bodies(g), g.nextBeginOffset], [["b9", "b19"], 20]);
  g = s.getMessage("g", "F", 0, 0, 32, nines, sizeAt(9) + sizeAt(19) - 1);
  assert.deepEqual([bodies(g), g.nextBeginOffset], [["b9"], 10]);
});

test("expired segments are deleted and min offsets move: OFFSET_TOO_SMALL", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { fileReservedTimeHours: 1 }));
  t.after(() => s.close());
  for (let i = 0; i < 60; i++) await s.putMessages(batch("E", 0, [{ body: "y".repeat(400) }]));
  const before = s.minPhyOffset;
  const deleted = s.deleteExpiredFiles(Date.now() + 2 * 3600_000);
  assert.ok(deleted > 0);
  assert.ok(s.minPhyOffset > before);
  const min = s.getMinOffset("E", 0);
  assert.ok(min > 0, "min offset moved");
  const g = s.getMessage("g", "E", 0, 0, 32);
  assert.equal(g.status, "OFFSET_TOO_SMALL");
  assert.equal(g.nextBeginOffset, min);
  assert.equal(s.getMessage("g", "E", 0, min, 32).status, "FOUND");
});

test("disk pressure (opt-in): above diskCleanForciblyPercent the oldest segments go before they expire; above diskFullPercent puts are DISK_FULL", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let used = 99;
  const off = await MessageStore.open(small(path.join(dir, "off"), { diskUsedPercent: () => used }));
  t.after(() => off.close());
  for (let i = 0; i < 60; i++) await off.putMessages(batch("P", 0, [{ body: "y".repeat(400) }]));
  assert.equal(off.deleteExpiredFiles(), 0, "off by default: nothing is deleted at 99 %");
  assert.equal((await off.putMessages(batch("P", 0, [{ body: "still" }]))).status, "PUT_OK");

  // every deletion frees 3 points of disk in this fake
  const s = await MessageStore.open(
    small(path.join(dir, "on"), { diskUsedPercent: () => used, diskCleanForciblyPercent: 85, diskFullPercent: 90 }),
  );
  t.after(() => s.close());
  for (let i = 0; i < 60; i++) await s.putMessages(batch("P", 0, [{ body: "y".repeat(400) }]));
  const segments = () => fs.readdirSync(path.join(dir, "on", "commitlog")).length;
  const before = segments();
  assert.ok(before >= 4, `${before} segments`);
  const oldest = s.minPhyOffset;
  used = 88;
  const realDelete = s.commitLog.deleteSegments.bind(s.commitLog);
  s.commitLog.deleteSegments = (expired, max) => {
    const n = realDelete(expired, max);
    used -= 3 * n;
    return n;
  };
  assert.equal(s.deleteExpiredFiles(), 2, "88 -> 85 -> 82: two segments, oldest first");
  assert.equal(segments(), before - 2);
  assert.ok(s.minPhyOffset > oldest);
  assert.equal((await s.putMessages(batch("P", 0, [{ body: "ok" }]))).status, "PUT_OK");

  // at 95 % with one segment left to write into: nothing more to delete, puts refused until it drops
  used = 95;
  s.commitLog.deleteSegments = () => 0;
  s.deleteExpiredFiles();
  await assert.rejects(s.putMessages(batch("P", 0, [{ body: "no" }])), isCode("DISK_FULL"));
  used = 70;
  s.deleteExpiredFiles();
  assert.equal((await s.putMessages(batch("P", 0, [{ body: "again" }]))).status, "PUT_OK");
});

test("disk use is counted as df and RocketMQ count it: blocks reserved for root are neither used nor available", async (t) => {
  // a 252 GiB disk with 32 GiB used, 71 GiB available to users and the rest reserved (this host's)
  const gib = 262_144; // 4 KiB blocks
  assert.equal(Math.round(usedPercent({ blocks: 252 * gib, bfree: 220 * gib, bavail: 71 * gib })), 31);
  // no reserve: used / size
  assert.equal(usedPercent({ blocks: 100, bfree: 40, bavail: 40 }), 60);
  assert.ok(Number.isNaN(usedPercent({ blocks: 0, bfree: 0, bavail: 0 })));
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const here = statfsUsedPercent(dir);
  assert.ok(here >= 0 && here <= 100, `a real file system's use is a percent, got ${here}`);
});

test("disk pressure changes are told to onDiskSpace: full once when puts start being refused, notFull when they are taken again, forced deletes", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let used = 50;
  const changes: DiskSpaceChange[] = [];
  const s = await MessageStore.open(
    small(dir, {
      diskUsedPercent: () => used,
      diskCleanForciblyPercent: 85,
      diskFullPercent: 90,
      onDiskSpace: (c) => void changes.push(c),
    }),
  );
  t.after(() => s.close());
  for (let i = 0; i < 60; i++) await s.putMessages(batch("P", 0, [{ body: "y".repeat(400) }]));
  s.deleteExpiredFiles();
  assert.equal(changes.length, 0, "nothing to say below both thresholds");
  const realDelete = s.commitLog.deleteSegments.bind(s.commitLog);
  s.commitLog.deleteSegments = () => 0;
  used = 95;
  s.deleteExpiredFiles();
  s.deleteExpiredFiles();
  assert.deepEqual(
    changes.map((c) => c.kind),
    ["full"],
    "said once, not at every check",
  );
  assert.equal(changes[0]!.usedPercent, 95);
  assert.match(changes[0]!.message, /95 % full/);
  assert.match(changes[0]!.message, /DISK_FULL/);
  used = 70;
  s.deleteExpiredFiles();
  s.deleteExpiredFiles();
  assert.deepEqual(
    changes.map((c) => c.kind),
    ["full", "notFull"],
  );
  assert.match(changes[1]!.message, /70 %/);
  s.commitLog.deleteSegments = (expired, max) => {
    const n = realDelete(expired, max);
    used -= 3 * n;
    return n;
  };
  used = 86;
  assert.equal(s.deleteExpiredFiles(), 1);
  assert.deepEqual(changes.at(-1), {
    kind: "cleanedForcibly",
    dir,
    usedPercent: 83,
    segments: 1,
    message: changes.at(-1)!.message,
  });
  assert.match(changes.at(-1)!.message, /deleted the 1 oldest/);
});

test("a full disk stays full until its use falls to diskCleanForciblyPercent (RocketMQ marks it OK only there), not just below diskFullPercent", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let used = 50;
  const changes: DiskSpaceChange[] = [];
  const s = await MessageStore.open(
    small(dir, {
      diskUsedPercent: () => used,
      diskCleanForciblyPercent: 85,
      diskFullPercent: 90,
      onDiskSpace: (c) => void changes.push(c),
    }),
  );
  t.after(() => s.close());
  await s.putMessages(batch("P", 0, [{ body: "y" }]));
  // other files fill the disk: deleting segments frees nothing
  s.commitLog.deleteSegments = () => 0;
  used = 95;
  s.deleteExpiredFiles();
  await assert.rejects(s.putMessages(batch("P", 0, [{ body: "no" }])), isCode("DISK_FULL"));
  used = 88;
  s.deleteExpiredFiles();
  await assert.rejects(
    s.putMessages(batch("P", 0, [{ body: "still no" }])),
    (e) => isCode("DISK_FULL")(e) && /88 % full \(puts stop at 90 % and resume at or below 85 %\)/.test((e as Error).message),
    "88 % is still above 85 %",
  );
  used = 85;
  s.deleteExpiredFiles();
  assert.equal((await s.putMessages(batch("P", 0, [{ body: "again" }]))).status, "PUT_OK");
  assert.deepEqual(
    changes.map((c) => [c.kind, c.usedPercent]),
    [
      ["full", 95],
      ["notFull", 85],
    ],
  );
  assert.match(changes[0]!.message, /until it is at or below 85 %/);
  assert.match(changes[1]!.message, /85 % full, at or below 85 %: puts are taken again/);

  // without diskCleanForciblyPercent the disk is full only at or above diskFullPercent
  used = 50;
  const only = await MessageStore.open(small(path.join(dir, "only"), { diskUsedPercent: () => used, diskFullPercent: 90 }));
  t.after(() => only.close());
  used = 95;
  only.deleteExpiredFiles();
  await assert.rejects(only.putMessages(batch("P", 0, [{ body: "no" }])), isCode("DISK_FULL"));
  used = 89;
  only.deleteExpiredFiles();
  assert.equal((await only.putMessages(batch("P", 0, [{ body: "taken" }]))).status, "PUT_OK");
});

test("delay messages carry their delivery time in the consume-queue tag slot", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { messageDelayLevel: "1s 5s 10s" }));
  t.after(() => s.close());
  const arrivals: number[] = [];
  s.onArrival((a) => arrivals.push(a.tagsCode));
  await s.putMessages(batch(SCHEDULE_TOPIC, 1, [{ body: "d", props: { DELAY: "2", REAL_TOPIC: "X" } }]));
  const st = s.getStoreTime(SCHEDULE_TOPIC, 1, 0);
  assert.deepEqual(arrivals, [st + 5000]);
  const g = s.getMessage("g", SCHEDULE_TOPIC, 1, 0, 1, { tagsCodes: new Set([st + 5000]) });
  assert.equal(g.status, "FOUND");
});

test("bad input is refused with MESSAGE_ILLEGAL", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 1 << 20, maxMessageBytes: 1000 }));
  t.after(() => s.close());
  await assert.rejects(s.putMessages(batch("bad topic", 0, [{ body: "x" }])), isCode("MESSAGE_ILLEGAL"));
  await assert.rejects(s.putMessages(batch("t".repeat(128), 0, [{ body: "x" }])), isCode("MESSAGE_ILLEGAL"));
  await assert.rejects(s.putMessages(batch("ok", 0, [{ body: "z".repeat(1001) }])), isCode("MESSAGE_ILLEGAL"));
  await assert.rejects(s.putMessages({ ...batch("ok", 0, []), body: Buffer.from([0, 0, 0, 99]) }), isCode("MESSAGE_ILLEGAL"));
  assert.equal(s.getMaxOffset("ok", 0), 0);
  assert.equal((await s.putMessages(batch("ok", 0, [{ body: "z".repeat(1000) }]))).status, "PUT_OK");
});

test("a full disk fails the put with DISK_FULL and the store stays readable", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  await s.putMessages(batch("D", 0, [{ body: "before" }]));
  const real = segmentIo.writeSync;
  segmentIo.writeSync = (fd, buf, off, len, pos) => {
    if (len > 40) throw Object.assign(new Error("no space left on device"), { code: "ENOSPC" });
    return real(fd, buf, off, len, pos);
  };
  try {
    await assert.rejects(s.putMessages(batch("D", 0, [{ body: "during" }])), isCode("DISK_FULL"));
  } finally {
    segmentIo.writeSync = real;
  }
  const g = s.getMessage("g", "D", 0, 0, 32);
  assert.deepEqual(
    decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString()),
    ["before"],
  );
  const r = await s.putMessages(batch("D", 0, [{ body: "after" }]));
  assert.equal(r.firstQueueOffset, 1);
  assert.equal(s.getMessage("g", "D", 0, 1, 32).messageCount, 1);
});

/**
 * A commit-log write that fails part-way: the disk takes all of the batch's write but its last 50
 * bytes (B1 and B2 whole, B3 torn), then fails every write (EIO), the zero-fill included.
 */
function failWriteMidBatch(): () => void {
  const real = segmentIo.writeSync;
  let calls = 0;
  segmentIo.writeSync = (fd, buf, off, len, pos) => {
    if (++calls === 1) return real(fd, buf, off, len - 50, pos);
    throw Object.assign(new Error("i/o error"), { code: "EIO" });
  };
  return () => {
    segmentIo.writeSync = real;
  };
}
const refusedBatch = () =>
  batch(
    "Q",
    0,
    ["B1", "B2", "B3"].map((b) => ({ body: b + "b".repeat(300) })),
  );
const queueBodies = (st: MessageStore) =>
  decodeRecords(Buffer.concat(st.getMessage("g", "Q", 0, 0, 32).buffers), "b").map(
    (m) => `${m.queueOffset}:${m.body.toString().slice(0, 2)}`,
  );

test("a put refused part-way whose zero-fill fails too leaves no record behind: acknowledged puts keep their queue offsets after a restart", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 1 << 20, checkpointIntervalMs: 0 }));
  await s.putMessages(batch("Q", 0, [{ body: "A" }]));
  const restore = failWriteMidBatch();
  try {
    await assert.rejects(s.putMessages(refusedBatch()), isCode("SYSTEM_ERROR"));
  } finally {
    restore();
  }
  // C and D land inside B1's old bytes; B2 and B3 would follow them
  assert.equal((await s.putMessages(batch("Q", 0, [{ body: "C" }]))).firstQueueOffset, 1);
  assert.equal((await s.putMessages(batch("Q", 0, [{ body: "D" }]))).firstQueueOffset, 2);
  await s.close();
  s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 1 << 20, checkpointIntervalMs: 0 }));
  t.after(() => s.close());
  assert.deepEqual(queueBodies(s), ["0:A", "1:C", "2:D"]);
});

test("a refused put's bytes that can be neither zeroed nor truncated away refuse later puts (retriable) until they can", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 1 << 20, checkpointIntervalMs: 0 }));
  await s.putMessages(batch("Q", 0, [{ body: "A" }]));
  const realTruncate = segmentIo.ftruncateSync;
  segmentIo.ftruncateSync = () => {
    throw Object.assign(new Error("i/o error"), { code: "EIO" });
  };
  const restoreTruncate = () => {
    segmentIo.ftruncateSync = realTruncate;
  };
  t.after(restoreTruncate);
  const restore = failWriteMidBatch();
  try {
    await assert.rejects(s.putMessages(refusedBatch()), isCode("SYSTEM_ERROR"));
  } finally {
    restore();
  }
  await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "C" }])), (e) => isCode("SYSTEM_ERROR")(e) && (e as MQError).retriable);
  assert.deepEqual(queueBodies(s), ["0:A"]);
  restoreTruncate();
  assert.equal((await s.putMessages(batch("Q", 0, [{ body: "C" }]))).firstQueueOffset, 1);
  assert.equal((await s.putMessages(batch("Q", 0, [{ body: "D" }]))).firstQueueOffset, 2);
  await s.close();
  s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 1 << 20, checkpointIntervalMs: 0 }));
  t.after(() => s.close());
  assert.deepEqual(queueBodies(s), ["0:A", "1:C", "2:D"]);
});

test("close cuts a refused put's records left in the log (no put came since), or fails and keeps the store marked unclean", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const opts = small(dir, { commitLogSegmentBytes: 1 << 20, checkpointIntervalMs: 0 });
  let s = await MessageStore.open(opts);
  await s.putMessages(batch("Q", 0, [{ body: "A" }]));
  const realTruncate = segmentIo.ftruncateSync;
  const failTruncate = () => {
    segmentIo.ftruncateSync = () => {
      throw Object.assign(new Error("i/o error"), { code: "EIO" });
    };
  };
  const restoreTruncate = () => {
    segmentIo.ftruncateSync = realTruncate;
  };
  t.after(restoreTruncate);
  failTruncate();
  const restore = failWriteMidBatch();
  try {
    await assert.rejects(s.putMessages(refusedBatch()), isCode("SYSTEM_ERROR"));
  } finally {
    restore();
  }
  // the disk is fine again before the shutdown, but no put came to cut the refused records
  restoreTruncate();
  await s.close();
  s = await MessageStore.open(opts);
  assert.deepEqual(queueBodies(s), ["0:A"], "the refused put's records came back after a clean restart");
  // the same with the truncate still failing at close: the close says so instead of looking clean
  failTruncate();
  const restore2 = failWriteMidBatch();
  try {
    await assert.rejects(s.putMessages(refusedBatch()), isCode("SYSTEM_ERROR"));
  } finally {
    restore2();
  }
  await assert.rejects(s.close(), (e) => isCode("SYSTEM_ERROR")(e) && /refused put/.test((e as Error).message));
  restoreTruncate();
  assert.ok(fs.existsSync(path.join(dir, "abort")), "the abort file stays: the shutdown was not clean");
  s = await MessageStore.open(opts);
  t.after(() => s.close());
  // a known limit (README): their position is kept nowhere recovery reads, so they come back after
  // A, never in place of an acknowledged message
  assert.deepEqual(queueBodies(s).slice(0, 1), ["0:A"]);
  assert.equal(s.recovery.mode, "abnormal");
});

test("a consume-queue write that fails leaves no queue offset to reuse: the records are indexed before the next put", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
  t.after(() => s.close());
  const bodies = (st: MessageStore, from: number) =>
    decodeRecords(Buffer.concat(st.getMessage("g", "Q", 0, from, 32).buffers), "b").map((m) => `${m.queueOffset}:${m.body}`);
  const a = await s.putMessages(batch("Q", 0, [{ body: "a" }]));
  assert.equal(s.dispatchBehindBytes, 0);
  // the commit-log write succeeds, every consume-queue write fails (a full disk under the queue files)
  const restore = failWritesUnder("consumequeue");
  t.after(restore);
  await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "b1" }, { body: "b2" }])), isCode("DISK_FULL"));
  assert.equal(s.dispatchBehindBytes, s.maxPhyOffset - (a.commitLogOffset + a.wroteBytes), "b1 and b2 wait to be dispatched");
  // while the queue files still cannot be written, later puts are refused, not stored under reused offsets
  await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "refused" }])), isCode("DISK_FULL"));
  assert.equal(s.getMaxOffset("Q", 0), 1);
  restore();
  const r = await s.putMessages(batch("Q", 0, [{ body: "c" }]));
  assert.equal(r.firstQueueOffset, 3, "c follows b1 and b2, which are in the log");
  assert.equal(s.dispatchBehindBytes, 0);
  assert.deepEqual(bodies(s, 0), ["0:a", "1:b1", "2:b2", "3:c"]);
  await s.close();
  s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
  assert.deepEqual(bodies(s, 0), ["0:a", "1:b1", "2:b2", "3:c"]);
});

test("puts refused while records wait to be indexed say what to fix: the open-file limit after EMFILE, else space and permissions", async (t) => {
  for (const [code, advice] of [
    ["EMFILE", /puts resume once they are: raise the open-file limit \(`ulimit -n`/],
    ["ENOSPC", /puts resume once they are: fix the cause \(free space, permissions\)/],
  ] as const) {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    const s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
    t.after(() => s.close());
    await s.putMessages(batch("Q", 0, [{ body: "a" }]));
    const restore = failWritesUnder("consumequeue", code);
    t.after(restore);
    await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "b" }])));
    await assert.rejects(
      s.putMessages(batch("Q", 0, [{ body: "refused" }])),
      (e) => e instanceof MQError && /cannot be indexed yet/.test(e.message) && advice.test(e.message),
      code,
    );
    restore();
    assert.equal((await s.putMessages(batch("Q", 0, [{ body: "c" }]))).firstQueueOffset, 2);
  }
});

test("records left unindexed by a failed consume-queue write are indexed by the periodic flush, and a clean restart without it indexes them", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  for (const interval of [20, 0]) {
    const sub = path.join(dir, String(interval));
    let s = await MessageStore.open(small(sub, { checkpointIntervalMs: interval }));
    await s.putMessages(batch("Q", 0, [{ body: "a" }]));
    const restore = failWritesUnder("consumequeue");
    t.after(restore);
    await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "b" }])), isCode("DISK_FULL"));
    restore();
    if (interval > 0) {
      await waitFor(() => s.getMaxOffset("Q", 0) === 2, 5000, "the periodic flush to index b");
    } else {
      assert.equal(s.getMaxOffset("Q", 0), 1);
      await s.close(); // a clean close whose checkpoint must not claim b was indexed
      s = await MessageStore.open(small(sub, { checkpointIntervalMs: 0 }));
    }
    const got = decodeRecords(Buffer.concat(s.getMessage("g", "Q", 0, 0, 32).buffers), "b").map((m) => m.body.toString());
    assert.deepEqual(got, ["a", "b"], `checkpointIntervalMs ${interval}`);
    await s.close();
  }
});

test("a replica whose consume-queue write fails indexes those records before it appends more", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const master = await MessageStore.open(small(path.join(dir, "m"), { checkpointIntervalMs: 0 }));
  t.after(() => master.close());
  const slave = await MessageStore.open(small(path.join(dir, "s"), { checkpointIntervalMs: 0 }));
  t.after(() => slave.close());
  const copy = () => slave.appendReplica(master.readCommitLog(slave.maxPhyOffset, 1 << 20));
  await master.putMessages(batch("Q", 0, [{ body: "a" }]));
  await copy();
  await master.putMessages(batch("Q", 0, [{ body: "b" }]));
  // only the slave writes while this holds (the master is only read)
  const restore = failWritesUnder("consumequeue");
  t.after(restore);
  await assert.rejects(copy(), isCode("DISK_FULL"));
  restore();
  await master.putMessages(batch("Q", 0, [{ body: "c" }]));
  await copy();
  const got = decodeRecords(Buffer.concat(slave.getMessage("g", "Q", 0, 0, 32).buffers), "b").map((m) => `${m.queueOffset}:${m.body}`);
  assert.deepEqual(got, ["0:a", "1:b", "2:c"]);
});

test("puts refused while consume-queue writes fail do not add index entries again: older messages with the key stay found", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0 }));
  t.after(() => s.close());
  await s.putMessages(batch("Q", 0, [{ body: "old", props: { KEYS: "K" } }]));
  const restore = failWritesUnder("consumequeue");
  t.after(restore);
  await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "new", props: { KEYS: "K" } }])), isCode("DISK_FULL"));
  // every refused put tries to dispatch "new" again first
  for (let i = 0; i < 200; i++) await assert.rejects(s.putMessages(batch("Q", 0, [{ body: "refused" }])), isCode("DISK_FULL"));
  restore();
  await s.putMessages(batch("Q", 0, [{ body: "after" }]));
  const found = s.queryMessageByKey("Q", "K", 32).flatMap((b) => decodeRecords(b, "b").map((m) => m.body.toString()));
  assert.deepEqual(found.sort(), ["new", "old"]);
});

test("a second store on the same directory is refused with STORE_LOCKED", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  await assert.rejects(MessageStore.open(small(dir)), isCode("STORE_LOCKED"));
  await s.close();
  const again = await MessageStore.open(small(dir));
  await again.close();
});

test("the store lock: a live holder refuses; a dead, zombie or reused-pid holder is taken over", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  fs.mkdirSync(dir, { recursive: true });
  const lock = path.join(dir, "lock");
  // `sleep` never reaps the inner shell, which stays a zombie whose pid it printed
  const holder = spawn("sh", ["-c", "sh -c 'echo $$' & exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
  t.after(() => holder.kill("SIGKILL"));
  const zombie = Number(await new Promise<string>((r) => holder.stdout!.once("data", (d: Buffer) => r(d.toString()))));
  await waitFor(() => /\) Z /.test(fs.readFileSync(`/proc/${zombie}/stat`, "utf8")), 5000, "the inner shell to be a zombie");
  const stat = fs.readFileSync(`/proc/${holder.pid}/stat`, "utf8");
  const started = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];

  for (const content of [String(holder.pid), `${holder.pid} ${started}`]) {
    fs.writeFileSync(lock, content);
    await assert.rejects(MessageStore.open(small(dir)), (e) => isCode("STORE_LOCKED")(e) && String(e).includes(String(holder.pid)));
  }
  for (const content of [String(zombie), `${holder.pid} 1`, "999999999", "not a pid"]) {
    fs.writeFileSync(lock, content);
    const s = await MessageStore.open(small(dir));
    assert.equal(fs.readFileSync(lock, "utf8").split(" ")[0], String(process.pid), `taken over from ${content}`);
    await s.close();
    assert.ok(!fs.existsSync(lock), "released on close");
  }
});

test("store-directory entries of the wrong kind refuse the open with SYSTEM_ERROR naming the path, not a raw errno or STORE_LOCKED", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  await s.close();
  const ioErrorAt = (file: string) => (e: unknown) =>
    isCode("SYSTEM_ERROR")(e) &&
    (e as Error).message.includes(file) &&
    /Check the disk and the directory's permissions/.test((e as Error).message);
  // a lock that cannot be read is no contender: said at once, not after 16 attempts as "being opened by another process"
  const lock = path.join(dir, "lock");
  fs.mkdirSync(lock);
  await assert.rejects(MessageStore.open(small(dir)), ioErrorAt(lock));
  fs.rmdirSync(lock);
  const commitLog = path.join(dir, "commitlog");
  fs.rmSync(commitLog, { recursive: true });
  fs.writeFileSync(commitLog, "x");
  await assert.rejects(MessageStore.open(small(dir)), ioErrorAt(commitLog));
  fs.rmSync(commitLog);
  const abort = path.join(dir, "abort");
  fs.mkdirSync(abort);
  await assert.rejects(MessageStore.open(small(dir)), ioErrorAt(abort));
  fs.rmdirSync(abort);
  // each refusal released the lock: fixed, the store opens
  const again = await MessageStore.open(small(dir));
  await again.close();
});

test("the store lock: contenders racing for one directory, free or held by a dead pid, leave exactly one holder", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const rounds = 30;
  const dirs = Array.from({ length: rounds }, (_, i) => path.join(dir, String(i)));
  for (const [i, d] of dirs.entries()) {
    fs.mkdirSync(d);
    // a third of the rounds race for a free directory, the rest take over a dead holder's lock, and
    // half of those also the guard of a takeover whose contender died while it held the guard
    if (i % 3 !== 0) fs.writeFileSync(path.join(d, "lock"), "999999999");
    if (i % 3 === 2) fs.writeFileSync(path.join(d, "lock.takeover"), "999999999");
  }
  const fixture = path.join(import.meta.dirname, "fixtures", "lockContender.ts");
  const contenders = Array.from({ length: 4 }, () => {
    const child = spawn(process.execPath, ["--import", "tsx", fixture, "4", ...dirs], { stdio: ["pipe", "pipe", "inherit"] });
    const c = { child, out: "" };
    child.stdout!.on("data", (b: Buffer) => (c.out += b.toString()));
    return c;
  });
  t.after(() => {
    for (const c of contenders) c.child.kill("SIGKILL");
  });
  await waitFor(() => contenders.every((c) => c.out.startsWith("ready\n")), 60_000, "the contenders to start");
  const at = String(Date.now() + 100);
  for (const c of contenders) c.child.stdin!.write(at);
  await waitFor(() => contenders.every((c) => c.out.endsWith("done\n")), 30_000, "the contenders to race");
  for (let i = 0; i < rounds; i++) {
    const results = contenders.map((c) =>
      c.out
        .split("\n")
        .find((l) => l.startsWith(`${i} `))!
        .slice(String(i).length + 1),
    );
    assert.deepEqual([...results].sort(), ["GOT", "STORE_LOCKED", "STORE_LOCKED", "STORE_LOCKED"], `round ${i}: ${results}`);
    assert.deepEqual(fs.readdirSync(dirs[i]!), ["lock"], `round ${i}: no guard or temp file left`);
  }
  for (const c of contenders) c.child.stdin!.end();
});

test("startReplicaAt: an empty store begins at a segment boundary and reopens there; refused when unaligned or not empty", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(small(dir));
  assert.equal(s.isEmpty(), true);
  assert.throws(() => s.startReplicaAt(8192 + 1), isCode("MALFORMED"));
  s.startReplicaAt(3 * 8192);
  assert.equal(s.minPhyOffset, 3 * 8192);
  assert.equal(s.maxPhyOffset, 3 * 8192);
  await s.close();
  s = await MessageStore.open(small(dir));
  assert.equal(s.minPhyOffset, 3 * 8192, "reopened where it began");
  assert.equal(s.maxPhyOffset, 3 * 8192);
  const r = await s.putMessages(batch("Late", 0, [{ body: "first" }]));
  assert.equal(r.status, "PUT_OK");
  assert.equal(s.maxPhyOffset > 3 * 8192, true);
  assert.equal(s.isEmpty(), false);
  assert.throws(() => s.startReplicaAt(5 * 8192), isCode("ILLEGAL_ARGUMENT"));
  await s.close();
});

/** Makes the next `n` fdatasyncs of commit-log files fail with EIO (reported once, as Linux does); returns the restore. */
function failCommitLogSyncs(n: number): () => void {
  const real = segmentIo.fdatasync;
  segmentIo.fdatasync = (fd) => {
    if (n > 0 && fs.readlinkSync(`/proc/self/fd/${fd}`).includes(`${path.sep}commitlog${path.sep}`)) {
      n--;
      return Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    }
    return real(fd);
  };
  return () => {
    segmentIo.fdatasync = real;
  };
}

test("a failed commit-log fdatasync is reported with its file and range and counted: async flush (puts already acknowledged) and sync flush (the put is refused)", async (t) => {
  for (const flush of ["async", "sync"] as const) {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    const reports: Array<{ file: string; from: number; to: number; code: string }> = [];
    const s = await MessageStore.open({
      dir,
      flush,
      flushIntervalMs: 10,
      commitLogSegmentBytes: 1 << 20,
      cleanIntervalMs: 0,
      checkpointIntervalMs: 0,
      onFlushError: (f) => reports.push({ file: f.file, from: f.from, to: f.to, code: f.error.code }),
    });
    t.after(() => s.close());
    await s.putMessages(batch("F", 0, [{ body: "a" }]));
    await waitFor(() => s.commitLog.flushedOffset === s.maxPhyOffset, 5000, `${flush}: A flushed`);
    const from = s.maxPhyOffset;
    const restore = failCommitLogSyncs(1);
    t.after(restore);
    const put = s.putMessages(batch("F", 0, [{ body: "b" }]));
    if (flush === "sync") await assert.rejects(put, isCode("SYSTEM_ERROR"));
    else assert.equal((await put).status, "PUT_OK");
    await waitFor(() => reports.length > 0, 5000, `${flush}: the failed fdatasync reported`);
    assert.deepEqual(
      reports,
      [{ file: path.join(dir, "commitlog", "00000000000000000000"), from, to: s.maxPhyOffset, code: "SYSTEM_ERROR" }],
      flush,
    );
    assert.equal(s.flushErrors, 1, flush);
    restore();
  }
});

test("a checkpoint whose consume-queue fdatasync fails is reported against the checkpoint file and counted", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const reports: Array<{ file: string; from: number; to: number; message: string }> = [];
  const s = await MessageStore.open({
    dir,
    commitLogSegmentBytes: 1 << 20,
    cleanIntervalMs: 0,
    checkpointIntervalMs: 0,
    onFlushError: (f) => reports.push({ file: f.file, from: f.from, to: f.to, message: f.error.message }),
  });
  t.after(() => s.close());
  await s.putMessages(batch("F", 0, [{ body: "a" }]));
  const real = segmentIo.fdatasync;
  segmentIo.fdatasync = (fd) =>
    fs.readlinkSync(`/proc/self/fd/${fd}`).includes(`${path.sep}consumequeue${path.sep}`)
      ? Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }))
      : real(fd);
  t.after(() => {
    segmentIo.fdatasync = real;
  });
  await assert.rejects(s.checkpoint(), isCode("SYSTEM_ERROR"));
  assert.equal(reports.length, 1);
  assert.equal(reports[0]!.file, path.join(dir, "checkpoint"));
  assert.deepEqual([reports[0]!.from, reports[0]!.to], [0, s.maxPhyOffset]);
  assert.match(reports[0]!.message, /consumequeue/);
  assert.equal(s.flushErrors, 1);
});

test("a checkpoint write that fails removes its temp file: no checkpoint.tmp is left for a later open to read", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { checkpointIntervalMs: 0, onFlushError: () => {} }));
  t.after(() => s.close());
  await s.putMessages(batch("F", 0, [{ body: "a" }]));
  const tmp = path.join(dir, "checkpoint.tmp");
  const realOpen = fs.promises.open;
  fs.promises.open = (async (file: fs.PathLike, flags?: string | number) => {
    const h = await realOpen(file, flags);
    if (file === tmp) h.datasync = () => Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    return h;
  }) as typeof fs.promises.open;
  t.after(() => {
    fs.promises.open = realOpen;
  });
  await assert.rejects(s.checkpoint(), isCode("SYSTEM_ERROR"));
  assert.equal(fs.existsSync(tmp), false);
});

test("close waits for an fdatasync still queued on the pool: no EBADF reported as a flush error", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const reports: string[] = [];
  // a busy pool: the commit log's fdatasyncs start only when the test lets them
  const real = segmentIo.fdatasync;
  let asked = 0;
  let ended = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  segmentIo.fdatasync = (fd) => {
    asked++;
    return gate.then(() => real(fd)).finally(() => ended++);
  };
  t.after(() => {
    segmentIo.fdatasync = real;
  });
  const s = await MessageStore.open({
    dir,
    flush: "async",
    flushIntervalMs: 10,
    commitLogSegmentBytes: 1 << 20,
    cleanIntervalMs: 0,
    checkpointIntervalMs: 0,
    onFlushError: (f) => reports.push(f.error.message),
  });
  assert.equal((await s.putMessages(batch("E", 0, [{ body: "a" }]))).status, "PUT_OK");
  await waitFor(() => asked > 0, 5000, "the flusher's fdatasync asked for");
  const closing = s.close();
  release();
  await closing;
  await waitFor(() => ended === asked, 5000, "every fdatasync asked for to end");
  await new Promise((r) => setImmediate(r)); // its outcome handled
  assert.deepEqual(reports, []);
  assert.equal(s.flushErrors, 0);
});

test("sync flush: concurrent puts share fdatasyncs and all resolve", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open({ dir, commitLogSegmentBytes: 1 << 20, cleanIntervalMs: 0 });
  t.after(() => s.close());
  const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => s.putMessages(batch("G", 0, [{ body: `g${i}` }]))));
  assert.ok(rs.every((r) => r.status === "PUT_OK"));
  assert.deepEqual(
    rs.map((r) => r.firstQueueOffset).sort((a, b) => a - b),
    Array.from({ length: 50 }, (_, i) => i),
  );
  assert.equal(s.commitLog.flushedOffset, s.maxPhyOffset);
});

test("sync flush: a put not on disk by its flushDeadline is FLUSH_DISK_TIMEOUT then, before syncFlushTimeoutMs; the puts of one group share the earliest", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open({
    dir,
    commitLogSegmentBytes: 1 << 20,
    cleanIntervalMs: 0,
    checkpointIntervalMs: 0,
    syncFlushTimeoutMs: 600,
  });
  // the commit log's fdatasyncs hang (a stalled disk) until released
  const real = segmentIo.fdatasync;
  const stalled: Array<() => void> = [];
  segmentIo.fdatasync = (fd) =>
    fs.readlinkSync(`/proc/self/fd/${fd}`).includes(`${path.sep}commitlog${path.sep}`)
      ? new Promise<void>((resolve, reject) => stalled.push(() => real(fd).then(resolve, reject)))
      : real(fd);
  t.after(async () => {
    segmentIo.fdatasync = real;
    for (const release of stalled) release();
    await s.close();
  });
  // each put's status and when it came, in ms from t0
  let t0 = monotonicNow();
  const timed = async (p: Promise<{ status: string }>) => {
    const { status } = await p;
    return { status, ms: monotonicNow() - t0 };
  };
  const alone = await timed(s.putMessages({ ...batch("D", 0, [{ body: "a" }]), flushDeadline: t0 + 100 }));
  assert.equal(alone.status, "FLUSH_DISK_TIMEOUT");
  assert.ok(alone.ms >= 95 && alone.ms < 500, `answered at its deadline (${Math.round(alone.ms)} ms)`);
  // answered together: a put without a deadline in the group of one with one is answered at that one
  t0 = monotonicNow();
  const group = await Promise.all(
    s.putMessagesGroup([batch("D", 0, [{ body: "b" }]), { ...batch("D", 1, [{ body: "c" }]), flushDeadline: t0 + 100 }]).map(timed),
  );
  for (const r of group) {
    assert.equal(r.status, "FLUSH_DISK_TIMEOUT");
    assert.ok(r.ms < 500, `answered at the group's earliest deadline (${Math.round(r.ms)} ms)`);
  }
  // a deadline past syncFlushTimeoutMs, or none, waits syncFlushTimeoutMs
  for (const later of [true, false]) {
    t0 = monotonicNow();
    const r = await timed(s.putMessages({ ...batch("D", 0, [{ body: "d" }]), flushDeadline: later ? t0 + 60_000 : undefined }));
    assert.equal(r.status, "FLUSH_DISK_TIMEOUT");
    assert.ok(r.ms >= 595 && r.ms < 5000, `waited syncFlushTimeoutMs (${Math.round(r.ms)} ms)`);
  }
  assert.equal(s.getMaxOffset("D", 0) + s.getMaxOffset("D", 1), 5, "the puts are stored all the same");
});

test("sync flush: puts waiting for their flush when the store closes resolve PUT_OK, as close flushed them", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const o = { dir, commitLogSegmentBytes: 1 << 20, cleanIntervalMs: 0, checkpointIntervalMs: 0 };
  let s = await MessageStore.open(o);
  const puts = Array.from({ length: 5 }, (_, i) => s.putMessages(batch("C", 0, [{ body: `c${i}` }])));
  await s.close();
  const outcomes = await Promise.allSettled(puts);
  assert.deepEqual(
    outcomes.map((r) => (r.status === "fulfilled" ? r.value.status : String(r.reason))),
    Array(5).fill("PUT_OK"),
  );
  s = await MessageStore.open(o);
  t.after(() => s.close());
  assert.equal(s.getMaxOffset("C", 0), 5, "and they are stored");
});

test("records stored under a larger maxMessageBytes stay readable by offset, key and store time after it is lowered", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const o = small(dir, { commitLogSegmentBytes: 1 << 22, flush: "async", checkpointIntervalMs: 0 });
  let s = await MessageStore.open({ ...o, maxMessageBytes: 1 << 20 });
  const r = await s.putMessages(batch("T", 0, [{ body: "x".repeat(300_000), props: { KEYS: "big" } }]));
  await s.close();
  s = await MessageStore.open({ ...o, maxMessageBytes: 128 * 1024 });
  t.after(() => s.close());
  assert.equal(s.getMessage("g", "T", 0, 0, 1).messageCount, 1);
  assert.equal(s.viewMessage(r.commitLogOffset)?.length, r.wroteBytes, "viewMessage");
  assert.equal(s.viewMessage(r.commitLogOffset, r.wroteBytes)?.length, r.wroteBytes, "viewMessage with its size");
  assert.equal(s.viewMessage(r.commitLogOffset, r.wroteBytes - 1), null, "a wrong size finds nothing");
  assert.equal(s.viewMessage(r.commitLogOffset + 1), null, "nor an offset inside the record");
  assert.equal(s.queryMessageByKey("T", "big", 10).length, 1, "queryMessageByKey");
  assert.ok(s.getStoreTime("T", 0, 0) > 0, "getStoreTime");
});

test("queryMessageByKey: a message whose KEYS repeat the key is found once", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { flush: "async" }));
  t.after(() => s.close());
  await s.putMessages(batch("T", 0, [{ body: "a", props: { KEYS: "order-1 order-1 other order-1" } }]));
  await s.putMessages(batch("T", 0, [{ body: "b", props: { KEYS: "order-1" } }]));
  const hits = s.queryMessageByKey("T", "order-1", 32);
  assert.deepEqual(
    hits.map((r) => decodeRecords(r, "b")[0]!.body.toString()),
    ["b", "a"],
  );
  assert.equal(s.queryMessageByKey("T", "order-1", 1).length, 1);
});

test("getMessage: NO_MESSAGE_IN_QUEUE, OFFSET_FOUND_NULL and MESSAGE_WAS_REMOVING with their next offsets", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const o = small(dir, { flush: "async", checkpointIntervalMs: 0 });
  let s = await MessageStore.open(o);
  const at: number[] = [];
  for (let i = 0; i < 40; i++) at.push((await s.putMessages(batch("S", 0, [{ body: `s${i}-${"w".repeat(500)}` }]))).commitLogOffset);
  const lone = await s.putMessages(batch("Lone", 2, [{ body: "last in the log" }]));
  await s.close();

  // the log loses its tail (torn after a clean close): Lone/2 keeps its consume queue, with nothing in it
  const segOf = (phy: number) => path.join(dir, "commitlog", String(phy - (phy % 8192)).padStart(20, "0"));
  fs.truncateSync(segOf(lone.commitLogOffset), lone.commitLogOffset % 8192);
  // the consume-queue file for offsets 16..31 of S/0 is lost
  fs.rmSync(path.join(dir, "consumequeue", "S", "0", String(16 * 20).padStart(20, "0")));
  s = await MessageStore.open(o);
  t.after(() => s.close());
  let g = s.getMessage("g", "Lone", 2, 0, 32);
  assert.deepEqual([g.status, g.nextBeginOffset, g.maxOffset], ["NO_MESSAGE_IN_QUEUE", 0, 0]);
  g = s.getMessage("g", "Lone", 2, 3, 32);
  assert.deepEqual([g.status, g.nextBeginOffset], ["NO_MESSAGE_IN_QUEUE", 0]);
  g = s.getMessage("g", "S", 0, 20, 32);
  assert.deepEqual([g.status, g.nextBeginOffset, g.messageCount], ["OFFSET_FOUND_NULL", 32, 0]);
  g = s.getMessage("g", "S", 0, 32, 32);
  assert.deepEqual([g.status, g.messageCount, g.nextBeginOffset], ["FOUND", 8, 40]);

  // commit-log files deleted before the consume queues caught up (RocketMQ's race with file expiry)
  const firstOfSeg1 = at.findIndex((p) => p >= 8192);
  assert.ok(firstOfSeg1 > 0 && firstOfSeg1 < 16);
  assert.equal(
    s.commitLog.deleteSegments((seg) => seg.start === 0),
    1,
  );
  g = s.getMessage("g", "S", 0, 0, 4);
  const n = Math.min(4, 16 - firstOfSeg1); // one read stays within one consume-queue file
  assert.deepEqual([g.status, g.messageCount], ["FOUND", n], "entries past the removed file are served");
  assert.equal(decodeRecords(Buffer.concat(g.buffers), "b")[0]!.queueOffset, firstOfSeg1);
  assert.equal(g.nextBeginOffset, firstOfSeg1 + n);
  assert.equal(
    s.commitLog.deleteSegments((seg) => seg.start === 8192),
    1,
  );
  assert.ok(at.findIndex((p) => p >= 16384) >= 16, "consume-queue file 0 points into segments 0 and 1 only");
  g = s.getMessage("g", "S", 0, 0, 32);
  assert.deepEqual(
    [g.status, g.messageCount, g.nextBeginOffset],
    ["MESSAGE_WAS_REMOVING", 0, 16],
    "the whole consume-queue file points into removed files: skip it",
  );
});

test("putMessagesGroup: batches that arrive together share one write; queue offsets continue across them; a bad batch fails alone", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir, { commitLogSegmentBytes: 4096 }));
  t.after(() => s.close());
  const before = s.commitLog.writeOffset;
  const results = s.putMessagesGroup([
    batch("GroupT", 0, [{ body: "a0" }, { body: "a1" }]),
    batch("GroupT", 1, [{ body: "b0" }]),
    { ...batch("GroupT", 0, [{ body: "x" }]), queueId: -1 },
    batch("GroupT", 0, [{ body: "a2", props: { KEYS: "k2" } }]),
    // does not fit what is left of the 4 KiB segment after the others: goes to a write of its own
    batch("GroupT", 0, [{ body: "y".repeat(3700) }]),
  ]);
  const settled = await Promise.allSettled(results);
  assert.equal(settled[2]!.status, "rejected");
  assert.ok(isCode("MESSAGE_ILLEGAL")((settled[2] as PromiseRejectedResult).reason));
  const ok = settled
    .filter((r): r is PromiseFulfilledResult<Awaited<(typeof results)[number]>> => r.status === "fulfilled")
    .map((r) => r.value);
  assert.deepEqual(
    ok.map((r) => [r.firstQueueOffset, r.count]),
    [
      [0, 2],
      [0, 1],
      [2, 1],
      [3, 1],
    ],
  );
  assert.equal(ok[0]!.commitLogOffset, before);
  assert.equal(ok[1]!.commitLogOffset, ok[0]!.commitLogOffset + ok[0]!.wroteBytes);
  assert.equal(ok[2]!.commitLogOffset, ok[1]!.commitLogOffset + ok[1]!.wroteBytes);
  assert.equal(ok[3]!.commitLogOffset % 4096, 0, "the big batch starts the next segment");
  const q0 = decodeRecords(Buffer.concat(s.getMessage("g", "GroupT", 0, 0, 32).buffers), "b");
  assert.deepEqual(
    q0.map((m) => [m.queueOffset, m.body.toString().slice(0, 2)]),
    [
      [0, "a0"],
      [1, "a1"],
      [2, "a2"],
      [3, "yy"],
    ],
  );
  assert.deepEqual(
    q0.map((m) => m.offsetMsgId),
    [...ok[0]!.offsetMsgIds.split(","), ok[2]!.offsetMsgIds, ok[3]!.offsetMsgIds],
  );
  assert.equal(s.queryMessageByKey("GroupT", "k2", 4).length, 1);
  const q1 = decodeRecords(Buffer.concat(s.getMessage("g", "GroupT", 1, 0, 32).buffers), "b");
  assert.deepEqual(
    q1.map((m) => m.body.toString()),
    ["b0"],
  );
});

test("putMessagesGroup: queues of different topics with the same queue id count their offsets apart, across groups too", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(small(dir));
  t.after(() => s.close());
  const offsets = async (batches: ReturnType<typeof batch>[]) =>
    (await Promise.all(s.putMessagesGroup(batches))).map((r) => [r.firstQueueOffset, r.count]);
  assert.deepEqual(
    await offsets([
      batch("TopicA", 0, [{ body: "a0" }, { body: "a1" }]),
      batch("TopicB", 0, [{ body: "b0" }]),
      batch("TopicA", 0, [{ body: "a2" }]),
      batch("TopicB", 0, [{ body: "b1" }, { body: "b2" }]),
      batch("TopicA", 1, [{ body: "c0" }]),
    ]),
    [
      [0, 2],
      [0, 1],
      [2, 1],
      [1, 2],
      [0, 1],
    ],
  );
  assert.deepEqual(await offsets([batch("TopicB", 0, [{ body: "b3" }]), batch("TopicA", 0, [{ body: "a3" }])]), [
    [3, 1],
    [3, 1],
  ]);
  const bodies = (topic: string) =>
    decodeRecords(Buffer.concat(s.getMessage("g", topic, 0, 0, 32).buffers), "b").map((m) => m.body.toString());
  assert.deepEqual(bodies("TopicA"), ["a0", "a1", "a2", "a3"]);
  assert.deepEqual(bodies("TopicB"), ["b0", "b1", "b2", "b3"]);
});

test("storeHost must be an IPv4 ip:port: a host name or IPv6 address is refused, not stamped as 0.0.0.0", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  for (const storeHost of ["broker-a.example.com:10911", "[::1]:10911", "10.0.0.256:10911", "10.0.0.2", "10.0.0.2:70000", "10.0.0.2:"]) {
    await assert.rejects(
      MessageStore.open(small(path.join(dir, "refused"), { storeHost })),
      (e) => isCode("ILLEGAL_ARGUMENT")(e) && (e as Error).message.includes(storeHost),
      storeHost,
    );
  }
  const s = await MessageStore.open(small(dir, { storeHost: "10.0.0.2:10911" }));
  t.after(() => s.close());
  const r = await s.putMessage({ topic: "T", queueId: 0, body: Buffer.from("x"), bornTimestamp: Date.now(), bornHost: "client-host:5" });
  assert.equal(r.offsetMsgIds.slice(0, 16), "0A00000200002A9F");
});

test("messageDelayLevel that is empty, blank or not a string is refused at open, before any file is made", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const refused = path.join(dir, "refused");
  for (const messageDelayLevel of ["", "   ", 5, "1s 1x"]) {
    await assert.rejects(
      MessageStore.open(small(refused, { messageDelayLevel: messageDelayLevel as never })),
      (e) => isCode("ILLEGAL_ARGUMENT")(e) && /^messageDelayLevel /.test((e as Error).message),
      String(messageDelayLevel),
    );
  }
  assert.equal(fs.existsSync(refused), false);
});

test("numeric options out of range are refused with ILLEGAL_ARGUMENT naming the option and its range, before any file is made", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const bad: Array<[keyof MessageStoreOptions, number[]]> = [
    ["commitLogSegmentBytes", [65536.5, 4095, Number.NaN]],
    ["consumeQueueEntries", [0, -1, 1.5, Number.NaN]],
    ["indexSlots", [0, -1, 2.5]],
    ["maxMessageBytes", [0, Number.NaN]],
    ["maxTransferBytes", [0]],
    ["maxTransferCount", [0, 2.5]],
    ["flushLeastBytes", [-1]],
    ["fileReservedTimeHours", [0, -1, Number.NaN]],
    ["flushIntervalMs", [0, Number.NaN, 2 ** 31]],
    ["syncFlushTimeoutMs", [0, Number.POSITIVE_INFINITY]],
    ["cleanIntervalMs", [-1, Number.NaN]],
    ["checkpointIntervalMs", [-1, 2 ** 31]],
    ["diskCleanForciblyPercent", [0, 101]],
    ["diskFullPercent", [0, Number.NaN]],
  ];
  const at = path.join(dir, "refused");
  for (const [option, values] of bad) {
    for (const v of values) {
      await assert.rejects(
        MessageStore.open(small(at, { [option]: v })),
        (e) =>
          isCode("ILLEGAL_ARGUMENT")(e) && (e as Error).message.startsWith(`${option} must be`) && (e as Error).message.includes(String(v)),
        `${option} ${v}`,
      );
    }
  }
  assert.equal(fs.existsSync(at), false, "nothing was created");
  // the edges of each range open
  const s = await MessageStore.open(
    small(dir, {
      commitLogSegmentBytes: 4096,
      consumeQueueEntries: 1,
      indexSlots: 1,
      flushLeastBytes: 0,
      checkpointIntervalMs: 0,
      fileReservedTimeHours: 0.5,
      diskFullPercent: 100,
    }),
  );
  t.after(() => s.close());
  const r = await s.putMessage({
    topic: "T",
    queueId: 0,
    body: Buffer.from("x"),
    properties: { KEYS: "k1" },
    bornTimestamp: Date.now(),
    bornHost: "1.2.3.4:5",
  });
  await s.putMessage({
    topic: "T",
    queueId: 0,
    body: Buffer.from("y"),
    properties: { KEYS: "k2" },
    bornTimestamp: Date.now(),
    bornHost: "1.2.3.4:5",
  });
  assert.equal(s.getMessage("g", "T", 0, 1, 32).status, "FOUND");
  assert.equal(s.queryMessageByKey("T", "k1", 4).length, 1);
  assert.equal(r.status, "PUT_OK");
});

test("a periodic clean-up that fails is told to onDiskSpace once per run of failures (cleanFailed), not swallowed: expired files would stay and fill the disk unsaid", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const changes: DiskSpaceChange[] = [];
  const s = await MessageStore.open(small(dir, { cleanIntervalMs: 5, onDiskSpace: (c) => void changes.push(c) }));
  t.after(() => s.close());
  const realDelete = s.commitLog.deleteSegments.bind(s.commitLog);
  let calls = 0;
  const broken = () => {
    calls++;
    throw Object.assign(new Error("EACCES: permission denied, unlink '00000000000000000000'"), { code: "EACCES" });
  };
  s.commitLog.deleteSegments = broken;
  await waitFor(() => calls >= 5, 5000, "five failed clean-ups");
  assert.deepEqual(
    changes.map((c) => c.kind),
    ["cleanFailed"],
    "said once for the run of failures",
  );
  assert.match(changes[0]!.message, /EACCES/);
  assert.match(changes[0]!.message, new RegExp(`${dir.replaceAll("/", "\\/")}`));
  // a clean-up that works ends the run: the next failure is said again
  const before = calls;
  s.commitLog.deleteSegments = (expired, max) => {
    s.commitLog.deleteSegments = broken;
    return realDelete(expired, max);
  };
  await waitFor(() => calls >= before + 2, 5000, "failing again after one that worked");
  assert.deepEqual(
    changes.map((c) => c.kind),
    ["cleanFailed", "cleanFailed"],
  );
});
