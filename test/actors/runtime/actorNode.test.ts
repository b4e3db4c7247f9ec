import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { assign, setup } from "xstate";
import { ActorNode, type Origin, type Replier, type WireEvent } from "../../../actors/runtime/index.ts";
import { monotonicNow } from "../../../transport/clock.ts";
import { isMQError, MQError } from "../../../transport/protocol.ts";
import { PEER_EXPIRY_MS } from "../../../transport/zmqNode.ts";
import { EPHEMERAL, fakeWallClock, waitFor } from "../../helpers.ts";

type EchoEvent =
  | { type: "ECHO"; text: string; body?: Buffer; reply?: Replier; origin?: Origin }
  | { type: "COUNT"; n: number; body?: Buffer; reply?: Replier }
  | { type: "GET"; reply?: Replier }
  | { type: "FAIL"; reply?: Replier }
  | { type: "CALL_BACK"; reply?: Replier; origin?: Origin };

const echoMachine = setup({
  types: { context: {} as { total: number; bytes: number }, events: {} as EchoEvent },
}).createMachine({
  context: { total: 0, bytes: 0 },
  on: {
    ECHO: { actions: ({ event }) => event.reply?.ok({ text: event.text, from: event.origin?.nodeId ?? "local" }, event.body) },
    COUNT: {
      actions: assign({
        total: ({ context, event }) => context.total + event.n,
        bytes: ({ context, event }) => context.bytes + (event.body?.length ?? 0),
      }),
    },
    GET: { actions: ({ context, event }) => event.reply?.ok({ total: context.total, bytes: context.bytes }) },
    FAIL: {
      actions: ({ event }) => {
        event.reply?.fail(new MQError("TOPIC_NOT_EXIST", "no such topic"));
        event.reply?.ok({ late: true });
      },
    },
    CALL_BACK: {
      actions: ({ event }) => {
        const r = event.reply;
        event
          .origin!.ref("client")
          .ask({ type: "PING" }, { timeoutMs: 2000 })
          .then(
            (rep) => r?.ok({ clientSaid: rep.fields.pong }),
            (e) => r?.fail(e),
          );
      },
    },
  },
});

const clientMachine = setup({ types: { events: {} as { type: "PING"; reply?: Replier } } }).createMachine({
  on: { PING: { actions: ({ event }) => event.reply?.ok({ pong: "from-client" }) } },
});

describe("ActorNode ask/send", () => {
  let server: ActorNode;
  let client: ActorNode;
  before(async () => {
    server = await ActorNode.start({ listen: EPHEMERAL, requestTimeoutMs: 2000 });
    client = await ActorNode.start({ listen: null, requestTimeoutMs: 2000 });
    server.spawn("echo", echoMachine);
    client.spawn("client", clientMachine);
  });
  after(async () => {
    await client.close();
    await server.close();
  });

  it("binds an ephemeral port and reports it", () => {
    assert.match(server.address ?? "", /^tcp:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(server.address, "tcp://127.0.0.1:*");
    assert.equal(client.address, null);
  });

  it("asks a remote actor and gets fields and body back", async () => {
    const r = await client
      .ref(server.address, "echo")
      .ask<{ text: string; from: string }>({ type: "ECHO", text: "hi" }, { body: [Buffer.from("ab"), Buffer.from("cd")] });
    assert.equal(r.fields.text, "hi");
    assert.equal(r.fields.from, client.nodeId);
    assert.equal(r.body?.toString(), "abcd");
  });

  it("delivers one-way sends in order, and a local ref behaves the same", async () => {
    const remote = client.ref(server.address, "echo");
    for (let i = 1; i <= 100; i++) remote.send({ type: "COUNT", n: i }, { body: Buffer.alloc(10) });
    const local = server.ref(null, "echo");
    local.send({ type: "COUNT", n: 1000 }, { body: new Uint8Array(5) });
    await waitFor(async () => (await local.ask<{ total: number }>({ type: "GET" })).fields.total === 5050 + 1000, 5000, "all COUNTs");
    const r = await remote.ask<{ total: number; bytes: number }>({ type: "GET" });
    assert.deepEqual(r.fields, { total: 6050, bytes: 1005 });
    const l = await server
      .ref(server.address, "echo")
      .ask<{ text: string; from: string }>({ type: "ECHO", text: "self" }, { body: Buffer.from("x") });
    assert.deepEqual(l.fields, { text: "self", from: "local" });
    assert.equal(l.body?.toString(), "x");
  });

  it("frames past the early-send size go out mid-tick: big asks and their replies all arrive intact, sends in order", async () => {
    const remote = client.ref(server.address, "echo");
    const body = (i: number) => Buffer.alloc(48 * 1024 + i, i & 0xff);
    // 12 x ~48 KiB asked in one tick: the DEALER sends early at 128 KiB, the ROUTER's replies too
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) => remote.ask<{ text: string }>({ type: "ECHO", text: `big-${i}` }, { body: body(i) })),
    );
    replies.forEach((r, i) => {
      assert.equal(r.fields.text, `big-${i}`);
      assert.ok(r.body?.equals(body(i)), `reply ${i} carries its own body`);
    });
    const before = (await remote.ask<{ total: number; bytes: number }>({ type: "GET" })).fields;
    for (let i = 1; i <= 6; i++) remote.send({ type: "COUNT", n: i }, { body: Buffer.alloc(40 * 1024) });
    const after = (await remote.ask<{ total: number; bytes: number }>({ type: "GET" })).fields;
    assert.deepEqual(after, { total: before.total + 21, bytes: before.bytes + 6 * 40 * 1024 }, "the GET sent after them sees every COUNT");
  });

  it("carries typed errors; the first reply wins", async () => {
    for (const ref of [client.ref(server.address, "echo"), server.ref(null, "echo")]) {
      await assert.rejects(ref.ask({ type: "FAIL" }), (e) => isMQError(e, "TOPIC_NOT_EXIST") && e.message === "no such topic");
    }
  });

  it("answers SYSTEM_ERROR for an unknown actor, remote and local", async () => {
    for (const ref of [client.ref(server.address, "nobody"), server.ref(null, "nobody")]) {
      await assert.rejects(ref.ask({ type: "ECHO", text: "x" }), (e) => isMQError(e, "SYSTEM_ERROR") && /no actor nobody/.test(e.message));
    }
  });

  it("times out when the actor never replies (local and remote alike)", async () => {
    for (const ref of [client.ref(server.address, "echo"), server.ref(null, "echo")]) {
      const t0 = Date.now();
      await assert.rejects(ref.ask({ type: "COUNT", n: 0 }, { timeoutMs: 150 }), (e) => isMQError(e, "TIMEOUT"));
      assert.ok(Date.now() - t0 >= 140);
    }
  });

  it("lets the server reach a non-listening client over its connection (origin.ref)", async () => {
    const r = await client.ref(server.address, "echo").ask<{ clientSaid: string }>({ type: "CALL_BACK" });
    assert.equal(r.fields.clientSaid, "from-client");
  });

  it("rejects with CLOSED after close", async () => {
    const n = await ActorNode.start({ listen: null });
    const ref = n.ref(server.address, "echo");
    const pending = ref.ask({ type: "COUNT", n: 0 }, { timeoutMs: 5000 });
    await n.close();
    await assert.rejects(pending, (e) => isMQError(e, "CLOSED"));
    assert.throws(
      () => ref.send({ type: "COUNT", n: 1 }),
      (e) => isMQError(e, "CLOSED"),
    );
  });
});

type BadReplyEvent = { type: "TEXT" | "BIG" | "COUNT" | "RESET"; reply?: Replier };
const badReplyMachine = setup({ types: { context: {} as { n: number }, events: {} as BadReplyEvent } }).createMachine({
  context: { n: 0 },
  on: {
    TEXT: { actions: ({ event }) => event.reply?.ok({ kind: "text" }, "hello" as unknown as Uint8Array) },
    BIG: { actions: ({ event }) => event.reply?.ok({ big: 2n ** 70n }) },
    COUNT: { actions: [assign({ n: ({ context }) => context.n + 1 }), ({ context, event }) => event.reply?.ok({ n: context.n })] },
    RESET: { actions: [assign({ n: 0 }), ({ event }) => event.reply?.ok({})] },
  },
});

describe("asks and sends the transport cannot carry", () => {
  let server: ActorNode;
  let client: ActorNode;
  before(async () => {
    server = await ActorNode.start({ listen: EPHEMERAL, requestTimeoutMs: 300 });
    client = await ActorNode.start({ listen: null, requestTimeoutMs: 300 });
    server.spawn("echo", echoMachine);
    server.spawn("badReply", badReplyMachine);
  });
  after(async () => {
    await client.close();
    await server.close();
  });
  const illegal = (what: RegExp) => (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && what.test((e as Error).message);

  it("an event msgpack cannot encode is refused ILLEGAL_ARGUMENT and leaves no ask behind to time out unhandled", async () => {
    const remote = client.ref(server.address, "echo");
    await assert.rejects(remote.ask({ type: "ECHO", text: "x", big: 2n ** 70n }), illegal(/ECHO.*cannot be encoded/));
    assert.throws(() => remote.send({ type: "COUNT", n: 1, big: 2n ** 70n }), illegal(/COUNT.*cannot be encoded/));
    assert.equal(client.transport.pending.size, 0, "no ask left waiting");
    assert.equal((await remote.ask<{ text: string }>({ type: "ECHO", text: "after" })).fields.text, "after");
  });

  it("a body that is not bytes is refused ILLEGAL_ARGUMENT, local and remote, and the link keeps working", async () => {
    for (const ref of [client.ref(server.address, "echo"), server.ref(null, "echo")]) {
      for (const body of ["text", 42, { a: 1 }, null, [Buffer.from("a"), "b"]]) {
        const opts = { body: body as unknown as Uint8Array };
        await assert.rejects(ref.ask({ type: "ECHO", text: "x" }, opts), illegal(/body must be bytes/), `ask ${JSON.stringify(body)}`);
        assert.throws(() => ref.send({ type: "COUNT", n: 1 }, opts), illegal(/body must be bytes/), `send ${JSON.stringify(body)}`);
      }
      const r = await ref.ask<{ text: string }>({ type: "ECHO", text: "ok" }, { body: [Buffer.from("a"), new Uint8Array([98])] });
      assert.equal(r.body?.toString(), "ab");
    }
    // an ask left behind would reject at its deadline with nobody listening
    assert.equal(client.transport.pending.size + server.transport.pending.size, 0, "no ask left waiting");
  });

  it("an ask's timeoutMs that is not an integer from 1 to 2^31-1 ms is refused ILLEGAL_ARGUMENT, local and remote", async () => {
    for (const ref of [client.ref(server.address, "echo"), server.ref(null, "echo")]) {
      for (const timeoutMs of ["300", Number.NaN, -5, 0, 1.5, Number.POSITIVE_INFINITY, 2 ** 31, null]) {
        await assert.rejects(
          ref.ask({ type: "COUNT", n: 0 }, { timeoutMs: timeoutMs as number }),
          illegal(/timeoutMs must be an integer in \[1, 2147483647\]/),
          `${ref.address} ${String(timeoutMs)}`,
        );
      }
    }
    assert.equal(client.transport.pending.size + server.transport.pending.size, 0, "no ask left waiting");
  });

  it("an event without a string type is refused ILLEGAL_ARGUMENT at the sender, and the actor keeps its state", async () => {
    const failures: unknown[] = [];
    const off = server.on("actorFailure", (f) => failures.push(f.error));
    try {
      const local = server.ref(null, "echo");
      const before = (await local.ask<{ total: number }>({ type: "GET" })).fields.total;
      local.send({ type: "COUNT", n: 1 });
      for (const ref of [client.ref(server.address, "echo"), local]) {
        for (const event of [{}, { type: 42 }, { type: null }, null, undefined, "COUNT"]) {
          const ev = event as unknown as WireEvent;
          await assert.rejects(ref.ask(ev), illegal(/needs a string type/), `ask ${JSON.stringify(event)}`);
          assert.throws(() => ref.send(ev), illegal(/needs a string type/), `send ${JSON.stringify(event)}`);
        }
      }
      assert.equal((await local.ask<{ total: number }>({ type: "GET" })).fields.total, before + 1, "context kept");
      assert.deepEqual(failures, [], "the actor did not fail");
    } finally {
      off();
    }
  });

  it("ref refuses an address that is neither null nor a string, and a name that is not a string", () => {
    for (const [address, name] of [
      [undefined, "echo"],
      [42, "echo"],
      [{}, "echo"],
      [null, undefined],
      [null, 7],
      [server.address, null],
    ]) {
      assert.throws(
        () => client.ref(address as string | null, name as string),
        illegal(/address|name/),
        `${String(address)} ${String(name)}`,
      );
    }
  });

  it("a reply the transport cannot carry fails that ask with ILLEGAL_ARGUMENT; the actor and the link to its client carry on", async () => {
    const failures: unknown[] = [];
    const off = server.on("actorFailure", (f) => failures.push(f.error));
    try {
      for (const ref of [client.ref(server.address, "badReply"), server.ref(null, "badReply")]) {
        await assert.rejects(ref.ask({ type: "TEXT" }), illegal(/body must be bytes/));
        // a local reply is not encoded: only a remote one can fail so
        if (ref.address !== null) await assert.rejects(ref.ask({ type: "BIG" }), illegal(/reply to client .* cannot be encoded/));
        // the same client's later asks are answered (its queue on the server was left holding the bad frame)
        for (let i = 0; i < 3; i++) assert.equal((await ref.ask<{ n: number }>({ type: "COUNT" })).fields.n, i + 1);
        await ref.ask({ type: "RESET" });
      }
      assert.deepEqual(failures, [], "the actor did not fail");
    } finally {
      off();
    }
  });
});

describe("connections to peers that went away", () => {
  const openFds = () => readdirSync("/proc/self/fd").length;

  it("are closed once unreachable and unused for PEER_EXPIRY_MS; a later ref, or one kept from before, connects anew", async () => {
    const client = await ActorNode.start({ listen: null, requestTimeoutMs: 3000 });
    const peers = (client.transport as unknown as { peers: Map<string, unknown> }).peers;
    const live = await ActorNode.start({ listen: EPHEMERAL });
    live.spawn("echo", echoMachine);
    const gone: string[] = [];
    try {
      assert.equal((await client.ref(live.address, "echo").ask<{ text: string }>({ type: "ECHO", text: "a" })).fields.text, "a");
      // peers reached once, then gone for good (a broker restarted on another port or pod address)
      for (let i = 0; i < 5; i++) {
        const srv = await ActorNode.start({ listen: EPHEMERAL });
        srv.spawn("echo", echoMachine);
        await client.ref(srv.address, "echo").ask({ type: "ECHO", text: "x" });
        gone.push(srv.address!);
        await srv.close();
      }
      const kept = client.ref(gone[0]!, "echo");
      await waitFor(() => gone.every((a) => client.peerUnreachable(a)), 10_000, "the closed connections noticed");
      const fds = openFds();

      client.transport.forgetIdlePeers(monotonicNow() + PEER_EXPIRY_MS / 2);
      assert.equal(peers.size, 6, "not unreachable and unused for long enough yet: all kept");
      client.transport.forgetIdlePeers(monotonicNow() + PEER_EXPIRY_MS + 10_000);
      assert.deepEqual([...peers.keys()], [live.address], "the live connection stays");
      assert.equal(client.peerUnreachable(gone[0]!), false, "a forgotten address is not known");
      await waitFor(() => openFds() <= fds - 2 * gone.length, 5000, "the closed sockets' fds released");

      // the peer comes back at the same address: a new ref and the one kept from before both reach it
      // (another process on this machine may hold the port for a moment)
      const back = await waitFor(() => ActorNode.start({ listen: gone[0]! }).catch(() => null), 20_000, "the peer back on its port");
      try {
        back.spawn("echo", echoMachine);
        const fresh = client.ref(gone[0]!, "echo");
        assert.notEqual(fresh, kept, "the node's refs to the forgotten address were dropped");
        assert.equal((await fresh.ask<{ text: string }>({ type: "ECHO", text: "new" })).fields.text, "new");
        assert.equal((await kept.ask<{ text: string }>({ type: "ECHO", text: "old" })).fields.text, "old");
        kept.send({ type: "COUNT", n: 2 });
        assert.equal((await fresh.ask<{ total: number }>({ type: "GET" })).fields.total, 2);
        assert.equal(peers.size, 2);
      } finally {
        await back.close();
      }
      // live links are never forgotten, however long they go unused
      client.transport.forgetIdlePeers(monotonicNow() + 10 * PEER_EXPIRY_MS);
      assert.ok(peers.has(live.address!));
    } finally {
      await client.close();
      await live.close();
    }
  });

  it("a peer unreachable for long but still sent to (a consumer's heartbeats to a killed master) keeps its link and reads unreachable", async () => {
    const client = await ActorNode.start({ listen: null });
    type LinkState = { unreachableSince: number; lastDeadline: number; queued: number; flushing: boolean };
    const peers = (client.transport as unknown as { peers: Map<string, LinkState> }).peers;
    const srv = await ActorNode.start({ listen: EPHEMERAL });
    const address = srv.address!;
    await srv.close();
    try {
      await assert.rejects(client.ref(address, "echo").ask({ type: "ECHO", text: "x" }, { timeoutMs: 200 }), (e) =>
        isMQError(e, "TIMEOUT"),
      );
      await waitFor(() => client.peerUnreachable(address), 5000, "the failed connection noticed");
      const ageLink = () => {
        const link = peers.get(address)!;
        link.unreachableSince -= 2 * PEER_EXPIRY_MS;
        link.lastDeadline -= 2 * PEER_EXPIRY_MS;
      };
      ageLink();
      client.ref(address, "echo").send({ type: "COUNT", n: 1 });
      client.transport.forgetIdlePeers();
      assert.equal(peers.size, 1, "sent to just now: kept");
      assert.equal(client.peerUnreachable(address), true);
      await waitFor(() => peers.get(address)!.queued === 0 && !peers.get(address)!.flushing, 10_000, "the send dropped at its deadline");
      ageLink();
      client.transport.forgetIdlePeers();
      assert.equal(peers.size, 0, "unused as long as unreachable: forgotten");
    } finally {
      await client.close();
    }
  });
});

describe("ask deadlines when the wall clock steps", () => {
  const slowMachine = setup({
    types: { events: {} as { type: "SLOW"; ms: number; reply?: Replier } | { type: "NEVER"; reply?: Replier } },
  }).createMachine({
    on: {
      SLOW: {
        actions: ({ event }) => {
          const r = event.reply;
          setTimeout(() => r?.ok({ done: true }), event.ms);
        },
      },
      NEVER: {},
    },
  });
  let server: ActorNode;
  let client: ActorNode;
  let clock: ReturnType<typeof fakeWallClock>;
  before(async () => {
    server = await ActorNode.start({ listen: EPHEMERAL, requestTimeoutMs: 3000 });
    client = await ActorNode.start({ listen: null, requestTimeoutMs: 3000 });
    server.spawn("slow", slowMachine);
    clock = fakeWallClock();
  });
  after(async () => {
    clock.restore();
    await client.close();
    await server.close();
  });

  it("a step forward of 1 h does not time out an ask answered 300 ms later (timeout 30 s)", async () => {
    const p = client.ref(server.address!, "slow").ask<{ done: boolean }>({ type: "SLOW", ms: 300 }, { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 50));
    clock.jump(3_600_000);
    assert.equal((await p).fields.done, true);
  });

  it("a step back of 20 s does not stretch an unanswered ask's 500 ms timeout", async () => {
    const t0 = performance.now();
    const p = client.ref(server.address!, "slow").ask({ type: "NEVER" }, { timeoutMs: 500 });
    await new Promise((r) => setTimeout(r, 50));
    clock.jump(-20_000);
    try {
      const outcome = await Promise.race([
        p.then(
          () => "answered",
          (e: Error) => (isMQError(e, "TIMEOUT") ? "TIMEOUT" : e.message),
        ),
        new Promise<string>((r) => setTimeout(() => r("still waiting after 5 s"), 5000)),
      ]);
      assert.equal(outcome, "TIMEOUT");
      assert.ok(performance.now() - t0 < 2000, `failed after ${Math.round(performance.now() - t0)} ms`);
    } finally {
      clock.jump(20_000);
      await p.catch(() => {});
    }
  });
});

it("refuses a requestTimeoutMs that is not an integer from 1 to 2^31-1 ms at start", async () => {
  for (const requestTimeoutMs of ["500", 0, -1, 1.5, Number.POSITIVE_INFINITY, Number.NaN, 2 ** 31]) {
    await assert.rejects(
      ActorNode.start({ listen: null, requestTimeoutMs: requestTimeoutMs as number }).then((n) => n.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /requestTimeoutMs must be an integer in \[1, 2147483647\]/.test((e as Error).message),
      String(requestTimeoutMs),
    );
  }
});

it("refuses a sendHighWaterMark that is not an integer from 1 to 2^31-1 (ZeroMQ's int option) at start", async () => {
  for (const sendHighWaterMark of [0, -1, 1.5, 2 ** 31, 1e12, Number.POSITIVE_INFINITY, Number.NaN]) {
    for (const listen of [EPHEMERAL, null]) {
      await assert.rejects(
        ActorNode.start({ listen, sendHighWaterMark }).then((n) => n.close()),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /sendHighWaterMark/.test((e as Error).message),
        `${sendHighWaterMark} ${listen}`,
      );
    }
  }
  const n = await ActorNode.start({ listen: null, sendHighWaterMark: 2 ** 31 - 1 });
  n.ref("tcp://127.0.0.1:5", "x");
  await n.close();
});
