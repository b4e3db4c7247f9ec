import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Broker } from "../../actors/broker/broker.ts";
import { Producer } from "../../actors/client/index.ts";
import { cmdlineOf, isAlive } from "../../actors/cluster/index.ts";
import { NameServer } from "../../actors/nameserver/index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { cli } from "./cliRun.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = path.join(root, "bin", "actormq.mjs");

function run(
  args: string[],
  cwd: string,
  nodeFlags: string[] = [],
): { child: ChildProcess; out: () => string; err: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [...nodeFlags, bin, ...args], {
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

/** The banner of a server command once it serves; the server is then stopped with SIGTERM and must exit 0. */
async function bannerOf(args: string[], cwd: string, nodeFlags: string[] = []): Promise<string> {
  const r = run(args, cwd, nodeFlags);
  try {
    await waitFor(() => /Press Ctrl-C/.test(r.out()), 30_000, `${args[0]} to be ready (${r.err()})`);
    return r.out();
  } finally {
    r.child.kill("SIGTERM");
    assert.equal(await r.exit, 0);
  }
}

// Ephemeral ports only (`*`): a port picked at random can be one another test just bound.
const anyPort = ["--namesrv-listen", "tcp://127.0.0.1:*", "--listen", "tcp://127.0.0.1:*"];

test("--help describes the commands", async () => {
  const h = run(["--help"], root);
  assert.equal(await h.exit, 0);
  for (const c of ["start", "nameserver", "broker"]) assert.match(h.out(), new RegExp(c));
  const s = run(["start", "--help"], root);
  assert.equal(await s.exit, 0);
  assert.match(s.out(), /--store/);
  assert.match(s.out(), /--flush/);
  assert.match(s.out(), /--max-semi-space-size=8 --initial-old-space-size=64/, "start --help gives the brokers' node flags");
  assert.match(s.out(), /--heap-reserve <MiB>/);
  assert.match(s.out(), /log level \(default: \$ACTORMQ_LOG_LEVEL\s+or\s+info\)/);
});

test("no command (actormq, actormq topic) is a usage error: help on stderr, exit 2; help asked for exits 0", async () => {
  for (const args of [[], ["topic"], ["cluster"]]) {
    const r = await cli(args);
    assert.equal(r.code, 2, args.join(" "));
    assert.equal(r.out, "");
    assert.match(r.err, /^Usage: actormq/);
  }
  const h = await cli(["help", "topic"]);
  assert.equal(h.code, 0);
  assert.match(h.out, /^Usage: actormq topic/);
});

test("a --listen port past 65535 is refused, not bound modulo 65536", async () => {
  const { dir, cleanup } = await tempDir();
  const r = run(["nameserver", "--listen", "tcp://127.0.0.1:99999"], dir);
  // a name server that serves anyway is stopped, so the assertion fails instead of hanging
  const guard = setTimeout(() => r.child.kill("SIGKILL"), 20_000);
  try {
    assert.equal(await r.exit, 1);
    assert.match(r.err(), /^actormq: error ILLEGAL_ARGUMENT: listen endpoint tcp:\/\/127.0.0.1:99999 has no valid port/);
  } finally {
    clearTimeout(guard);
    await cleanup();
  }
});

test("start serves, prints its addresses, stops cleanly on SIGTERM; a port in use or a locked store is one line and a non-zero exit", async () => {
  const { dir, cleanup } = await tempDir();
  const s = run(["start", ...anyPort], dir);
  try {
    await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `start to be ready (${s.err()})`);
    const nsAddr = /name server\s+(tcp:\/\/127\.0\.0\.1:\d+)/.exec(s.out())?.[1];
    const brokerAddr = /broker\s+broker-a (tcp:\/\/127\.0\.0\.1:\d+)/.exec(s.out())?.[1];
    assert.ok(nsAddr && brokerAddr, `bound addresses printed: ${s.out()}`);
    assert.match(s.out(), /actormq-data/);
    // started without the brokers' node flags: the banner says which are missing and what stands in
    assert.match(
      s.out(),
      /node flags\s+without --max-semi-space-size=8 --initial-old-space-size=64: a 32 MiB heap reserve stands in for --initial-old-space-size/,
    );

    // without the reserve, nothing stands in
    const brokerArgs = (name: string) => [
      "broker",
      "--namesrv",
      nsAddr,
      "--listen",
      "tcp://127.0.0.1:*",
      "--name",
      name,
      "--store",
      path.join(dir, name),
    ];
    const noReserve = await bannerOf([...brokerArgs("broker-r"), "--heap-reserve", "0"], dir);
    assert.match(
      noReserve,
      /node flags\s+without --max-semi-space-size=8 --initial-old-space-size=64: expect frequent full GCs under load/,
    );

    // a broker started with them (another value for one counts) says nothing about them
    const flagged = await bannerOf(brokerArgs("broker-b"), dir, ["--max_semi_space_size=4", "--initial-old-space-size=64"]);
    assert.doesNotMatch(flagged, /node flags/);

    const p = await Producer.start({ group: "cli", nameservers: [nsAddr] });
    try {
      assert.equal((await p.send({ topic: "Cli", body: "hi" })).status, "SEND_OK");
    } finally {
      await p.close();
    }

    const busy = run(["start", "--namesrv-listen", nsAddr, "--listen", brokerAddr], dir);
    assert.notEqual(await busy.exit, 0);
    assert.equal(busy.err().trim().split("\n").length, 1);
    assert.match(busy.err(), /Cannot listen|in use/i);

    const locked = run(["start", ...anyPort], dir);
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

test("start shuts down cleanly on SIGHUP (terminal closed): no abort marker, the next start recovers normally", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    for (const round of [1, 2]) {
      const s = run(["start", "--store", "data", ...anyPort, "--no-inspector"], dir);
      await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `start to be ready (${s.err()})`);
      if (round === 2) assert.doesNotMatch(s.out() + s.err(), /abnormal/i, "the store was closed cleanly");
      s.child.kill("SIGHUP");
      assert.equal(await s.exit, 0, s.out() + s.err());
      assert.match(s.out(), /SIGHUP received, shutting down/);
      assert.match(s.out(), /stopped/);
      assert.ok(!existsSync(path.join(dir, "data", "broker-a", "abort")), "no abort marker left");
    }
  } finally {
    await cleanup();
  }
});

test("npm start stops the server it runs on SIGTERM to npm (a process manager's stop), not only npm", async () => {
  const { dir, cleanup } = await tempDir();
  const store = path.join(dir, "data");
  const npm = spawn("npm", ["start", "--", "--store", store, ...anyPort, "--no-inspector"], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  let out = "";
  npm.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  npm.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exit = new Promise<void>((r) => npm.once("exit", () => r()));
  const servers = () =>
    readdirSync("/proc")
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .filter((pid) => {
        const argv = cmdlineOf(pid);
        return !!argv && path.basename(argv[0] ?? "") === "node" && argv.includes(store);
      });
  try {
    await waitFor(() => /Press Ctrl-C/.test(out), 60_000, `npm start to be ready (${out})`);
    const [server] = servers();
    assert.ok(server, "the server runs node");
    npm.kill("SIGTERM");
    await exit;
    await waitFor(() => !isAlive(server), 20_000, `the server (pid ${server}) to stop`);
    assert.match(out, /stopped/);
  } finally {
    npm.kill("SIGKILL");
    for (const pid of servers()) process.kill(pid, "SIGKILL");
    await cleanup();
  }
});

test("broker --broker-id past 2^53-1 is a usage error saying what a broker id is", async () => {
  const r = await cli(["broker", "--name", "big", "--broker-id", "9007199254740993", "--namesrv", "tcp://127.0.0.1:1"]);
  assert.equal(r.code, 2);
  assert.match(r.err, /--broker-id.*expected a broker id: an integer from 0 \(the master\) to 2\^53-1/);
});

test("broker --role SLAVE without --broker-id runs as slave 1 next to its master; a SLAVE with id 0 or a master with id 1 is refused", async () => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const master = await Broker.start({ brokerName: "rs", listen: EPHEMERAL, nameservers: [ns.address], storeDir: path.join(dir, "m") });
  const env = { ACTORMQ_NAMESRV: ns.address };
  const slaveArgs = ["broker", "--name", "rs", "--role", "SLAVE", "--master-address", master.address, "--namesrv", ns.address];
  const s = run([...slaveArgs, "--listen", EPHEMERAL, "--store", path.join(dir, "s")], dir);
  try {
    await master.createTopic({ topic: "RoleT", readQueueNums: 1 });
    await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `slave to be ready (${s.err()})`);
    const slaveAddr = /listening on (tcp:\/\/\S+)/.exec(s.out())?.[1];
    const route = await waitFor(async () => {
      const r = await cli(["topic", "route", "RoleT"], { env });
      return /rs\s+slave/.test(r.out) ? r.out : undefined;
    });
    assert.match(route, new RegExp(`rs\\s+master\\s+${master.address}`), route);
    assert.match(route, new RegExp(`rs\\s+slave 1\\s+${slaveAddr}`), route);

    const id0 = await cli([...slaveArgs, "--broker-id", "0", "--listen", EPHEMERAL, "--store", path.join(dir, "s0")]);
    assert.equal(id0.code, 1);
    assert.match(id0.err, /^actormq: error ILLEGAL_ARGUMENT: A SLAVE needs brokerId > 0/);
    const master1 = await cli(["broker", "--name", "rs", "--broker-id", "1", "--role", "SYNC_MASTER", "--namesrv", ns.address]);
    assert.equal(master1.code, 1);
    assert.match(master1.err, /ILLEGAL_ARGUMENT: role SYNC_MASTER is a master role and needs brokerId 0/);
  } finally {
    s.child.kill("SIGTERM");
    assert.equal(await s.exit, 0);
    await master.close();
    await ns.close();
    await cleanup();
  }
});

test("broker without --store keeps its store in ./actormq-data/<--name>, so a second broker never opens the first one's", async () => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  try {
    const args = (name?: string) => ["broker", "--namesrv", ns.address, "--listen", EPHEMERAL, ...(name ? ["--name", name] : [])];
    const a = await bannerOf(args(), dir);
    assert.ok(
      a.includes(`broker broker-a listening on tcp://127.0.0.1:`) && a.includes(`(store ${path.join(dir, "actormq-data", "broker-a")},`),
      a,
    );
    const b = await bannerOf(args("broker-b"), dir);
    assert.ok(
      b.includes(`broker broker-b listening on tcp://127.0.0.1:`) && b.includes(`(store ${path.join(dir, "actormq-data", "broker-b")},`),
      b,
    );
    // a slave of broker-a: its own store, not its master's (which is locked while the master runs)
    const s = await bannerOf([...args(), "--role", "SLAVE", "--master-address", "tcp://127.0.0.1:1"], dir);
    assert.ok(s.includes(`(store ${path.join(dir, "actormq-data", "broker-a-s1")},`), s);
    assert.deepEqual(readdirSync(path.join(dir, "actormq-data")).sort(), ["broker-a", "broker-a-s1", "broker-b"]);
    const h = await cli(["broker", "--help"]);
    assert.match(h.out, /\.\/actormq-data\/<brokerName>/);
    assert.match(h.out, /<brokerName>-s<brokerId>/);
  } finally {
    await ns.close();
    await cleanup();
  }
});

test("broker --broker-permission 4 runs read only: its topics are routed with perm 4; a value that is not a perm bit set is a usage error", async () => {
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const args = ["broker", "--namesrv", ns.address, "--listen", EPHEMERAL, "--name", "ro", "--store", path.join(dir, "ro")];
  const b = run([...args, "--broker-permission", "4"], dir);
  try {
    const h = await cli(["broker", "--help"]);
    assert.match(h.out, /--broker-permission <perm>/);
    for (const bad of ["16", "-1", "4.5", "rw"]) {
      const r = await cli([...args, "--broker-permission", bad]);
      assert.equal(r.code, 2, `${bad}: ${r.err}`);
      assert.match(r.err, /option '--broker-permission <perm>' argument '.*' is invalid\. expected a PermName bit set from 0 to 15/);
    }
    await waitFor(() => /Press Ctrl-C/.test(b.out()), 30_000, `broker to be ready (${b.err()})`);
    // the banner says so: the permission may come from config/broker.json, kept from an earlier run
    assert.match(b.out(), /read only: brokerPermission 4 .*actormq broker-config set ro brokerPermission 6/);
    const env = { ACTORMQ_NAMESRV: ns.address };
    const created = await cli(["topic", "create", "RoT", "--queues", "2"], { env });
    assert.equal(created.code, 0, created.err);
    const route = await cli(["topic", "route", "RoT"], { env });
    assert.match(route.out, /ro\s+master\s+tcp:\S+\s+2\s+2\s+4\s*$/m, route.out);
    b.child.kill("SIGTERM");
    assert.equal(await b.exit, 0, b.err());
  } finally {
    b.child.kill("SIGKILL");
    await b.exit;
    await ns.close();
    await cleanup();
  }
});
