import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { ActorNode, type Replier } from "../../actors/runtime/index.ts";
import { curveKeyPair, z85Decode, zapHandler } from "../../transport/curve.ts";
import { isMQError } from "../../transport/protocol.ts";
import { EPHEMERAL, waitFor } from "../helpers.ts";

const echo = setup({ types: { events: {} as { type: "ECHO"; reply?: Replier } | { type: "NOTE" } } }).createMachine({
  on: { ECHO: { actions: ({ event }) => event.reply?.ok({ ok: true }) }, NOTE: { actions: () => void seen++ } },
});
let seen = 0;

describe("CURVE", () => {
  const server = curveKeyPair();
  const allowed = curveKeyPair();
  const stranger = curveKeyPair();
  const nodes: ActorNode[] = [];
  after(async () => {
    for (const n of nodes) await n.close();
  });

  it("decodes Z85 keys to 32 bytes", () => {
    assert.equal(z85Decode(server.publicKey).length, 32);
    assert.throws(
      () => z85Decode("abc"),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT"),
    );
  });

  it("accepts an allowed client key and rejects wrong or missing keys without exchanging a message", async () => {
    const srv = await ActorNode.start({ listen: EPHEMERAL, curve: { ...server, allowedClientKeys: [allowed.publicKey] } });
    nodes.push(srv);
    srv.spawn("echo", echo);
    const addr = srv.address!;

    const good = await ActorNode.start({ listen: null, curveClient: { ...allowed, serverKeys: { [addr]: server.publicKey } } });
    nodes.push(good);
    assert.deepEqual((await good.ref(addr, "echo").ask({ type: "ECHO" })).fields, { ok: true });

    const wrongKey = await ActorNode.start({ listen: null, curveClient: { ...stranger, serverKeys: server.publicKey } });
    const noCurve = await ActorNode.start({ listen: null });
    const wrongServerKey = await ActorNode.start({ listen: null, curveClient: { ...allowed, serverKeys: stranger.publicKey } });
    nodes.push(wrongKey, noCurve, wrongServerKey);
    const before = srv.stats().requestsIn;
    for (const n of [wrongKey, noCurve, wrongServerKey]) {
      n.ref(addr, "echo").send({ type: "NOTE" });
      // refused at the handshake: failed at once, not at the ask's timeout
      await assert.rejects(n.ref(addr, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }), (e) => isMQError(e, "AUTH_FAILED"));
    }
    assert.equal(srv.stats().requestsIn, before, "no frame from a rejected client reached the node");
    assert.equal(seen, 0);
    // counted (and, on a broker or name server, logged): the operator learns why clients cannot connect
    await waitFor(() => srv.stats().handshakeFailures >= 3, 5000, "the three refused handshakes counted");
    // the allowed client still works afterwards
    assert.deepEqual((await good.ref(addr, "echo").ask({ type: "ECHO" })).fields, { ok: true });
  });

  it("without allowedClientKeys any client knowing the server key connects, plain clients do not", async () => {
    const srv = await ActorNode.start({ listen: EPHEMERAL, curve: server });
    nodes.push(srv);
    srv.spawn("echo", echo);
    const c = await ActorNode.start({ listen: null, curveClient: { ...stranger, serverKeys: server.publicKey } });
    const plain = await ActorNode.start({ listen: null });
    nodes.push(c, plain);
    assert.deepEqual((await c.ref(srv.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
    await assert.rejects(plain.ref(srv.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }), (e) => isMQError(e, "AUTH_FAILED"));
  });

  it("nodes of one process with the same nodeId each keep their own allowed keys, also after the other closes", async () => {
    const keyA = curveKeyPair();
    const keyB = curveKeyPair();
    const a = await ActorNode.start({ nodeId: "svc", listen: EPHEMERAL, curve: { ...server, allowedClientKeys: [keyA.publicKey] } });
    const b = await ActorNode.start({ nodeId: "svc", listen: EPHEMERAL, curve: { ...server, allowedClientKeys: [keyB.publicKey] } });
    nodes.push(a, b);
    a.spawn("echo", echo);
    b.spawn("echo", echo);
    const client = async (keys: { publicKey: string; secretKey: string }) => {
      const c = await ActorNode.start({ listen: null, curveClient: { ...keys, serverKeys: server.publicKey } });
      nodes.push(c);
      return c;
    };
    const withA = await client(keyA);
    const withB = await client(keyB);
    assert.deepEqual((await withA.ref(a.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
    assert.deepEqual((await withB.ref(b.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
    await assert.rejects(withB.ref(a.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }), (e) => isMQError(e, "AUTH_FAILED"));
    await assert.rejects(withA.ref(b.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }), (e) => isMQError(e, "AUTH_FAILED"));
    await b.close();
    const strangerClient = await client(stranger);
    await assert.rejects(strangerClient.ref(a.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }), (e) =>
      isMQError(e, "AUTH_FAILED"),
    );
    assert.deepEqual((await withA.ref(a.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 2000 })).fields, { ok: true });
  });

  it("a CURVE socket whose ZAP domain is not registered (its node gone) refuses every client", async () => {
    // a node with allowed keys keeps the process's ZAP handler bound
    const keeper = await ActorNode.start({ listen: EPHEMERAL, curve: { ...server, allowedClientKeys: [allowed.publicKey] } });
    nodes.push(keeper);
    const orphan = new zmq.Router({ linger: 0 });
    orphan.curveServer = true;
    orphan.curvePublicKey = server.publicKey;
    orphan.curveSecretKey = server.secretKey;
    orphan.zapDomain = "actormq/a-node-that-closed";
    await orphan.bind(EPHEMERAL);
    const c = await ActorNode.start({ listen: null, curveClient: { ...allowed, serverKeys: server.publicKey } });
    nodes.push(c);
    const rejected = zapHandler.rejected;
    try {
      c.ref(orphan.lastEndpoint, "echo").send({ type: "NOTE" });
      await waitFor(() => zapHandler.rejected > rejected, 5000, "the handshake refused");
      const got = await Promise.race([orphan.receive().then(() => "received"), new Promise((r) => setTimeout(r, 300, "nothing"))]);
      assert.equal(got, "nothing");
    } finally {
      orphan.close();
    }
  });

  it("refuses a client with no server key for the address", async () => {
    const c = await ActorNode.start({ listen: null, curveClient: { ...allowed, serverKeys: {} } });
    nodes.push(c);
    assert.throws(
      () => c.ref("tcp://127.0.0.1:5", "echo"),
      (e) => isMQError(e, "AUTH_FAILED"),
    );
  });
});
