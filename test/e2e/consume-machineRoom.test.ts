/**
 * BY_MACHINE_ROOM on a real cluster: with `allocateOptions.machineRoomOf` mapping each broker to
 * its room, two members of one room split that room's queues and leave the other room's alone.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admin, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("BY_MACHINE_ROOM: the members split the queues of the brokers in their room", async () => {
  const { dir, cleanup } = await tempDir("actormq-machine-room-");
  const cluster = await startLocalCluster({ brokers: 2, dir, broker: { flush: "async" } });
  const consumers: PushConsumer[] = [];
  try {
    const admin = await Admin.start({ nameservers: cluster.nameservers });
    await admin.createTopic({ topic: "Rooms", readQueueNums: 4, writeQueueNums: 4 });
    await admin.close();
    const names = cluster.brokers.map((b) => b.ctx.config.brokerName).sort();
    const [near, far] = names as [string, string];
    const machineRoomOf = (brokerName: string) => (brokerName === near ? "room1" : brokerName === far ? "room2" : undefined);
    for (const instanceName of ["A", "B"]) {
      consumers.push(
        await PushConsumer.start({
          group: "cgRooms",
          nameservers: cluster.nameservers,
          instanceName,
          subscriptions: { Rooms: "*" },
          allocateStrategy: "BY_MACHINE_ROOM",
          allocateOptions: { consumeridcs: ["room1"], machineRoomOf },
          rebalanceIntervalMs: 500,
          listener: async () => "CONSUME_SUCCESS",
        }),
      );
    }
    const held = () => consumers.map((c) => c.assignment().filter((q) => q.topic === "Rooms"));
    await waitFor(() => held().every((qs) => qs.length === 2), 10_000, "each member holds two queues");
    const all = held().flat();
    assert.ok(
      all.every((q) => q.brokerName === near),
      `only ${near}'s queues: ${all.map((q) => `${q.brokerName}:${q.queueId}`).join(" ")}`,
    );
    assert.deepEqual([...new Set(all.map((q) => q.queueId))].sort(), [0, 1, 2, 3]);
  } finally {
    for (const c of consumers) await c.close().catch(() => {});
    await cluster.close();
    await cleanup();
  }
});
