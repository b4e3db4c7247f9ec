/**
 * A send whose request is larger than a broker's transport takes in one message (64 MiB unless its
 * maxMessageBytes is over 16 MiB) is cut off by the broker's socket and can only time out: the
 * TIMEOUT says the message or batch is too large for the transport, the limit, and what to do. It
 * is sent once, not retried (retryTimesWhenSendFailed): each attempt would be cut off again.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isMQError, Producer, startLocalCluster } from "../../index.ts";
import { DEFAULT_MAX_INBOUND_BYTES } from "../../transport/zmqNode.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { freePort, TcpProxy } from "./fixtures/tcpProxy.ts";

test("a batch over the transport's 64 MiB fails with a TIMEOUT that says it is too large for the transport and names the limit, after one attempt", async () => {
  const { dir, cleanup } = await tempDir("actormq-over-transport-");
  // the broker is reached through a proxy, which counts the connections the broker drops
  const port = await freePort();
  const proxy = await TcpProxy.start(port);
  const cluster = await startLocalCluster({
    dir,
    brokerListen: `tcp://127.0.0.1:${port}`,
    broker: { flush: "async", advertise: proxy.address },
  });
  // a producer that allows large messages, brokers at the default maxMessageBytes (4 MiB, so 64 MiB
  // per request), and the default retryTimesWhenSendFailed (2)
  const producer = await Producer.start({
    group: "pgOverTransport",
    nameservers: cluster.nameservers,
    maxMessageBytes: 2 * DEFAULT_MAX_INBOUND_BYTES,
  });
  try {
    await cluster.brokers[0]!.createTopic({ topic: "Huge", readQueueNums: 1, writeQueueNums: 1 });
    // the connection is made before the large send, so that every connection the broker drops is an attempt
    assert.equal((await producer.send({ topic: "Huge", body: "before" })).status, "SEND_OK");
    assert.equal(proxy.closedByTarget, 0);
    const body = Buffer.alloc(DEFAULT_MAX_INBOUND_BYTES + 1, 1);
    await assert.rejects(
      producer.sendBatch([{ topic: "Huge", body }]),
      (e: unknown) =>
        isMQError(e, "TIMEOUT") &&
        /the batch may be too large for the transport: its request is about \d+ bytes, over the 67108864 bytes \(64 MiB\)/.test(
          e.message,
        ) &&
        /Split the batch, or, if the brokers run with the default, raise their maxMessageBytes to at least \d+\.$/.test(e.message),
    );
    await waitFor(() => proxy.closedByTarget >= 1, 10_000, "the broker dropped the oversized send's connection");
    // the broker cut the connection, not the producer: a send goes through once ZeroMQ has made it
    // again (a send in between fails at once: the connection reads as lost until then)
    const deadline = performance.now() + 10_000;
    for (;;) {
      const r = await producer.send({ topic: "Huge", body: "small" }).catch((e: unknown) => e);
      if (!isMQError(r)) {
        assert.equal((r as { status: string }).status, "SEND_OK");
        break;
      }
      assert.ok(isMQError(r, "TIMEOUT") && /refused or lost/.test(r.message), String(r));
      assert.ok(performance.now() < deadline, `no send went through within 10 s of the cut: ${r.message}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // one attempt: the batch was not sent again after the broker dropped it
    assert.equal(proxy.closedByTarget, 1, "the broker dropped one connection, the one attempt's");
  } finally {
    await producer.close();
    await cluster.close();
    await proxy.close();
    await cleanup();
  }
});
