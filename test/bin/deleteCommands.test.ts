import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { type LocalCluster, startLocalCluster } from "../../actors/localCluster.ts";
import { tempDir } from "../helpers.ts";
import { cli, oneLine } from "./cliRun.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let env: Record<string, string>;

before(async () => {
  const t = await tempDir();
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, brokers: 2, broker: { flush: "async" } });
  env = { ACTORMQ_NAMESRV: cluster.nameservers[0]! };
});

after(async () => {
  await cluster.close();
  await cleanup();
});

test("topic delete removes the topic from both brokers and the name server; created again it starts empty", async () => {
  assert.equal((await cli(["topic", "create", "CliDel", "--queues", "1"], { env })).code, 0);
  assert.equal((await cli(["send", "--topic", "CliDel", "--count", "3", "old"], { env })).code, 0);
  const consumed = await cli(["consume", "--topic", "CliDel", "--group", "cgCliDel", "--from", "first", "--count", "3"], { env });
  assert.equal(consumed.code, 0, consumed.err);

  const d = await cli(["topic", "delete", "CliDel"], { env });
  assert.equal(d.code, 0, d.err);
  assert.match(d.out, /^topic CliDel deleted from 2 broker\(s\) and the name servers$/m);
  const l = await cli(["topic", "list"], { env });
  assert.ok(!l.out.split("\n").includes("CliDel"), l.out);
  const r = await cli(["topic", "route", "CliDel"], { env });
  assert.equal(r.code, 1);
  assert.match(oneLine(r.err), /^actormq: error TOPIC_NOT_EXIST: /);
  for (const b of cluster.brokers) assert.equal(b.ctx.topics.get("CliDel"), undefined);

  assert.equal((await cli(["topic", "create", "CliDel", "--queues", "1"], { env })).code, 0);
  assert.equal((await cli(["send", "--topic", "CliDel", "new"], { env })).code, 0);
  const s = await cli(["topic", "status", "CliDel"], { env });
  const maxes = s.out
    .trim()
    .split("\n")
    .slice(1)
    .map((x) => Number(x.trim().split(/\s+/)[3]));
  assert.deepEqual(maxes.sort(), [0, 1], s.out);
  // the group's offsets went with the topic: it reads the new message, not from offset 3
  const again = await cli(["consume", "--topic", "CliDel", "--group", "cgCliDel", "--from", "first", "--count", "1"], { env });
  assert.equal(again.code, 0, again.err);
  assert.match(again.out, /new/);
});

test("topic delete refuses unknown and system topics with one line", async () => {
  const unknown = await cli(["topic", "delete", "NoSuchTopicHere"], { env });
  assert.equal(unknown.code, 1);
  assert.match(
    oneLine(unknown.err),
    /^actormq: error TOPIC_NOT_EXIST: Topic NoSuchTopicHere does not exist on any broker: nothing to delete; list the topics that exist with `actormq topic list`/,
  );
  for (const t of ["TBW102", "SCHEDULE_TOPIC_XXXX", "%RETRY%cg"]) {
    const sys = await cli(["topic", "delete", t], { env });
    assert.equal(sys.code, 1, t);
    assert.match(oneLine(sys.err), /^actormq: error INVALID_PARAMETER: /, t);
  }
  assert.match(oneLine((await cli(["topic", "delete", "%DLQ%cg"], { env })).err), /group delete/);
  const cluster = await cli(["topic", "delete", "X", "--cluster", "Nope"], { env });
  assert.match(oneLine(cluster.err), /^actormq: error ILLEGAL_ARGUMENT: No cluster Nope .*DefaultCluster/);
  const help = await cli(["topic", "delete", "--help"], { env });
  assert.equal(help.code, 0);
  assert.match(help.out, /--cluster <name>/);
});

test("group delete --clean-offset drops the group's config and offsets; an unknown group is refused", async () => {
  assert.equal((await cli(["topic", "create", "CliGrp", "--queues", "1"], { env })).code, 0);
  assert.equal((await cli(["send", "--topic", "CliGrp", "--count", "2", "x"], { env })).code, 0);
  const c = await cli(["consume", "--topic", "CliGrp", "--group", "cgCliGrp", "--from", "first", "--count", "2"], { env });
  assert.equal(c.code, 0, c.err);
  assert.ok(cluster.brokers.some((b) => consumerOffsetsOf(b.ctx).offsetsOf("cgCliGrp", "CliGrp")));

  const d = await cli(["group", "delete", "cgCliGrp", "--clean-offset"], { env });
  assert.equal(d.code, 0, d.err);
  assert.match(d.out, /^group cgCliGrp deleted from 2 broker\(s\); \d+ offset entries forgotten; topics %RETRY%cgCliGrp deleted$/m);
  for (const b of cluster.brokers) {
    assert.equal(b.ctx.groups.get("cgCliGrp"), undefined);
    assert.equal(consumerOffsetsOf(b.ctx).offsetsOf("cgCliGrp", "CliGrp"), undefined);
  }
  const p = await cli(["progress", "--group", "cgCliGrp"], { env });
  assert.match(oneLine(p.err), /^actormq: error SUBSCRIPTION_GROUP_NOT_EXIST: /);

  const again = await cli(["group", "delete", "cgCliGrp"], { env });
  assert.equal(again.code, 1);
  assert.match(
    oneLine(again.err),
    /^actormq: error SUBSCRIPTION_GROUP_NOT_EXIST: Consumer group cgCliGrp does not exist on any broker: nothing to delete; list the groups that exist with `actormq group list`/,
  );
  const both = await cli(["group", "delete", "g", "--cluster", "DefaultCluster", "--broker", "broker-a"], { env });
  assert.match(oneLine(both.err), /^actormq: error ILLEGAL_ARGUMENT: /);
  const help = await cli(["group", "delete", "--help"], { env });
  assert.match(help.out, /--clean-offset/);
});
