/**
 * What a producer's close does to the sends it was given: one-way sends it resolved are delivered,
 * not dropped with the sockets; sends still waiting for their answer get it.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { isMQError, type LocalCluster, Producer, startLocalCluster } from "../../../index.ts";
import { tempDir, waitFor } from "../../helpers.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;

before(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir());
  cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
});
after(async () => {
  await cluster.close();
  await cleanup();
});

function storedIn(topic: string): number {
  return cluster.brokers[0]!.store.topicQueues()
    .filter((q) => q.topic === topic)
    .reduce((n, q) => n + q.maxOffset, 0);
}

test("one-way sends resolved before close are delivered, on a connection not made yet and on one in use", async () => {
  const warm = await Producer.start({ group: "pg-close-warm", nameservers: cluster.nameservers, instanceName: "close-warm" });
  await warm.send({ topic: "OnewayClose", body: "creates the topic" });
  await warm.close();
  let expected = 1;
  for (let i = 0; i < 20; i++) {
    // an instance of its own: its close closes the sockets. The route is known, the broker never asked
    const p = await Producer.start({ group: "pg-close", nameservers: cluster.nameservers, instanceName: `close-fresh-${i}` });
    await p.fetchPublishQueues("OnewayClose");
    await p.sendOneway({ topic: "OnewayClose", body: `fresh ${i}` });
    await p.close();
    expected++;
  }
  const p = await Producer.start({ group: "pg-close", nameservers: cluster.nameservers, instanceName: "close-in-use" });
  await p.send({ topic: "OnewayClose", body: "in use" });
  expected++;
  for (let i = 0; i < 200; i++) await p.sendOneway({ topic: "OnewayClose", body: `in use ${i}` });
  expected += 200;
  await p.close();
  await waitFor(() => storedIn("OnewayClose") >= expected, 5000, `${expected} messages stored`).catch(() => undefined);
  assert.equal(storedIn("OnewayClose"), expected);
});

test("sends called before close are awaited by it, not failed CLOSED: each is answered and stored once", async () => {
  const p = await Producer.start({ group: "pg-close", nameservers: cluster.nameservers, instanceName: "close-inflight" });
  await p.send({ topic: "InFlightClose", body: "creates the topic" });
  const before = storedIn("InFlightClose");
  const sends = Array.from({ length: 50 }, (_, i) => p.send({ topic: "InFlightClose", body: `in flight ${i}` }));
  const batch = p.sendBatch([
    { topic: "InFlightClose", body: "batch 0" },
    { topic: "InFlightClose", body: "batch 1" },
  ]);
  const oneways = Array.from({ length: 10 }, (_, i) => p.sendOneway({ topic: "InFlightClose", body: `one-way ${i}` }));
  const closed = p.close();
  await assert.rejects(p.send({ topic: "InFlightClose", body: "after close" }), (e) => isMQError(e, "CLOSED"));
  const results = await Promise.allSettled([...sends, batch, ...oneways]);
  await closed;
  const failed = results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
  assert.deepEqual(failed, [], "no send called before close failed");
  for (const r of results.slice(0, 51)) assert.equal((r as PromiseFulfilledResult<{ status: string }>).value.status, "SEND_OK");
  const expected = before + 50 + 2 + 10;
  await waitFor(() => storedIn("InFlightClose") >= expected, 5000, `${expected} messages stored`).catch(() => undefined);
  assert.equal(storedIn("InFlightClose"), expected);
});
