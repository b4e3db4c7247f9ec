import assert from "node:assert/strict";
import path from "node:path";
import { it } from "node:test";
import { setup } from "xstate";
import { ActorNode, type Replier } from "../../actors/runtime/index.ts";
import { curveKeyPair } from "../../transport/curve.ts";
import { isMQError } from "../../transport/protocol.ts";
import { EPHEMERAL, runFixture } from "../helpers.ts";

const echo = setup({ types: { events: {} as { type: "ECHO"; reply?: Replier } } }).createMachine({
  on: { ECHO: { actions: ({ event }) => event.reply?.ok({ ok: true }) } },
});

it("CURVE nodes with allowed client keys start concurrently and each enforces its keys", async () => {
  const server = curveKeyPair();
  const allowed = curveKeyPair();
  const stranger = curveKeyPair();
  const opts = { listen: EPHEMERAL, curve: { ...server, allowedClientKeys: [allowed.publicKey] } };
  const servers = await Promise.all([ActorNode.start(opts), ActorNode.start(opts)]);
  const good = await ActorNode.start({ listen: null, curveClient: { ...allowed, serverKeys: server.publicKey } });
  const bad = await ActorNode.start({ listen: null, curveClient: { ...stranger, serverKeys: server.publicKey } });
  try {
    for (const s of servers) {
      s.spawn("echo", echo);
      assert.deepEqual((await good.ref(s.address, "echo").ask({ type: "ECHO" })).fields, { ok: true });
      await assert.rejects(bad.ref(s.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 20_000 }), (e) => isMQError(e, "AUTH_FAILED"));
    }
  } finally {
    for (const n of [good, bad, ...servers]) await n.close();
  }
});

it("a start that cannot bind the ZAP endpoint fails with MQError and leaves nothing open; one right after a close binds it again", async () => {
  const out = await runFixture(path.join(import.meta.dirname, "fixtures", "zapStarts.ts"), [], {});
  assert.deepEqual(JSON.parse(out), {
    concurrent: ["started", "started", "started"],
    blocked: ["MQError SYSTEM_ERROR", "MQError SYSTEM_ERROR"],
    again: ["started", "started", "started", "started", "started"],
    badKey: ["MQError ILLEGAL_ARGUMENT"],
  });
});
