import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Runs `npx tsx examples/<name>.ts` (through node + tsx) and returns its exit code and output. */
function runExample(name: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "examples", `${name}.ts`)], { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" } });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  return new Promise((r) => child.once("close", (code) => (clearTimeout(timer), r({ code, out }))));
}

test("quickstart sends three messages and consumes them", async () => {
  const r = await runExample("quickstart");
  assert.equal(r.code, 0, r.out);
  assert.equal((r.out.match(/^received /gm) ?? []).length, 3, r.out);
  assert.match(r.out, /quickstart done: 3 messages/);
});

test("multinode spawns processes, consumes from both brokers and stops them", async () => {
  const r = await runExample("multinode");
  assert.equal(r.code, 0, r.out);
  const line = /consumed per broker: (.*)/.exec(r.out)?.[1] ?? "";
  assert.match(line, /'broker-a': [1-9]\d*/, r.out);
  assert.match(line, /'broker-b': [1-9]\d*/, r.out);
  assert.match(r.out, /stopped 3 processes/);
});

test("sql-filter delivers only the matching readings", async () => {
  const r = await runExample("sql-filter");
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /matched: reading-5, reading-7, reading-9\n/);
});
