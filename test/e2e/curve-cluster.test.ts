/**
 * A cluster over CURVE (docs/security.md): a name server and a master with a slave, all with one
 * server key pair and an allow-list; a producer and a push consumer with an allowed key. Messages
 * flow and replicate; a client without CURVE, one with the wrong server key and one whose key is
 * not allowed fail at once with AUTH_FAILED.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { Broker, curveKeyPair, isMQError, NameServer, Producer, PushConsumer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const cluster = curveKeyPair();
const client = curveKeyPair();
const stranger = curveKeyPair();
let ns: NameServer;
let master: Broker;
let slave: Broker;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await tempDir("actormq-curve-cluster-");
  cleanup = t.cleanup;
  const curve = { secretKey: cluster.secretKey, allowedClientKeys: [client.publicKey] };
  ns = await NameServer.start({ listen: EPHEMERAL, curve });
  // the brokers reach the name server and the master with the cluster's own key pair, always allowed
  const common = { listen: EPHEMERAL, nameservers: [ns.address], curve, curveServerKey: cluster.publicKey, flush: "async" as const };
  master = await Broker.start({ ...common, brokerName: "broker-a", storeDir: path.join(t.dir, "a") });
  slave = await Broker.start({
    ...common,
    brokerName: "broker-a",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(t.dir, "a-s1"),
  });
});

after(async () => {
  await slave?.close();
  await master?.close();
  await ns?.close();
  await cleanup?.();
});

test("a producer and a push consumer with an allowed key: messages flow over CURVE and the slave replicates them", async () => {
  const keys = { nameservers: [ns.address], curveServerKey: cluster.publicKey, curveClient: client };
  const producer = await Producer.start({ group: "curve-pg", ...keys });
  const got = new Set<string>();
  const consumer = await PushConsumer.start({
    group: "curve-cg",
    ...keys,
    subscriptions: { Secure: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) got.add(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  try {
    for (let i = 0; i < 50; i++) assert.equal((await producer.send({ topic: "Secure", body: `m${i}` })).status, "SEND_OK");
    await waitFor(() => got.size === 50, 30_000, `all 50 consumed (${got.size})`);
    await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 15_000, "the slave caught up over CURVE");
  } finally {
    await consumer.close();
    await producer.close();
  }
});

test("clients without CURVE, with the wrong server key, or with a key not allowed fail at once with AUTH_FAILED", async () => {
  const cases = [
    { name: "no CURVE", opts: {}, re: /requires CURVE/ },
    { name: "wrong server key", opts: { curveServerKey: stranger.publicKey, curveClient: client }, re: /curveServerKey/ },
    {
      name: "key not allowed",
      opts: { curveServerKey: cluster.publicKey, curveClient: stranger },
      re: /not in the server's allowed client keys/,
    },
  ];
  for (const c of cases) {
    // each its own instance name: one process's clients with the same keys share their connections
    const producer = await Producer.start({ group: "curve-refused", nameservers: [ns.address], instanceName: c.name, ...c.opts });
    try {
      const t0 = performance.now();
      await assert.rejects(producer.send({ topic: "Secure", body: "x" }), (e) => {
        assert.ok(isMQError(e, "AUTH_FAILED"), `${c.name}: ${e}`);
        assert.match((e as Error).message, c.re);
        return true;
      });
      // the route lookup's timeout is 3 s: a refused handshake fails well before it
      const ms = performance.now() - t0;
      assert.ok(ms < 2500, `${c.name}: failed after ${Math.round(ms)} ms`);
    } finally {
      await producer.close();
    }
  }
  // nothing of theirs reached the name server or the broker
  assert.equal(master.ctx.node.stats().handshakeFailures, 0, "the refused clients never got past the name server");
  assert.ok(ns.node.stats().handshakeFailures >= 3);
});
