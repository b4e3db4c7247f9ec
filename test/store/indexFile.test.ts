import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { INDEX_ENTRY_BYTES, INDEX_HEADER_BYTES, IndexService } from "../../store/indexFile.ts";
import { segmentIo } from "../../store/segment.ts";
import { readLong } from "../../transport/messageRecord.ts";
import { tempDir } from "../helpers.ts";
import { bytesRead } from "./segmentReads.ts";

const PER_FILE = 100; // entry 0 of each file is the null entry: 99 per file
const SLOTS = 16;
const T0 = 1_700_000_000_000;

interface Added {
  hash: number;
  phy: number;
  ts: number;
}

/** RocketMQ's key hash: |hash|, MIN_VALUE as 0 (h and -h share entries; hits are checked against records). */
const keyHash = (h: number): number => (h === -0x80000000 ? 0 : Math.abs(h));

/** What a lookup must return: the matching entries, newest first. */
function expected(all: Added[], hash: number, begin = 0, end = Number.MAX_SAFE_INTEGER): number[] {
  return all
    .filter((a) => keyHash(a.hash) === keyHash(hash) && a.ts >= begin && a.ts <= end)
    .map((a) => a.phy)
    .reverse();
}

function fill(idx: IndexService, n: number, from = 0, keys = 7): Added[] {
  const out: Added[] = [];
  for (let i = from; i < from + n; i++) {
    // hashes of both signs and Integer.MIN_VALUE, several keys per slot
    const hash = i % keys === 0 ? -0x80000000 : (i % keys) * (i % 2 ? 1 : -1) * 1_000_003;
    const a = { hash, phy: i * 100, ts: T0 + i * 1000 };
    idx.add(a.hash, a.phy, a.ts);
    out.push(a);
  }
  idx.writePending();
  return out;
}

test("index: lookups across files, newest first; reload reads only the last file; RocketMQ's file layout", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  let idx = new IndexService(dir, PER_FILE, SLOTS);
  const all = fill(idx, 450);
  assert.equal(idx.entries, 450);
  const hashes = [...new Set(all.map((a) => a.hash))];
  for (const h of hashes) assert.deepEqual(idx.lookup(h, 0, Number.MAX_SAFE_INTEGER, 1000), expected(all, h), `hash ${h}`);
  // a time range (to the second) and a limit
  const h = hashes[1]!;
  assert.deepEqual(idx.lookup(h, T0 + 100_000, T0 + 200_000, 1000), expected(all, h, T0 + 100_000, T0 + 200_000));
  assert.deepEqual(idx.lookup(h, 0, Number.MAX_SAFE_INTEGER, 3), expected(all, h).slice(0, 3));
  idx.syncNow();
  idx.close();

  const files = fs.readdirSync(dir).sort();
  assert.equal(files.length, 5, "99 entries per file");
  const size = INDEX_HEADER_BYTES + SLOTS * 4 + PER_FILE * INDEX_ENTRY_BYTES;
  for (const f of files) assert.equal(fs.statSync(path.join(dir, f)).size, size);
  // a full file: header indexCount = entries per file, begin/end offsets of its first and last entry
  const first = fs.readFileSync(path.join(dir, files[0]!));
  assert.equal(first.readInt32BE(36), PER_FILE);
  assert.equal(readLong(first, 16), 0);
  assert.equal(readLong(first, 24), 98 * 100);
  assert.equal(readLong(first, 0), T0);
  // an entry: |hash| (MIN_VALUE as 0), offset, seconds since the file's begin time, previous entry in its slot
  const e1 = INDEX_HEADER_BYTES + SLOTS * 4 + 1 * INDEX_ENTRY_BYTES;
  assert.equal(first.readInt32BE(e1), 0);
  assert.equal(readLong(first, e1 + 4), 0);
  const e9 = INDEX_HEADER_BYTES + SLOTS * 4 + 9 * INDEX_ENTRY_BYTES;
  assert.equal(first.readInt32BE(e9), Math.abs(all[8]!.hash));
  assert.equal(first.readInt32BE(e9 + 12), 8);

  idx = new IndexService(dir, PER_FILE, SLOTS);
  const reopened = idx;
  const { value: loaded, bytes } = await bytesRead(() => reopened.load(450, 1e9));
  assert.equal(loaded, "ok");
  assert.ok(bytes <= 5 * INDEX_HEADER_BYTES + PER_FILE * INDEX_ENTRY_BYTES, `an open read ${bytes} bytes`);
  assert.equal(idx.entries, 450);
  for (const x of hashes) assert.deepEqual(idx.lookup(x, 0, Number.MAX_SAFE_INTEGER, 1000), expected(all, x), `reloaded, hash ${x}`);
  // more entries after the reload go on in the last file, then new ones
  const more = fill(idx, 100, 450);
  for (const x of hashes) assert.deepEqual(idx.lookup(x, 0, Number.MAX_SAFE_INTEGER, 1000), expected([...all, ...more], x));
  idx.close();
});

test("index: truncation across files, then appends; deleting old files; damage is reported", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const idx = new IndexService(dir, PER_FILE, SLOTS);
  const all = fill(idx, 450);
  idx.truncateFrom(150 * 100); // inside the second file
  assert.equal(idx.entries, 150);
  assert.equal(fs.readdirSync(dir).length, 2);
  const kept = all.slice(0, 150);
  const again = fill(idx, 120, 150, 5);
  const now = [...kept, ...again];
  for (const h of new Set(now.map((a) => a.hash))) assert.deepEqual(idx.lookup(h, 0, Number.MAX_SAFE_INTEGER, 1000), expected(now, h));
  idx.truncateFrom(0);
  assert.equal(idx.entries, 0);
  const fresh = fill(idx, 300);
  idx.deleteBelow(200 * 100); // files holding only entries below offset 20 000 go
  const left = fs.readdirSync(dir).sort();
  assert.equal(left.length, 2, `files left: ${left.join(", ")}`);
  const h = fresh[250]!.hash;
  assert.deepEqual(
    idx.lookup(h, 0, Number.MAX_SAFE_INTEGER, 1000),
    expected(fresh, h).filter((phy) => phy >= 198 * 100),
  );
  idx.syncNow();
  idx.close();

  const reopened = new IndexService(dir, PER_FILE, SLOTS);
  assert.equal(reopened.load(fresh.length - 198, 1e9), "ok", "numbers go on after deleted files");
  assert.deepEqual(
    reopened.lookup(h, 0, Number.MAX_SAFE_INTEGER, 1000),
    expected(fresh, h).filter((phy) => phy >= 198 * 100),
  );
  reopened.close();
  // fewer entries than the checkpoint recorded, a file of another size, a full file's bad header
  assert.equal(new IndexService(dir, PER_FILE, SLOTS).load(10_000, 1e9), "damaged");
  fs.truncateSync(path.join(dir, left[0]!), 1000);
  assert.equal(new IndexService(dir, PER_FILE, SLOTS).load(0, 1e9), "damaged");
});

test("index: random adds, truncations and reloads agree with a plain list", async (t) => {
  const { dir: base, cleanup } = await tempDir();
  t.after(cleanup);
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.oneof(fc.record({ add: fc.integer({ min: 1, max: 150 }) }), fc.record({ cut: fc.nat(400) }), fc.constant({ reload: true })),
        {
          maxLength: 12,
        },
      ),
      async (ops) => {
        const dir = path.join(base, String(run++));
        let idx = new IndexService(dir, PER_FILE, SLOTS);
        let all: Added[] = [];
        let next = 0;
        for (const op of ops) {
          if ("add" in op) {
            all.push(...fill(idx, op.add, next, 3));
            next += op.add;
          } else if ("cut" in op) {
            idx.truncateFrom(op.cut * 100);
            all = all.filter((a) => a.phy < op.cut * 100);
            next = Math.min(next, all.length ? all[all.length - 1]!.phy / 100 + 1 : 0);
          } else {
            idx.syncNow();
            idx.close();
            idx = new IndexService(dir, PER_FILE, SLOTS);
            assert.equal(idx.load(all.length, 1e9), "ok");
          }
          assert.equal(idx.entries, all.length);
          for (const h of new Set(all.map((a) => a.hash)))
            assert.deepEqual(idx.lookup(h, 0, Number.MAX_SAFE_INTEGER, 10_000), expected(all, h));
        }
        idx.close();
      },
    ),
    { numRuns: 40 },
  );
});

test("index: a sync whose fdatasync fails syncs the same files again the next time", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const idx = new IndexService(dir, PER_FILE, SLOTS);
  t.after(() => idx.close());
  fill(idx, 20);
  const real = segmentIo.fdatasync;
  let fail = true;
  let synced = 0;
  segmentIo.fdatasync = (fd) => {
    if (fail) return Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    synced++;
    return real(fd);
  };
  t.after(() => {
    segmentIo.fdatasync = real;
  });
  await assert.rejects(idx.sync(), /EIO/);
  fail = false;
  await idx.sync();
  assert.equal(synced, 1, "the file whose sync failed is synced again");
});

test("index: a lookup with a begin time stops at the key's first entry older than it, as RocketMQ's, instead of reading the rest of its chain", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const n = 20_000;
  const idx = new IndexService(dir, n + 10, SLOTS);
  t.after(() => idx.close());
  // one busy key, a message a second
  for (let i = 0; i < n; i++) idx.add(42, i * 100, T0 + i * 1000);
  idx.writePending();
  const begin = T0 + (n - 5) * 1000;
  const { value, bytes } = await bytesRead(() => idx.lookup(42, begin, Number.MAX_SAFE_INTEGER, 1000));
  assert.deepEqual(
    value,
    [4, 3, 2, 1, 0].map((k) => (n - 5 + k) * 100),
  );
  // the five newest entries, the one before them (1 s below the begin time, as times are kept to the second) and the slot
  assert.ok(bytes <= 8 * INDEX_ENTRY_BYTES, `read ${bytes} bytes of a chain of ${n * INDEX_ENTRY_BYTES}`);
});

test("index: a file roll syncs nothing on the put that fills it; the next sync flushes the full file with the new one", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const idx = new IndexService(dir, PER_FILE, SLOTS);
  const syncedNow = t.mock.method(fs, "fdatasyncSync");
  const realSync = segmentIo.fdatasync;
  const syncedLater: number[] = [];
  segmentIo.fdatasync = (fd) => {
    syncedLater.push(fd);
    return realSync(fd);
  };
  try {
    const all = fill(idx, 250); // fills two files, starts a third
    assert.equal(syncedNow.mock.callCount(), 0, "no fdatasync on the event loop while adding");
    await idx.sync();
    assert.equal(syncedLater.length, 3, "the two full files and the one being written");
    const h = all[5]!.hash;
    assert.deepEqual(idx.lookup(h, 0, Number.MAX_SAFE_INTEGER, 1000), expected(all, h));
  } finally {
    segmentIo.fdatasync = realSync;
    idx.close();
  }
  // the full files read back as written
  const reopened = new IndexService(dir, PER_FILE, SLOTS);
  t.after(() => reopened.close());
  assert.equal(reopened.load(250, 1e9), "ok");
  assert.equal(reopened.entries, 250);
});
