import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Producer } from "../../actors/client/index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = path.join(root, "bin", "actormq.mjs");

function run(args: string[], cwd: string): { child: ChildProcess; out: () => string; err: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, out: () => out, err: () => err, exit };
}

function freePortPair(): [number, number] {
  const base = 20000 + Math.floor(Math.random() * 20000);
  return [base, base + 1];
}

test("--help describes the commands", async () => {
  const h = run(["--help"], root);
  assert.equal(await h.exit, 0);
  for (const c of ["start", "nameserver", "broker"]) assert.match(h.out(), new RegExp(c));
  const s = run(["start", "--help"], root);
  assert.equal(await s.exit, 0);
  assert.match(s.out(), /--store/);
  assert.match(s.out(), /--flush/);
});

test("start serves, prints its addresses, stops cleanly on SIGTERM; a port in use or a locked store is one line and a non-zero exit", async () => {
  const { dir, cleanup } = await tempDir();
  const [nsPort, brokerPort] = freePortPair();
  const ports = ["--namesrv-listen", `tcp://127.0.0.1:${nsPort}`, "--listen", `tcp://127.0.0.1:${brokerPort}`];
  const s = run(["start", ...ports], dir);
  try {
    await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `start to be ready (${s.err()})`);
    assert.match(s.out(), new RegExp(`tcp://127.0.0.1:${nsPort}`));
    assert.match(s.out(), new RegExp(`tcp://127.0.0.1:${brokerPort}`));
    assert.match(s.out(), /actormq-data/);

    const p = await Producer.start({ group: "cli", nameservers: [`tcp://127.0.0.1:${nsPort}`] });
    try {
      assert.equal((await p.send({ topic: "Cli", body: "hi" })).status, "SEND_OK");
    } finally {
      await p.close();
    }

    const busy = run(["start", ...ports], dir);
    assert.notEqual(await busy.exit, 0);
    assert.equal(busy.err().trim().split("\n").length, 1);
    assert.match(busy.err(), /Cannot listen|in use/i);

    const [p2, p3] = freePortPair();
    const locked = run(["start", "--namesrv-listen", `tcp://127.0.0.1:${p2}`, "--listen", `tcp://127.0.0.1:${p3}`], dir);
    assert.notEqual(await locked.exit, 0);
    assert.equal(locked.err().trim().split("\n").length, 1, locked.err());
    assert.match(locked.err(), /lock|another/i);
  } finally {
    s.child.kill("SIGTERM");
    assert.equal(await s.exit, 0);
    assert.match(s.out(), /stopped/);
    await cleanup();
  }
});
