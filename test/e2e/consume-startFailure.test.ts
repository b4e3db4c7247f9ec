/**
 * A push consumer whose start fails after it registered with the brokers and spawned its actors
 * gives all of it back: left running, its client instance (shared with the process's other
 * clients) kept heartbeating the group, so the brokers listed a member that consumed nothing and
 * the group's other members left it its share of the queues; and its actors kept their names, so
 * every later start of the group on that instance failed.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { fromCallback } from "xstate";
import { ClientInstance } from "../../actors/client/clientInstance.ts";
import { Admin, isMQError, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("a push consumer whose start fails in its first steps unregisters the group and stops its actors", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-start-failure-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const group = "cgStartFail";
  const opts = { nameservers: cluster.nameservers, instanceName: "startFail" };
  // another client of the process on the same instance keeps it (and its heartbeat) running
  const inst = await ClientInstance.acquire(opts);
  let c: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "StartFail", readQueueNums: 2, writeQueueNums: 2 });
    // the pull actor's name is taken: the start fails once the consume actor is spawned
    inst.node.spawn(
      `${group}/pull`,
      fromCallback(() => {}),
    );
    const start = () => PushConsumer.start({ ...opts, group, subscriptions: { StartFail: "*" }, listener: async () => "CONSUME_SUCCESS" });
    await assert.rejects(start(), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /already runs/.test(String((e as Error).message)));
    assert.equal(inst.node.actorOf(`${group}/consume`), undefined, "the consume actor is stopped");
    // a heartbeat of the instance now: the failed consumer is not part of it
    await inst.sendHeartbeatToAllBrokers();
    await waitFor(
      () =>
        admin.examineConsumerConnectionInfo(group).then(
          () => false,
          (e: unknown) => isMQError(e, "CONSUMER_NOT_ONLINE"),
        ),
      10_000,
      "the group left the broker",
    );
    inst.node.stopActor(`${group}/pull`);
    c = await start();
    await waitFor(
      () => c!.assignment().filter((q) => q.topic === "StartFail").length === 2,
      10_000,
      "the consumer started again holds the queues",
    );
  } finally {
    await c?.close();
    await inst.release();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});
