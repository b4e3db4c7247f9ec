import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { JsonFile, MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { decodeRecords, encodeMessageBatch, encodeProperties } from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

const SEG = 64 * 1024;
const opts = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: SEG,
  consumeQueueEntries: 100,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  flush: "async",
  ...o,
});
const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "deleter.ts");

/** Puts one message per body to queue `queueId` of `topic`, KEYS `key` and UNIQ_KEY `<body>`; their commit-log offsets. */
async function put(s: MessageStore, topic: string, bodies: string[], key = "k", queueId = 0): Promise<number[]> {
  const out: number[] = [];
  for (const b of bodies) {
    const body = encodeMessageBatch([{ body: Buffer.from(b), properties: encodeProperties({ KEYS: key, UNIQ_KEY: b }) }]);
    out.push((await s.putMessages({ topic, queueId, bornTimestamp: 1, bornHost: "1.1.1.1:1", body })).commitLogOffset);
  }
  return out;
}

/** Bodies and queue offsets of queue `queueId` of `topic`, from its min offset. */
function readAll(s: MessageStore, topic: string, queueId = 0): string[] {
  const out: string[] = [];
  let off = s.getMinOffset(topic, queueId);
  for (;;) {
    const g = s.getMessage("g", topic, queueId, off, 32);
    if (g.status !== "FOUND") return out;
    out.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => `${m.queueOffset}:${m.body.toString()}`));
    off = g.nextBeginOffset;
  }
}

const bodies = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const numbered = (prefix: string, n: number) => bodies(prefix, n).map((b, i) => `${i}:${b}`);
const keysOf = (recs: Buffer[]) => recs.flatMap((r) => decodeRecords(r, "b").map((m) => m.body.toString()));

test("a deleted topic serves nothing, is found by no lookup, and starts empty when created again, also after a clean restart", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  const old = await put(s, "T", bodies("old", 10));
  await put(s, "U", bodies("u", 5));
  assert.equal(await s.deleteTopics(["T"]), 1);

  assert.equal(s.getMaxOffset("T", 0), 0);
  assert.equal(s.getMessage("g", "T", 0, 0, 32).status, "NO_MATCHED_LOGIC_QUEUE");
  assert.deepEqual(s.queryMessageByKey("T", "k", 32), []);
  assert.equal(s.queryMessageByUniqKey("T", "old-3"), null);
  assert.equal(s.viewMessage(old[3]!), null, "an old record is not served by its offset either");
  assert.deepEqual(readAll(s, "U"), numbered("u", 5), "other topics are untouched");
  assert.equal(s.queryMessageByKey("U", "k", 32).length, 5);
  assert.ok(!fs.existsSync(path.join(dir, "consumequeue", "T")), "the topic's consume-queue files are removed");
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, "deletedTopics.json"), "utf8")), { deletedTopics: { T: s.maxPhyOffset } });

  const fresh = await put(s, "T", bodies("new", 3));
  assert.deepEqual(readAll(s, "T"), numbered("new", 3), "the topic created again starts at queue offset 0");
  assert.deepEqual(keysOf(s.queryMessageByKey("T", "k", 32)).sort(), bodies("new", 3));
  assert.ok(s.viewMessage(fresh[0]!));
  await s.close();

  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(s.recovery.rebuilt, null);
  assert.deepEqual(readAll(s, "T"), numbered("new", 3));
  assert.deepEqual(keysOf(s.queryMessageByKey("T", "k", 32)).sort(), bodies("new", 3));
  assert.equal(s.queryMessageByUniqKey("T", "old-0"), null);
  assert.deepEqual(readAll(s, "U"), numbered("u", 5));
  assert.deepEqual(s.deletedTopics(), { T: fresh[0] });
});

test("a consume-queue rebuild (no checkpoint, crash marker) skips a deleted topic's old records", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await put(s, "T", bodies("old", 30));
  await put(s, "U", bodies("u", 5));
  await s.deleteTopics(["T"]);
  await put(s, "T", bodies("new", 4));
  await s.close();
  for (const f of ["checkpoint", "checkpoint.bak"]) fs.rmSync(path.join(dir, f), { force: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");

  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(s.recovery.rebuilt, "no checkpoint");
  assert.deepEqual(readAll(s, "T"), numbered("new", 4), "not the 30 old messages, nor queue offsets after them");
  assert.deepEqual(readAll(s, "U"), numbered("u", 5));
  assert.deepEqual(keysOf(s.queryMessageByKey("T", "k", 64)).sort(), bodies("new", 4));
});

test("a crash after the deletion was written but before the queue files were removed drops them on open", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await put(s, "T", bodies("old", 12));
  await s.checkpoint();
  // the queue's files as they were before the deletion removed them
  const aside = path.join(dir, "aside");
  fs.cpSync(path.join(dir, "consumequeue", "T"), aside, { recursive: true });
  await s.deleteTopics(["T"]);
  await s.close();
  fs.cpSync(aside, path.join(dir, "consumequeue", "T"), { recursive: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");

  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.deepEqual(readAll(s, "T"), []);
  assert.equal(s.getMaxOffset("T", 0), 0);
  await put(s, "T", bodies("new", 2));
  assert.deepEqual(readAll(s, "T"), numbered("new", 2));
});

for (const unclean of [false, true])
  test(`a consume queue of a topic created again, lost after a checkpoint written since the deletion, is rebuilt from the log (${unclean ? "crash marker" : "clean shutdown"})`, async (t) => {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    let s = await MessageStore.open(opts(dir));
    await put(s, "T", bodies("old0", 10), "k", 0);
    await put(s, "T", bodies("old1", 10), "k", 1);
    await put(s, "U", bodies("u", 5));
    await s.deleteTopics(["T"]);
    await put(s, "T", bodies("new0", 3), "k", 0);
    await put(s, "T", bodies("new1", 4), "k", 1);
    await s.close();
    // the checkpoint close wrote names the queues of the topic created again
    const cp = JSON.parse(fs.readFileSync(path.join(dir, "checkpoint"), "utf8"));
    assert.deepEqual(cp.queues.T, { 0: { min: 0, max: 3 }, 1: { min: 0, max: 4 } });
    fs.rmSync(path.join(dir, "consumequeue", "T", "1"), { recursive: true });
    if (unclean) fs.writeFileSync(path.join(dir, "abort"), "1");

    s = await MessageStore.open(opts(dir));
    t.after(() => s.close());
    assert.equal(s.recovery.mode, unclean ? "abnormal" : "normal");
    assert.match(s.recovery.rebuilt ?? "", /consume queue T\/1 is missing/);
    assert.deepEqual(readAll(s, "T", 0), numbered("new0", 3));
    assert.deepEqual(readAll(s, "T", 1), numbered("new1", 4), "the lost queue is rebuilt, without the old messages");
    assert.equal(s.getMaxOffset("T", 1), 4);
    assert.equal(s.queryMessageByUniqKey("T", "old1-0"), null);
    assert.deepEqual(keysOf(s.queryMessageByKey("T", "k", 64)).sort(), [...bodies("new0", 3), ...bodies("new1", 4)].sort());
    assert.deepEqual(readAll(s, "U"), numbered("u", 5));
  });

for (const unclean of [false, true])
  test(`the marks of a checkpoint written before a deletion are not taken for the topic created again (${unclean ? "crash marker" : "clean shutdown"})`, async (t) => {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    let s = await MessageStore.open(opts(dir));
    await put(s, "T", bodies("old0", 10), "k", 0);
    await put(s, "T", bodies("old1", 5), "k", 1);
    await s.checkpoint();
    const before = fs.readFileSync(path.join(dir, "checkpoint"));
    await put(s, "T", bodies("late", 2), "k", 0);
    await s.deleteTopics(["T"]);
    await put(s, "T", bodies("new0", 3), "k", 0);
    await s.close();
    // the checkpoints written since the deletion are lost: the one before it is the last
    fs.writeFileSync(path.join(dir, "checkpoint"), before);
    fs.rmSync(path.join(dir, "checkpoint.bak"), { force: true });
    if (unclean) fs.writeFileSync(path.join(dir, "abort"), "1");

    s = await MessageStore.open(opts(dir));
    t.after(() => s.close());
    assert.equal(s.recovery.mode, unclean ? "abnormal" : "normal");
    // queue 1 is named by the checkpoint and gone with the deletion; queue 0 has fewer entries than it says
    assert.equal(s.recovery.rebuilt, null);
    assert.deepEqual(readAll(s, "T", 0), numbered("new0", 3));
    assert.deepEqual(readAll(s, "T", 1), []);
    assert.equal(s.getMaxOffset("T", 1), 0);
    assert.equal(s.queryMessageByUniqKey("T", "late-0"), null);
  });

test("kill -9 after a deletion and new puts to the topic: reopened, the topic holds only the new messages", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const child = spawn(process.execPath, ["--import", "tsx", fixture, dir], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise((r) => child.on("exit", r));
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  await waitFor(() => out.includes("deleted\n"), 30_000, "the fixture to delete the topic and put to it again");
  child.kill("SIGKILL");
  await exited;
  assert.ok(fs.existsSync(path.join(dir, "abort")), "the store was not closed");

  const s = await MessageStore.open(opts(dir, { flush: "sync" }));
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "abnormal");
  assert.deepEqual(readAll(s, "Gone"), numbered("new", 3));
  assert.deepEqual(keysOf(s.queryMessageByKey("Gone", "k", 64)).sort(), bodies("new", 3));
  assert.ok(readAll(s, "Kept").length >= 20);
});

test("the deletion is forgotten once the segments holding the old records expire", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  await put(s, "T", bodies("old", 5));
  await s.deleteTopics(["T"]);
  const at = s.deletedTopics().T!;
  assert.ok(at > 0);
  // fill past the first segment so that it can expire
  await put(s, "U", bodies(`u-${"x".repeat(2000)}`, 60));
  assert.ok(s.maxPhyOffset > 2 * SEG);
  assert.ok(s.deleteExpiredFiles(Date.now() + 1000 * 3600_000) > 0);
  assert.ok(s.minPhyOffset >= at);
  assert.deepEqual(s.deletedTopics(), {});
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, "deletedTopics.json"), "utf8")), { deletedTopics: {} });
});

for (const chunk of [4 * 1024 * 1024, 300])
  test(`a deletion at a master's offset makes a replica drop what it dispatched of the old topic and keep what came after (re-read in chunks of ${chunk} bytes)`, async (t) => {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    const s = await MessageStore.open(opts(dir));
    t.after(() => s.close());
    // 300 bytes: a few records per chunk, and the long "new" record below is longer than one
    s.redispatchChunkBytes = chunk;
    await put(s, "T", bodies("old", 6));
    const at = s.maxPhyOffset;
    await put(s, "U", bodies("u", 2));
    // the topic was created again on the master and its first messages already copied here
    const news = [...bodies("new", 3), "L".repeat(500)];
    const fresh = await put(s, "T", news);
    await put(s, "U", bodies("v", 2));
    assert.deepEqual(readAll(s, "T"), numbered("old", 6).concat(news.map((b, i) => `${6 + i}:${b}`)));
    await s.deleteTopics(["T"], at);
    assert.deepEqual(s.deletedTopics(), { T: at });
    assert.ok(fresh[0]! > at);
    // the old records are skipped; the new ones keep the queue offsets their records carry
    assert.deepEqual(
      readAll(s, "T").map((x) => x.split(":")[1]),
      news,
    );
    assert.deepEqual(readAll(s, "U"), numbered("u", 2).concat(bodies("v", 2).map((b, i) => `${2 + i}:${b}`)));
  });

for (const flush of ["async", "sync"] as const)
  test(`the commit log is flushed up to a deletion's offset before the deletion is written (${flush} flush)`, async (t) => {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    const s = await MessageStore.open(opts(dir, { flush, flushIntervalMs: 60_000, flushLeastBytes: 1 << 30 }));
    t.after(() => s.close());
    await put(s, "T", bodies("old", 5));
    // in sync mode: appended, their flush not yet done
    const pending = put(s, "T", bodies("late", 1));
    const write = JsonFile.write;
    const flushedWhenWritten: number[] = [];
    JsonFile.write = (file, value) => {
      if (path.basename(file) === "deletedTopics.json") flushedWhenWritten.push(s.commitLog.flushedOffset);
      write(file, value);
    };
    t.after(() => {
      JsonFile.write = write;
    });
    await s.deleteTopics(["T"]);
    await pending;
    const at = s.deletedTopics().T!;
    assert.equal(at, s.maxPhyOffset);
    assert.equal(flushedWhenWritten.length, 1);
    assert.ok(flushedWhenWritten[0]! >= at, `flushed to ${flushedWhenWritten[0]} when the deletion at ${at} was written`);
  });

test("a deletion whose commit-log flush fails is not recorded: the topic is still served", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const flushErrors: unknown[] = [];
  const s = await MessageStore.open(
    opts(dir, { flushIntervalMs: 60_000, flushLeastBytes: 1 << 30, onFlushError: (f) => flushErrors.push(f) }),
  );
  t.after(() => s.close());
  await put(s, "T", bodies("old", 3));
  const seg = s.commitLog.segments[0]!;
  const syncNow = seg.syncNow;
  seg.syncNow = () => {
    throw new Error("EIO: simulated");
  };
  await assert.rejects(s.deleteTopics(["T"]), /EIO: simulated/);
  seg.syncNow = syncNow;
  assert.equal(flushErrors.length, 1);
  assert.deepEqual(s.deletedTopics(), {});
  assert.ok(!fs.existsSync(path.join(dir, "deletedTopics.json")));
  assert.deepEqual(readAll(s, "T"), numbered("old", 3));
});

test("a deletion whose deletedTopics.json cannot be written is not made: the topics are still served, in memory and after a reopen", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  // A was deleted before and created again: a failed deletion must not move its offset up either
  await put(s, "A", bodies("a-old", 2));
  await s.deleteTopics(["A"]);
  const aAt = s.deletedTopics().A!;
  await put(s, "A", bodies("a", 2));
  const old = await put(s, "T", bodies("old", 3));
  const file = path.join(dir, "deletedTopics.json");
  const onDisk = fs.readFileSync(file, "utf8");
  // a non-empty directory in the file's place: the rename over it fails, also as root
  fs.rmSync(file);
  fs.mkdirSync(path.join(file, "obstacle"), { recursive: true });

  await assert.rejects(
    s.deleteTopics(["A", "T"]),
    (e: unknown) =>
      e instanceof MQError &&
      e.code === "SYSTEM_ERROR" &&
      e.message.includes("deletedTopics.json") &&
      /EISDIR|ENOTEMPTY|EEXIST/.test(e.message),
  );
  assert.deepEqual(s.deletedTopics(), { A: aAt }, "the table in memory is as before");
  assert.deepEqual(readAll(s, "T"), numbered("old", 3));
  assert.deepEqual(readAll(s, "A"), numbered("a", 2));
  assert.deepEqual(keysOf(s.queryMessageByKey("T", "k", 32)).sort(), bodies("old", 3));
  assert.ok(s.queryMessageByUniqKey("T", "old-1"));
  assert.ok(s.viewMessage(old[0]!));
  assert.ok(fs.existsSync(path.join(dir, "consumequeue", "T")), "the topic's consume-queue files are kept");
  // puts to the topics are dispatched as before
  await put(s, "T", bodies("more", 1));
  assert.deepEqual(readAll(s, "T"), [...numbered("old", 3), "3:more-0"]);

  // with the obstacle gone the deletion is made
  fs.rmSync(file, { recursive: true });
  fs.writeFileSync(file, onDisk);
  assert.equal(await s.deleteTopics(["T"]), 1);
  assert.equal(s.getMessage("g", "T", 0, 0, 32).status, "NO_MATCHED_LOGIC_QUEUE");
  assert.equal(s.viewMessage(old[0]!), null);
  const at = s.deletedTopics().T!;
  assert.deepEqual(s.deletedTopics(), { A: aAt, T: at });
  assert.deepEqual(JSON.parse(fs.readFileSync(file, "utf8")), { deletedTopics: { A: aAt, T: at } });
  await s.close();

  s = await MessageStore.open(opts(dir));
  assert.deepEqual(s.deletedTopics(), { A: aAt, T: at });
  assert.deepEqual(readAll(s, "T"), []);
  assert.deepEqual(readAll(s, "A"), numbered("a", 2));
});

test("a first deletion whose deletedTopics.json cannot be written is not made after a reopen either", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  await put(s, "T", bodies("old", 3));
  const file = path.join(dir, "deletedTopics.json");
  fs.mkdirSync(path.join(file, "obstacle"), { recursive: true });
  await assert.rejects(s.deleteTopics(["T"]), (e: unknown) => e instanceof MQError && e.code === "SYSTEM_ERROR");
  fs.rmSync(file, { recursive: true });
  assert.ok(!fs.existsSync(`${file}.tmp`), "the failed write leaves no temp file that a reopen would read instead");
  await s.close();

  s = await MessageStore.open(opts(dir));
  assert.deepEqual(s.deletedTopics(), {});
  assert.deepEqual(readAll(s, "T"), numbered("old", 3));
});

/** Zeroes the commit log's bytes in [from, to) (one segment): what a power loss leaves of bytes written but not yet flushed. */
function loseUnflushed(dir: string, from: number, to: number): void {
  const seg = Math.floor(from / SEG) * SEG;
  assert.ok(to <= seg + SEG, "one segment");
  const fd = fs.openSync(path.join(dir, "commitlog", String(seg).padStart(20, "0")), "r+");
  try {
    fs.writeSync(fd, Buffer.alloc(to - from), 0, to - from, from - seg);
  } finally {
    fs.closeSync(fd);
  }
}

test("a power loss that keeps a deletion but not the unflushed log below its offset: the topic's new messages are served, also after a reopen and a rebuild", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir, { flushIntervalMs: 60_000, flushLeastBytes: 1 << 30 }));
  await put(s, "T", bodies("old", 5));
  await put(s, "U", bodies("u", 3));
  await s.checkpoint();
  const flushed = s.maxPhyOffset;
  // the last checkpoint the power loss leaves: the one the deletion writes is lost with the log's tail
  const cp = fs.readFileSync(path.join(dir, "checkpoint"));
  await put(s, "T", bodies("late", 5));
  await s.deleteTopics(["T"]);
  const at = s.deletedTopics().T!;
  assert.ok(at > flushed);
  await s.close();
  loseUnflushed(dir, flushed, at);
  fs.writeFileSync(path.join(dir, "checkpoint"), cp);
  fs.rmSync(path.join(dir, "checkpoint.bak"), { force: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");

  s = await MessageStore.open(opts(dir));
  assert.equal(s.recovery.mode, "abnormal");
  assert.equal(s.maxPhyOffset, flushed, "the unflushed tail is cut");
  assert.deepEqual(readAll(s, "T"), []);
  const fresh = await put(s, "T", bodies("new", 4));
  assert.ok(fresh[0]! < at, "the new records are appended below the deletion's offset");
  assert.deepEqual(s.deletedTopics(), { T: flushed }, "the deletion is lowered to the log's end");
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, "deletedTopics.json"), "utf8")), { deletedTopics: { T: flushed } });
  assert.deepEqual(readAll(s, "T"), numbered("new", 4), "the new messages are served");
  assert.deepEqual(keysOf(s.queryMessageByKey("T", "k", 64)).sort(), bodies("new", 4));
  assert.ok(s.viewMessage(fresh[0]!));
  assert.equal(s.queryMessageByUniqKey("T", "old-0"), null, "the old ones are still not");
  await s.close();

  s = await MessageStore.open(opts(dir));
  assert.deepEqual(readAll(s, "T"), numbered("new", 4), "after a clean reopen");
  await s.close();
  for (const f of ["checkpoint", "checkpoint.bak"]) fs.rmSync(path.join(dir, f), { force: true });
  fs.writeFileSync(path.join(dir, "abort"), "1");
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(s.recovery.rebuilt, "no checkpoint");
  assert.deepEqual(readAll(s, "T"), numbered("new", 4), "after a rebuild from the log");
  assert.deepEqual(readAll(s, "U"), numbered("u", 3));
});

for (const unclean of [false, true])
  test(`a replica keeps a deletion at its master's offset past its own end across a restart (${unclean ? "crash marker" : "clean shutdown"}); appending records of its own, it lowers it to its end`, async (t) => {
    const { dir, cleanup } = await tempDir();
    t.after(cleanup);
    const master = await MessageStore.open(opts(path.join(dir, "m")));
    t.after(() => master.close());
    let slave = await MessageStore.open(opts(path.join(dir, "s")));
    const copyAll = async () => {
      while (slave.maxPhyOffset < master.maxPhyOffset) await slave.appendReplica(master.readCommitLog(slave.maxPhyOffset, 200));
    };
    await put(master, "T", bodies("old", 2));
    await copyAll();
    await put(master, "T", bodies("old", 6).slice(2));
    await put(master, "U", bodies("u", 2));
    await master.deleteTopics(["T"]);
    const at = master.deletedTopics().T!;
    await put(master, "T", bodies("new", 3));
    // the slave learns of the deletion before it has copied the log up to its offset
    await slave.deleteTopics(["T"], at);
    assert.ok(slave.maxPhyOffset < at);
    assert.deepEqual(slave.deletedTopics(), { T: at });
    await slave.close();
    if (unclean) fs.writeFileSync(path.join(dir, "s", "abort"), "1");

    slave = await MessageStore.open(opts(path.join(dir, "s")));
    t.after(() => slave.close());
    assert.deepEqual(slave.deletedTopics(), { T: at }, "not lowered by recovery");
    await copyAll();
    assert.deepEqual(readAll(slave, "T"), numbered("new", 3), "the old records copied after the restart are skipped");
    assert.deepEqual(readAll(slave, "U"), numbered("u", 2));
    assert.equal(slave.queryMessageByUniqKey("T", "old-4"), null);

    // a slave promoted before it copied up to the deletion's offset: its own records are new
    await slave.deleteTopics(["V"], master.maxPhyOffset + 1000);
    assert.deepEqual(slave.deletedTopics(), { T: at, V: master.maxPhyOffset + 1000 });
    const end = slave.maxPhyOffset;
    await put(slave, "V", bodies("v", 2));
    assert.deepEqual(slave.deletedTopics(), { T: at, V: end });
    assert.deepEqual(readAll(slave, "V"), numbered("v", 2));
  });

test("deletedTopics.json without its deletedTopics object, or with an offset that is not an integer >= 0, refuses the open: the deleted topic's old messages are not served again", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  await put(s, "T", bodies("old", 3));
  await s.deleteTopics(["T"]);
  await s.close();
  const file = path.join(dir, "deletedTopics.json");
  const good = fs.readFileSync(file, "utf8");
  const at = (JSON.parse(good) as { deletedTopics: { T: number } }).deletedTopics.T;
  // without a checkpoint the consume queues are rebuilt from the log, where the old records still are
  for (const f of ["checkpoint", "checkpoint.bak"]) fs.rmSync(path.join(dir, f), { force: true });
  const damaged = [
    "[]",
    "{}",
    "42",
    '"NaN"',
    JSON.stringify({ deletedTopics: [] }),
    JSON.stringify({ deletedTopics: { T: String(at) } }),
    JSON.stringify({ deletedTopics: { T: -1 } }),
    JSON.stringify({ deletedTopics: { T: 1.5 } }),
    JSON.stringify({ deletedTopics: { T: 1e300 } }),
    JSON.stringify({ deletedTopics: { T: null } }),
  ];
  for (const text of damaged) {
    fs.writeFileSync(file, text);
    fs.rmSync(`${file}.bak`, { force: true });
    const opened = MessageStore.open(opts(dir)).then(async (o) => {
      const served = o.getMaxOffset("T", 0);
      await o.close();
      return served;
    });
    await assert.rejects(
      opened,
      (e: unknown) => e instanceof MQError && e.code === "MALFORMED" && e.message.includes(file) && /deletedTopics/.test(e.message),
      `${text}: refused, not opened with T's ${3} old messages served again`,
    );
    assert.equal(fs.readFileSync(file, "utf8"), text, `${text}: left as it is`);
  }
  fs.writeFileSync(file, good);
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(s.recovery.rebuilt, "no checkpoint");
  assert.equal(s.getMaxOffset("T", 0), 0, "restored, the deletion holds");
});
