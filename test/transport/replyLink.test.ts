import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { ActorNode, type Replier } from "../../actors/runtime/index.ts";
import { encode, framePrefix, KIND_REPLY } from "../../transport/codec.ts";
import { EPHEMERAL, waitFor } from "../helpers.ts";

// answers after a while, so a third party has time to answer first
const slow = setup({ types: { events: {} as { type: "SLOW"; reply?: Replier } } }).createMachine({
  on: { SLOW: { actions: ({ event }) => setTimeout(() => event.reply?.ok({ from: "b" }, Buffer.from("real")), 300) } },
});
// never answers
const silent = setup({ types: { events: {} as { type: "SLOW"; reply?: Replier } } }).createMachine({});

/** Reply frames for correlation ids 1..n, as any peer connected to a node could send. */
function forgedReplies(n: number): Buffer {
  const parts: Buffer[] = [];
  for (let id = 1; id <= n; id++) {
    const h = encode([KIND_REPLY, id, 0, { from: "attacker" }, 4]);
    parts.push(framePrefix(h.length), h, Buffer.from("EVIL"));
  }
  return Buffer.concat(parts);
}

describe("replies are taken only from the link the request went out on", () => {
  let a: ActorNode;
  let b: ActorNode;
  let attacker: zmq.Dealer;
  before(async () => {
    b = await ActorNode.start({ listen: EPHEMERAL });
    b.spawn("slow", slow);
    a = await ActorNode.start({ listen: EPHEMERAL });
    a.spawn("silent", silent);
    attacker = new zmq.Dealer({ linger: 0 });
    attacker.connect(a.address!);
  });
  after(async () => {
    attacker.close();
    await a.close();
    await b.close();
  });

  it("a reply from another peer does not complete an ask sent to b; it is counted and dropped", async () => {
    const ask = a.ref(b.address, "slow").ask<{ from: string }>({ type: "SLOW" }, { timeoutMs: 3000 });
    const localAsk = a.ref(null, "silent").ask({ type: "SLOW" }, { timeoutMs: 600 });
    const before = a.stats().foreignReplies;
    await attacker.send(forgedReplies(50));
    await waitFor(() => a.stats().foreignReplies >= before + 2, 5000, "the forged replies to both asks counted");
    const r = await ask;
    assert.equal(r.fields.from, "b");
    assert.equal(r.body?.toString(), "real");
    // a local ask is answered by its actor only, never by a frame from the network
    await assert.rejects(localAsk, (e: { code?: string }) => e.code === "TIMEOUT");
  });
});
