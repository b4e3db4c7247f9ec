import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { pino } from "pino";
import * as zmq from "zeromq";
import {
  createLogger,
  LOG_THROTTLE_MAX_KEYS,
  LogThrottle,
  logTransportDrops,
  TRANSPORT_DROP_LOG_INTERVAL_MS,
} from "../../actors/logger.ts";
import { Admin, NameServer, Producer, PullConsumer, PushConsumer } from "../../index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import { encode, framePrefix } from "../../transport/codec.ts";
import { MQError } from "../../transport/protocol.ts";
import { ZmqNode } from "../../transport/zmqNode.ts";
import { EPHEMERAL, fakeWallClock, monotonicFollowsDate, waitFor } from "../helpers.ts";
import { requestFrame } from "../transport/fixtures/rawFrames.ts";

test("createLogger takes pino's levels and silent; other names, Object.prototype's included, are ILLEGAL_ARGUMENT", () => {
  for (const level of ["trace", "debug", "info", "warn", "error", "fatal", "silent"]) assert.equal(createLogger("t", level).level, level);
  for (const level of ["verbose", "toString", "constructor", "__proto__", "hasOwnProperty", ""])
    assert.throws(
      () => createLogger("t", level),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /Unknown log level/.test(e.message),
      level,
    );
});

test("servers log on stdout, clients on stderr (a client program's stdout is its data)", () => {
  const script = `
    import { createLogger, lazyClientLogger } from ${JSON.stringify(new URL("../../actors/logger.ts", import.meta.url).href)};
    createLogger("broker:t", "info").info("server line");
    lazyClientLogger("client:t")().warn("client line");
    process.stdout.write("data\\n");
  `;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "info", NODE_TEST_CONTEXT: "" },
  });
  assert.equal(r.status, 0, r.stderr);
  // the server logger writes asynchronously: its line and the program's own may come in either order
  const out = r.stdout.trim().split("\n").sort();
  assert.equal(out.length, 2, r.stdout);
  assert.equal(out[0], "data");
  assert.equal(JSON.parse(out[1]!).msg, "server line");
  const err = r.stderr.trim().split("\n");
  assert.equal(err.length, 1, r.stderr);
  assert.equal(JSON.parse(err[0]!).msg, "client line");
});

test("a throttled log line goes out again after its interval of real time, though the wall clock stepped back 1 h", async () => {
  const clock = fakeWallClock();
  try {
    const t = new LogThrottle(200);
    assert.equal(t.pass("pull-failed"), 0);
    clock.jump(-3_600_000);
    const held = await waitFor(() => t.pass("pull-failed"), 2_000, "the next line let through");
    assert.ok(held > 0);
  } finally {
    clock.restore();
  }
});

test("a log throttle keyed by what peers send stays bounded: past LOG_THROTTLE_MAX_KEYS, keys whose interval is over are forgotten", () => {
  const done = new LogThrottle(0);
  for (let i = 0; i < 3 * LOG_THROTTLE_MAX_KEYS; i++) assert.equal(done.pass(`k${i}`), 0);
  assert.ok(done.size <= LOG_THROTTLE_MAX_KEYS, `${done.size} keys kept`);
  // keys still within their interval are kept: forgetting them would let their lines through again
  const open = new LogThrottle(60_000);
  for (let i = 0; i < LOG_THROTTLE_MAX_KEYS + 10; i++) open.pass(`k${i}`);
  assert.equal(open.size, LOG_THROTTLE_MAX_KEYS + 10);
  assert.equal(open.pass("k0"), undefined, "k0 still held back");
});

test("an unknown ACTORMQ_LOG_LEVEL is refused at Producer, PushConsumer, PullConsumer and Admin start with ILLEGAL_ARGUMENT", async () => {
  const ns = await NameServer.start({ listen: "tcp://127.0.0.1:*", logLevel: "warn" });
  const saved = process.env.ACTORMQ_LOG_LEVEL;
  process.env.ACTORMQ_LOG_LEVEL = "verbose";
  try {
    const nameservers = [ns.address];
    const starts: [string, () => Promise<{ close(): Promise<void> }>][] = [
      ["Producer", () => Producer.start({ group: "pg", nameservers })],
      [
        "PushConsumer",
        () => PushConsumer.start({ group: "cg", nameservers, subscriptions: { T: "*" }, listener: async () => "CONSUME_SUCCESS" }),
      ],
      ["PullConsumer", () => PullConsumer.start({ group: "lg", nameservers })],
      ["Admin", () => Admin.start({ nameservers })],
    ];
    for (const [name, start] of starts) {
      const r = await start().then(
        async (c) => {
          await c.close();
          return "started";
        },
        (e: unknown) => e,
      );
      assert.ok(
        r instanceof MQError &&
          r.code === "ILLEGAL_ARGUMENT" &&
          /"verbose"/.test(r.message) &&
          /ACTORMQ_LOG_LEVEL/.test(r.message) &&
          /trace, debug, info, warn, error, fatal or silent/.test(r.message),
        `${name}: ${String(r)}`,
      );
    }
  } finally {
    if (saved === undefined) delete process.env.ACTORMQ_LOG_LEVEL;
    else process.env.ACTORMQ_LOG_LEVEL = saved;
    await ns.close();
  }
});

test("a client logger made under an unknown ACTORMQ_LOG_LEVEL does not throw: it logs at warn, after one note on stderr", () => {
  // a level set after the clients started (or code logging without one) must not turn a warning into a crash
  const script = `
    import { lazyClientLogger } from ${JSON.stringify(new URL("../../actors/logger.ts", import.meta.url).href)};
    lazyClientLogger("client:a")().warn("first");
    lazyClientLogger("client:b")().warn("second");
    lazyClientLogger("client:b")().info("not at warn");
  `;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "verbose", NODE_TEST_CONTEXT: "" },
  });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stderr
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { msg: string; level: number });
  assert.equal(lines.length, 3, r.stderr);
  assert.match(lines[0]!.msg, /ACTORMQ_LOG_LEVEL "verbose"/);
  assert.match(lines[0]!.msg, /trace, debug, info, warn, error, fatal or silent/);
  assert.deepEqual(
    lines.slice(1).map((l) => l.msg),
    ["first", "second"],
  );
});

/** A listening node wired to a logger whose warnings land in `lines`, and a raw DEALER connected to it. */
async function loggedNode(t: import("node:test").TestContext) {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const node = await ZmqNode.start({ listen: EPHEMERAL });
  const served: number[] = [];
  node.onRequest((_link, _code, corrId) => served.push(corrId));
  logTransportDrops(node, logger, "broker t");
  const raw = new zmq.Dealer({ linger: 0 });
  raw.connect(node.address!);
  t.after(async () => {
    raw.close();
    await node.close();
  });
  /** Sends the frames and a fresh ask `marker` after them, and waits until the node served the marker. */
  const sendThenMark = async (frames: Buffer[], marker: number) => {
    for (const f of frames) await raw.send(f);
    await raw.send(requestFrame(marker, monotonicNow(), 0, 1000));
    await waitFor(() => served.includes(marker), 5000, `request ${marker}`);
  };
  return { lines, node, raw, sendThenMark };
}

test("a listening node warns of asks dropped unserved (it is overloaded) at most once per 30 s, with the count since its last line", async (t) => {
  monotonicFollowsDate(t);
  const clock = fakeWallClock();
  t.after(() => clock.restore());
  const { lines, node, sendThenMark } = await loggedNode(t);
  const stale = (id: number) => requestFrame(id, monotonicNow(), 5000, 1000);
  await sendThenMark([requestFrame(1, monotonicNow(), 0, 1000), stale(2), stale(3), stale(4)], 5);
  assert.equal(node.stats.expiredDropped, 3);
  assert.equal(lines.length, 1, "one line for the first drop, the next two held back");
  assert.match(String(lines[0]!.msg), /^broker t is overloaded: requests are dropped unserved/);
  assert.equal(lines[0]!.dropped, 1);
  assert.equal(lines[0]!.event, "PING");
  assert.equal(lines[0]!.timeoutMs, 1000);
  assert.ok((lines[0]!.waitedMs as number) >= 4900, `waitedMs ${lines[0]!.waitedMs}`);
  assert.equal(lines[0]!.peer, "peer-1");

  clock.jump(TRANSPORT_DROP_LOG_INTERVAL_MS + 1000);
  await sendThenMark([stale(6), stale(7)], 8);
  assert.equal(lines.length, 2);
  assert.equal(lines[1]!.dropped, 3, "the two held back and this one");
});

test("a listening node warns of malformed frames at most once per 30 s, with the count since its last line and the peer", async (t) => {
  monotonicFollowsDate(t);
  const clock = fakeWallClock();
  t.after(() => clock.restore());
  const { lines, node, raw, sendThenMark } = await loggedNode(t);
  // not an actormq frame at all, then a request whose fields have wrong types (answered MALFORMED)
  await raw.send(Buffer.from("GET / HTTP/1.1\r\n\r\n"));
  await sendThenMark([frameOf([0, 1, 9, 7, "x", "notobject", 0, -1])], 1);
  assert.equal(node.stats.malformedDropped + node.stats.malformedAnswered, 2);
  assert.equal(lines.length, 1, "one line for the first, the second held back");
  assert.match(String(lines[0]!.msg), /^broker t received malformed frames/);
  assert.equal(lines[0]!.malformed, 1);
  assert.match(String(lines[0]!.peer), /^client [0-9a-f]+$/, "a peer that never sent a good request is named by its connection");
  assert.equal(typeof lines[0]!.reason, "string");

  clock.jump(TRANSPORT_DROP_LOG_INTERVAL_MS + 1000);
  await sendThenMark([frameOf([0, 9999, 10, "svc", "x", { type: "NOPE" }, 0, -1])], 2);
  assert.equal(lines.length, 2);
  assert.equal(lines[1]!.malformed, 2, "the one held back and this one");
  assert.equal(lines[1]!.peer, "peer-1", "the node id the connection's good requests gave");
  assert.match(String(lines[1]!.reason), /request code/);
});

function frameOf(header: unknown[]): Buffer {
  const h = encode(header);
  return Buffer.concat([framePrefix(h.length), h]);
}
