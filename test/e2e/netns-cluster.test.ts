/**
 * Name server, broker and client on three hosts: network namespaces joined by veth pairs to a
 * bridge in a fourth, addresses 10.77.0.1/2/3. The broker binds 0.0.0.0 and advertises its
 * namespace address. Needs root and `ip netns`; otherwise skipped with the reason.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { test } from "node:test";
import { bin, cli } from "../bin/cliRun.ts";
import { tempDir, waitFor } from "../helpers.ts";

const tag = (process.pid % 10000).toString(36);
const HUB = `amqhub${tag}`;
const HOSTS = [1, 2, 3].map((i) => ({ ns: `amq${tag}h${i}`, ip: `10.77.0.${i}`, veth: `amq${tag}v${i}`, peer: `amq${tag}p${i}` }));

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: "pipe" });
}

function whyNotRunnable(): string | null {
  if (process.platform !== "linux") return "network namespaces need Linux";
  if (process.getuid?.() !== 0) return "creating network namespaces needs root";
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "pipe" });
  } catch {
    return "the ip command (iproute2) with netns support is not available";
  }
  return null;
}

function teardown(): void {
  for (const n of [...HOSTS.map((h) => h.ns), HUB]) {
    try {
      ip("netns", "del", n);
    } catch {
      // not created
    }
  }
}

function setup(): void {
  ip("netns", "add", HUB);
  ip("-n", HUB, "link", "add", "br0", "type", "bridge");
  ip("-n", HUB, "link", "set", "br0", "up");
  for (const h of HOSTS) {
    ip("netns", "add", h.ns);
    ip("link", "add", h.veth, "type", "veth", "peer", "name", h.peer);
    ip("link", "set", h.veth, "netns", h.ns);
    ip("link", "set", h.peer, "netns", HUB);
    ip("-n", HUB, "link", "set", h.peer, "master", "br0");
    ip("-n", HUB, "link", "set", h.peer, "up");
    ip("-n", h.ns, "addr", "add", `${h.ip}/24`, "dev", h.veth);
    ip("-n", h.ns, "link", "set", h.veth, "up");
    ip("-n", h.ns, "link", "set", "lo", "up");
  }
}

function server(ns: string, args: string[]): { child: ChildProcess; out: () => string; exited: Promise<unknown> } {
  const child = spawn("ip", ["netns", "exec", ns, process.execPath, bin, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  return { child, out: () => out, exited: new Promise((r) => child.once("exit", r)) };
}

const reason = whyNotRunnable();

test("produce and consume across network namespaces: name server, broker and client on different addresses", {
  skip: reason ?? false,
}, async () => {
  const { dir, cleanup } = await tempDir();
  teardown();
  const servers: ReturnType<typeof server>[] = [];
  try {
    setup();
    const [nsHost, brokerHost, clientHost] = HOSTS as [(typeof HOSTS)[0], (typeof HOSTS)[0], (typeof HOSTS)[0]];
    const namesrv = `tcp://${nsHost.ip}:9876`;
    const ns = server(nsHost.ns, ["nameserver", "--listen", namesrv]);
    servers.push(ns);
    await waitFor(() => /listening/.test(ns.out()), 20_000, `name server (${ns.out()})`);
    const broker = server(brokerHost.ns, [
      "broker",
      "--namesrv",
      namesrv,
      "--listen",
      "tcp://0.0.0.0:10911",
      "--advertise",
      `tcp://${brokerHost.ip}:10911`,
      "--store",
      `${dir}/store`,
    ]);
    servers.push(broker);
    await waitFor(() => /Press Ctrl-C/.test(broker.out()), 20_000, `broker (${broker.out()})`);

    const inClient = (args: string[], input?: string) =>
      cli(["netns", "exec", clientHost.ns, process.execPath, bin, ...args], { input, env: {} }, "ip");
    const route = await inClient(["topic", "create", "NetT", "--queues", "2", "--namesrv", namesrv]);
    assert.equal(route.code, 0, route.err);
    const r = await inClient(["topic", "route", "NetT", "--namesrv", namesrv]);
    assert.match(
      r.out,
      new RegExp(`tcp://${brokerHost.ip.replace(/\./g, "\\.")}:10911`),
      "the route names the advertised address, not 0.0.0.0",
    );
    const s = await inClient(["send", "--topic", "NetT", "--namesrv", namesrv], "one\ntwo\nthree\n");
    assert.equal(s.code, 0, s.err);
    const c = await inClient(["consume", "--topic", "NetT", "--from", "first", "--count", "3", "--group", "net-g", "--namesrv", namesrv]);
    assert.equal(c.code, 0, c.err);
    assert.deepEqual(
      c.out
        .trim()
        .split("\n")
        .map((l) => l.split(" ").at(-1))
        .sort(),
      ["one", "three", "two"],
    );
  } finally {
    for (const s of servers) s.child.kill("SIGTERM");
    await Promise.all(servers.map((s) => s.exited));
    teardown();
    await cleanup();
  }
});
