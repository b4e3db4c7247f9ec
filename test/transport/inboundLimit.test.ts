/**
 * A listening node takes messages up to maxInboundBytes: a peer that sends a larger one is cut off
 * by libzmq before it is buffered whole; the node keeps serving everyone else.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { ActorNode, type Replier } from "../../actors/runtime/index.ts";
import { isMQError } from "../../transport/protocol.ts";
import { MAX_BATCH_BYTES } from "../../transport/zmqNode.ts";
import { EPHEMERAL } from "../helpers.ts";

const echo = setup({ types: { events: {} as { type: "ECHO"; body?: Buffer; reply?: Replier } } }).createMachine({
  on: { ECHO: { actions: ({ event }) => event.reply?.ok({ bytes: event.body?.length ?? 0 }) } },
});

describe("maxInboundBytes", () => {
  let server: ActorNode;
  let client: ActorNode;
  before(async () => {
    server = await ActorNode.start({ listen: EPHEMERAL, maxInboundBytes: 64 * 1024 });
    server.spawn("echo", echo);
    client = await ActorNode.start({ listen: null, requestTimeoutMs: 1500 });
  });
  after(async () => {
    await client.close();
    await server.close();
  });

  it("serves requests within the limit, cuts off a peer that sends more, and keeps serving", async () => {
    const ref = client.ref(server.address, "echo");
    assert.equal((await ref.ask<{ bytes: number }>({ type: "ECHO" }, { body: Buffer.alloc(32 * 1024) })).fields.bytes, 32 * 1024);
    await assert.rejects(ref.ask({ type: "ECHO" }, { body: Buffer.alloc(256 * 1024) }), (e) => isMQError(e, "TIMEOUT"));
    // a raw peer sending 8 MiB in one message: the node neither crashes nor stops answering others
    const raw = new zmq.Dealer({ linger: 0 });
    raw.connect(server.address!);
    await raw.send(Buffer.alloc(8 * 1024 * 1024, 1));
    raw.close();
    const other = await ActorNode.start({ listen: null, requestTimeoutMs: 3000 });
    try {
      const r = await other.ref(server.address, "echo").ask<{ bytes: number }>({ type: "ECHO" }, { body: Buffer.alloc(1000) });
      assert.equal(r.fields.bytes, 1000);
    } finally {
      await other.close();
    }
    // the cut-off client reconnects and is served again
    assert.equal((await ref.ask<{ bytes: number }>({ type: "ECHO" }, { body: Buffer.alloc(10) })).fields.bytes, 10);
  });

  it("requests that each fit are not sent together in a message over the limit: the queue leaves in batches of at most MAX_BATCH_BYTES", async () => {
    const limit = 2 * MAX_BATCH_BYTES;
    const srv = await ActorNode.start({ listen: EPHEMERAL, maxInboundBytes: limit });
    srv.spawn("echo", echo);
    const cli = await ActorNode.start({ listen: null, requestTimeoutMs: 20_000 });
    try {
      const ref = cli.ref(srv.address, "echo");
      const big = Buffer.alloc((MAX_BATCH_BYTES * 3) / 4, 7);
      const small = Buffer.alloc(64 * 1024, 8);
      // queued in one tick while the first send is under way: 7 big and 200 small ones, over 4 limits in all
      const sizes = [...Array<number>(6).fill(big.length), ...Array<number>(200).fill(small.length), big.length];
      const replies = await Promise.all(
        sizes.map((n) => ref.ask<{ bytes: number }>({ type: "ECHO" }, { body: n === big.length ? big : small })),
      );
      assert.deepEqual(
        replies.map((r) => r.fields.bytes),
        sizes,
      );
      assert.equal(cli.stats().sendFailures, 0);
    } finally {
      await cli.close();
      await srv.close();
    }
  });

  it("refuses a limit below 1 KiB", async () => {
    await assert.rejects(ActorNode.start({ listen: EPHEMERAL, maxInboundBytes: 10 }), (e) => isMQError(e, "ILLEGAL_ARGUMENT"));
  });
});
