/**
 * Store workload: append throughput (async flush) against plain `fs.writeSync` of the same bytes,
 * group-commit throughput (sync flush, 64 concurrent putters) against one fdatasync per record,
 * and getMessage batch reads.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageStore } from "../store/index.ts";
import { createUniqId, encodeMessageBatch, encodeProperties } from "../transport/messageRecord.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

const BODY = 1024;
const BATCH = 32;
/** one-message batches per group, and the queues they go to, for the wide group-commit figure */
const WIDE_GROUP = 4096;
const WIDE_QUEUES = 1024;

function makeBatch(n: number): Buffer {
  const body = Buffer.alloc(BODY, 97);
  return encodeMessageBatch(
    Array.from({ length: n }, (_, i) => ({
      body,
      properties: encodeProperties({ TAGS: `Tag${i % 4}`, KEYS: `k${i}`, UNIQ_KEY: createUniqId() }),
    })),
  );
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "actormq-bench-store-"));
  const log = (s: string) => opts.verbose && console.log(s);
  const appendMsgs = opts.quick ? 50_000 : 300_000;
  const syncSeconds = opts.quick ? 1 : 3;
  try {
    // async append
    const batch = makeBatch(BATCH);
    const s1 = await MessageStore.open({
      dir: path.join(root, "a"),
      flush: "async",
      commitLogSegmentBytes: 256 * 1024 * 1024,
      cleanIntervalMs: 0,
    });
    let t0 = performance.now();
    for (let i = 0; i < appendMsgs / BATCH; i++) {
      await s1.putMessages({ topic: "BenchTopic", queueId: i % 4, bornTimestamp: Date.now(), bornHost: "127.0.0.1:1", body: batch });
    }
    const appendSec = (performance.now() - t0) / 1000;
    const appendAsyncMsgsPerSec = appendMsgs / appendSec;
    const recordBytes = s1.maxPhyOffset / appendMsgs;
    log(`append async: ${appendAsyncMsgsPerSec.toFixed(0)} msg/s (${recordBytes.toFixed(0)} B/record)`);

    // getMessage batches of 32
    let batches = 0;
    t0 = performance.now();
    const readMs = opts.quick ? 500 : 2000;
    outer: for (;;) {
      for (let q = 0; q < 4; q++) {
        let off = 0;
        for (;;) {
          const g = s1.getMessage("g", "BenchTopic", q, off, 32);
          if (g.status !== "FOUND") break;
          batches++;
          off = g.nextBeginOffset;
          if ((batches & 63) === 0 && performance.now() - t0 > readMs) break outer;
        }
      }
    }
    const getMessageBatchesPerSec = batches / ((performance.now() - t0) / 1000);
    log(`getMessage: ${getMessageBatchesPerSec.toFixed(0)} batches/s`);

    // group commit across many queues: what a broker appends in one tick when many producers each
    // sent one message to a different queue (one untimed round opens the consume-queue files)
    const wideBatch = makeBatch(1);
    const wide = Array.from({ length: WIDE_GROUP }, (_, i) => ({
      topic: "BenchWide",
      queueId: i % WIDE_QUEUES,
      bornTimestamp: Date.now(),
      bornHost: "127.0.0.1:1",
      body: wideBatch,
    }));
    await Promise.all(s1.putMessagesGroup(wide));
    const wideRounds = opts.quick ? 5 : 20;
    t0 = performance.now();
    for (let r = 0; r < wideRounds; r++) await Promise.all(s1.putMessagesGroup(wide));
    const wideGroupMsgsPerSec = (wideRounds * WIDE_GROUP) / ((performance.now() - t0) / 1000);
    log(`group of ${WIDE_GROUP} over ${WIDE_QUEUES} queues: ${wideGroupMsgsPerSec.toFixed(0)} msg/s`);
    await s1.close();

    // raw baseline: the same bytes in 4 MiB writeSync calls
    const total = Math.round(recordBytes * appendMsgs);
    const chunk = Buffer.alloc(4 * 1024 * 1024, 1);
    const fd = fs.openSync(path.join(root, "raw"), "w");
    t0 = performance.now();
    for (let done = 0; done < total; done += chunk.length) fs.writeSync(fd, chunk, 0, Math.min(chunk.length, total - done));
    const rawSec = (performance.now() - t0) / 1000;
    fs.closeSync(fd);
    const rawWriteMsgsPerSec = appendMsgs / rawSec;
    log(`raw writeSync: ${rawWriteMsgsPerSec.toFixed(0)} msg/s`);

    // sync flush, 64 concurrent putters of one message each
    const one = makeBatch(1);
    const s2 = await MessageStore.open({
      dir: path.join(root, "s"),
      flush: "sync",
      commitLogSegmentBytes: 256 * 1024 * 1024,
      cleanIntervalMs: 0,
    });
    let synced = 0;
    const until = performance.now() + syncSeconds * 1000;
    t0 = performance.now();
    await Promise.all(
      Array.from({ length: 64 }, async (_, w) => {
        while (performance.now() < until) {
          await s2.putMessages({ topic: "BenchSync", queueId: w % 4, bornTimestamp: Date.now(), bornHost: "127.0.0.1:1", body: one });
          synced++;
        }
      }),
    );
    const syncGroupCommitMsgsPerSec = synced / ((performance.now() - t0) / 1000);
    await s2.close();
    log(`sync group commit: ${syncGroupCommitMsgsPerSec.toFixed(0)} msg/s`);

    // baseline: one write + fdatasync per record
    const rec = Buffer.alloc(Math.round(recordBytes), 2);
    const fd2 = fs.openSync(path.join(root, "fsync-each"), "w");
    let each = 0;
    const until2 = performance.now() + syncSeconds * 1000;
    t0 = performance.now();
    let pos = 0;
    while (performance.now() < until2) {
      fs.writeSync(fd2, rec, 0, rec.length, pos);
      pos += rec.length;
      fs.fdatasyncSync(fd2);
      each++;
    }
    const fsyncPerRecordMsgsPerSec = each / ((performance.now() - t0) / 1000);
    fs.closeSync(fd2);
    log(`fsync per record: ${fsyncPerRecordMsgsPerSec.toFixed(0)} msg/s`);

    return {
      workload: "store",
      metrics: { appendAsyncMsgsPerSec, syncGroupCommitMsgsPerSec, getMessageBatchesPerSec, wideGroupMsgsPerSec },
      baseline: { rawWriteMsgsPerSec, fsyncPerRecordMsgsPerSec },
      ratio: {
        appendVsRaw: appendAsyncMsgsPerSec / rawWriteMsgsPerSec,
        groupCommitVsFsyncEach: syncGroupCommitMsgsPerSec / fsyncPerRecordMsgsPerSec,
      },
      notes: [
        `1 KiB bodies, ${BATCH}-message batches for async append, ${appendMsgs} messages; sync: 64 putters x 1 message for ${syncSeconds} s`,
        `wide group: ${WIDE_GROUP} one-message batches over ${WIDE_QUEUES} queues per putMessagesGroup, ${wideRounds} groups`,
      ],
    };
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}
