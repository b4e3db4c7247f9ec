/**
 * Every public object started and closed many times in one process (test/e2e/fixtures/churnProbe.ts,
 * a real process: a leaked socket, timer or zeromq context shows as a process that does not end):
 * the process ends by itself soon after the last close, its open file descriptors and process
 * listeners do not grow with the rounds, its heap (over 20 rounds or more) grows by little more than noise, and it prints no
 * warning or unhandled rejection. The probe also checks that a closed object's methods fail with
 * MQError CLOSED rather than hang.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

interface Sample {
  i: number;
  fds: number;
  heap: number;
  listeners: Record<string, number>;
}

/** How long the process may take to end after its last close. */
const EXIT_WITHIN_MS = 2000;
/** Heap the probe may keep per round after warm-up (documented per-peer tables of the servers, JIT, noise). */
const HEAP_PER_ROUND_BYTES = 100 * 1024;
/** Scenarios run fewer rounds than this (brokers, clusters) have their heap judged by longer runs of the probe. */
const HEAVY_ROUNDS = 20;

async function probe(scenario: string, n: number): Promise<{ samples: Sample[]; exitMs: number; stderr: string; code: number | null }> {
  const child = spawn(
    process.execPath,
    ["--expose-gc", "--import", "tsx", path.join(here, "fixtures/churnProbe.ts"), scenario, String(n)],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
    },
  );
  let out = "";
  let stderr = "";
  let doneAt = 0;
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
    if (!doneAt && out.includes('"done":true')) doneAt = performance.now();
  });
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => {
    child.once("exit", (c) => resolve(c));
    // a process that never ends is killed once it has had far longer than it may take
    const guard = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.once("exit", () => clearTimeout(guard));
  });
  const exitMs = doneAt ? performance.now() - doneAt : Number.POSITIVE_INFINITY;
  const samples: Sample[] = [];
  const lingering: string[] = [];
  for (const line of out.split("\n")) {
    if (!line.startsWith("{")) continue;
    const o = JSON.parse(line) as Sample & { probe?: boolean; lingering?: string[] };
    if (o.probe) samples.push(o);
    if (o.lingering) lingering.push(...o.lingering);
  }
  if (lingering.length > 0) stderr += `\nstill active after the last close: ${lingering.join(", ")}`;
  return { samples, exitMs, stderr, code };
}

const cases: [string, number][] = [
  // first: it mostly waits (each close waits out the producer's grace for the frozen broker), beside the others
  ["frozen", 4],
  ["nameserver", 30],
  ["actornode", 30],
  ["broker", 12],
  ["cluster", 12],
  ["producer", 30],
  ["admin", 30],
  ["push", 20],
  ["pull", 20],
  ["shared", 20],
  ["listenerRunning", 20],
  ["inspector", 30],
  // a consumer closed after its broker: each close waits out its offset and unregister requests (about 8 s)
  ["brokerDown", 1],
];

// Two probes at a time: "frozen" (about 12 s of its 17 s idle) runs beside the others, which then
// run two at once as they do beside another test file in the suite.
describe("churn", { concurrency: 2 }, () => {
  for (const [scenario, n] of cases) {
    test(`${scenario}: started and closed ${n} times, the process ends by itself and keeps nothing`, async () => {
      const { samples, exitMs, stderr, code } = await probe(scenario, n);
      assert.equal(code, 0, `the probe failed:\n${stderr}`);
      assert.equal(stderr.trim(), "", "no warning, unhandled rejection or lingering resource");
      assert.ok(exitMs < EXIT_WITHIN_MS, `the process ended ${Math.round(exitMs)} ms after its last close`);
      const first = samples[0]!;
      const last = samples.at(-1)!;
      assert.equal(last.i, n);
      if (first === last) return;
      assert.ok(last.fds <= first.fds + 2, `open files grew from ${first.fds} (round ${first.i}) to ${last.fds} (round ${last.i})`);
      // fewer is no leak: a listener whose owner was collected may go between samples
      for (const [ev, count] of Object.entries(last.listeners))
        assert.ok(
          count <= (first.listeners[ev] ?? 0),
          `process listeners of ${ev}: ${first.listeners[ev]} at round ${first.i}, ${count} at ${last.i}`,
        );
      // a broker or cluster a round is still warming up (compiled code, heap pages) over the few rounds
      // the suite has time for, by about the bound (703 KiB over 7 rounds once); run the probe with 80
      // rounds to judge their heap (flat after round 20)
      if (n < HEAVY_ROUNDS) return;
      const grown = last.heap - first.heap;
      assert.ok(
        grown < HEAP_PER_ROUND_BYTES * (last.i - first.i),
        `the heap grew ${Math.round(grown / 1024)} KiB over ${last.i - first.i} rounds`,
      );
    });
  }
});
