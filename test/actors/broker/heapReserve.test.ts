import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Broker } from "../../../actors/broker/broker.ts";
import type { BrokerOptions } from "../../../actors/broker/brokerConfig.ts";
import { heapReserveMb, holdHeapReserve } from "../../../actors/broker/heapReserve.ts";
import { missingBrokerNodeFlags } from "../../../actors/broker/nodeFlags.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, runFixture, tempDir } from "../../helpers.ts";

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "heapReserve.ts");
const bothMissing = ["--max-semi-space-size=8", "--initial-old-space-size=64"];

async function runReserve(nodeFlags: string[], mb: number): Promise<{ mb: number; before: number; held: number; released: number }> {
  return JSON.parse(await runFixture(fixture, [...nodeFlags, "--expose-gc"], { RESERVE_MB: String(mb) }));
}

test("holdHeapReserve: the largest size asked for, held until the last holder releases; none with the flag or for 0 MiB", () => {
  assert.equal(heapReserveMb(), 0);
  assert.equal(holdHeapReserve(8, ["--max-semi-space-size=8"]).mb, 0, "the process has --initial-old-space-size");
  assert.equal(holdHeapReserve(0, bothMissing).mb, 0);
  assert.equal(heapReserveMb(), 0);

  const a = holdHeapReserve(4, bothMissing);
  assert.equal(a.mb, 4);
  const b = holdHeapReserve(8, bothMissing);
  assert.equal(b.mb, 8, "a larger ask grows the reserve");
  const c = holdHeapReserve(2, bothMissing);
  assert.equal(c.mb, 8, "a smaller ask shares it");
  b.release();
  b.release(); // twice counts once
  a.release();
  assert.equal(heapReserveMb(), 8, "c still holds it");
  c.release();
  assert.equal(heapReserveMb(), 0);
});

test("the reserve is V8 heap while held and freed after its release; a process with the flag holds none", async () => {
  const r = await runReserve([], 24);
  assert.equal(r.mb, 24);
  assert.ok(r.held - r.before >= 23.5, `held ${r.held - r.before} MiB more`);
  assert.ok(r.released - r.before < 2, `released: ${r.released - r.before} MiB more`);
  const flagged = await runReserve(["--initial-old-space-size=64"], 24);
  assert.equal(flagged.mb, 0);
  assert.ok(flagged.held - flagged.before < 2, `with the flag: ${flagged.held - flagged.before} MiB more`);
});

test("a broker holds its heapReserveMb while open (this test process runs without the flag); bad values are ILLEGAL_ARGUMENT", async () => {
  assert.deepEqual(missingBrokerNodeFlags(), bothMissing, "npm test runs node without the brokers' flags");
  const { dir, cleanup } = await tempDir();
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const opts = { listen: EPHEMERAL, nameservers: [ns.address], flush: "async" as const };
  const open = new Set<Broker>();
  const start = async (o: Partial<BrokerOptions> & { brokerName: string }) => {
    const b = await Broker.start({ ...opts, storeDir: path.join(dir, o.brokerName), ...o });
    open.add(b);
    return b;
  };
  const close = async (b: Broker) => {
    open.delete(b);
    await b.close();
  };
  try {
    for (const bad of [-1, 1.5, 2048, Number.NaN])
      await assert.rejects(
        Broker.start({ ...opts, brokerName: "bad", storeDir: path.join(dir, "bad"), heapReserveMb: bad }),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /heapReserveMb/.test((e as Error).message),
        String(bad),
      );
    const a = await start({ brokerName: "a", heapReserveMb: 6 });
    const none = await start({ brokerName: "none", heapReserveMb: 0 });
    assert.equal(a.heapReserveMb, 6);
    assert.equal(none.heapReserveMb, 0);
    assert.equal(heapReserveMb(), 6);
    // a start that fails lets its hold go: the store is a's, locked
    await assert.rejects(start({ brokerName: "a2", storeDir: path.join(dir, "a"), heapReserveMb: 6 }), (e) => isMQError(e, "STORE_LOCKED"));
    await close(a);
    assert.equal(heapReserveMb(), 0, "released with the broker that held it");
    await close(none);
    const dflt = await start({ brokerName: "d" });
    assert.equal(dflt.heapReserveMb, 32, "32 MiB by default");
    await close(dflt);
    assert.equal(heapReserveMb(), 0);
  } finally {
    for (const b of open) await b.close();
    await ns.close();
    await cleanup();
  }
});
