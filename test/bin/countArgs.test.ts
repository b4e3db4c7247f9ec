/**
 * Counts on the command line (`send --count`, `consume --count`, `cluster up --nameservers` and
 * `--brokers`, `broker --default-queue-nums`) must be positive integers, and `topic create`'s queue
 * counts in their range: 0, negative, non-integer and out-of-range values are usage errors (exit 2,
 * one line naming the flag), refused before anything connects or starts.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { tempDir } from "../helpers.ts";
import { cli } from "./cliRun.ts";

// nothing listens there: a command that got past its flags would fail with exit 1, not 2
const env = { ACTORMQ_NAMESRV: "tcp://127.0.0.1:1" };

const escaped = (text: string) => text.replace(/[.+()]/g, "\\$&");

function assertUsageError(
  r: { code: number | null; err: string },
  flag: string,
  value: string,
  what: string,
  expected = "a positive integer (1 or more)",
): void {
  assert.equal(r.code, 2, `${what}: ${r.err}`);
  const lines = r.err.trim().split("\n");
  assert.equal(lines.length, 1, `${what}: one line, got ${r.err}`);
  assert.match(
    lines[0]!,
    new RegExp(
      `^actormq: error: option '${flag} <n>' argument '${escaped(value)}' is invalid\\. expected ${escaped(expected)} \\(see --help\\)$`,
    ),
    what,
  );
}

test("send --count and consume --count of 0, negative or not an integer are usage errors", async () => {
  // the parser's every case is test/bin/common.test.ts's; here each command is wired to it (one CLI
  // process per case, run side by side: each costs a second or two of start-up)
  const cases: [string, string][] = [
    ["send", "0"],
    ["send", "1.5"],
    ["consume", "-1"],
    ["consume", "abc"],
  ];
  const runs = cases.map(([cmd, v]) =>
    cli(cmd === "send" ? ["send", "--topic", "T", "--count", v, "body"] : ["consume", "--topic", "T", "--count", v], { env }),
  );
  for (const [i, r] of (await Promise.all(runs)).entries()) {
    const [cmd, v] = cases[i]!;
    assertUsageError(r, "--count", v, `${cmd} --count ${v}`);
  }
});

test("cluster up --nameservers 0 / --brokers 0 and broker --default-queue-nums 0 are usage errors; nothing is started", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-countargs-");
  t.after(cleanup);
  for (const flag of ["--nameservers", "--brokers"]) {
    const clusterDir = path.join(dir, `cluster${flag}`);
    assertUsageError(await cli(["cluster", "up", "--dir", clusterDir, flag, "0"]), flag, "0", `cluster up ${flag} 0`);
    assert.ok(!existsSync(clusterDir), "no cluster directory made");
  }
  const store = path.join(dir, "broker");
  const b = await cli([
    "broker",
    "--namesrv",
    env.ACTORMQ_NAMESRV,
    "--listen",
    "tcp://127.0.0.1:*",
    "--store",
    store,
    "--default-queue-nums",
    "0",
  ]);
  assertUsageError(b, "--default-queue-nums", "0", "broker --default-queue-nums 0");
  assert.ok(!existsSync(store), "no store made");
});

test("topic create --queues 0 and --read-queues / --write-queues past 1024 are usage errors", async () => {
  // one process per flag, side by side: each flag is wired to its parser
  const cases: [string, string, string][] = [
    ["--queues", "0", "1 to 1024 queues per broker (to stop writes or reads, use --write-queues 0 or --read-queues 0)"],
    ["--read-queues", "1025", "0 to 1024 queues per broker"],
    ["--write-queues", "1025", "0 to 1024 queues per broker"],
  ];
  const runs = await Promise.all(cases.map(([flag, v]) => cli(["topic", "create", "T", flag, v], { env })));
  for (const [i, r] of runs.entries()) {
    const [flag, v, expected] = cases[i]!;
    assertUsageError(r, flag, v, `topic create ${flag} ${v}`, expected);
  }
});

test("a count of 1 or more is taken", async () => {
  // past its flags, send fails on the name server nobody serves: exit 1, not a usage error
  const r = await cli(["send", "--topic", "T", "--count", "2", "--namesrv", "tcp://127.0.0.1:1", "body"], { env });
  assert.equal(r.code, 1, r.err);
});
