import assert from "node:assert/strict";
import { it } from "node:test";
import { ClientInstance } from "../../../actors/client/clientInstance.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { EPHEMERAL } from "../../helpers.ts";

it("an acquire made while the last holder releases gets a live instance, not the closing one", async (t) => {
  const ns = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  t.after(() => ns.close());
  const opts = { nameservers: [ns.address] };
  const first = await ClientInstance.acquire(opts);
  const second = ClientInstance.acquire(opts); // a restart: the new client starts, then the old one closes
  const released = first.release();
  const inst = await second;
  await released;
  try {
    assert.ok(first.closed);
    assert.notEqual(inst, first);
    assert.equal(inst.closed, false);
    assert.equal(inst.node.transport.isClosed, false);
    const info = await inst.clusterInfo();
    assert.deepEqual(info.brokerAddrTable, {});
    // and the registry hands the live one to the next acquire
    const third = await ClientInstance.acquire(opts);
    assert.equal(third, inst);
    await third.release();
  } finally {
    await inst.release();
  }
});
