import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { MessageStore } from "../../store/index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { tempDir, waitFor } from "../helpers.ts";

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "appender.ts");

async function crashRun(flush: "sync" | "async") {
  const { dir, cleanup } = await tempDir();
  const child = spawn(process.execPath, ["--import", "tsx", fixture, dir, flush], { stdio: ["ignore", "pipe", "inherit"] });
  const acked = new Map<number, number>(); // queueId -> highest acknowledged end offset
  let lines = 0;
  let buf = "";
  child.stdout.on("data", (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const [q, first, count] = line.split(" ").map(Number) as [number, number, number];
      if (line !== "ready") {
        acked.set(q, Math.max(acked.get(q) ?? 0, first + count));
        lines++;
      }
    }
  });
  const exited = new Promise((r) => child.on("exit", r));
  await waitFor(
    () => lines > 150 && fs.existsSync(path.join(dir, "checkpoint")),
    30_000,
    "the appender to acknowledge puts and write a checkpoint",
  );
  child.kill("SIGKILL");
  await exited;
  const s = await MessageStore.open({ dir, flush, commitLogSegmentBytes: 64 * 1024, consumeQueueEntries: 100, cleanIntervalMs: 0 });
  return { s, acked, cleanup };
}

function readQueue(s: MessageStore, q: number): string[] {
  const out: string[] = [];
  let off = 0;
  for (;;) {
    const g = s.getMessage("g", "Crash", q, off, 32);
    if (g.status !== "FOUND") return out;
    for (const m of decodeRecords(Buffer.concat(g.buffers), "b")) {
      assert.equal(m.queueOffset, out.length, "queue offsets in order, no gaps");
      out.push(m.body.toString());
    }
    off = g.nextBeginOffset;
  }
}

for (const flush of ["sync", "async"] as const) {
  test(`kill -9 while appending (${flush} flush): ${flush === "sync" ? "every acknowledged put survives" : "the log is a clean prefix"}`, async (t) => {
    const { s, acked, cleanup } = await crashRun(flush);
    t.after(cleanup);
    t.after(() => s.close());
    assert.equal(s.recovery.mode, "abnormal");
    assert.equal(s.recovery.rebuilt, null, "consume queues kept, the log re-dispatched from the checkpoint");
    assert.equal(s.recovery.log.damagedRegions, 0);
    for (const q of [0, 1, 2]) {
      const bodies = readQueue(s, q);
      assert.equal(bodies.length, s.getMaxOffset("Crash", q), "every queue entry readable, no holes");
      if (flush === "sync")
        assert.ok(bodies.length >= (acked.get(q) ?? 0), `queue ${q}: ${bodies.length} readable < ${acked.get(q)} acknowledged`);
      // clean prefix: batch n's messages appear complete and in order
      let expectN = 0;
      for (let i = 0; i < bodies.length; ) {
        const size = 1 + (expectN % 5);
        for (let j = 0; j < size; j++) {
          assert.ok(i + j < bodies.length || flush === "async", "sync batches are whole");
          if (i + j >= bodies.length) break;
          assert.ok(bodies[i + j]!.startsWith(`msg-${expectN}-${j}-`), `queue ${q} entry ${i + j}: ${bodies[i + j]!.slice(0, 20)}`);
        }
        i += size;
        expectN++;
      }
    }
    const r = await s
      .putMessages({ topic: "Crash", queueId: 0, bornTimestamp: 1, bornHost: "1.1.1.1:1", body: Buffer.alloc(0) })
      .catch((e) => e);
    assert.ok(r instanceof Error, "an empty batch is refused");
  });
}
