/**
 * Workload "transport": one-way messages and ask round trips with 1 KiB bodies between two
 * processes, through the actor runtime (msgpack headers, ROUTER/DEALER, xstate delivery) and,
 * in the same run, through raw zeromq DEALER/ROUTER as the baseline.
 *
 * The peer process is this same file started with ACTORMQ_BENCH_PEER=runtime|raw.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { ActorNode, type Replier } from "../actors/runtime/index.ts";
import type { BenchOptions, BenchResult } from "./index.ts";

const BODY_BYTES = 1024;
/** asks in flight at once, identical for the runtime and the raw baseline */
const ASK_WINDOW = 64;

const KIND_ONE_WAY = 1;
const KIND_ASK = 2;
const KIND_COUNT = 3;

async function runtimePeer(): Promise<void> {
  let count = 0;
  const sink = setup({
    types: { events: {} as { type: "MSG"; body?: Buffer } | { type: "ECHO"; reply?: Replier } | { type: "COUNT"; reply?: Replier } },
  }).createMachine({
    on: {
      MSG: { actions: () => void count++ },
      ECHO: { actions: ({ event }) => event.reply?.ok({ ok: true }) },
      COUNT: { actions: ({ event }) => event.reply?.ok({ count }) },
    },
  });
  const node = await ActorNode.start({ listen: "tcp://127.0.0.1:*", sendHighWaterMark: 1_000_000 });
  node.spawn("sink", sink);
  console.log(JSON.stringify({ address: node.address }));
  process.on("SIGTERM", () => void node.close());
}

async function rawPeer(): Promise<void> {
  const router = new zmq.Router({ linger: 0, sendHighWaterMark: 1_000_000, receiveHighWaterMark: 1_000_000 });
  await router.bind("tcp://127.0.0.1:*");
  console.log(JSON.stringify({ address: router.lastEndpoint }));
  process.on("SIGTERM", () => router.close());
  let count = 0;
  const countBuf = Buffer.alloc(8);
  for (;;) {
    let msg: Buffer[];
    try {
      msg = await router.receive();
    } catch {
      return;
    }
    const kind = msg[1]![0];
    if (kind === KIND_ONE_WAY) count++;
    else if (kind === KIND_ASK) await router.send([msg[0]!, msg[2]!]);
    else if (kind === KIND_COUNT) {
      countBuf.writeDoubleBE(count, 0);
      await router.send([msg[0]!, countBuf]);
    }
  }
}

function startPeer(role: "runtime" | "raw"): Promise<{ address: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url)], {
    env: { ...process.env, ACTORMQ_BENCH_PEER: role },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", (l) => {
      const address = JSON.parse(l).address as string;
      resolve({
        address,
        stop: () =>
          new Promise((r) => {
            child.once("exit", () => r());
            child.kill("SIGTERM");
            setTimeout(() => child.kill("SIGKILL"), 3000).unref();
          }),
      });
    });
    child.once("exit", (code) => reject(new Error(`bench peer exited with ${code}`)));
  });
}

async function measureRuntime(n: number, asks: number): Promise<{ oneWay: number; ask: number }> {
  const peer = await startPeer("runtime");
  const node = await ActorNode.start({ listen: null, sendHighWaterMark: 1_000_000, requestTimeoutMs: 30_000 });
  const sink = node.ref(peer.address, "sink");
  const body = Buffer.alloc(BODY_BYTES, 1);
  await sink.ask({ type: "ECHO" });
  const msg = { type: "MSG" };
  let t0 = performance.now();
  // yield to the event loop every chunk so the socket drains while we produce
  for (let i = 0; i < n; ) {
    const end = Math.min(n, i + 1000);
    for (; i < end; i++) sink.send(msg, { body });
    await new Promise((r) => setImmediate(r));
  }
  for (;;) {
    const r = await sink.ask<{ count: number }>({ type: "COUNT" });
    if (r.fields.count >= n) break;
  }
  const oneWay = n / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  let sent = 0;
  const echo = { type: "ECHO" };
  const worker = async () => {
    while (sent < asks) {
      sent++;
      await sink.ask(echo, { body });
    }
  };
  await Promise.all(Array.from({ length: ASK_WINDOW }, worker));
  const ask = asks / ((performance.now() - t0) / 1000);
  await node.close();
  await peer.stop();
  return { oneWay, ask };
}

async function measureRaw(n: number, asks: number): Promise<{ oneWay: number; ask: number }> {
  const peer = await startPeer("raw");
  const dealer = new zmq.Dealer({ linger: 0, sendHighWaterMark: 1_000_000, receiveHighWaterMark: 1_000_000 });
  dealer.connect(peer.address);
  const body = Buffer.alloc(BODY_BYTES, 1);
  const oneWayKind = Buffer.from([KIND_ONE_WAY]);
  const askKind = Buffer.from([KIND_ASK]);
  const countKind = Buffer.from([KIND_COUNT]);
  let t0 = performance.now();
  for (let i = 0; i < n; i++) await dealer.send([oneWayKind, body]);
  for (;;) {
    await dealer.send([countKind]);
    const [c] = await dealer.receive();
    if (c!.readDoubleBE(0) >= n) break;
  }
  const oneWay = n / ((performance.now() - t0) / 1000);
  // a window of asks: correlation by a 4-byte id, one receive loop resolving them
  const waiting = new Map<number, () => void>();
  let receiving = true;
  const recvLoop = (async () => {
    while (receiving) {
      const [idBuf] = await dealer.receive();
      const id = idBuf!.readUInt32BE(0);
      waiting.get(id)?.();
      waiting.delete(id);
    }
  })();
  t0 = performance.now();
  let sent = 0;
  let nextId = 1;
  const worker = async () => {
    while (sent < asks) {
      sent++;
      const id = nextId++;
      const idBuf = Buffer.alloc(4);
      idBuf.writeUInt32BE(id, 0);
      const p = new Promise<void>((r) => waiting.set(id, r));
      await dealer.send([askKind, idBuf, body]);
      await p;
    }
  };
  await Promise.all(Array.from({ length: ASK_WINDOW }, worker));
  const ask = asks / ((performance.now() - t0) / 1000);
  receiving = false;
  dealer.close();
  await recvLoop.catch(() => {});
  await peer.stop();
  return { oneWay, ask };
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const n = opts.quick ? 20_000 : 200_000;
  const asks = opts.quick ? 5_000 : 50_000;
  const raw = await measureRaw(n, asks);
  if (opts.verbose) console.log(`raw zeromq: ${Math.round(raw.oneWay)} one-way/s, ${Math.round(raw.ask)} asks/s`);
  const rt = await measureRuntime(n, asks);
  if (opts.verbose) console.log(`runtime:    ${Math.round(rt.oneWay)} one-way/s, ${Math.round(rt.ask)} asks/s`);
  return {
    workload: "transport",
    metrics: { oneWayMsgsPerSec: Math.round(rt.oneWay), askRoundTripsPerSec: Math.round(rt.ask) },
    baseline: { zmqOneWayMsgsPerSec: Math.round(raw.oneWay), zmqRoundTripsPerSec: Math.round(raw.ask) },
    ratio: { oneWay: Number((rt.oneWay / raw.oneWay).toFixed(3)), ask: Number((rt.ask / raw.ask).toFixed(3)) },
    notes: [`${n} one-way messages and ${asks} asks (${ASK_WINDOW} in flight), ${BODY_BYTES}-byte bodies, peer in a second process`],
  };
}

const role = process.env.ACTORMQ_BENCH_PEER;
if (role === "runtime") await runtimePeer();
else if (role === "raw") await rawPeer();
