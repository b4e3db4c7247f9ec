import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { MessageStore } from "../../store/index.ts";
import { decodeRecords } from "../../transport/messageRecord.ts";
import { tempDir } from "../helpers.ts";

const QUEUES = 120;
const STORE = { commitLogSegmentBytes: 1 << 20, consumeQueueEntries: 16, cleanIntervalMs: 0 };

// One put per queue in a process whose open-file limit is far below one file per queue: every
// consume-queue file the store opens keeps a descriptor, so the later puts run out of them.
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
  const child = spawn(
    "bash",
    ["-c", 'ulimit -n 64 && exec "$0" --import tsx --input-type=module -e "$1" "$2"', process.execPath, CHILD, dir],
    // from the repository root, where `--import tsx` resolves
    { cwd: fileURLToPath(new URL("../..", import.meta.url)), stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise<number | null>((r) => child.on("exit", r));
  assert.equal(code, 0, `the child exited ${code}: ${stderr}`);
  const { out: results, closed } = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
    out: Array<{ q: number; status?: string; code?: string; message?: string }>;
    closed: string;
  };
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
