/**
 * Connections a listening node refuses are counted and logged: a server out of file descriptors
 * cannot accept its clients' connections, and a CURVE server refuses clients with the wrong keys;
 * in both the clients only see their connects fail, so the server's log is where an operator learns why.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import * as zmq from "zeromq";
import { logTransportDrops } from "../../actors/logger.ts";
import { curveKeyPair } from "../../transport/curve.ts";
import { ZmqNode } from "../../transport/zmqNode.ts";
import { EPHEMERAL, waitFor } from "../helpers.ts";

// a name server whose process may open a few dozen more descriptors than it needs to start (about
// 35): headroom for what its start opens for a moment (module loading, the compile cache)
const CHILD = `
import { NameServer } from ${JSON.stringify(new URL("../../index.ts", import.meta.url).href)};
const ns = await NameServer.start({ listen: "tcp://127.0.0.1:*" });
console.log(JSON.stringify({ address: ns.address }));
`;

test("a name server out of file descriptors logs that it cannot accept connections, with advice, and keeps running", async (t) => {
  const child = spawn("bash", ["-c", `ulimit -n 90 && exec "$0" --import tsx --input-type=module -e "$1"`, process.execPath, CHILD], {
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const socks: zmq.Dealer[] = [];
  t.after(() => {
    for (const s of socks) s.close();
    child.kill("SIGKILL");
  });
  await waitFor(() => out.includes('"address"'), 30_000, `the name server to start: ${out}`);
  const { address } = JSON.parse(out.split("\n").find((l) => l.includes('"address"'))!) as { address: string };
  // more connections than descriptors left
  for (let i = 0; i < 80; i++) {
    const d = new zmq.Dealer({ linger: 0 });
    d.connect(address);
    socks.push(d);
  }
  await waitFor(() => out.includes("could not accept connections"), 15_000, `the refused accept logged: ${out}`);
  const line = JSON.parse(out.split("\n").find((l) => l.includes("could not accept connections"))!) as Record<string, unknown>;
  assert.equal(line.level, 50, "an error: clients cannot connect");
  assert.match(String(line.reason), /EMFILE/);
  assert.match(String(line.msg), /ulimit -n/);
  assert.equal(out.split("\n").filter((l) => l.includes("could not accept connections")).length, 1, "throttled: one line for the burst");
  for (const s of socks) s.close();
  socks.length = 0;
  assert.equal(child.exitCode, null, "the name server is still running");
});

test("a CURVE server logs clients refused at the handshake, throttled, and counts each", async (t) => {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const server = curveKeyPair();
  const node = await ZmqNode.start({ listen: EPHEMERAL, curve: server });
  logTransportDrops(node, logger, "broker t");
  const plain = [new zmq.Dealer({ linger: 0 }), new zmq.Dealer({ linger: 0 })];
  t.after(async () => {
    for (const p of plain) p.close();
    await node.close();
  });
  for (const p of plain) {
    // connecting starts the handshake; the send may fail (EAGAIN) once the refused pipe is torn down
    p.connect(node.address!);
    await p.send(Buffer.from("hello")).catch(() => {});
  }
  await waitFor(() => node.stats.handshakeFailures >= 2, 10_000, "both plain clients' handshakes refused");
  assert.equal(node.stats.acceptFailures, 0);
  assert.equal(node.stats.requestsIn, 0);
  const refused = lines.filter((l) => /refused connections whose handshake failed/.test(String(l.msg)));
  assert.equal(refused.length, 1, "one line per 30 s");
  assert.match(String(refused[0]!.msg), /^broker t refused connections whose handshake failed: check the clients' CURVE keys/);
  assert.equal(refused[0]!.refused, 1);
  assert.equal(typeof refused[0]!.reason, "string");
});

test("a connection closed before its handshake (a TCP health check) is neither counted nor logged", async (t) => {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const node = await ZmqNode.start({ listen: EPHEMERAL, curve: curveKeyPair() });
  t.after(() => node.close());
  logTransportDrops(node, logger, "broker t");
  const port = Number(node.address!.split(":").pop());
  for (let i = 0; i < 3; i++) {
    // closed once the node has accepted it and sent its greeting
    const s = net.connect(port, "127.0.0.1");
    s.once("data", () => s.destroy());
    s.on("error", () => {});
    await new Promise((r) => s.on("close", r));
  }
  // then a plain client, refused at its handshake: the node's connection events come in order, so
  // once this one is counted the probes before it have been seen
  const d = new zmq.Dealer({ linger: 0 });
  t.after(() => d.close());
  d.connect(node.address!);
  await d.send(Buffer.from("hello"));
  await waitFor(() => node.stats.handshakeFailures >= 1, 10_000, "the plain client's handshake refused");
  assert.equal(node.stats.handshakeFailures, 1, "the probes are not counted");
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.refused, 1);
});
