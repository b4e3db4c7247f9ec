import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { isAlive } from "../../actors/cluster/index.ts";
import { waitFor } from "../helpers.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * Runs `npx tsx examples/<name>.ts` (through node + tsx) and returns its exit code and output.
 * The environment sets no log level: an example's output must read as its own lines, without the
 * servers' info logs.
 */
async function runExample(name: string): Promise<{ code: number | null; out: string }> {
  const env = { ...process.env };
  delete env.ACTORMQ_LOG_LEVEL;
  const r = await spawnExample(name, env);
  assert.doesNotMatch(r.out, /^\{"level":(10|20|30)/m, `${name} printed server info logs:\n${r.out}`);
  return r;
}

function spawnExample(name: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "examples", `${name}.ts`)], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env,
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  return new Promise((r) =>
    child.once("close", (code) => {
      clearTimeout(timer);
      r({ code, out });
    }),
  );
}

// Each example is a process of its own with its own cluster (ephemeral ports, its own temp dirs):
// two at a time, as the suite runs two test files at a time.
describe("examples", { concurrency: 2 }, () => {
  test("quickstart sends three messages and consumes them", async () => {
    const r = await runExample("quickstart");
    assert.equal(r.code, 0, r.out);
    assert.equal((r.out.match(/^received /gm) ?? []).length, 3, r.out);
    assert.match(r.out, /quickstart done: 3 messages/);
    // the first example a user runs prints its own lines only: no warning that reads as a fault
    assert.doesNotMatch(r.out, /^\{"level":/m, r.out);
  });

  test("multinode spawns processes, consumes from both brokers and stops them", async () => {
    const r = await runExample("multinode");
    assert.equal(r.code, 0, r.out);
    const line = /consumed per broker: (.*)/.exec(r.out)?.[1] ?? "";
    assert.match(line, /'broker-a': [1-9]\d*/, r.out);
    assert.match(line, /'broker-b': [1-9]\d*/, r.out);
    assert.match(r.out, /stopped 3 processes/);
  });

  test("multinode interrupted (Ctrl-C once running, SIGTERM while starting) stops the processes it spawned and exits", async () => {
    for (const [sig, when] of [
      ["SIGINT", /^ready 3\/3/m],
      ["SIGTERM", /^ready 1\/3/m],
    ] as const) {
      const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "examples", "multinode.ts")], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      // the cluster's processes are detached children of the example
      const children = () =>
        readdirSync("/proc")
          .filter((n) => /^\d+$/.test(n))
          .map(Number)
          .filter((pid) => {
            try {
              const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
              return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === child.pid;
            } catch {
              return false;
            }
          });
      let spawned: number[] = [];
      try {
        await waitFor(() => when.test(out), 60_000, `multinode to print ${when} (${out})`);
        spawned = children();
        assert.ok(spawned.length > 0, out);
        child.kill(sig);
        assert.equal(await exit, 128 + os.constants.signals[sig], out);
        assert.match(out, /^cluster dir: \S+actormq-multinode-/m, "the example says where its processes live");
        assert.deepEqual(
          spawned.filter((pid) => isAlive(pid)),
          [],
          `${sig}: the processes the example spawned are stopped\n${out}`,
        );
      } finally {
        child.kill("SIGKILL");
        for (const pid of spawned) if (isAlive(pid)) process.kill(pid, "SIGKILL");
      }
    }
  });

  test("sql-filter delivers only the matching readings", async () => {
    const r = await runExample("sql-filter");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /matched: reading-5, reading-7, reading-9\n/);
  });

  test("delay delivers the delayed messages after their levels, in order of due time", async () => {
    const r = await runExample("delay");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /arrival order: now, in-200ms, in-1s\n/);
    assert.match(r.out, /in-1s waited at least 1000 ms: true/);
    const waited = Number(/received in-200ms after (\d+) ms/.exec(r.out)?.[1]);
    assert.ok(waited >= 200, r.out);
  });

  test("broadcast gives every member of the broadcasting group every message, the clustering group each message once", async () => {
    const r = await runExample("broadcast");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /broadcasting assignment: 4, 4, 4 queues/);
    assert.match(r.out, /broadcasting: each member got 12, 12, 12 of 12/);
    assert.match(r.out, /clustering: members got \d+, \d+, \d+ \(total 12\)/);
  });

  test("retry-dlq retries a failed message and sends a poison one to the DLQ after maxReconsumeTimes", async () => {
    const r = await runExample("retry-dlq");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /delivery of flaky, reconsumeTimes 1\n/);
    assert.equal((r.out.match(/^delivery of poison/gm) ?? []).length, 3, r.out);
    assert.match(r.out, /dead letter: poison from Payments, reconsumeTimes 3, same id: true/);
  });

  test("pull-consumer polls, seeks back and commits", async () => {
    const r = await runExample("pull-consumer");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /polled 20 invoices from 2 queues/);
    assert.match(r.out, /after seek to 5 on queue \d: offsets 5, 6, 7, 8, 9\n/);
    assert.equal((r.out.match(/lag 0$/gm) ?? []).length, 2, r.out);
  });

  test("custom-actor enriches every order through a user-written machine between two topics", async () => {
    const r = await runExample("custom-actor");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /enriched 20 orders: o0=Ada, o1=Grace, o2=Linus/);
    const m = /enricher transitions: idle -> processing x(\d+), processing -> idle x(\d+)/.exec(r.out);
    assert.ok(m, r.out);
    assert.ok(Number(m[1]) >= 1 && m[1] === m[2], r.out);
  });

  test("ordered keeps each order's steps in sending order through a selector and orderly consumers, across a suspend", async () => {
    const r = await runExample("ordered");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /order-3:paid failed once/);
    for (let i = 1; i <= 6; i++) assert.match(r.out, new RegExp(`^order-${i}: created -> paid -> packed -> shipped$`, "m"));
    assert.match(r.out, /every order's steps in sending order: true/);
  });
});
