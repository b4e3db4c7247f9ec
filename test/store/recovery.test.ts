import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { segmentIo } from "../../store/segment.ts";
import { decodeRecords, encodeMessageBatch, encodeProperties } from "../../transport/messageRecord.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { bytesRead } from "./segmentReads.ts";

const SEG = 64 * 1024;
const opts = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: SEG,
  consumeQueueEntries: 256,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  flush: "async",
  onDamage: () => {},
  ...o,
});

/** Puts `batches` batches of 8 messages of ~1 KiB over two queues; KEYS k<batch> when `keys`. */
async function fill(s: MessageStore, batches: number, from = 0, keys = false): Promise<number[]> {
  const at: number[] = [];
  for (let i = from; i < from + batches; i++) {
    const body = encodeMessageBatch(
      Array.from({ length: 8 }, (_, j) => ({
        body: Buffer.from(`m${i}-${j}-${"x".repeat(1000)}`),
        properties: keys ? encodeProperties({ KEYS: `k${i}` }) : undefined,
      })),
    );
    at.push((await s.putMessages({ topic: "R", queueId: i % 2, bornTimestamp: 1, bornHost: "1.1.1.1:1", body })).commitLogOffset);
  }
  return at;
}

function readAll(s: MessageStore, queueId: number): string[] {
  const out: string[] = [];
  let off = s.getMinOffset("R", queueId);
  for (;;) {
    const g = s.getMessage("g", "R", queueId, off, 32);
    if (g.status !== "FOUND" && g.status !== "NO_MATCHED_MESSAGE") return out;
    out.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString().slice(0, 12)));
    off = g.nextBeginOffset;
  }
}

test("a clean reopen of a many-segment log reads only its last segments; a crashed one without checkpoint reads them all", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await fill(s, 300);
  const want = [readAll(s, 0), readAll(s, 1)];
  await s.close();
  const segments = fs.readdirSync(path.join(dir, "commitlog")).length;
  assert.ok(segments >= 30, `${segments} segments`);

  const clean = await bytesRead(() => MessageStore.open(opts(dir)));
  s = clean.value;
  assert.equal(s.recovery.mode, "normal");
  assert.equal(s.recovery.rebuilt, null);
  assert.equal(s.recovery.checkedFrom, (segments - 1) * SEG, "from the file holding the dispatched position");
  assert.ok(clean.bytes <= SEG + 64 * 1024, `a clean open read ${clean.bytes} bytes of a ${segments * SEG}-byte log`);
  assert.deepEqual([readAll(s, 0), readAll(s, 1)], want);
  await fill(s, 4, 300);
  await s.close();

  for (const f of ["checkpoint", "checkpoint.bak"]) fs.rmSync(path.join(dir, f), { force: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");
  const crashed = await bytesRead(() => MessageStore.open(opts(dir)));
  s = crashed.value;
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "abnormal");
  assert.equal(s.recovery.rebuilt, "no checkpoint");
  assert.ok(crashed.bytes >= segments * SEG * 0.9, `a rebuild read ${crashed.bytes} bytes`);
  assert.equal(readAll(s, 0).length, want[0]!.length + 16);
});

test("after a crash, recovery starts at the newest file older than the checkpoint and re-dispatches from there, without duplicate index entries", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const dir = path.join(base, "live");
  const realNow = Date.now;
  let clock = realNow() - 3600_000;
  Date.now = () => clock;
  let s: MessageStore;
  const at: number[] = [];
  try {
    s = await MessageStore.open(opts(dir));
    for (let i = 0; i < 200; i++) {
      clock += 1000; // one batch per simulated second
      at.push(...(await fill(s, 1, i, true)));
      if (i === 150) await s.checkpoint();
    }
  } finally {
    Date.now = realNow;
  }
  s.commitLog.flushNow();
  // a copy taken while the store is open is what a crash leaves: abort marker, checkpoint behind the log
  const copy = path.join(base, "crashed");
  fs.cpSync(dir, copy, { recursive: true });
  const want = [readAll(s, 0), readAll(s, 1)];
  await s.close();

  const r = await bytesRead(() => MessageStore.open(opts(copy)));
  const c = r.value;
  t.after(() => c.close());
  assert.equal(c.recovery.mode, "abnormal");
  assert.equal(c.recovery.rebuilt, null);
  const segments = fs.readdirSync(path.join(copy, "commitlog")).length;
  // the checkpoint trusts store times up to batch 150's minus 3 s: the file holding batch 147's start
  const trusted = at[147]!;
  assert.equal(c.recovery.checkedFrom, trusted - (trusted % SEG), `checked from ${c.recovery.checkedFrom}`);
  assert.equal(c.recovery.redispatchedFrom, c.recovery.checkedFrom);
  assert.ok(r.bytes < (segments - 10) * SEG, `read ${r.bytes} bytes of ${segments * SEG}`);
  assert.deepEqual([readAll(c, 0), readAll(c, 1)], want);
  for (const k of [3, 120, 151, 199]) assert.equal(c.queryMessageByKey("R", `k${k}`, 64).length, 8, `key k${k}: one entry per message`);
});

test("consume queues or index missing or behind, or no checkpoint: rebuilt from the whole log", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const pristine = path.join(base, "p");
  const s0 = await MessageStore.open(opts(pristine));
  await fill(s0, 40, 0, true);
  const want = [readAll(s0, 0), readAll(s0, 1)];
  await s0.close();
  const cases: Array<[string, (d: string) => void, RegExp]> = [
    ["queue dir removed", (d) => fs.rmSync(path.join(d, "consumequeue", "R", "1"), { recursive: true }), /missing/],
    [
      "last queue file removed",
      (d) => {
        const q = path.join(d, "consumequeue", "R", "0");
        const files = fs.readdirSync(q).sort();
        fs.rmSync(path.join(q, files[files.length - 1]!));
      },
      /behind/,
    ],
    [
      "queue file cut",
      (d) => {
        const q = path.join(d, "consumequeue", "R", "0");
        const files = fs.readdirSync(q).sort();
        fs.truncateSync(path.join(q, files[files.length - 1]!), 20);
      },
      /behind/,
    ],
    ["index removed", (d) => fs.rmSync(path.join(d, "index"), { recursive: true }), /index/],
    ["checkpoint removed", (d) => fs.rmSync(path.join(d, "checkpoint")), /no checkpoint/],
  ];
  for (const [name, damage, why] of cases) {
    const d = path.join(base, name.replace(/ /g, "-"));
    fs.cpSync(pristine, d, { recursive: true });
    damage(d);
    const s = await MessageStore.open(opts(d));
    try {
      assert.match(s.recovery.rebuilt ?? "", why, name);
      assert.deepEqual([readAll(s, 0), readAll(s, 1)], want, name);
      assert.equal(s.queryMessageByKey("R", "k7", 64).length, 8, name);
    } finally {
      await s.close();
    }
  }
});

test("the periodic checkpoint follows the dispatched log", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(opts(dir, { checkpointIntervalMs: 20 }));
  t.after(() => s.close());
  await fill(s, 10);
  const file = path.join(dir, "checkpoint");
  const end = s.maxPhyOffset;
  await waitFor(
    () => fs.existsSync(file) && JSON.parse(fs.readFileSync(file, "utf8")).confirmOffset === end,
    5000,
    "a checkpoint at the log end",
  );
  const cp = JSON.parse(fs.readFileSync(file, "utf8"));
  assert.equal(cp.flushedOffset, end);
  assert.deepEqual(cp.queues.R, { 0: { min: 0, max: 40 }, 1: { min: 0, max: 40 } });
  assert.ok(cp.logicsMsgTimestamp >= s.getStoreTime("R", 1, 39));
});

test("recovery reports as cut exactly the torn bytes after the last record, nothing for a clean end", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    let s = await MessageStore.open(opts(dir));
    await fill(s, 3);
    const end = s.maxPhyOffset;
    await s.close();
    s = await MessageStore.open(opts(dir));
    assert.equal(s.recovery.log.cutBytes, 0, "a clean close cuts nothing (the unfilled rest of a segment is not a cut)");
    await s.close();
    // a torn write: 300 bytes of a record that never finished, right after the valid end
    const file = path.join(dir, "commitlog", String(end - (end % SEG)).padStart(20, "0"));
    const fd = fs.openSync(file, "r+");
    fs.writeSync(fd, Buffer.alloc(300, 0x5a), 0, 300, end % SEG);
    fs.closeSync(fd);
    s = await MessageStore.open(opts(dir));
    assert.equal(s.recovery.log.end, end);
    assert.equal(s.recovery.log.cutBytes, 300);
    await s.close();
  } finally {
    await cleanup();
  }
});

test("a crash recovery reads about one window past the written end of a large, mostly unwritten segment; a zeroed record inside the log is still stepped over", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const big = 256 * 1024 * 1024; // sparse: the file takes only what was written
  let s = await MessageStore.open(opts(dir, { commitLogSegmentBytes: big }));
  const at = await fill(s, 6);
  const want = [readAll(s, 0), readAll(s, 1)];
  await s.close();
  for (const f of ["checkpoint", "checkpoint.bak"]) fs.rmSync(path.join(dir, f), { force: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");
  const crashed = await bytesRead(() => MessageStore.open(opts(dir, { commitLogSegmentBytes: big })));
  s = crashed.value;
  assert.equal(s.recovery.mode, "abnormal");
  assert.deepEqual([readAll(s, 0), readAll(s, 1)], want);
  assert.equal(s.recovery.log.damagedRegions, 0);
  // the record walk plus one window of zeros to see the end, plus one for the torn-tail check
  assert.ok(crashed.bytes <= 3 * 16 * 1024 * 1024 + 1024 * 1024, `recovery read ${crashed.bytes} bytes of a ${big}-byte segment`);
  await s.close();

  // zero the third batch (8 records): the records after it are found again, only those are lost
  const file = path.join(dir, "commitlog", "0".padStart(20, "0"));
  const fd = fs.openSync(file, "r+");
  fs.writeSync(fd, Buffer.alloc(at[3]! - at[2]!), 0, at[3]! - at[2]!, at[2]!);
  fs.closeSync(fd);
  for (const f of ["checkpoint", "checkpoint.bak"]) fs.rmSync(path.join(dir, f), { force: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");
  s = await MessageStore.open(opts(dir, { commitLogSegmentBytes: big }));
  t.after(() => s.close());
  assert.equal(s.recovery.log.damagedRegions, 1);
  const lost = new Set(Array.from({ length: 8 }, (_, j) => `m2-${j}-xxxxxxx`.slice(0, 12)));
  assert.deepEqual(
    [readAll(s, 0), readAll(s, 1)],
    want.map((q) => q.filter((b) => !lost.has(b))),
  );
});

test("below what the checkpoint saw flushed, a long run of zeros is damage: recovery scans through it and keeps the records after it", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const big = 64 * 1024 * 1024;
  let s = await MessageStore.open(opts(dir, { commitLogSegmentBytes: big }));
  const at = await fill(s, 2400); // ~20 MiB in one segment
  const end = s.maxPhyOffset;
  await s.close(); // checkpoint: flushed up to `end`
  // 17 MiB of zeros from the 100th batch on (more than the 16 MiB window), records after it
  const from = at[100]!;
  const to = at.find((o) => o >= from + 17 * 1024 * 1024)!;
  assert.ok(to < end, "records follow the zeroed run");
  const fd = fs.openSync(path.join(dir, "commitlog", "0".padStart(20, "0")), "r+");
  fs.writeSync(fd, Buffer.alloc(to - from), 0, to - from, from);
  fs.closeSync(fd);
  fs.writeFileSync(path.join(dir, "abort"), "1"); // as after a crash, with the checkpoint kept
  s = await MessageStore.open(opts(dir, { commitLogSegmentBytes: big }));
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "abnormal");
  assert.equal(s.recovery.log.end, end, "nothing after the zeroed run was cut");
  assert.equal(s.recovery.log.damagedRegions, 1);
  const last = at.length - 1;
  assert.ok(readAll(s, last % 2).includes(`m${last}-7-xxxxxxx`.slice(0, 12)), "the last batch is still served");
});

test("a lost or short index is rebuilt alone: the consume queues are kept, and a crash right after does not rebuild it again", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const dir = path.join(base, "live");
  let s = await MessageStore.open(opts(dir));
  await fill(s, 40, 0, true);
  const want = [readAll(s, 0), readAll(s, 1)];
  await s.close();
  // a file a full rebuild would delete with the consume-queue directory
  const marker = path.join(dir, "consumequeue", "R", "0", "kept");
  fs.writeFileSync(marker, "");
  fs.rmSync(path.join(dir, "index"), { recursive: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");
  s = await MessageStore.open(opts(dir));
  assert.match(s.recovery.rebuilt ?? "", /index/);
  assert.ok(fs.existsSync(marker), "consume queues were not rebuilt");
  assert.deepEqual([readAll(s, 0), readAll(s, 1)], want);
  assert.equal(s.queryMessageByKey("R", "k7", 64).length, 8);
  assert.equal(s.queryMessageByKey("R", "k39", 64).length, 8);
  // kill -9 right after the open: its checkpoint already counts the rebuilt index
  const crashed = path.join(base, "crashed");
  fs.cpSync(dir, crashed, { recursive: true });
  await s.close();
  s = await MessageStore.open(opts(crashed));
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "abnormal");
  assert.equal(s.recovery.rebuilt, null);
  assert.equal(s.queryMessageByKey("R", "k7", 64).length, 8);
});

test("a full rebuild keeps the offsets of a queue whose records all expired (from its last file or the checkpoint)", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const pristine = path.join(base, "p");
  const s0 = await MessageStore.open(opts(pristine));
  for (let i = 0; i < 3; i++)
    await s0.putMessages({
      topic: "Old",
      queueId: 0,
      bornTimestamp: 1,
      bornHost: "1.1.1.1:1",
      body: encodeMessageBatch([{ body: Buffer.from(`o${i}`) }]),
    });
  // later records move the log on: every segment but the one written holds Old's records
  for (let i = 0; s0.maxPhyOffset < 2 * SEG; i++) await fill(s0, 1, i);
  assert.ok(s0.deleteExpiredFiles(Date.now() + 1000 * 3600_000) > 0);
  assert.deepEqual([s0.getMinOffset("Old", 0), s0.getMaxOffset("Old", 0)], [3, 3], "all of Old/0 expired");
  await fill(s0, 2, 1000); // R/0 and R/1 hold records
  await s0.close();
  const cases: Array<[string, (d: string) => void, RegExp]> = [
    ["checkpoint removed", (d) => fs.rmSync(path.join(d, "checkpoint")), /no checkpoint/],
    ["another queue removed", (d) => fs.rmSync(path.join(d, "consumequeue", "R", "1"), { recursive: true }), /missing/],
    [
      "its files removed too",
      (d) => {
        fs.rmSync(path.join(d, "consumequeue", "R", "1"), { recursive: true });
        fs.rmSync(path.join(d, "consumequeue", "Old"), { recursive: true });
      },
      /missing/,
    ],
  ];
  for (const [name, damage, why] of cases) {
    const d = path.join(base, name.replace(/ /g, "-"));
    fs.cpSync(pristine, d, { recursive: true });
    damage(d);
    fs.writeFileSync(path.join(d, "abort"), "1");
    let s = await MessageStore.open(opts(d));
    try {
      assert.match(s.recovery.rebuilt ?? "", why, name);
      assert.deepEqual([s.getMinOffset("Old", 0), s.getMaxOffset("Old", 0)], [3, 3], name);
      // kill -9 right after the rebuild: the next open still knows where Old/0 goes on
      const crashed = `${d}-crashed`;
      fs.cpSync(d, crashed, { recursive: true });
      await s.close();
      s = await MessageStore.open(opts(crashed));
      assert.deepEqual([s.getMinOffset("Old", 0), s.getMaxOffset("Old", 0)], [3, 3], `${name}, then a crash`);
      const r = await s.putMessage({ topic: "Old", queueId: 0, body: Buffer.from("next"), bornTimestamp: 1, bornHost: "1.1.1.1:1" });
      assert.equal(r.firstQueueOffset, 3, name);
      assert.equal(s.getMessage("g", "Old", 0, 3, 32).messageCount, 1, name);
    } finally {
      await s.close();
    }
  }
});

test("a rebuild killed part-way (no checkpoint) does not restart a queue whose records all expired at 0", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s0 = await MessageStore.open(opts(dir));
  for (let i = 0; i < 3; i++)
    await s0.putMessages({
      topic: "Old",
      queueId: 0,
      bornTimestamp: 1,
      bornHost: "1.1.1.1:1",
      body: encodeMessageBatch([{ body: Buffer.from(`o${i}`) }]),
    });
  for (let i = 0; s0.maxPhyOffset < 2 * SEG; i++) await fill(s0, 1, i);
  assert.ok(s0.deleteExpiredFiles(Date.now() + 1000 * 3600_000) > 0);
  await fill(s0, 2, 1000);
  await s0.close();
  fs.rmSync(path.join(dir, "checkpoint"));
  fs.rmSync(path.join(dir, "checkpoint.bak"), { force: true });
  // the rebuild dies while it reads the log (a kill -9 there): its old consume-queue files are gone by then
  const oldQueue = path.join(dir, "consumequeue", "Old");
  const realRead = segmentIo.readSync;
  segmentIo.readSync = (fd, buf, off, len, pos) => {
    if (!fs.existsSync(oldQueue) && fs.readlinkSync(`/proc/self/fd/${fd}`).includes(`${path.sep}commitlog${path.sep}`))
      throw Object.assign(new Error("killed"), { code: "EIO" });
    return realRead(fd, buf, off, len, pos);
  };
  try {
    await assert.rejects(MessageStore.open(opts(dir)), /killed/);
  } finally {
    segmentIo.readSync = realRead;
  }
  const s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.deepEqual([s.getMinOffset("Old", 0), s.getMaxOffset("Old", 0)], [3, 3]);
  const r = await s.putMessage({ topic: "Old", queueId: 0, body: Buffer.from("next"), bornTimestamp: 1, bornHost: "1.1.1.1:1" });
  assert.equal(r.firstQueueOffset, 3);
  assert.deepEqual(readAll(s, 0).length > 0, true, "the live queues are rebuilt");
});

test("records stored under a larger maxMessageBytes survive a crash recovery with a lower one, also across the scan window's end", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const big = 64 * 1024 * 1024;
  let s = await MessageStore.open(opts(dir, { commitLogSegmentBytes: big, maxMessageBytes: 4 << 20 }));
  // the 5th record straddles the end of recovery's first 16 MiB window
  for (let i = 0; i < 5; i++)
    await s.putMessage({ topic: "Big", queueId: 0, body: Buffer.alloc(3_900_000, i), bornTimestamp: 1, bornHost: "1.1.1.1:1" });
  const end = s.maxPhyOffset;
  await s.close();
  fs.rmSync(path.join(dir, "checkpoint"));
  fs.writeFileSync(path.join(dir, "abort"), "1");
  s = await MessageStore.open(opts(dir, { commitLogSegmentBytes: big, maxMessageBytes: 128 * 1024 }));
  t.after(() => s.close());
  assert.equal(s.recovery.log.end, end, "nothing was cut");
  assert.deepEqual([s.recovery.log.records, s.recovery.log.damagedRegions], [5, 0]);
  assert.equal(s.getMaxOffset("Big", 0), 5);
  assert.equal(s.getMessage("g", "Big", 0, 4, 1).messageCount, 1);
});
