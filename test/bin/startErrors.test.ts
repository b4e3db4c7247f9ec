import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { NameServer } from "../../actors/nameserver/index.ts";
import { EPHEMERAL, tempDir } from "../helpers.ts";
import { bin, cli, oneLine, root } from "./cliRun.ts";

/** Runs the command; one still running after `ms` is sent SIGTERM (a broker then stops cleanly, exit 0). */
function runFor(args: string[], ms: number): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
    timeout: ms,
    killSignal: "SIGTERM",
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out, err })));
}

test("a broker given a name server or master address it cannot connect to is refused at start, as clients refuse it", async () => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  try {
    const broker = (name: string, ...more: string[]) => [
      "broker",
      "--name",
      name,
      "--listen",
      EPHEMERAL,
      "--store",
      path.join(dir, name),
      ...more,
    ];
    const cases = [
      { args: broker("bad-ns", "--namesrv", "foo"), why: /Cannot connect to "foo"/ },
      { args: broker("bad-ns2", "--namesrv", `${ns.address},http://127.0.0.1:1`), why: /Cannot connect to "http:\/\/127\.0\.0\.1:1"/ },
      {
        args: broker("bad-master", "--namesrv", ns.address, "--role", "SLAVE", "--master-address", "foo"),
        why: /Cannot connect to "foo"/,
      },
    ];
    const results = await Promise.all(cases.map((c) => runFor(c.args, 20_000)));
    for (const [i, r] of results.entries()) {
      const what = cases[i]!.args.join(" ");
      assert.equal(r.code, 1, `${what}: exit ${r.code}\n${r.out}${r.err}`);
      assert.doesNotMatch(r.out, /Press Ctrl-C/, what);
      assert.match(r.err, /^actormq: error ILLEGAL_ARGUMENT: /, what);
      assert.match(r.err, cases[i]!.why, what);
      assert.equal(r.err.trim().split("\n").length, 1, `${what}: one line\n${r.err}`);
    }
  } finally {
    await ns.close();
    await cleanup();
  }
});

test("consume of a topic name that is not valid is one error line, not a 'waiting for its first message' note first", async () => {
  const ns = await NameServer.start({ listen: EPHEMERAL });
  try {
    const r = await runFor(["consume", "--namesrv", ns.address, "--topic", "bad topic!", "--count", "1"], 20_000);
    assert.equal(r.code, 1, r.err);
    assert.equal(
      r.err,
      `actormq: error MESSAGE_ILLEGAL: subscribe: the topic "bad topic!" has illegal characters; use only letters, digits, '%', '|', '_' and '-'.\n`,
    );
  } finally {
    await ns.close();
  }
});

test("broker and start with a --store that cannot be made (on /proc) fail at once in one line naming it, exit 1", async () => {
  const cases = [
    {
      args: ["broker", "--name", "b", "--listen", EPHEMERAL, "--namesrv", "tcp://127.0.0.1:1", "--store", "/proc/actormq-store"],
      store: "/proc/actormq-store",
    },
    {
      args: [
        "start",
        "--name",
        "b",
        "--listen",
        EPHEMERAL,
        "--namesrv-listen",
        EPHEMERAL,
        "--no-inspector",
        "--store",
        "/proc/actormq-data",
      ],
      store: "/proc/actormq-data/b",
    },
  ];
  for (const c of cases) {
    const what = c.args.join(" ");
    // killed, never answered: Node's recursive mkdir spun forever on /proc, deaf to SIGTERM and Ctrl-C
    const r = await cli(["-s", "KILL", "30", process.execPath, bin, ...c.args], {}, "timeout");
    assert.equal(r.code, 1, `${what}: exit ${r.code}\n${r.out}${r.err}`);
    assert.doesNotMatch(r.out, /Press Ctrl-C/, what);
    const line = oneLine(r.err);
    assert.match(line, /^actormq: error ILLEGAL_ARGUMENT: /, what);
    assert.ok(line.includes(c.store), `${what}: ${line}`);
  }
});
