import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { ActorNode, type Replier } from "../../actors/runtime/index.ts";
import { decode, encode, framePrefix, KIND_REQUEST } from "../../transport/codec.ts";
import { EPHEMERAL } from "../helpers.ts";

const echo = setup({ types: { events: {} as { type: "ECHO"; reply?: Replier } } }).createMachine({
  on: { ECHO: { actions: ({ event }) => event.reply?.ok({ ok: true }) } },
});

function frame(header: unknown, body?: Buffer): Buffer {
  const h = encode(header);
  return Buffer.concat([framePrefix(h.length), h, body ?? Buffer.alloc(0)]);
}

describe("bad input at the ROUTER", () => {
  let node: ActorNode;
  let client: ActorNode;
  let raw: zmq.Dealer;
  before(async () => {
    node = await ActorNode.start({ listen: EPHEMERAL });
    node.spawn("echo", echo);
    client = await ActorNode.start({ listen: null });
    raw = new zmq.Dealer({ linger: 0 });
    raw.connect(node.address!);
  });
  after(async () => {
    raw.close();
    await client.close();
    await node.close();
  });

  it("answers MALFORMED / REQUEST_CODE_NOT_SUPPORTED where it can read a reply address", async () => {
    const deadline = Date.now() + 10_000;
    await raw.send(frame([KIND_REQUEST, 999, 7, 42, "x", { type: "ECHO" }, deadline, -1])); // target not a string
    await raw.send(frame([KIND_REQUEST, 12345, 8, "echo", "x", { type: "ECHO" }, deadline, -1])); // unknown code
    await raw.send(frame([KIND_REQUEST, 999, 9, "echo", "x", { type: "ECHO" }, deadline, 1 << 30])); // absurd body length
    const got = new Map<number, string>();
    // replies queued together come back as one batch frame: read every frame of each message
    while (got.size < 3) {
      const [b] = await raw.receive();
      for (let off = 0; off < b!.length; ) {
        const hl = b!.readUInt32LE(off);
        const h = decode(b!.subarray(off + 4, off + 4 + hl)) as [number, number, number, { code: string }, number];
        got.set(h[1], h[3].code);
        off += 4 + hl + Math.max(0, h[4]);
      }
    }
    assert.deepEqual(Object.fromEntries(got), { 7: "MALFORMED", 8: "REQUEST_CODE_NOT_SUPPORTED", 9: "MALFORMED" });
  });

  it("survives random frames, keeps serving good requests, memory stays bounded", async () => {
    const echoRef = client.ref(node.address, "echo");
    const good = frame([KIND_REQUEST, 999, 0, "echo", "x", { type: "ECHO" }, 0, -1]);
    const arbFrame = fc.oneof(
      fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
      fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.concat([framePrefix(a.length), Buffer.from(a)])),
      fc.nat({ max: good.length - 1 }).map((n) => good.subarray(0, n)),
      fc
        .tuple(fc.anything(), fc.anything(), fc.anything(), fc.anything())
        .map((t) => frame([KIND_REQUEST, ...t, "x", { type: 1 }, "soon", "many"])),
      fc
        .tuple(fc.integer(), fc.integer({ min: -5, max: 2 ** 31 }))
        .map(([code, len]) => frame([KIND_REQUEST, code, 0, "echo", "x", { type: "ECHO" }, 0, len])),
      fc.tuple(fc.nat(), fc.anything()).map(([id, p]) => frame([1, id, 5, p, -1])),
      fc.nat().map((l) => Buffer.concat([framePrefix(l), Buffer.from([0x93, 0x01])])),
    );
    const heapBefore = process.memoryUsage().heapUsed;
    await fc.assert(
      fc.asyncProperty(fc.array(arbFrame, { minLength: 1, maxLength: 4 }), async (frames) => {
        await raw.send(frames);
        return true;
      }),
      { numRuns: 400 },
    );
    // drain whatever error replies came back to the raw socket
    raw.receiveTimeout = 200;
    for (;;) {
      try {
        await raw.receive();
      } catch {
        break;
      }
    }
    const r = await echoRef.ask({ type: "ECHO" });
    assert.deepEqual(r.fields, { ok: true });
    const s = node.stats();
    assert.ok(s.malformedDropped > 0, "undecodable frames are counted");
    assert.ok(s.malformedDropped + s.malformedAnswered > 100);
    global.gc?.();
    assert.ok(process.memoryUsage().heapUsed - heapBefore < 64 * 1024 * 1024, "memory bounded");
  });
});
