import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { FILLER_HEADER_BYTES, FILLER_MAGIC } from "../../store/commitLog.ts";
import { MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { BLANK_MAGIC, decodeRecords, encodeMessageBatch } from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";
import { flipCommitLogByte, tempDir } from "../helpers.ts";

const SEG = 8192;
const opts = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: SEG,
  consumeQueueEntries: 16,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  flush: "async",
  ...o,
});

/** `n` single-message puts of ~300 bytes on queue 0 (`d0-yyy…`, `d1-…`); their commit-log offsets. */
async function put(s: MessageStore, n: number): Promise<number[]> {
  const at: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await s.putMessages({
      topic: "D",
      queueId: 0,
      bornTimestamp: 1,
      bornHost: "1.1.1.1:1",
      body: encodeMessageBatch([{ body: Buffer.from(`d${i}-${"y".repeat(180)}`) }]),
    });
    at.push(r.commitLogOffset);
  }
  return at;
}

/** 120 puts: about 15 segments. */
async function fill(dir: string): Promise<number[]> {
  const s = await MessageStore.open(opts(dir, { onDamage: () => {} }));
  const at = await put(s, 120);
  await s.close();
  return at;
}

const flipByte = (dir: string, phy: number): void => flipCommitLogByte(path.join(dir, "commitlog"), phy);

function bodies(s: MessageStore): string[] {
  const out: string[] = [];
  let off = 0;
  for (;;) {
    const g = s.getMessage("g", "D", 0, off, 32);
    if (g.status !== "FOUND" && g.status !== "NO_MATCHED_MESSAGE") return out;
    out.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString().split("-")[0]!));
    off = g.nextBeginOffset;
  }
}

/**
 * Copies `master`'s log into `slave` the way the HA client and the master's `ha` actor do: the
 * master checks the slave's last entry, then readCommitLog from the slave's max offset, appendReplica.
 */
async function replicate(master: MessageStore, slave: MessageStore): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  while (slave.maxPhyOffset < master.maxPhyOffset) {
    const tail = slave.replicaTail();
    assert.ok(
      tail ? master.matchesReplicaTail(slave.maxPhyOffset, tail.at, tail.crc) : master.isEntryStart(slave.maxPhyOffset),
      `the master finds the slave's log its own up to ${slave.maxPhyOffset}`,
    );
    const chunk = master.readCommitLog(slave.maxPhyOffset, 4096);
    assert.ok(chunk.length > 0, `readable at ${slave.maxPhyOffset}`);
    chunks.push(Buffer.from(chunk));
    await slave.appendReplica(chunk);
  }
  return chunks;
}

test("a damaged record in an old segment (not checked by a clean reopen) is never served: pulls skip it, counted and reported once", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const at = await fill(dir);
  flipByte(dir, at[5]! + 100); // inside message 5's body, segment 0
  const reports: string[] = [];
  const s = await MessageStore.open(opts(dir, { onDamage: (m) => reports.push(m) }));
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "normal");
  assert.ok(s.recovery.checkedFrom > at[5]!, "the damaged segment was not checked on open");
  const want = Array.from({ length: 120 }, (_, i) => `d${i}`).filter((b) => b !== "d5");
  assert.deepEqual(bodies(s), want);
  assert.deepEqual(bodies(s), want, "again, without searching again");
  assert.equal(s.damage.damagedRecordsSkipped, 1);
  assert.equal(reports.length, 1);
  assert.match(reports[0]!, /D\/0 offset 5/);
  assert.equal(s.viewMessage(at[5]!), null);
  const g = s.getMessage("g", "D", 0, 5, 1);
  assert.deepEqual([g.status, g.messageCount, g.nextBeginOffset], ["FOUND", 1, 7], "the first batch entry damaged: the next one is served");
});

test("a record this process appended and then damaged in its file: pulls frame it only, a verifying pull skips it, counted and reported", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const reports: string[] = [];
  const s = await MessageStore.open(opts(dir, { onDamage: (m) => reports.push(m) }));
  t.after(() => s.close());
  const at = await put(s, 10);
  flipByte(dir, at[3]! + 100); // inside message 3's body: bit rot under the running store
  // the fast path serves it framed (the consumer's CRC check refuses it)...
  const plain = s.getMessage("g", "D", 0, 0, 32);
  assert.equal(plain.messageCount, 10);
  assert.throws(
    () => decodeRecords(Buffer.concat(plain.buffers), "b"),
    (e: unknown) => e instanceof MQError && e.code === "MALFORMED",
  );
  assert.equal(s.damage.damagedRecordsSkipped, 0);
  // ...and the pull the consumer sends next, asking for verification, goes on without it
  const verified = s.getMessage("g", "D", 0, 0, 32, null, undefined, true);
  assert.deepEqual(
    decodeRecords(Buffer.concat(verified.buffers), "b").map((m) => m.body.toString().split("-")[0]!),
    ["d0", "d1", "d2", "d4", "d5", "d6", "d7", "d8", "d9"],
  );
  assert.equal(verified.nextBeginOffset, 10);
  assert.equal(s.damage.damagedRecordsSkipped, 1);
  assert.equal(reports.length, 1);
  assert.match(reports[0]!, /D\/0 offset 3/);
});

test("replication steps over damage: a filler for a damaged record, a BLANK marker when the rest of a finished segment is damaged; the slave stays at the master's offsets", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const mdir = path.join(base, "m");
  const at = await fill(mdir);
  flipByte(mdir, at[5]! + 100);
  // damage the last record of segment 2 and its BLANK marker: nothing valid follows in that segment
  const lastOfSeg2 = Math.max(...at.filter((p) => p >= 2 * SEG && p < 3 * SEG));
  flipByte(mdir, lastOfSeg2 + 1);
  const master = await MessageStore.open(opts(mdir, { onDamage: () => {} }));
  t.after(() => master.close());
  const first = master.readCommitLog(at[5]!, 4096);
  assert.equal(first.length, FILLER_HEADER_BYTES);
  assert.equal(first.readUInt32BE(4), FILLER_MAGIC);
  assert.equal(first.readInt32BE(0), at[6]! - at[5]!, "the filler reaches the next valid record");
  const blank = master.readCommitLog(lastOfSeg2, 4096);
  assert.deepEqual([blank.length, blank.readUInt32BE(4), blank.readInt32BE(0)], [8, BLANK_MAGIC, 3 * SEG - lastOfSeg2]);
  const before = master.readCommitLog(at[4]!, 1 << 20);
  assert.equal(before.length, at[5]! - at[4]!, "a read stops before the damage");

  let slave = await MessageStore.open(opts(path.join(base, "s"), { onDamage: () => {} }));
  const chunks = await replicate(master, slave);
  assert.ok(chunks.every((c) => c.length > 0));
  assert.equal(slave.maxPhyOffset, master.maxPhyOffset);
  const want = Array.from({ length: 120 }, (_, i) => `d${i}`).filter((b) => b !== "d5" && `d${at.indexOf(lastOfSeg2)}` !== b);
  assert.deepEqual(bodies(slave), want);
  assert.ok(master.damage.replicationBytesSkipped >= at[6]! - at[5]!);
  // the slave passes the filler on, and finds its log whole after a clean and after a crashed restart
  const cascaded = slave.readCommitLog(at[5]!, 4096);
  assert.deepEqual([cascaded.length, cascaded.readUInt32BE(4)], [FILLER_HEADER_BYTES, FILLER_MAGIC]);
  await slave.close();
  for (const crashed of [false, true]) {
    if (crashed) {
      fs.writeFileSync(path.join(base, "s", "abort"), "1");
      fs.rmSync(path.join(base, "s", "checkpoint"));
    }
    slave = await MessageStore.open(opts(path.join(base, "s"), { onDamage: () => {} }));
    try {
      assert.equal(slave.recovery.log.damagedRegions, 0, "fillers are not damage");
      assert.equal(slave.maxPhyOffset, master.maxPhyOffset);
      const tail = slave.replicaTail();
      assert.ok(
        tail && master.matchesReplicaTail(slave.maxPhyOffset, tail.at, tail.crc),
        "the reopened slave's last entry is the master's",
      );
      assert.equal(master.matchesReplicaTail(slave.maxPhyOffset, tail.at, tail.crc ^ 1), false);
      assert.deepEqual(bodies(slave), want);
    } finally {
      await slave.close();
    }
  }
});

test("a damaged last record of the segment being written is not replicated as a filler: the replica waits, and gets the records recovery writes there", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const mdir = path.join(base, "m");
  let master = await MessageStore.open(opts(mdir, { onDamage: () => {} }));
  const slave = await MessageStore.open(opts(path.join(base, "s"), { onDamage: () => {} }));
  t.after(() => slave.close());
  await put(master, 5);
  await replicate(master, slave);
  const [tail] = await put(master, 1);
  flipByte(mdir, tail! + 100); // bit rot in the last record, with nothing after it
  assert.equal(master.readCommitLog(tail!, 4096).length, 0, "nothing to send yet: the request waits like a caught-up one");
  assert.equal(master.damage.replicationBytesSkipped, 0);
  // a record written after the damaged one: the damage is now in the middle of the log, and skipped
  const [after] = await put(master, 1);
  const filler = master.readCommitLog(tail!, 4096);
  assert.deepEqual([filler.readUInt32BE(4), filler.readInt32BE(0)], [FILLER_MAGIC, after! - tail!]);
  await replicate(master, slave);

  // the same damage as the last record again, then the master crashes: its recovery cuts that tail
  // and writes new records at the same offsets, which the replica must receive
  const [tail2] = await put(master, 1);
  flipByte(mdir, tail2! + 100);
  assert.equal(master.readCommitLog(tail2!, 4096).length, 0);
  await master.close();
  fs.writeFileSync(path.join(mdir, "abort"), "1");
  fs.rmSync(path.join(mdir, "checkpoint"));
  master = await MessageStore.open(opts(mdir, { onDamage: () => {} }));
  t.after(() => master.close());
  assert.equal(master.maxPhyOffset, tail2!, "recovery cut the damaged tail");
  await put(master, 2);
  await replicate(master, slave);
  assert.equal(slave.maxPhyOffset, master.maxPhyOffset);
  assert.deepEqual(bodies(slave), bodies(master));
  assert.deepEqual(bodies(slave), ["d0", "d1", "d2", "d3", "d4", "d0", "d0", "d1"]);
});

test("a record stored under a larger maxMessageBytes replicates whole after the limit is lowered, not as a filler", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const mdir = path.join(base, "m");
  const big = { commitLogSegmentBytes: 4 << 20, consumeQueueEntries: 1024 };
  let master = await MessageStore.open(opts(mdir, { ...big, maxMessageBytes: 2 << 20 }));
  await put(master, 1);
  const large = await master.putMessages({
    topic: "D",
    queueId: 0,
    bornTimestamp: 1,
    bornHost: "1.1.1.1:1",
    body: encodeMessageBatch([{ body: Buffer.alloc(1 << 20, "L") }]),
  });
  await put(master, 1);
  await master.close();
  master = await MessageStore.open(opts(mdir, { ...big, maxMessageBytes: 64 * 1024, onDamage: () => {} }));
  t.after(() => master.close());
  assert.equal(master.readCommitLog(large.commitLogOffset, 4096).length, large.wroteBytes, "the record whole");
  const slave = await MessageStore.open(opts(path.join(base, "s"), { ...big, maxMessageBytes: 64 * 1024, onDamage: () => {} }));
  t.after(() => slave.close());
  await replicate(master, slave);
  assert.equal(master.damage.replicationBytesSkipped, 0);
  assert.deepEqual(
    bodies(slave).map((b) => b.slice(0, 2)),
    ["d0", "LL", "d0"],
  );
  assert.deepEqual(bodies(slave), bodies(master));
});

test("expiry keeps a consume-queue file whose last entry is a hole (a damaged record left out by a rebuild) while its other entries point at live records", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir, { fileReservedTimeHours: 1, onDamage: () => {} }));
  // the first segment holds another topic's records and one of D's: only it expires
  while (s.maxPhyOffset < SEG - 700)
    await s.putMessages({
      topic: "Other",
      queueId: 0,
      bornTimestamp: 1,
      bornHost: "1.1.1.1:1",
      body: encodeMessageBatch([{ body: Buffer.alloc(200) }]),
    });
  const at = await put(s, 40);
  const gone = at.filter((p) => p < SEG).length;
  assert.ok(gone >= 1 && gone < 4, `D's first ${gone} records in the first segment, the rest after it`);
  await s.close();
  // queue offset 15, the last entry of D's first consume-queue file, becomes a hole: its record is
  // damaged and the rebuild (no checkpoint) leaves it out
  flipByte(dir, at[15]! + 30);
  fs.rmSync(path.join(dir, "checkpoint"));
  fs.rmSync(path.join(dir, "checkpoint.bak"), { force: true });
  s = await MessageStore.open(opts(dir, { fileReservedTimeHours: 1, onDamage: () => {} }));
  t.after(() => s.close());
  assert.ok(s.recovery.rebuilt);
  const old = new Date(Date.now() - 2 * 3600_000);
  fs.utimesSync(path.join(dir, "commitlog", "0".repeat(20)), old, old);
  assert.equal(s.deleteExpiredFiles(), 1);
  assert.equal(s.minPhyOffset, SEG);
  assert.equal(s.getMinOffset("D", 0), gone, "only the records of the first segment went");
  const want = Array.from({ length: 40 }, (_, i) => `d${i}`).filter((b, i) => i >= gone && b !== "d15");
  const got: string[] = [];
  for (let off = gone; off < 40; ) {
    const g = s.getMessage("g", "D", 0, off, 32);
    got.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString().split("-")[0]!));
    off = g.nextBeginOffset;
  }
  assert.deepEqual(got, want);
});
