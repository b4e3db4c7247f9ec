/** UNIQ_KEY (a SendResult's msgId): RocketMQ's layout, decodable as RocketMQ decodes it, unique across fast sends and processes. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import { createUniqId, localIPv4, uniqIdInfo } from "../../transport/messageRecord.ts";

test("a UNIQ_KEY is RocketMQ's 16 bytes: IPv4 | pid | per-process int | ms since month start | counter", () => {
  const before = Date.now();
  const id = createUniqId();
  const after = Date.now();
  assert.match(id, /^[0-9A-F]{32}$/);
  const info = uniqIdInfo(id);
  assert.ok(info);
  assert.equal(info.ip, localIPv4());
  assert.equal(info.pid, process.pid & 0xffff);
  assert.ok(info.time >= before && info.time <= after, `decoded time ${info.time} within [${before}, ${after}]`);
  // the time field is ms since the start of the month (local time), as getNearlyTimeFromID reads it
  const d = new Date(info.time);
  const monthStart = new Date(d.getFullYear(), d.getMonth(), 1).getTime();
  assert.equal(Buffer.from(id, "hex").readUInt32BE(10), info.time - monthStart);
  // bytes 0-9 are the same for every id of the process; the counter (bytes 14-15) moves by one
  const next = createUniqId();
  assert.equal(next.slice(0, 20), id.slice(0, 20));
  assert.equal((Buffer.from(next, "hex").readUInt16BE(14) - Buffer.from(id, "hex").readUInt16BE(14)) & 0xffff, 1);
  // an id made last month is dated last month
  const lastMonth = new Date(d.getFullYear(), d.getMonth() - 1, 3, 4, 5, 6, 7).getTime();
  const span = lastMonth - new Date(d.getFullYear(), d.getMonth() - 1, 1).getTime();
  const old = Buffer.from(id, "hex");
  old.writeUInt32BE(span, 10);
  assert.equal(uniqIdInfo(old.toString("hex").toUpperCase(), new Date(d.getFullYear(), d.getMonth(), 2).getTime())?.time, lastMonth);
  assert.equal(uniqIdInfo("not an id"), null);
});

test("UNIQ_KEYs stay unique past 65 536 in one millisecond's worth and across two producer processes", async () => {
  const n = 300_000;
  const mine = new Set<string>();
  for (let i = 0; i < n; i++) mine.add(createUniqId());
  assert.equal(mine.size, n);
  const script = `import { createUniqId } from ${JSON.stringify(new URL("../../transport/messageRecord.ts", import.meta.url).href)};
const out = []; for (let i = 0; i < 20000; i++) out.push(createUniqId()); process.stdout.write(out.join("\\n"));`;
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    maxBuffer: 1 << 24,
  });
  const theirs = stdout.split("\n");
  assert.equal(new Set(theirs).size, theirs.length);
  for (const id of theirs) assert.ok(!mine.has(id), `${id} made by both processes`);
  assert.notEqual(theirs[0]!.slice(0, 20), [...mine][0]!.slice(0, 20), "each process has its own prefix");
});

test("a clock that stands still or steps back makes no repeated UNIQ_KEY: the id's time holds, then moves on per 65 536 ids", (t) => {
  const real = Date.now;
  t.after(() => {
    Date.now = real;
  });
  let clock = real() + 60_000;
  Date.now = () => clock;
  const ids = new Set<string>();
  for (let i = 0; i < 70_000; i++) ids.add(createUniqId());
  clock -= 30_000;
  for (let i = 0; i < 70_000; i++) ids.add(createUniqId());
  assert.equal(ids.size, 140_000);
  const times = [...ids].map((id) => Buffer.from(id, "hex").readUInt32BE(10));
  for (let i = 1; i < times.length; i++) assert.ok(times[i]! >= times[i - 1]!, "the time field never goes back");
});
