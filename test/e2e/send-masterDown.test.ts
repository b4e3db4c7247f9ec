import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Broker, isMQError, type MQError, NameServer, Producer } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

test("a send while the topic's only master is down and its slave still listed is NO_ROUTE naming the broker without a master, not a permission to change", async () => {
  const { dir, cleanup } = await tempDir("actormq-send-master-down-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const common = { brokerName: "md", listen: EPHEMERAL, nameservers: [ns.address], flush: "async" as const };
  const master = await Broker.start({ ...common, storeDir: path.join(dir, "m") });
  const slave = await Broker.start({ ...common, brokerId: 1, role: "SLAVE", masterAddress: master.address, storeDir: path.join(dir, "s") });
  let masterOpen = true;
  const admin = await Admin.start({ nameservers: [ns.address] });
  const producer = await Producer.start({ group: "md-pg", nameservers: [ns.address], sendTimeoutMs: 1000 });
  try {
    await admin.createTopic({ topic: "MD", readQueueNums: 2, writeQueueNums: 2 });
    await producer.send({ topic: "MD", body: "before" });
    await master.close();
    masterOpen = false;
    await waitFor(
      async () => (await admin.topicRoute("MD")).brokerDatas[0]?.brokerAddrs["0"] === undefined,
      10_000,
      "the master out of the route",
    );
    // a send on the producer's old route fails on the lost connection and refreshes the route
    const e = await waitFor(
      () =>
        producer.send({ topic: "MD", body: "while down" }).then(
          () => assert.fail("sent with no master"),
          (err: unknown) => (/connection/.test((err as Error).message) ? undefined : err),
        ),
      10_000,
      "a send refused on the new route",
    );
    assert.ok(isMQError(e, "NO_ROUTE"), String(e));
    assert.equal((e as MQError).retriable, true, "sends resume once the master registers");
    assert.match((e as Error).message, /no master/);
    assert.match((e as Error).message, /\bmd\b/, "names the broker");
    assert.doesNotMatch((e as Error).message, /change its perm/, "the topic's perm is not the problem");
  } finally {
    await producer.close();
    await admin.close();
    await slave.close();
    if (masterOpen) await master.close();
    await ns.close();
    await cleanup();
  }
});
