import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { PullConsumer } from "../../index.ts";
import { MessageStore } from "../../store/index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { tempDir, waitFor } from "../helpers.ts";

const QUEUES = 120;
const STORE = { commitLogSegmentBytes: 1 << 20, consumeQueueEntries: 16, cleanIntervalMs: 0 };

/** Runs `script` (an ES module, given `dir` as argv[1]) under `ulimit -n <limit>`, from the repository root where `--import tsx` resolves. */
function spawnUnderFileLimit(limit: number, script: string, dir: string) {
  const child = spawn(
    "bash",
    ["-c", `ulimit -n ${limit} && exec "$0" --import tsx --input-type=module -e "$1" "$2"`, process.execPath, script, dir],
    {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (d) => (out.stdout += d));
  child.stderr.on("data", (d) => (out.stderr += d));
  const exited = new Promise<number | null>((r) => child.on("exit", r));
  return { child, out, exited };
}

/** {@link spawnUnderFileLimit} to its end: the last stdout line, parsed (the child must exit 0). */
async function runUnderFileLimit<T>(limit: number, script: string, dir: string): Promise<T> {
  const { out, exited } = spawnUnderFileLimit(limit, script, dir);
  const code = await exited;
  assert.equal(code, 0, `the child exited ${code}: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").at(-1)!) as T;
}

// One put per queue in a process whose open-file limit is far below one file per queue: every
// consume-queue file the store opens keeps a descriptor, so the later puts are refused (the store
// keeps a reserve of descriptors free) or run out of them.
const CHILD = `
import { MessageStore } from ${JSON.stringify(new URL("../../store/index.ts", import.meta.url).href)};
import { encodeMessageBatch, encodeProperties } from ${JSON.stringify(new URL("../../transport/messageRecord.ts", import.meta.url).href)};
const s = await MessageStore.open({ dir: process.argv[1], ...${JSON.stringify(STORE)} });
const out = [];
for (let q = 0; q < ${QUEUES}; q++) {
  const body = encodeMessageBatch([{ body: Buffer.from("m" + q), properties: encodeProperties({ KEYS: "k" + q }) }]);
  try {
    const r = await s.putMessages({ topic: "Fds", queueId: q, bornTimestamp: Date.now(), bornHost: "10.0.0.1:1", body });
    out.push({ q, status: r.status });
  } catch (e) {
    out.push({ q, code: e.code, message: e.message });
  }
}
let closed = "ok";
try { await s.close(); } catch (e) { closed = e.message; }
console.log(JSON.stringify({ out, closed }));
`;

test("running out of file descriptors fails puts with advice to raise the limit; the process survives and acknowledged messages stay readable", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const { out: results, closed } = await runUnderFileLimit<{
    out: Array<{ q: number; status?: string; code?: string; message?: string }>;
    closed: string;
  }>(64, CHILD, dir);
  // the consume queues give their descriptors back before the checkpoint is written
  assert.equal(closed, "ok");
  const ok = results.filter((r) => r.status === "PUT_OK");
  const failed = results.filter((r) => r.status !== "PUT_OK");
  assert.ok(ok.length > 0, "the first queues were written");
  assert.ok(failed.length > 0, `a limit of 64 descriptors did not run out for ${QUEUES} queues`);
  for (const f of failed) {
    assert.equal(f.code, "SYSTEM_ERROR", JSON.stringify(f));
    assert.match(f.message!, /Too many open files/);
    assert.match(f.message!, /ulimit -n/);
  }

  // with the normal limit every acknowledged message is there (failed puts may be too: at least once)
  const s = await MessageStore.open({ dir, ...STORE });
  t.after(() => s.close());
  assert.equal(s.recovery.mode, "normal", "the shutdown under the limit was clean");
  for (const { q } of ok) {
    const g = s.getMessage("g", "Fds", q, 0, 32);
    assert.equal(g.status, "FOUND", `queue ${q}`);
    assert.deepEqual(
      decodeRecords(Buffer.concat(g.buffers), "b").map((m) => m.body.toString()),
      [`m${q}`],
    );
  }
});

// A broker (and its name server) in a process whose open-file limit its queues would use up: one
// put per new queue until the store refuses one. Prints what it saw, then serves until killed.
const BROKER_CHILD = `
import path from "node:path";
import { Broker, NameServer } from ${JSON.stringify(new URL("../../index.ts", import.meta.url).href)};
const dir = process.argv[1];
const ns = await NameServer.start({ listen: "tcp://127.0.0.1:*", logLevel: "silent" });
let broker = await Broker.start({ brokerName: "b", listen: "tcp://127.0.0.1:*", nameservers: [ns.address], storeDir: dir, logLevel: "silent" });
await broker.createTopic({ topic: "Existing", readQueueNums: 1, writeQueueNums: 1 });
const put = (topic, queueId, body) => broker.store.putMessage({ topic, queueId, body: Buffer.from(body), bornTimestamp: Date.now(), bornHost: "127.0.0.1:1" });
await put("Existing", 0, "before");
let refused = null;
for (let q = 0; q < 2000 && !refused; q++) await put("Fill", q, "x").catch((e) => { refused = { q, code: e.code, message: e.message }; });
// a queue whose file is open still takes puts
const after = await put("Existing", 0, "after").then((r) => r.status, (e) => e.message);
// started again, its queues already use most of the limit: it says so
await broker.close();
broker = await Broker.start({ brokerName: "b", listen: "tcp://127.0.0.1:*", nameservers: [ns.address], storeDir: dir, logLevel: "warn" });
console.log(JSON.stringify({ report: { ns: ns.address, refused, after } }));
process.on("SIGTERM", async () => { await broker.close(); await ns.close(); process.exit(0); });
setInterval(() => {}, 1000);
`;

test("a broker at the open-file limit refuses new queues before it runs out, and a new client can still connect and read", async (t) => {
  // every descriptor went to consume queues: libzmq could not accept a new connection (the client
  // timed out, the broker spun a core, nothing was logged), and the put whose queue file failed to
  // open left a record no later put could get past
  const { dir, cleanup } = await tempDir();
  const { child, out, exited } = spawnUnderFileLimit(256, BROKER_CHILD, dir);
  let pc: PullConsumer | undefined;
  t.after(async () => {
    await pc?.close();
    child.kill("SIGTERM");
    await exited;
    await cleanup();
  });
  const line = await waitFor(
    () => out.stdout.split("\n").find((l) => l.startsWith('{"report"')) ?? (child.exitCode !== null ? out.stderr || "exited" : ""),
    60_000,
    "the broker child's report",
  );
  const { ns, refused, after } = (
    JSON.parse(line) as {
      report: { ns: string; refused: { q: number; code: string; message: string } | null; after: string };
    }
  ).report;
  assert.ok(refused, "2000 queues did not reach a limit of 256 files");
  assert.equal(refused.code, "SYSTEM_ERROR", refused.message);
  assert.match(refused.message, /open-file limit/);
  assert.match(refused.message, /ulimit -n/);
  assert.equal(after, "PUT_OK", "a put to a queue whose file is open after the refusal");
  const warned = out.stdout
    .split("\n")
    .filter((l) => l.includes('"level":40'))
    .map((l) => JSON.parse(l) as { msg: string; openFiles: number; openFileLimit: number });
  assert.ok(
    warned.some((w) => /open files near the limit/.test(w.msg) && /ulimit -n/.test(w.msg) && w.openFileLimit === 256),
    `the restarted broker warned of its open files: ${JSON.stringify(warned)}`,
  );

  // a client that was not connected before reaches the name server and the broker
  pc = await PullConsumer.start({
    group: "cgAtLimit",
    nameservers: [ns],
    autoCommit: false,
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
  });
  await pc.assign(await pc.fetchMessageQueues("Existing"));
  const seen: string[] = [];
  await waitFor(
    async () => {
      for (const m of await pc!.poll(200)) seen.push(m.body.toString());
      return seen.length >= 2;
    },
    10_000,
    "the acknowledged messages polled",
  );
  assert.deepEqual(seen, ["before", "after"]);
});

// Puts that arrive together are planned together, then appended with one write: the files the
// group's earlier batches will open count against the reserve too. Fills queues one at a time until
// two more files are left, puts a group of two batches to one queue crossing into its next file,
// then a group to 100 new queues.
const GROUP_CHILD = `
import fs from "node:fs";
import { MessageStore } from ${JSON.stringify(new URL("../../store/index.ts", import.meta.url).href)};
import { openFilesShort } from ${JSON.stringify(new URL("../../store/openFiles.ts", import.meta.url).href)};
import { encodeMessageBatch, encodeProperties } from ${JSON.stringify(new URL("../../transport/messageRecord.ts", import.meta.url).href)};
const s = await MessageStore.open({ dir: process.argv[1], ...${JSON.stringify(STORE)} });
const batch = (topic, queueId, n = 1) => ({ topic, queueId, bornTimestamp: Date.now(), bornHost: "10.0.0.1:1",
  body: encodeMessageBatch(Array.from({ length: n }, () => ({ body: Buffer.from("m"), properties: encodeProperties({}) }))) });
const settle = async (ps) => (await Promise.allSettled(ps)).map((r) => r.status === "fulfilled" ? r.value.status : { code: r.reason.code, message: r.reason.message });
let filled = 0;
// two files left under the reserve
while (openFilesShort(3) === null) await s.putMessages(batch("Seq", filled++));
// a queue one entry short of its file's end: two batches of 2 in one group cross into one next file
const last = filled - 1;
await s.putMessages(batch("Seq", last, ${STORE.consumeQueueEntries - 2}));
const crossing = await settle(s.putMessagesGroup([batch("Seq", last, 2), batch("Seq", last, 2)]));
// one file left: a group to 100 new queues
const group = await settle(s.putMessagesGroup(Array.from({ length: 100 }, (_, i) => batch("Grp", i))));
const later = await settle([s.putMessages(batch("Seq", 0))]);
const fds = fs.readdirSync("/proc/self/fd").length - 1;
console.log(JSON.stringify({ filled, group, later, crossing, fds }));
await s.close();
`;

test("a group of puts to new queues near the open-file limit is counted together: the puts past the reserve are refused, the rest of the store goes on", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  type Result = string | { code: string; message: string };
  const r = await runUnderFileLimit<{ filled: number; group: Result[]; later: Result[]; crossing: Result[]; fds: number }>(
    256,
    GROUP_CHILD,
    dir,
  );
  const refusedForFiles = (x: Result) => typeof x !== "string" && x.code === "SYSTEM_ERROR" && /open-file limit/.test(x.message);
  const okGroup = r.group.filter((x) => x === "PUT_OK").length;
  // one file was left under the reserve (another descriptor may have come or gone since the count)
  assert.ok(okGroup <= 2, `${okGroup} of the group's 100 new queues were written: ${JSON.stringify(r.group.slice(0, 3))}`);
  assert.ok(
    r.group.filter((x) => x !== "PUT_OK").every(refusedForFiles),
    JSON.stringify(r.group.find((x) => !refusedForFiles(x) && x !== "PUT_OK")),
  );
  // nothing of it ran out of descriptors: a queue whose file is open takes puts
  assert.deepEqual(r.later, ["PUT_OK"]);
  // the second batch crossing into the same next file needs no other one: both fit the one file left
  assert.deepEqual(r.crossing, ["PUT_OK", "PUT_OK"]);
  assert.ok(r.fds < 256 - 32, `${r.fds} descriptors open of 256`);
});
