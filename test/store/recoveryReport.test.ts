import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { decodeRecords, encodeMessageBatch } from "../../transport/messageRecord.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const serverProcess = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "e2e", "fixtures", "serverProcess.ts");

const opts = (dir: string): MessageStoreOptions => ({
  dir,
  // what a broker given segmentBytes 64 KiB opens (its consume queues have the default size)
  commitLogSegmentBytes: 64 * 1024,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  flush: "async",
  onDamage: () => {},
});

function bodies(s: MessageStore, queueId: number): string[] {
  const out: string[] = [];
  let off = 0;
  for (;;) {
    const g = s.getMessage("g", "R", queueId, off, 32);
    if (g.status !== "FOUND") return out;
    out.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString()));
    off = g.nextBeginOffset;
  }
}

/** Makes the store's checkpoint unreadable, and its backup with it. */
function damageCheckpoint(dir: string): void {
  fs.writeFileSync(path.join(dir, "checkpoint"), '{"physicMsgTimestamp": 17');
  fs.rmSync(path.join(dir, "checkpoint.bak"), { force: true });
}

test("a checkpoint that cannot be read is named as the reason for the rebuild, not taken for a missing one; every message stays readable", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  for (let i = 0; i < 20; i++)
    await s.putMessage({ topic: "R", queueId: 0, body: Buffer.from(`m${i}`), bornTimestamp: 1, bornHost: "1.1.1.1:1" });
  await s.close();
  damageCheckpoint(dir);
  s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.match(s.recovery.rebuilt ?? "", /checkpoint .*cannot be read/);
  assert.match(s.recovery.rebuilt ?? "", new RegExp(path.join(dir, "checkpoint").replaceAll("/", "\\/")));
  assert.deepEqual(
    bodies(s, 0),
    Array.from({ length: 20 }, (_, i) => `m${i}`),
  );
  const body = encodeMessageBatch([{ body: Buffer.from("after") }]);
  assert.equal((await s.putMessages({ topic: "R", queueId: 0, body, bornTimestamp: 1, bornHost: "1.1.1.1:1" })).firstQueueOffset, 20);
});

/** A broker in its own process; its JSON log lines are collected. */
function brokerChild(storeDir: string) {
  const options = { brokerName: "rec", nameservers: [], storeDir, listen: EPHEMERAL, segmentBytes: 64 * 1024 };
  const child = spawn(process.execPath, ["--import", "tsx", serverProcess, JSON.stringify({ kind: "broker", options })], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  const lines: Array<Record<string, unknown>> = [];
  let buf = "";
  child.stdout.on("data", (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        /* not a log line */
      }
    }
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  return { lines, stop, ready: () => lines.some((l) => l.ready === true) };
}

test("a broker whose store rebuilt its consume queues and index warns with the reason (a damaged checkpoint), even after a clean shutdown", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const first = brokerChild(dir);
  t.after(first.stop);
  await waitFor(first.ready, 30_000, "the broker to start");
  await first.stop();
  damageCheckpoint(dir);

  const second = brokerChild(dir);
  t.after(second.stop);
  await waitFor(second.ready, 30_000, "the broker to start again");
  const rec = second.lines.find((l) => l.msg === "store recovered");
  assert.ok(rec, `a "store recovered" line at warn: ${JSON.stringify(second.lines)}`);
  assert.equal(rec.level, 40);
  assert.equal(rec.mode, "normal");
  assert.match(String(rec.rebuilt), /checkpoint .*cannot be read/);
});

test("a commit-log file missing between others is reported by the open with its range (its messages are lost), and by the broker at warn", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const SEG = 64 * 1024;
  let s = await MessageStore.open(opts(dir));
  const big = Buffer.alloc(8000, "x");
  for (let i = 0; i < 40; i++) await s.putMessage({ topic: "R", queueId: 0, body: big, bornTimestamp: 1, bornHost: "1.1.1.1:1" });
  await s.close();
  const logDir = path.join(dir, "commitlog");
  assert.ok(fs.readdirSync(logDir).length >= 4, "several segments");
  fs.rmSync(path.join(logDir, String(SEG).padStart(20, "0")));
  fs.rmSync(path.join(logDir, String(2 * SEG).padStart(20, "0")));
  // reported at every open, a clean one after it included: nothing fills the gap
  for (let open = 0; open < 2; open++) {
    s = await MessageStore.open(opts(dir));
    assert.deepEqual(s.recovery.missingLog, [{ from: SEG, to: 3 * SEG }]);
    await s.close();
  }

  const b = brokerChild(dir);
  t.after(b.stop);
  await waitFor(b.ready, 30_000, "the broker to start");
  const rec = b.lines.find((l) => l.msg === "store recovered");
  assert.ok(rec, `a "store recovered" line at warn: ${JSON.stringify(b.lines)}`);
  assert.equal(rec.level, 40);
  assert.deepEqual(rec.missingLog, [{ from: SEG, to: 3 * SEG }]);
});

test("a checkpoint whose queue marks name a queue id that is no integer, or a topic that is no topic name, is damaged: no stray queue or directory is made, every message stays readable", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let s = await MessageStore.open(opts(dir));
  for (let i = 0; i < 5; i++)
    await s.putMessage({ topic: "R", queueId: 1, body: Buffer.from(`m${i}`), bornTimestamp: 1, bornHost: "1.1.1.1:1" });
  await s.close();
  const file = path.join(dir, "checkpoint");
  const good = JSON.parse(fs.readFileSync(file, "utf8"));
  for (const queues of [
    { R: { abc: { min: 0, max: 3 } } },
    { "../escaped": { 0: { min: 0, max: 3 } } },
    { R: { "01": { min: 0, max: 3 } } },
  ]) {
    fs.writeFileSync(file, JSON.stringify({ ...good, queues }));
    fs.rmSync(`${file}.bak`, { force: true });
    s = await MessageStore.open(opts(dir));
    try {
      assert.match(s.recovery.rebuilt ?? "", /checkpoint .*cannot be read \(a queue mark/, JSON.stringify(queues));
      assert.deepEqual(bodies(s, 1), ["m0", "m1", "m2", "m3", "m4"]);
    } finally {
      await s.close();
    }
    assert.deepEqual(fs.readdirSync(path.join(dir, "consumequeue")), ["R"], "only the topic's own directory");
    assert.deepEqual(fs.readdirSync(path.join(dir, "consumequeue", "R")), ["1"], "only its queue's directory");
    assert.equal(fs.existsSync(path.join(dir, "escaped")), false);
  }
});
