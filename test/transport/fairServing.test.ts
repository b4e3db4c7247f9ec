/**
 * A listening node serves its clients in turn by bytes, not by ZeroMQ message: libzmq's ROUTER takes
 * one message per connection in turn, and one message is a batch of 1 to thousands of requests, so a
 * client whose requests leave in small batches waited behind every large batch of another and, under
 * load, past its timeout.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as zmq from "zeromq";
import { monotonicNow } from "../../transport/clock.ts";
import { encode, framePrefix, KIND_REQUEST, requestCodeOf } from "../../transport/codec.ts";
import { ZmqNode } from "../../transport/zmqNode.ts";
import { EPHEMERAL, waitFor } from "../helpers.ts";

/** A request frame with a body of `bodyBytes`, sent now with a long timeout (nothing expires). */
function frame(corrId: number, bodyBytes: number): Buffer {
  const now = monotonicNow();
  const h = encode([KIND_REQUEST, requestCodeOf("PING"), corrId, "svc", "peer", { type: "PING" }, now + 60_000, bodyBytes, 60_000]);
  return Buffer.concat([framePrefix(h.length), h, Buffer.alloc(bodyBytes, 1)]);
}

test("a client sending one request per message is served in turn with one sending batches of thousands", async (t) => {
  const served: number[] = [];
  const node = await ZmqNode.start({ listen: EPHEMERAL });
  t.after(() => node.close());
  node.onRequest((_link, _code, corrId) => served.push(corrId));
  const big = new zmq.Dealer({ linger: 0 });
  const small = new zmq.Dealer({ linger: 0 });
  big.connect(node.address!);
  small.connect(node.address!);
  t.after(() => {
    big.close();
    small.close();
  });
  await big.send(frame(900_001, 0));
  await small.send(frame(900_002, 0));
  await waitFor(() => served.length === 2, 5000, "both clients connected");
  served.length = 0;
  const BIG_MESSAGES = 4;
  const PER_BIG = 2000;
  const SMALL = 50;
  // queued without yielding, then this thread (the node's) is kept busy while ZeroMQ's I/O threads
  // carry it all over: the node then finds both clients' messages waiting together
  const sends: Promise<void>[] = [];
  for (let m = 0; m < BIG_MESSAGES; m++)
    sends.push(big.send(Buffer.concat(Array.from({ length: PER_BIG }, (_, i) => frame(1 + m * PER_BIG + i, 1024)))));
  for (let i = 0; i < SMALL; i++) sends.push(small.send(frame(100_001 + i, 1024)));
  const until = Date.now() + 500;
  while (Date.now() < until) {}
  await Promise.all(sends);
  const total = BIG_MESSAGES * PER_BIG + SMALL;
  await waitFor(() => served.length === total, 20_000, `${total} requests served`);
  const lastSmall = served.indexOf(100_000 + SMALL);
  const lastBig = served.indexOf(BIG_MESSAGES * PER_BIG);
  // by message, the small client's 50 messages would take turns with the big client's 4: its last
  // request served after all 8 000 of the other's; by bytes it is done long before
  assert.ok(
    lastSmall < lastBig / 2,
    `the small client's last request was served ${lastSmall}th of ${total}, the big client's last ${lastBig}th`,
  );
});
