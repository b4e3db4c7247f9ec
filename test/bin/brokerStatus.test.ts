/** `actormq broker-status`: the key/value table, --json, --help, and one-line errors for an unknown or unreachable broker. */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import { type LocalCluster, startLocalCluster } from "../../actors/localCluster.ts";
import type { BrokerStatus } from "../../index.ts";
import { tempDir } from "../helpers.ts";
import { cli, oneLine } from "./cliRun.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let env: Record<string, string>;

before(async () => {
  const t = await tempDir();
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, brokers: 1, slavesPerBroker: 1, broker: { flush: "async" } });
  env = { ACTORMQ_NAMESRV: cluster.nameservers[0]! };
});

after(async () => {
  await cluster.close();
  await cleanup();
});

/** The `key : value` lines of the table. */
function table(out: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const l of out.trim().split("\n")) {
    const at = l.indexOf(" : ");
    assert.ok(at > 0, `a key : value line: ${l}`);
    m.set(l.slice(0, at).trim(), l.slice(at + 3));
  }
  return m;
}

test("broker-status prints the master's figures as a key/value table, and as JSON with --json", async () => {
  const s = await cli(["send", "--topic", "CliStatusT", "--count", "3", "hello"], { env });
  assert.equal(s.code, 0, s.err);
  const master = cluster.brokers.find((b) => b.ctx.config.brokerId === 0)!;
  const slave = cluster.brokers.find((b) => b.ctx.config.brokerId === 1)!;

  const r = await cli(["broker-status", master.brokerName], { env });
  assert.equal(r.code, 0, r.err);
  const t = table(r.out);
  assert.equal(t.get("brokerName"), master.brokerName);
  assert.equal(t.get("brokerId"), "0", "a name is its master");
  assert.equal(t.get("brokerAddr"), master.address);
  assert.equal(t.get("role"), "ASYNC_MASTER");
  assert.equal(t.get("flushDiskType"), "ASYNC_FLUSH");
  assert.equal(t.get("msgPutTotalTodayNow"), "3");
  assert.equal(t.get("commitLogMaxOffset"), String(master.store.maxPhyOffset));
  assert.match(t.get("bootTimestamp")!, /^\d+ \(\d{4}-\d\d-\d\dT/);
  assert.match(t.get("runtime")!, /^\[ 0 days, /);
  assert.match(t.get("commitLogDiskRatio")!, /^0\.\d{3}$|^1\.000$/);
  assert.match(t.get("haSlave 1") ?? "", new RegExp(`^${slave.address} ackOffset \\d+, \\d+ bytes behind$`), r.out);

  const j = await cli(["broker-status", master.address, "--json"], { env });
  assert.equal(j.code, 0, j.err);
  assert.equal(j.out.trim().split("\n").length, 1, "one JSON line");
  const js = JSON.parse(j.out) as BrokerStatus;
  assert.equal(js.brokerAddr, master.address);
  assert.equal(js.msgPutTotalTodayNow, 3);
  assert.equal(typeof js.putTps, "number");
  assert.equal(js.haSlaves[0]?.addr, slave.address);

  const sl = await cli(["broker-status", slave.address], { env });
  assert.equal(sl.code, 0, sl.err);
  const st = table(sl.out);
  assert.equal(st.get("role"), "SLAVE");
  assert.equal(st.get("masterAddr"), master.address);
  assert.ok(st.has("slaveFallBehindBytes"), sl.out);
  assert.ok(!st.has("haSlaves"), "a slave lists no slaves");
});

test("broker-status --help explains the fields", async () => {
  const h = await cli(["broker-status", "--help"], { env });
  assert.equal(h.code, 0);
  assert.match(h.out, /^Usage: actormq broker-status \[options\] <broker>/);
  for (const f of ["--json", "msgPutTotalTodayNow", "getTransferedTps", "dispatchBehindBytes", "slaveFallBehindBytes", "tcp://host:port"])
    assert.ok(h.out.includes(f), `${f} in: ${h.out}`);
});

test("an unknown broker name and an unreachable address are one-line errors, exit 1", async () => {
  const u = await cli(["broker-status", "no-such-broker"], { env });
  assert.equal(u.code, 1);
  assert.equal(u.out, "");
  assert.match(oneLine(u.err), /^actormq: error ILLEGAL_ARGUMENT: No broker named no-such-broker .*they know broker-a \(master tcp:/);

  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const d = await cli(["broker-status", `tcp://127.0.0.1:${port}`], { env });
  assert.equal(d.code, 1);
  assert.match(oneLine(d.err), new RegExp(`^actormq: error TIMEOUT: The broker at tcp://127\\.0\\.0\\.1:${port} did not answer`));
});
