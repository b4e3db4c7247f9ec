import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { wireClusterSource } from "../../../actors/inspector/clusterView.ts";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { Admin, Producer, PushConsumer, startLocalCluster } from "../../../index.ts";
import { tempDir, waitFor } from "../../helpers.ts";

test("the cluster view lists a clustering group's lag and leaves a broadcasting group out (its offsets are its members'), reporting no error", async () => {
  const { dir, cleanup } = await tempDir("actormq-clusterview-");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const producer = await Producer.start({ group: "pgView", nameservers: cluster.nameservers });
  const node = await ActorNode.start({ listen: null });
  const consumers: PushConsumer[] = [];
  try {
    await admin.createTopic({ topic: "ViewT", readQueueNums: 1, writeQueueNums: 1 });
    await producer.sendBatch([1, 2, 3].map((i) => ({ topic: "ViewT", body: `m${i}` })));
    const got = { cgViewB: 0, cgViewC: 0 };
    for (const group of ["cgViewB", "cgViewC"] as const)
      consumers.push(
        await PushConsumer.start({
          group,
          nameservers: cluster.nameservers,
          instanceName: group,
          model: group === "cgViewB" ? "BROADCASTING" : "CLUSTERING",
          offsetStoreDir: path.join(dir, "offsets"),
          consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
          subscriptions: { ViewT: "*" },
          listener: async (msgs) => {
            got[group] += msgs.length;
            return "CONSUME_SUCCESS";
          },
        }),
      );
    await waitFor(() => got.cgViewB >= 3 && got.cgViewC >= 3, 15_000, "both groups consumed the 3 messages");
    const view = await wireClusterSource({ node, nameservers: () => cluster.nameservers, assignments: () => [] })();
    assert.deepEqual(view.errors, []);
    const groups = view.groups.map((g) => g.group);
    assert.ok(groups.includes("cgViewC"), groups.join(" "));
    assert.ok(!groups.includes("cgViewB"), groups.join(" "));
  } finally {
    for (const c of consumers) await c.close();
    await node.close();
    await producer.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});
