/**
 * A listening node does not serve an ask whose asker has given up: one that waited (in the network,
 * the socket buffers, the node's backlog) at least its timeout since it was sent. The wait is the
 * request's lag (receive time − the sender's stamp) over the least lag of its connection, so the
 * sender's clock may be anything; the baseline follows clocks drifting apart.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as zmq from "zeromq";
import { monotonicNow } from "../../transport/clock.ts";
import { decode } from "../../transport/codec.ts";
import { EXPIRED_RUN_RESET_MS, LAG_WINDOW_MS, RouterLink, ZmqNode } from "../../transport/zmqNode.ts";
import { EPHEMERAL, waitFor } from "../helpers.ts";
import { requestFrame as request } from "./fixtures/rawFrames.ts";

describe("asks that waited past their timeout", () => {
  let node: ZmqNode;
  const served: number[] = [];
  const expired: Array<{ type: string; waitedMs: number; timeoutMs: number }> = [];
  const raws: zmq.Dealer[] = [];
  before(async () => {
    node = await ZmqNode.start({ listen: EPHEMERAL });
    node.onRequest((_link, _code, corrId) => served.push(corrId));
    node.onRequestExpired((_link, type, waitedMs, timeoutMs) => expired.push({ type, waitedMs, timeoutMs }));
  });
  after(async () => {
    for (const r of raws) r.close();
    await node.close();
  });
  const connect = () => {
    const raw = new zmq.Dealer({ linger: 0 });
    raw.connect(node.address!);
    raws.push(raw);
    return raw;
  };
  /** Sends the frames, then a fresh request `marker`, and waits for the marker: everything before it was judged. */
  const sendThenMark = async (raw: zmq.Dealer, clockOffset: number, frames: (clock: number) => Buffer[], marker: number) => {
    for (const f of frames(monotonicNow() + clockOffset)) await raw.send(f);
    await raw.send(request(marker, monotonicNow() + clockOffset, 0, 1000));
    await waitFor(() => served.includes(marker), 5000, `request ${marker}`);
  };

  it("are not handed to the handler, and are counted; fresh ones, long-timeout ones, one-way sends and old peers' are served", async () => {
    const raw = connect();
    const start = { ...node.stats };
    await sendThenMark(
      raw,
      0,
      (now) => [
        request(1, now, 0, 1000), // fresh: the baseline
        request(2, now, 5000, 1000), // waited 5 s of a 1 s timeout: its asker gave up
        request(3, now, 5000, 10_000), // waited 5 s of 10 s: still awaited
        request(0, now, 5000, 1000), // a one-way send has no asker to give up
        request(4, now, 5000, undefined), // an older peer sends no timeout: served however late
        request(5, now, 1000, 1000), // waited exactly its timeout
        request(7, now, 5000, 0), // an ask sent with serveLate (timeout 0): served however late
      ],
      6,
    );
    assert.deepEqual(served, [1, 3, 0, 4, 7, 6]);
    assert.equal(node.stats.expiredDropped - start.expiredDropped, 2);
    assert.equal(node.stats.requestsIn - start.requestsIn, 8, "dropped requests were received (requestsIn) but not served");
    assert.equal(expired.length, 2);
    assert.equal(expired[0]!.type, "PING");
    assert.equal(expired[0]!.timeoutMs, 1000);
    assert.ok(expired[0]!.waitedMs >= 5000 && expired[0]!.waitedMs < 6000, `estimated wait ${expired[0]!.waitedMs} ms`);
  });

  for (const skew of [3_600_000, -3_600_000]) {
    it(`a peer whose clock is an hour ${skew > 0 ? "ahead" : "behind"} is served; its requests are judged by their own lag (${skew} ms)`, async () => {
      const raw = connect();
      served.length = 0;
      const dropped = node.stats.expiredDropped;
      await sendThenMark(raw, skew, (now) => [request(11, now, 0, 1000), request(12, now, 0, 1000), request(13, now, 3000, 1000)], 14);
      assert.deepEqual(served, [11, 12, 14], "fresh requests served whatever the sender's clock reads");
      assert.equal(node.stats.expiredDropped - dropped, 1, "the one sent 3 s before the others is dropped");
    });
  }
});

describe("an ask that is served", () => {
  it("reaches the handler with when its asker gives up: its timeout less the wait estimated for it", async () => {
    const node = await ZmqNode.start({ listen: EPHEMERAL });
    const raw = new zmq.Dealer({ linger: 0 });
    try {
      const got = new Map<number, { answerBy: number; at: number }>();
      node.onRequest((_link, _code, corrId, _target, _sender, _event, _body, answerBy) =>
        got.set(corrId, { answerBy, at: monotonicNow() }),
      );
      raw.connect(node.address!);
      const now = monotonicNow();
      await raw.send(request(1, now, 0, 2000)); // fresh: the baseline
      await raw.send(request(2, now, 1500, 2000)); // sent 1.5 s before the first: 0.5 s left
      await raw.send(request(0, now, 0, 2000)); // one-way: nobody waits
      await raw.send(request(3, now, 0, undefined)); // no timeout sent: unknown
      await waitFor(() => got.size === 4, 5000, "the four requests");
      const left = (id: number) => got.get(id)!.answerBy - got.get(id)!.at;
      assert.ok(left(1) > 1500 && left(1) <= 2000, `fresh ask: ${left(1)} ms left`);
      assert.ok(left(2) > 0 && left(2) <= 500, `ask that waited 1.5 s of 2 s: ${left(2)} ms left`);
      assert.equal(got.get(0)!.answerBy, Number.POSITIVE_INFINITY);
      assert.equal(got.get(3)!.answerBy, Number.POSITIVE_INFINITY);
    } finally {
      raw.close();
      await node.close();
    }
  });
});

describe("an ask sent with serveLate", () => {
  it("carries a timeout of 0, which the receiver serves however late; other asks carry theirs", async () => {
    const router = new zmq.Router({ linger: 0 });
    await router.bind(EPHEMERAL);
    const client = await ZmqNode.start({});
    try {
      const link = client.peer(router.lastEndpoint!);
      void client.request(link, "svc", { type: "UNREGISTER_CLIENT" }, undefined, 1500, true).catch(() => {});
      void client.request(link, "svc", { type: "PING" }, undefined, 1500).catch(() => {});
      const timeouts: unknown[] = [];
      while (timeouts.length < 2) {
        const [, msg] = await router.receive();
        // a message holds one or more logical frames: 4-byte header length (LE), header, body
        for (let at = 0; at < msg!.length; ) {
          const hl = msg!.readUInt32LE(at);
          const h = decode(msg!.subarray(at + 4, at + 4 + hl)) as unknown[];
          timeouts.push(h[8]);
          at += 4 + hl + Math.max(0, h[7] as number);
        }
      }
      assert.deepEqual(timeouts, [0, 1500]);
    } finally {
      router.close();
      await client.close();
    }
  });
});

describe("the lag baseline of a router link", () => {
  const link = () => new RouterLink(Buffer.from([1]), "01");

  it("is the least lag seen: a first request that waited makes later fresh ones look fresh, not old", () => {
    const l = link();
    const t = 1e9;
    assert.equal(l.waitedMs(t - 2000, t), 0, "the first request has no baseline yet");
    assert.equal(l.waitedMs(t + 100 - 1, t + 100), 0, "a quicker one lowers the baseline at once");
    assert.equal(l.waitedMs(t + 200 - 1501, t + 200), 1500);
  });

  it("follows two clocks drifting apart: after the sender's clock fell 2.4 s behind, a fresh request reads at most two windows of drift", () => {
    // the sender's clock runs 2000 ppm slow: every request below waits in no queue
    const l = link();
    const t0 = 5e9;
    let worst = 0;
    let last = 0;
    for (let s = 0; s <= 4 * LAG_WINDOW_MS; s += 1000) {
      const now = t0 + s;
      const sentAt = t0 + s * (1 - 0.002);
      last = l.waitedMs(sentAt, now);
      if (last > worst) worst = last;
    }
    const driftMs = 4 * LAG_WINDOW_MS * 0.002;
    assert.ok(driftMs >= 2000, `${driftMs} ms of drift`);
    assert.ok(
      worst <= 2 * LAG_WINDOW_MS * 0.002 + 1,
      `worst fresh wait ${worst} ms, at most two windows of drift (${2 * LAG_WINDOW_MS * 0.002} ms)`,
    );
    // a request that really waited 3 s still reads as such, give or take the drift not yet followed
    const now = t0 + 4 * LAG_WINDOW_MS + 1000;
    const waited = l.waitedMs(t0 + (now - 3000 - t0) * (1 - 0.002), now);
    assert.ok(waited >= 3000 && waited <= 3000 + 2 * LAG_WINDOW_MS * 0.002 + 1, `a 3 s wait read as ${waited} ms`);
  });

  it("follows a sender's clock that runs fast at once (the lag only shrinks)", () => {
    const l = link();
    const t0 = 5e9;
    for (let s = 0; s <= 2 * LAG_WINDOW_MS; s += 1000) assert.equal(l.waitedMs(t0 + s * 1.002, t0 + s), 0);
  });

  it("keeps no lag from before an idle gap of more than a window", () => {
    const l = link();
    const t0 = 5e9;
    l.waitedMs(t0, t0);
    // idle an hour; meanwhile the lag grew by 10 s (the sender's clock was stopped by a suspend)
    const t1 = t0 + 3_600_000;
    assert.equal(l.waitedMs(t1 - 10_000, t1), 0);
    assert.equal(l.waitedMs(t1 + 10 - 10_000, t1 + 10), 0);
  });

  it("starts the baseline over after EXPIRED_RUN_RESET_MS of nothing but dropped asks (a sender's clock stepped back)", () => {
    const l = link();
    const t0 = 5e9;
    // an ask a second for 2 minutes, all fresh
    for (let s = 0; s < 120_000; s += 1000) assert.equal(l.expiredWait(t0 + s, t0 + s, 3000), -1);
    // the sender's host was paused 4 s: its clock now reads 4 s behind; its fresh 3 s asks look old
    let firstServed = -1;
    for (let s = 120_000; s < 120_000 + 3 * LAG_WINDOW_MS; s += 1000) {
      if (l.expiredWait(t0 + s - 4000, t0 + s, 3000) === -1) {
        firstServed = s - 120_000;
        break;
      }
    }
    assert.equal(firstServed, EXPIRED_RUN_RESET_MS, "dropped for the reset interval, then served");
    // the asks after it are judged against the new baseline: fresh ones served, a late one dropped
    const t1 = t0 + 120_000 + EXPIRED_RUN_RESET_MS + 1000;
    assert.equal(l.expiredWait(t1 - 4000, t1, 3000), -1);
    assert.equal(l.expiredWait(t1 - 4000 - 3500, t1 + 10, 3000), 3510);
    // a served ask ends a run of drops: a later run starts counting anew
    assert.equal(l.expiredWait(t1 + 20 - 4000, t1 + 20, 3000), -1);
    assert.equal(l.dropRunSince, 0);
  });

  it("keeps the previous window's least lag for one more window, so a backlog across a window's end is still seen", () => {
    const l = link();
    const t0 = 5e9;
    l.waitedMs(t0, t0);
    // the next window begins with a request that waited 4 s: the baseline still holds the fresh lag
    const t1 = t0 + LAG_WINDOW_MS + 5;
    assert.equal(l.waitedMs(t1 - 4000, t1), 4000);
  });
});
