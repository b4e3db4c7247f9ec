import assert from "node:assert/strict";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { Admin, Broker, isMQError, NameServer } from "../../../index.ts";
import { NAMESRV_ACTOR } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir } from "../../helpers.ts";

/** An address nothing listens on: a port the OS handed out, then freed. */
async function deadAddress(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `tcp://127.0.0.1:${port}`;
}

test("createTopic on several brokers with one dead master still registered: the error names the dead one and the ones that created it, which keep it, within seconds", async () => {
  const { dir, cleanup } = await tempDir("actormq-admin-create-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const live = await Broker.start({ brokerName: "live-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: path.join(dir, "a") });
  // a master that died without unregistering: still in the name server's table, its port refusing
  const raw = await ActorNode.start({ listen: null });
  const dead = await deadAddress();
  await raw.ref(ns.address, NAMESRV_ACTOR).ask({
    type: "REGISTER_BROKER",
    clusterName: "DefaultCluster",
    brokerName: "dead-b",
    brokerAddr: dead,
    brokerId: 0,
    topicConfigTable: {},
    dataVersion: 1,
  });
  const admin = await Admin.start({ nameservers: [ns.address] });
  try {
    const t0 = performance.now();
    const err = await admin.createTopic({ topic: "Half", readQueueNums: 2, writeQueueNums: 2 }).then(
      () => assert.fail("createTopic succeeded with a dead broker"),
      (e: unknown) => e,
    );
    const took = performance.now() - t0;
    assert.ok(isMQError(err), String(err));
    assert.match(err.message, new RegExp(`not created or updated on broker dead-b \\(${dead}: TIMEOUT`));
    assert.match(err.message, new RegExp(`It was on live-a \\(${live.address}\\), which keep it`));
    assert.ok(took < 8_000, `failed after ${Math.round(took)} ms, not as soon as the dead broker's connection did`);
    const route = await admin.topicRoute("Half");
    assert.deepEqual(route.queueDatas, [{ brokerName: "live-a", readQueueNums: 2, writeQueueNums: 2, perm: 6 }]);
    // leaving the dead broker out finishes it
    const configs = await admin.createTopic({ topic: "Half", brokers: ["live-a"], readQueueNums: 2, writeQueueNums: 2 });
    assert.equal(configs.length, 1);
    // a group update on the same brokers says the same: which broker failed, which took it
    const t1 = performance.now();
    const gErr = await admin.updateSubscriptionGroup({ groupName: "half-cg", retryMaxTimes: 3 }).then(
      () => assert.fail("updateSubscriptionGroup succeeded with a dead broker"),
      (e: unknown) => e,
    );
    assert.ok(isMQError(gErr), String(gErr));
    assert.match(gErr.message, new RegExp(`Group half-cg was not updated on broker dead-b \\(${dead}: TIMEOUT`));
    assert.match(gErr.message, new RegExp(`It was on live-a \\(${live.address}\\)`));
    assert.ok(performance.now() - t1 < 8_000, "failed as soon as the dead broker's connection did");
    assert.equal(live.ctx.groups.get("half-cg")?.retryMaxTimes, 3, "the live broker keeps the update");
  } finally {
    await admin.close();
    await raw.close();
    await live.close();
    await ns.close();
    await cleanup();
  }
});

test("createTopic without perm or order keeps an existing topic's (re-running it to change queue counts does not make a read-only topic writable or an ordered one unordered); given, they change", async () => {
  const { dir, cleanup } = await tempDir("actormq-admin-keep-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({ brokerName: "keep-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir });
  const admin = await Admin.start({ nameservers: [ns.address] });
  try {
    const [fresh] = await admin.createTopic({ topic: "Plain", readQueueNums: 2, writeQueueNums: 2 });
    assert.deepEqual([fresh!.perm, fresh!.order], [6, false], "a new topic given neither: perm 6, unordered");
    await admin.createTopic({ topic: "Kept", readQueueNums: 2, writeQueueNums: 2, perm: 4, order: true });
    const [kept] = await admin.createTopic({ topic: "Kept", readQueueNums: 4, writeQueueNums: 4 });
    assert.deepEqual([kept!.readQueueNums, kept!.perm, kept!.order], [4, 4, true]);
    const route = await admin.topicRoute("Kept");
    assert.equal(route.queueDatas[0]!.perm, 4, "the route still read-only");
    const [changed] = await admin.createTopic({ topic: "Kept", perm: 6, order: false });
    assert.deepEqual([changed!.readQueueNums, changed!.perm, changed!.order], [4, 6, false]);
  } finally {
    await admin.close();
    await broker.close();
    await ns.close();
    await cleanup();
  }
});

test("createTopic refuses a queue count, perm or order out of range with ILLEGAL_ARGUMENT naming it, before any broker is asked (not as a broker failure to run again)", async () => {
  const { dir, cleanup } = await tempDir("actormq-admin-values-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({ brokerName: "values-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir });
  const admin = await Admin.start({ nameservers: [ns.address] });
  try {
    const bad: [string, object][] = [
      ["readQueueNums", { readQueueNums: 1.5 }],
      ["readQueueNums", { readQueueNums: -1 }],
      ["readQueueNums", { readQueueNums: "4" }],
      ["writeQueueNums", { writeQueueNums: 1025 }],
      ["writeQueueNums", { writeQueueNums: Number.NaN }],
      ["perm", { perm: "6" }],
      ["perm", { perm: 16 }],
      ["order", { order: "false" }],
    ];
    for (const [name, values] of bad) {
      const err = await admin.createTopic({ topic: "Values", ...values } as never).then(
        () => assert.fail(`createTopic took ${JSON.stringify(values)}`),
        (e: unknown) => e,
      );
      assert.ok(isMQError(err, "ILLEGAL_ARGUMENT"), `${JSON.stringify(values)}: ${String(err)}`);
      assert.match(err.message, new RegExp(`^${name} `), JSON.stringify(values));
      assert.doesNotMatch(err.message, /Run the same create again/);
    }
    // a broker named by something that is no name is the caller's mistake, not a broker without a master
    for (const brokers of [[5], ["values-a", null], [""]])
      await assert.rejects(
        admin.createTopic({ topic: "Values", brokers } as never),
        (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /^brokers /.test((e as Error).message),
        JSON.stringify(brokers),
      );
    // the broker's own createTopic refuses an option name it does not know (queues for readQueueNums)
    await assert.rejects(
      broker.createTopic({ topic: "Values", queues: 3 } as never),
      (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /queues/.test((e as Error).message),
    );
    await assert.rejects(admin.topicRoute("Values"), (e: unknown) => isMQError(e, "TOPIC_NOT_EXIST"));
    // a broker named twice is asked once
    assert.equal((await admin.createTopic({ topic: "Twice", brokers: ["values-a", "values-a"] })).length, 1);
    // the limits themselves are taken
    const [tc] = await admin.createTopic({ topic: "Values", readQueueNums: 1024, writeQueueNums: 0, perm: 4, order: true });
    assert.deepEqual([tc!.readQueueNums, tc!.writeQueueNums, tc!.perm, tc!.order], [1024, 0, 4, true]);
  } finally {
    await admin.close();
    await broker.close();
    await ns.close();
    await cleanup();
  }
});

test("updateSubscriptionGroup refuses a value out of range with ILLEGAL_ARGUMENT naming it and its range, before any broker is asked (none up, or no name server answering)", async () => {
  const { dir, cleanup } = await tempDir("actormq-admin-group-values-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const admin = await Admin.start({ nameservers: [ns.address] });
  const unreachable = await Admin.start({ nameservers: [await deadAddress()] });
  let broker: Broker | undefined;
  try {
    const bad: [string, object][] = [
      ["retryQueueNums", { retryQueueNums: 2000 }],
      ["retryQueueNums", { retryQueueNums: -1 }],
      ["retryMaxTimes", { retryMaxTimes: -2 }],
      ["retryMaxTimes", { retryMaxTimes: 1.5 }],
      ["brokerId", { brokerId: "1" }],
      ["whichBrokerWhenConsumeSlowly", { whichBrokerWhenConsumeSlowly: 2 ** 31 }],
      ["consumeTimeoutMinute", { consumeTimeoutMinute: Number.NaN }],
      ["consumeEnable", { consumeEnable: "false" }],
      ["consumeMessageOrderly", { consumeMessageOrderly: 1 }],
    ];
    for (const a of [admin, unreachable])
      for (const [name, values] of bad) {
        const t0 = performance.now();
        const err = await a.updateSubscriptionGroup({ groupName: "cg-values", ...values } as never).then(
          () => assert.fail(`updateSubscriptionGroup took ${JSON.stringify(values)}`),
          (e: unknown) => e,
        );
        assert.ok(isMQError(err, "ILLEGAL_ARGUMENT"), `${JSON.stringify(values)}: ${String(err)}`);
        assert.match(err.message, new RegExp(`^${name} must be (an integer in \\[-?\\d+, \\d+\\]|true or false)`), JSON.stringify(values));
        assert.ok(performance.now() - t0 < 1_000, "refused without a round trip");
      }
    // the limits themselves are taken
    broker = await Broker.start({ brokerName: "gvalues-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir });
    const [done] = await admin.updateSubscriptionGroup({
      groupName: "cg-values",
      retryQueueNums: 1024,
      retryMaxTimes: -1,
      brokerId: 0,
      whichBrokerWhenConsumeSlowly: 2 ** 31 - 1,
      consumeTimeoutMinute: 0,
      consumeEnable: false,
    });
    assert.deepEqual(
      [done!.config.retryQueueNums, done!.config.retryMaxTimes, done!.config.whichBrokerWhenConsumeSlowly, done!.config.consumeEnable],
      [1024, -1, 2 ** 31 - 1, false],
    );
  } finally {
    await unreachable.close();
    await admin.close();
    await broker?.close();
    await ns.close();
    await cleanup();
  }
});
