import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { MessageStore } from "../../store/index.ts";
import { decodeRecords, encodeMessageBatch } from "../../transport/messageRecord.ts";
import { tempDir } from "../helpers.ts";

const opts = (dir: string) => ({
  dir,
  commitLogSegmentBytes: 4096,
  consumeQueueEntries: 8,
  cleanIntervalMs: 0,
  flush: "async" as const,
  onDamage: () => {},
});

async function fill(dir: string): Promise<Map<string, number>> {
  const s = await MessageStore.open(opts(dir));
  const where = new Map<string, number>(); // body -> commit-log offset
  // enough batches for several segments, so that a clean reopen checks only the last ones
  for (let i = 0; i < 60; i++) {
    const bodies = [`q${i % 2}-${i}-a-${"z".repeat((i % 30) * 5)}`, `q${i % 2}-${i}-b`];
    const r = await s.putMessages({
      topic: "P",
      queueId: i % 2,
      bornTimestamp: 1,
      bornHost: "1.1.1.1:1",
      body: encodeMessageBatch(bodies.map((b) => ({ body: Buffer.from(b) }))),
    });
    let off = r.commitLogOffset;
    for (const b of bodies) {
      where.set(b, off);
      off += 88 + b.length + 1 + 1 + 2 + 20;
    }
  }
  await s.close();
  return where;
}

function readAll(s: MessageStore): string[] {
  const out: string[] = [];
  for (const q of [0, 1]) {
    let off = s.getMinOffset("P", q);
    for (let guard = 0; guard < 1000; guard++) {
      const g = s.getMessage("g", "P", q, off, 32);
      if (g.status !== "FOUND" && g.status !== "NO_MATCHED_MESSAGE") break;
      out.push(...decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString()));
      off = g.nextBeginOffset;
    }
  }
  return out;
}

test("single-bit flips anywhere in the log or consume queues, after a clean or a crashed shutdown: only the damaged record is lost", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const pristine = path.join(base, "pristine");
  const where = await fill(pristine);
  const files = [
    ...fs.readdirSync(path.join(pristine, "commitlog")).map((f) => path.join("commitlog", f)),
    ...["0", "1"].flatMap((q) =>
      fs.readdirSync(path.join(pristine, "consumequeue", "P", q)).map((f) => path.join("consumequeue", "P", q, f)),
    ),
  ];
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 0, max: files.length - 1 }),
      fc.nat(),
      fc.integer({ min: 0, max: 7 }),
      fc.boolean(),
      async (fi, pos, bit, crashed) => {
        const dir = path.join(base, `r${run++}`);
        fs.cpSync(pristine, dir, { recursive: true });
        const file = path.join(dir, files[fi]!);
        const data = fs.readFileSync(file);
        let last = data.length - 1;
        while (last > 0 && data[last] === 0) last--;
        const used = files[fi]!.startsWith("commitlog") ? last + 1 : data.length;
        const at = pos % used;
        data[at]! ^= 1 << bit;
        fs.writeFileSync(file, data);
        if (crashed) fs.writeFileSync(path.join(dir, "abort"), "1");
        const s = await MessageStore.open(opts(dir));
        try {
          assert.equal(s.recovery.mode, crashed ? "abnormal" : "normal");
          const got = readAll(s);
          const lost = [...where.keys()].filter((b) => !got.includes(b));
          assert.ok(
            got.every((b) => where.has(b)),
            "nothing served that was not written",
          );
          if (files[fi]!.startsWith("commitlog")) {
            const flippedAt = Number(path.basename(file)) + at;
            for (const b of lost) {
              const o = where.get(b)!;
              assert.ok(flippedAt >= o && flippedAt < o + 88 + b.length + 24, `lost ${b} although the flip at ${flippedAt} is outside it`);
            }
            assert.ok(lost.length <= 1);
          } else {
            assert.deepEqual(lost, [], "consume queues are rebuilt from the log");
          }
        } finally {
          await s.close();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      },
    ),
    { numRuns: 60 },
  );
});

test("random truncation of the last log segment: a clean prefix survives", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  const pristine = path.join(base, "pristine");
  const where = await fill(pristine);
  const segs = fs.readdirSync(path.join(pristine, "commitlog")).sort();
  const lastName = segs[segs.length - 1]!;
  const lastStart = Number(lastName);
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 0, max: 4096 }), async (len) => {
      const dir = path.join(base, `t${run++}`);
      fs.cpSync(pristine, dir, { recursive: true });
      fs.truncateSync(path.join(dir, "commitlog", lastName), len);
      const s = await MessageStore.open(opts(dir));
      try {
        const got = new Set(readAll(s));
        for (const [b, o] of where) {
          const end = o + 88 + b.length + 24;
          if (end <= lastStart + len) assert.ok(got.has(b), `${b} ended before the cut but was lost`);
          else assert.ok(!got.has(b), `${b} was cut but served`);
        }
        assert.equal(s.maxPhyOffset <= lastStart + len || len === 4096, true);
      } finally {
        await s.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }),
    { numRuns: 30 },
  );
});
