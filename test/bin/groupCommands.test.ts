import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import { CLIENT_VERSION } from "../../actors/client/clientInstance.ts";
import { Admin } from "../../actors/client/index.ts";
import { PushConsumer } from "../../actors/client/pushConsumer.ts";
import { type LocalCluster, startLocalCluster } from "../../actors/localCluster.ts";
import { tempDir } from "../helpers.ts";
import { cli, oneLine } from "./cliRun.ts";

let cluster: LocalCluster;
let consumer: PushConsumer;
let admin: Admin;
let cleanup: () => Promise<void>;
let env: Record<string, string>;

before(async () => {
  const t = await tempDir();
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, brokers: 2 });
  env = { ACTORMQ_NAMESRV: cluster.nameservers[0]! };
  admin = await Admin.start({ nameservers: cluster.nameservers });
  await admin.createTopic({ topic: "CliGroups", readQueueNums: 2, writeQueueNums: 2 });
  consumer = await PushConsumer.start({
    group: "cli-members",
    nameservers: cluster.nameservers,
    subscriptions: { CliGroups: "TagA || TagB" },
    listener: async () => "CONSUME_SUCCESS",
  });
});

after(async () => {
  await consumer.close();
  await admin.close();
  await cluster.close();
  await cleanup();
});

function rowOf(out: string, first: string): string[] | undefined {
  return out
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .find((r) => r[0] === first);
}

test("group members lists each member with address, language, version, last heartbeat and brokers, then the subscriptions; an unknown group is CONSUMER_NOT_ONLINE", async () => {
  const r = await cli(["group", "members", "cli-members"], { env });
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^CLIENT_ID\s+ADDRESS\s+LANGUAGE\s+VERSION\s+LAST_HEARTBEAT\s+BROKERS/);
  const row = r.out.split("\n")[1]!.trim().split(/\s+/);
  assert.match(row[0]!, new RegExp(`@${process.pid}@`));
  assert.match(row[1]!, /^\d+\.\d+\.\d+\.\d+:0$/);
  assert.deepEqual(row.slice(2, 3), ["NODE"]);
  assert.equal(row[3], CLIENT_VERSION);
  assert.ok(Math.abs(Date.parse(row[4]!) - Date.now()) < 60_000, row[4]);
  assert.equal(row[5], "broker-a,broker-b");
  assert.match(r.out, /CLUSTERING CONSUME_PASSIVELY CONSUME_FROM_LAST_OFFSET/);
  assert.match(r.out, /CliGroups\s+TagA \|\| TagB/);

  const none = await cli(["group", "members", "cli-nobody"], { env });
  assert.equal(none.code, 1);
  assert.match(oneLine(none.err), /^actormq: error CONSUMER_NOT_ONLINE: Consumer group cli-nobody has no live member/);
});

test("group update changes only the settings given, on every master; group list shows them; nothing to update or a bad value is refused", async () => {
  const u = await cli(["group", "update", "cli-members", "--consume-enable", "false", "--retry-max-times", "5"], { env });
  assert.equal(u.code, 0, u.err);
  assert.match(u.out, /group cli-members updated on 2 broker\(s\)/);
  assert.deepEqual(rowOf(u.out, "broker-a"), ["broker-a", "false", "true", "5", "1", "15"]);
  assert.deepEqual(rowOf(u.out, "broker-b"), ["broker-b", "false", "true", "5", "1", "15"]);
  for (const b of cluster.brokers) assert.equal(b.ctx.groups.get("cli-members")?.consumeEnable, false);

  const l = await cli(["group", "list"], { env });
  assert.equal(l.code, 0, l.err);
  assert.match(l.out, /^GROUP\s+BROKERS\s+CONSUME_ENABLE\s+MODEL\s+RETRY_MAX_TIMES/);
  assert.deepEqual(rowOf(l.out, "cli-members"), ["cli-members", "broker-a,broker-b", "false", "CLUSTERING", "5"]);

  const one = await cli(["group", "update", "cli-members", "--consume-enable", "true", "--brokers", "broker-a"], { env });
  assert.equal(one.code, 0, one.err);
  assert.deepEqual(rowOf(one.out, "broker-a"), ["broker-a", "true", "true", "5", "1", "15"], "other settings kept");
  assert.equal(rowOf(one.out, "broker-b"), undefined);
  const mixed = await cli(["group", "list"], { env });
  assert.deepEqual(rowOf(mixed.out, "cli-members")?.slice(0, 3), ["cli-members", "broker-a,broker-b", "broker-a=true,broker-b=false"]);
  assert.equal((await cli(["group", "update", "cli-members", "--consume-enable", "true"], { env })).code, 0);

  const nothing = await cli(["group", "update", "cli-members"], { env });
  assert.equal(nothing.code, 1);
  assert.match(oneLine(nothing.err), /^actormq: error ILLEGAL_ARGUMENT: Nothing to update: give at least one setting/);
  const bad = await cli(["group", "update", "cli-members", "--consume-enable", "maybe"], { env });
  assert.equal(bad.code, 2);
  assert.match(oneLine(bad.err), /--consume-enable <bool>.*expected true or false/);
  const refused = await cli(["group", "update", "cli-members", "--retry-queues", "5000"], { env });
  assert.equal(refused.code, 1);
  assert.match(oneLine(refused.err), /^actormq: error ILLEGAL_ARGUMENT: retryQueueNums must be an integer in \[0, 1024\], got 5000\./);
});

test("group update --retry-max-times takes the API's range: -1 up to 2^31-1; below -1, past it or not an integer is a usage error", async () => {
  const u = await cli(["group", "update", "cli-retry", "--retry-max-times", "-1", "--brokers", "broker-a"], { env });
  assert.equal(u.code, 0, u.err);
  assert.deepEqual(rowOf(u.out, "broker-a")?.[3], "-1");
  assert.equal(cluster.brokers.find((b) => b.brokerName === "broker-a")!.ctx.groups.get("cli-retry")?.retryMaxTimes, -1);
  const top = await cli(["group", "update", "cli-retry", "--retry-max-times", "2147483647", "--brokers", "broker-a"], { env });
  assert.equal(top.code, 0, top.err);
  for (const v of ["-2", "2147483648", "1.5", "x"]) {
    const r = await cli(["group", "update", "cli-retry", "--retry-max-times", v], { env });
    assert.equal(r.code, 2, `${v}: ${r.err}`);
    assert.match(oneLine(r.err), /--retry-max-times <n>.*expected an integer from -1 to 2147483647/, v);
  }
});

test("broker-config get shows the options and which are settable; set brokerPermission 4 drains the broker (routes show it), an unknown key or bad value names the settable ones", async () => {
  const g = await cli(["broker-config", "get", "broker-a"], { env });
  assert.equal(g.code, 0, g.err);
  assert.match(g.out, /^broker broker-a \(tcp:\/\/127\.0\.0\.1:\d+\)\n/);
  assert.deepEqual(rowOf(g.out, "brokerPermission"), ["brokerPermission", "6", "yes"]);
  assert.deepEqual(rowOf(g.out, "brokerName"), ["brokerName", "broker-a"]);

  const s = await cli(["broker-config", "set", "broker-a", "brokerPermission", "4"], { env });
  assert.equal(s.code, 0, s.err);
  assert.equal(s.out, "broker broker-a: brokerPermission 6 -> 4 (kept in its config/broker.json)\n");
  const route = await cli(["topic", "route", "CliGroups"], { env });
  assert.match(route.out, /broker-a\s+master\s+tcp:\/\/\S+\s+2\s+2\s+4/);
  assert.match(route.out, /broker-b\s+master\s+tcp:\/\/\S+\s+2\s+2\s+6/);
  // by address too
  const byAddr = await cli(["broker-config", "set", cluster.brokers[0]!.address, "brokerPermission", "6"], { env });
  assert.equal(byAddr.code, 0, byAddr.err);
  assert.match(byAddr.out, /brokerPermission 4 -> 6/);

  const unknown = await cli(["broker-config", "set", "broker-a", "flush", "sync"], { env });
  assert.equal(unknown.code, 1);
  assert.match(
    oneLine(unknown.err),
    /^actormq: error INVALID_PARAMETER: "flush" cannot be changed on a running broker; the settable keys are brokerPermission: 6/,
  );
  const badValue = await cli(["broker-config", "set", "broker-a", "brokerPermission", "7"], { env });
  assert.equal(badValue.code, 1);
  assert.match(
    oneLine(badValue.err),
    /^actormq: error INVALID_PARAMETER: brokerPermission must be 6 \(read and write\), 4 .* or 2 \(write only\), not "7"/,
  );
  const noBroker = await cli(["broker-config", "get", "broker-z"], { env });
  assert.equal(noBroker.code, 1);
  assert.match(oneLine(noBroker.err), /^actormq: error ILLEGAL_ARGUMENT: No broker named broker-z is registered/);
  assert.equal(cluster.brokers[0]!.ctx.config.brokerPermission, 6);
});

test("broker-config get and set of an address where no broker answers fail at once in one line naming the address", async () => {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const addr = `tcp://127.0.0.1:${port}`;
  for (const args of [
    ["broker-config", "get", addr],
    ["broker-config", "set", addr, "brokerPermission", "4"],
  ]) {
    const t0 = Date.now();
    const r = await cli(args, { env });
    assert.equal(r.code, 1, args.join(" "));
    assert.match(oneLine(r.err), new RegExp(`^actormq: error TIMEOUT: The broker at tcp://127\\.0\\.0\\.1:${port} did not answer`));
    // a refused connection, not the request's 10 s timeout
    assert.ok(Date.now() - t0 < 8000, `${args[1]} took ${Date.now() - t0} ms`);
  }
  // a name server's address: it answers, and the line says which address is not a broker
  const ns = await cli(["broker-config", "get", cluster.nameservers[0]!], { env });
  assert.equal(ns.code, 1);
  assert.match(oneLine(ns.err), new RegExp(`The broker at ${cluster.nameservers[0]!.replace(/\./g, "\\.")} did not answer`));
});
