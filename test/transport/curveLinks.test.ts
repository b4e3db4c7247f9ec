/**
 * CURVE links as servers and clients configure them (actors/runtime/curveOptions.ts): a refused
 * handshake fails the client's asks with AUTH_FAILED at once instead of at their timeout, the
 * refused link is retried at most once a second, the server tells which client it refused, a
 * refused address reads unreachable until the next link to it is made, and the link made after a
 * refusal tells its handshake as the peer being back.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import { pino } from "pino";
import { setup } from "xstate";
import { logTransportDrops } from "../../actors/logger.ts";
import { NameServer } from "../../actors/nameserver/index.ts";
import { unlessConnectionLost } from "../../actors/runtime/connectionLost.ts";
import { ActorNode, type Replier, resolveCurveLink, resolveCurveServer } from "../../actors/runtime/index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import { curveKeyPair, curvePublicKeyOf } from "../../transport/curve.ts";
import { isMQError, type MQError } from "../../transport/protocol.ts";
import { PEER_EXPIRY_MS, REFUSED_RETRY_MS } from "../../transport/zmqNode.ts";
import { EPHEMERAL, waitFor } from "../helpers.ts";

const echo = setup({ types: { events: {} as { type: "ECHO"; reply?: Replier } } }).createMachine({
  on: { ECHO: { actions: ({ event }) => event.reply?.ok({ ok: true }) } },
});

/** A listening node with `curve` (resolved as a server resolves it) hosting `echo`, closed after the test. */
async function server(t: { after: (fn: () => Promise<void>) => void }, curve: unknown): Promise<ActorNode> {
  const node = await ActorNode.start({ listen: EPHEMERAL, curve: resolveCurveServer(curve) });
  t.after(() => node.close());
  node.spawn("echo", echo);
  return node;
}

async function client(t: { after: (fn: () => Promise<void>) => void }, link: Parameters<typeof resolveCurveLink>[0]): Promise<ActorNode> {
  const node = await ActorNode.start({ listen: null, curveClient: resolveCurveLink(link) });
  t.after(() => node.close());
  return node;
}

/** Rejects with the ask's error; how long the ask took, ms. */
async function refusedAsk(node: ActorNode, address: string, timeoutMs = 20_000): Promise<{ error: MQError; ms: number }> {
  const t0 = performance.now();
  try {
    await node.ref(address, "echo").ask({ type: "ECHO" }, { timeoutMs });
  } catch (e) {
    return { error: e as MQError, ms: performance.now() - t0 };
  }
  assert.fail("the ask was answered");
}

/**
 * A TCP server that closes each connection once it has read the client's ZMTP greeting, having sent
 * only the start of its own (signature and major version, not its security mechanism): what a
 * CURVE server does to a plain client when its I/O thread reads the client's whole greeting before
 * it has sent the rest of its own, which on a busy machine happens many times in a row. libzmq tells
 * the client only of a handshake ended by the connection closing (handshake:error:other), never of
 * the mechanism mismatch. While `forwardTo` is set, connections are forwarded to that port instead,
 * as a proxy in front of a server does.
 */
async function greetingCloser(t: { after: (fn: () => Promise<void>) => void }) {
  const conns = new Set<net.Socket>();
  const fake = {
    address: "",
    /** connections closed at the greeting */
    closed: 0,
    forwardTo: null as number | null,
    /** closes every open connection (the server behind the proxy going down) */
    dropAll: () => {
      for (const c of conns) c.destroy();
    },
  };
  const server = net.createServer((c) => {
    conns.add(c);
    c.on("close", () => conns.delete(c));
    c.on("error", () => {});
    if (fake.forwardTo !== null) {
      const target = net.connect(fake.forwardTo, "127.0.0.1");
      conns.add(target);
      target.on("close", () => conns.delete(target));
      target.on("error", () => c.destroy());
      c.on("close", () => target.destroy());
      target.on("close", () => c.destroy());
      c.pipe(target);
      target.pipe(c);
      return;
    }
    let read = 0;
    c.write(Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f]));
    c.on("data", (d: Buffer) => {
      const before = read;
      read += d.length;
      if (before < 10 && read >= 10) c.write(Buffer.from([3]));
      if (read >= 64 && before < 64) {
        fake.closed++;
        c.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.address = `tcp://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  t.after(async () => {
    fake.dropAll();
    await new Promise((resolve) => server.close(resolve));
  });
  return fake;
}

describe("CURVE links", () => {
  const keys = curveKeyPair();

  test("a client given the server's public key completes the handshake; its own key pair defaults to a fresh one", async (t) => {
    const srv = await server(t, { secretKey: keys.secretKey });
    const c = await client(t, { curveServerKey: keys.publicKey });
    assert.deepEqual((await c.ref(srv.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
    const own = curveKeyPair();
    const withKeys = await client(t, { curveServerKey: { [srv.address!]: keys.publicKey }, curveClient: own });
    assert.deepEqual((await withKeys.ref(srv.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
  });

  test("a client without CURVE is refused at once with AUTH_FAILED, told to give curveServerKey", async (t) => {
    const srv = await server(t, keys);
    const plain = await client(t, undefined);
    const { error, ms } = await refusedAsk(plain, srv.address!);
    assert.ok(isMQError(error, "AUTH_FAILED"), String(error));
    assert.match(error.message, /requires CURVE.*curveServerKey/);
    assert.ok(ms < 5000, `failed after ${ms} ms, not at the 20 s timeout`);
  });

  test("a client without CURVE is refused at once also when the server closes its handshakes before sending its mechanism", async (t) => {
    const fake = await greetingCloser(t);
    const plain = await client(t, undefined);
    const { error, ms } = await refusedAsk(plain, fake.address, 5000);
    assert.ok(isMQError(error, "AUTH_FAILED"), String(error));
    assert.match(error.message, /requires CURVE.*curveServerKey/);
    assert.ok(ms < 2500, `failed after ${ms} ms`);
    assert.ok(fake.closed >= 2, `${fake.closed} handshakes closed`);
  });

  test("a plain link that completed a handshake is not refused when its server's later connections close at the handshake", async (t) => {
    const srv = await server(t, undefined);
    const fake = await greetingCloser(t);
    fake.forwardTo = Number(new URL(srv.address!).port);
    const c = await client(t, undefined);
    assert.deepEqual((await c.ref(fake.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
    // the server behind the proxy goes down mid-handshake, again and again, then is back
    fake.forwardTo = null;
    fake.dropAll();
    await waitFor(() => fake.closed >= 3, 10_000, "three handshakes closed in a row");
    const ask = c.ref(fake.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 });
    await waitFor(() => fake.closed >= 5, 10_000, "two more handshakes closed");
    fake.forwardTo = Number(new URL(srv.address!).port);
    assert.deepEqual((await ask).fields, { ok: true });
  });

  test("a wrong server key fails asks with AUTH_FAILED at once, and the refused link is tried again at most once a second", async (t) => {
    const srv = await server(t, keys);
    const c = await client(t, { curveServerKey: curveKeyPair().publicKey });
    const { error, ms } = await refusedAsk(c, srv.address!);
    assert.ok(isMQError(error, "AUTH_FAILED"), String(error));
    assert.match(error.message, /curveServerKey/);
    assert.ok(ms < 5000, `failed after ${ms} ms, not at the 20 s timeout`);
    // asks right after the refusal fail without a connection attempt; libzmq alone would retry every 100 ms
    const before = srv.stats().handshakeFailures;
    const t0 = performance.now();
    let asks = 0;
    while (performance.now() - t0 < 2.5 * REFUSED_RETRY_MS) {
      const r = await refusedAsk(c, srv.address!);
      assert.ok(isMQError(r.error, "AUTH_FAILED"), String(r.error));
      asks++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // every attempt is 2 refused hellos (a server that cannot read one closes the connection, which
    // is also how a server going down looks): at most 3 attempts in 2.5 s, plus one under way
    const attempts = (srv.stats().handshakeFailures - before) / 2;
    assert.ok(asks > 20, `asked ${asks} times`);
    assert.ok(attempts >= 1 && attempts <= 4, `${attempts} connection attempts in 2.5 s`);
  });

  test("a client not in the allow-list is refused at once; the server logs the listener, the client's address and key", async (t) => {
    const allowed = curveKeyPair();
    const stranger = curveKeyPair();
    const srv = await server(t, { ...keys, allowedClientKeys: [allowed.publicKey] });
    const lines: Record<string, unknown>[] = [];
    logTransportDrops(srv.transport, pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) }), "name server");
    const good = await client(t, { curveServerKey: keys.publicKey, curveClient: allowed });
    assert.deepEqual((await good.ref(srv.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
    const bad = await client(t, { curveServerKey: keys.publicKey, curveClient: stranger });
    const { error, ms } = await refusedAsk(bad, srv.address!);
    assert.ok(isMQError(error, "AUTH_FAILED"), String(error));
    assert.ok(error.message.includes(stranger.publicKey), "names the key to allow");
    assert.ok(ms < 5000, `failed after ${ms} ms`);
    await waitFor(() => lines.length > 0, 5000, "the refusal logged");
    assert.equal(lines.length, 1);
    assert.match(String(lines[0]!.msg), /^name server refused a CURVE client whose public key is not in its allowed client keys/);
    assert.equal(lines[0]!.listener, srv.address);
    assert.equal(lines[0]!.clientAddress, "127.0.0.1");
    assert.equal(lines[0]!.clientKey, stranger.publicKey);
    // an ask that also watches the connection (unlessConnectionLost, as admin and broker asks do)
    // fails with the refusal, not as a lost connection; a ref made during the refusal does not throw
    const again = await client(t, { curveServerKey: keys.publicKey, curveClient: stranger });
    const watched = await unlessConnectionLost(
      again,
      srv.address!,
      again.ref(srv.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }),
    ).then(
      () => assert.fail("answered"),
      (e: unknown) => e,
    );
    assert.ok(isMQError(watched, "AUTH_FAILED"), String(watched));
    assert.ok((watched as MQError).message.includes(stranger.publicKey), (watched as MQError).message);
    const other = again.ref(srv.address, "other");
    await assert.rejects(other.ask({ type: "ECHO" }), (e) => isMQError(e, "AUTH_FAILED"));
    // the server's own key is always allowed: brokers started with the name servers' key pair reach them
    const self = await client(t, { curveServerKey: keys.publicKey, curveClient: { secretKey: keys.secretKey } });
    assert.deepEqual((await self.ref(srv.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
  });

  test("a refused address reads unreachable, lost since the refusal and failed, until the next link to it is made", async (t) => {
    const srv = await server(t, { ...keys, allowedClientKeys: [curveKeyPair().publicKey] });
    const address = srv.address!;
    const c = await client(t, { curveServerKey: keys.publicKey });
    const t0 = monotonicNow();
    assert.ok(isMQError((await refusedAsk(c, address)).error, "AUTH_FAILED"));
    const refusedBy = monotonicNow();
    // the refused link is retired and no ask has made the next one: the refusal is all there is
    assert.equal(c.peerUnreachable(address), true, "unreachable while refused");
    const lostAt = c.peerLostAt(address);
    assert.ok(lostAt >= t0 && lostAt <= refusedBy, `lost at ${lostAt}, the refusal was between ${t0} and ${refusedBy}`);
    assert.equal(c.peerFailedSince(address, t0), true, "failed since before the refusal");
    assert.equal(c.peerFailedSince(address, refusedBy + 1), false, "not failed again since the refusal");
    // a watched ask within the refusal's second fails with the refusal (why), not as a lost connection
    const watched = await unlessConnectionLost(c, address, c.ref(address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 })).then(
      () => assert.fail("answered"),
      (e: unknown) => e,
    );
    assert.ok(isMQError(watched, "AUTH_FAILED"), String(watched));
    // the first ask after the refusal's second makes the next link, which waits for its handshake
    // (not unreachable) and keeps the refusal's loss
    await waitFor(() => monotonicNow() - refusedBy >= REFUSED_RETRY_MS, 5000, "the refusal's second over");
    const next = refusedAsk(c, address);
    assert.equal(c.peerUnreachable(address), false, "the next link waits for its handshake");
    assert.equal(c.peerLostAt(address), lostAt);
    assert.ok(isMQError((await next).error, "AUTH_FAILED"));
    // refused again before any handshake: the same loss goes on (what gives up on such a peer
    // after PEER_EXPIRY_MS counts from it), it does not start over with each refusal
    assert.equal(c.peerUnreachable(address), true, "unreachable, refused again");
    assert.equal(c.peerLostAt(address), lostAt, "still lost since the first refusal");
  });

  // the node's expiry check (forgetIdlePeers, every 10 s) may run between the refusal's second and
  // the next ask, or not: the link made then is the same either way
  for (const check of ["no expiry check", "an expiry check"] as const)
    test(`the link made after a refusal waits for its handshake, which is told as the peer being back; the loss keeps its time (${check} in between)`, async (t) => {
      const member = curveKeyPair();
      const late = curveKeyPair();
      const first = await ActorNode.start({
        listen: EPHEMERAL,
        curve: resolveCurveServer({ ...keys, allowedClientKeys: [member.publicKey] }),
      });
      t.after(() => first.close());
      const address = first.address!;
      const c = await client(t, { curveServerKey: keys.publicKey, curveClient: late });
      let backs = 0;
      c.onPeerReconnect(address, () => backs++);
      const t0 = monotonicNow();
      const { error } = await refusedAsk(c, address);
      const refusedBy = monotonicNow();
      assert.ok(isMQError(error, "AUTH_FAILED"), String(error));
      assert.ok(error.message.includes(late.publicKey), error.message);
      // the server restarts on its address with the client's key in its allow-list
      await first.close();
      const second = await waitFor(
        () =>
          ActorNode.start({ listen: address, curve: resolveCurveServer({ ...keys, allowedClientKeys: [late.publicKey] }) }).catch(
            () => null,
          ),
        10_000,
        "the server back on its address",
      );
      t.after(() => second.close());
      second.spawn("echo", echo);
      if (check === "an expiry check") {
        await waitFor(() => monotonicNow() - refusedBy >= REFUSED_RETRY_MS, 5000, "the refusal's second over");
        c.transport.forgetIdlePeers();
      }
      // as a client retrying would: asks fail with the refusal for REFUSED_RETRY_MS without a connection
      // attempt, and the first one after it goes out on a new link. That ask also watches the connection
      // (unlessConnectionLost): the new link is not lost, so it waits for the handshake and is answered
      const answer = await waitFor(
        async () => {
          const asked = monotonicNow();
          try {
            return await unlessConnectionLost(c, address, c.ref(address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }));
          } catch (e) {
            if (isMQError(e, "AUTH_FAILED") && asked - refusedBy < REFUSED_RETRY_MS) return null;
            throw e;
          }
        },
        10_000,
        "an ask answered over the link made after the refusal",
      );
      assert.deepEqual(answer.fields, { ok: true });
      // the handshake is told by the socket's monitor, which may come after the reply
      await waitFor(() => backs > 0, 5000, "the peer told as back");
      assert.equal(backs, 1, "told once");
      assert.equal(c.peerUnreachable(address), false);
      const lostAt = c.peerLostAt(address);
      assert.ok(lostAt >= t0 && lostAt <= refusedBy, `lost at ${lostAt}, the refusal was between ${t0} and ${refusedBy}`);
    });

  test("a refusal is forgotten after PEER_EXPIRY_MS: the next ask tries the server again, also within the refusal's second", async (t) => {
    const srv = await server(t, { ...keys, allowedClientKeys: [curveKeyPair().publicKey] });
    const address = srv.address!;
    const c = await client(t, { curveServerKey: keys.publicKey });
    assert.ok(isMQError((await refusedAsk(c, address)).error, "AUTH_FAILED"));
    await waitFor(() => srv.stats().handshakeFailures > 0, 5000, "the server counting the refusal");
    const before = srv.stats().handshakeFailures;
    c.transport.forgetIdlePeers(monotonicNow() + PEER_EXPIRY_MS);
    // not failed with the forgotten refusal: a new link makes a new handshake, which is refused too
    assert.ok(isMQError((await refusedAsk(c, address)).error, "AUTH_FAILED"));
    await waitFor(() => srv.stats().handshakeFailures > before, 5000, "a new handshake refused");
  });
});

describe("CURVE options", () => {
  const a = curveKeyPair();
  const b = curveKeyPair();
  /** Asserts an ILLEGAL_ARGUMENT whose message matches `re` and quotes no secret key. */
  const refused = (fn: () => unknown, re: RegExp) =>
    assert.throws(fn, (e) => {
      assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"), String(e));
      assert.match(e.message, re);
      for (const secret of [a.secretKey, b.secretKey])
        assert.ok(!e.message.includes(secret.slice(0, 10)), `quotes a secret key: ${e.message}`);
      return true;
    });

  test("keys are 40 Z85 characters decoding to 32 bytes; a public key must belong to its secret key", () => {
    assert.equal(curvePublicKeyOf(a.secretKey), a.publicKey);
    assert.deepEqual(resolveCurveServer({ secretKey: a.secretKey }), { publicKey: a.publicKey, secretKey: a.secretKey });
    refused(() => resolveCurveServer({ secretKey: a.secretKey.slice(0, 39) }), /^curve\.secretKey has 39 characters, not 40/);
    refused(() => resolveCurveServer({ secretKey: `${a.secretKey.slice(0, 39)}"` }), /^curve\.secretKey is not Z85 \(its character 40/);
    refused(() => resolveCurveServer({ secretKey: `#####${a.secretKey.slice(5)}` }), /^curve\.secretKey is not Z85 .*more than 32 bits/);
    refused(() => resolveCurveServer({ secretKey: 42 }), /^curve\.secretKey is a number, not a string/);
    refused(() => resolveCurveServer({ publicKey: a.publicKey }), /^curve\.secretKey is missing/);
    refused(() => resolveCurveServer("key"), /^curve must be an object \{ secretKey, publicKey\? \}/);
    // a secret key passed by itself (not in an object) is named by its type only
    refused(
      () => resolveCurveServer(a.secretKey),
      /^curve must be an object \{ secretKey, publicKey\? \} of Z85 CURVE keys, got a string\.$/,
    );
    refused(() => resolveCurveLink({ curveServerKey: b.publicKey, curveClient: b.secretKey as never }), /^curveClient must be an object/);
    refused(
      () => resolveCurveServer({ secretKey: a.secretKey, publicKey: b.publicKey }),
      /^curve\.publicKey is not the public key of curve\.secretKey .*different pairs/,
    );
    refused(() => resolveCurveServer({ ...a, allowedClientKeys: b.publicKey }), /^curve\.allowedClientKeys must be an array/);
    refused(
      () => resolveCurveServer({ ...a, allowedClientKeys: [b.publicKey, "nope"] }),
      /^curve\.allowedClientKeys\[1\] \("nope"\) has 4/,
    );
    refused(() => resolveCurveLink({ curveClient: a }), /^curveClient needs curveServerKey/);
    refused(() => resolveCurveLink({ curveServerKey: b.publicKey.slice(1) }), /^curveServerKey \(".{12}\.\.\."\) has 39 characters/);
    refused(() => resolveCurveLink({ curveServerKey: ["k"] as never }), /^curveServerKey must be the servers' public key/);
    refused(() => resolveCurveLink({ curveServerKey: { "tcp://h:1": "x" } }), /^curveServerKey\["tcp:\/\/h:1"\] \("x"\) has 1 character/);
    refused(
      () => resolveCurveLink({ curveServerKey: a.publicKey, curveClient: { secretKey: b.secretKey, publicKey: a.publicKey } }),
      /^curveClient\.publicKey is not the public key of curveClient\.secretKey/,
    );
  });

  test("a server refuses bad keys before it listens, and curve without a listening endpoint", async () => {
    await assert.rejects(NameServer.start({ listen: EPHEMERAL, curve: { secretKey: a.secretKey, publicKey: b.publicKey } }), (e) =>
      isMQError(e, "ILLEGAL_ARGUMENT"),
    );
    await assert.rejects(ActorNode.start({ listen: null, curve: a }), (e) => {
      assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"));
      assert.match(e.message, /^curve \(the server side of CURVE\) needs a listening endpoint/);
      return true;
    });
  });
});
