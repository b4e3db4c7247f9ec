/**
 * `--json` on the commands that show state: each prints exactly one JSON value on one line of stdout
 * with the data its text shows, and its errors stay one line on stderr with the same exit code.
 * `consume --json` prints one such value per message, one line each (NDJSON).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { Command } from "commander";
import type { ConsumerConnectionSummary, ConsumerProgressEntry, GroupListEntry, TopicStatsEntry } from "../../actors/client/admin.ts";
import { Admin } from "../../actors/client/index.ts";
import { Producer } from "../../actors/client/producer.ts";
import { PushConsumer } from "../../actors/client/pushConsumer.ts";
import type { ClusterFile, ClusterMemberStatus } from "../../actors/cluster/index.ts";
import { planCluster, writeClusterFile } from "../../actors/cluster/index.ts";
import { type LocalCluster, startLocalCluster } from "../../actors/localCluster.ts";
import { addBrokerConfigCommands } from "../../bin/commands/brokerConfig.ts";
import { addBrokerStatusCommand } from "../../bin/commands/brokerStatus.ts";
import { addClusterCommands } from "../../bin/commands/cluster.ts";
import { addConsumeCommand } from "../../bin/commands/consume.ts";
import { addGroupCommands } from "../../bin/commands/group.ts";
import { addMessageCommand } from "../../bin/commands/message.ts";
import { addProgressCommands } from "../../bin/commands/progress.ts";
import { addTopicCommands } from "../../bin/commands/topic.ts";
import type { MessageJson } from "../../bin/messageOutput.ts";
import type { BrokerConfigReply, TopicRouteData } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { bin, type CliResult, cli } from "./cliRun.ts";

const TOPIC = "JsonT";
const GROUP = "json-g";
const KEY = "json-k";
/** not UTF-8: shown in base64 */
const BINARY = Buffer.from([0xff, 0xfe, 0x00]);

let cluster: LocalCluster;
let admin: Admin;
let consumer: PushConsumer;
let cleanup: () => Promise<void>;
let env: Record<string, string>;
let firstId: string;

before(async () => {
  const t = await tempDir();
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, brokers: 1 });
  env = { ACTORMQ_NAMESRV: cluster.nameservers[0]! };
  admin = await Admin.start({ nameservers: cluster.nameservers });
  // read and write counts apart, so that the JSON shows which is which
  await admin.createTopic({ topic: TOPIC, readQueueNums: 4, writeQueueNums: 2 });
  const producer = await Producer.start({ group: "json-p", nameservers: cluster.nameservers });
  try {
    firstId = (await producer.send({ topic: TOPIC, keys: KEY, body: "first" })).msgId;
    await producer.send({ topic: TOPIC, keys: KEY, body: "second\nline" });
    await producer.send({ topic: TOPIC, keys: KEY, body: BINARY });
  } finally {
    await producer.close();
  }
  consumer = await PushConsumer.start({
    group: GROUP,
    nameservers: cluster.nameservers,
    subscriptions: { [TOPIC]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    persistConsumerOffsetIntervalMs: 100,
    listener: async () => "CONSUME_SUCCESS",
  });
  await waitFor(
    async () => {
      const { offsetTable } = await admin.examineConsumeStats(GROUP);
      return offsetTable.filter((q) => q.topic === TOPIC).reduce((n, q) => n + q.consumerOffset, 0) === 3;
    },
    20_000,
    "the group's committed offsets of the 3 messages",
  );
});

after(async () => {
  // optional: a before() that failed part way left some unset, and the rest must still go
  await consumer?.close();
  await admin?.close();
  await cluster?.close();
  await cleanup?.();
});

/** The one JSON value of a run's stdout: exit `code` (0 unless said), one line, nothing else. */
function json<T>(r: CliResult, code = 0): T {
  assert.equal(r.code, code, r.err);
  assert.ok(r.out.endsWith("\n") && r.out.indexOf("\n") === r.out.length - 1, `one line: ${r.out}`);
  return JSON.parse(r.out) as T;
}

test("--help of every command that shows state offers --json", () => {
  const program = new Command("actormq");
  for (const add of [
    addTopicCommands,
    addProgressCommands,
    addGroupCommands,
    addBrokerConfigCommands,
    addBrokerStatusCommand,
    addMessageCommand,
    addClusterCommands,
  ])
    add(program);
  const find = (names: string[]) =>
    names.reduce<Command | undefined>((c, n) => c?.commands.find((s) => s.name() === n), program) ?? assert.fail(names.join(" "));
  // as wrapped for any terminal width
  for (const names of [
    ["topic", "list"],
    ["topic", "route"],
    ["topic", "status"],
    ["progress"],
    ["group", "list"],
    ["group", "members"],
    ["broker-config", "get"],
    ["broker-status"],
    ["message"],
    ["cluster", "status"],
  ])
    assert.match(
      find(names).helpInformation().replace(/\s+/g, " "),
      / --json print one JSON value on one line instead of the text: \S/,
      names.join(" "),
    );
});

test("topic list, route and status --json: the topic with its queue counts and offsets", async () => {
  const broker = cluster.brokers[0]!;
  const list = json<string[]>(await cli(["topic", "list", "--json"], { env }));
  assert.ok(list.includes(TOPIC), JSON.stringify(list));

  const route = json<TopicRouteData>(await cli(["topic", "route", TOPIC, "--json"], { env }));
  assert.deepEqual(
    route.queueDatas.map(({ brokerName, readQueueNums, writeQueueNums, perm }) => ({ brokerName, readQueueNums, writeQueueNums, perm })),
    [{ brokerName: broker.brokerName, readQueueNums: 4, writeQueueNums: 2, perm: 6 }],
  );
  assert.equal(route.brokerDatas[0]?.brokerAddrs["0"], broker.address);

  const stats = json<TopicStatsEntry[]>(await cli(["topic", "status", TOPIC, "--json"], { env }));
  assert.deepEqual(
    stats.map((q) => q.queueId),
    [0, 1],
    "the write queues",
  );
  assert.equal(
    stats.reduce((n, q) => n + q.maxOffset - q.minOffset, 0),
    3,
  );
  for (const q of stats) assert.equal(q.lastUpdateTimestamp > 0, q.maxOffset > 0, JSON.stringify(q));
});

test("progress --json: the offsets of the messages sent and consumed, and the total lag", async () => {
  const p = json<{ offsetTable: ConsumerProgressEntry[]; consumeTps: number; totalLag: number }>(
    await cli(["progress", "--group", GROUP, "--json"], { env }),
  );
  const rows = p.offsetTable.filter((q) => q.topic === TOPIC);
  assert.deepEqual(
    rows.map((q) => q.queueId),
    [0, 1, 2, 3],
    "the read queues",
  );
  assert.equal(
    rows.reduce((n, q) => n + q.brokerOffset, 0),
    3,
  );
  assert.equal(
    rows.reduce((n, q) => n + q.consumerOffset, 0),
    3,
  );
  for (const q of rows) assert.equal(q.lag, 0);
  assert.equal(p.totalLag, 0);
  assert.ok(p.consumeTps > 0, "the 3 messages pulled count in the TPS");
});

test("group list and group members --json: the group's config per broker, its member and subscription", async () => {
  const broker = cluster.brokers[0]!;
  const groups = json<GroupListEntry[]>(await cli(["group", "list", "--json"], { env }));
  const g = groups.find((x) => x.group === GROUP);
  assert.equal(g?.configs[broker.brokerName]?.consumeEnable, true, JSON.stringify(groups));
  assert.equal(g?.configs[broker.brokerName]?.messageModel, "CLUSTERING");

  const m = json<ConsumerConnectionSummary>(await cli(["group", "members", GROUP, "--json"], { env }));
  assert.equal(m.connections.length, 1);
  assert.match(m.connections[0]!.clientId, new RegExp(`@${process.pid}@`));
  assert.deepEqual(m.connections[0]!.brokers, [broker.brokerName]);
  assert.equal(m.consumeFromWhere, "CONSUME_FROM_FIRST_OFFSET");
  assert.equal(m.subscriptions[TOPIC]?.subString, "*");
});

test("broker-config get --json: the options the broker runs with and the settable keys", async () => {
  const broker = cluster.brokers[0]!;
  const c = json<BrokerConfigReply>(await cli(["broker-config", "get", broker.brokerName, "--json"], { env }));
  assert.equal(c.brokerAddr, broker.address);
  assert.equal(c.brokerConfig.brokerName, broker.brokerName);
  assert.equal(c.brokerConfig.brokerPermission, 6);
  assert.deepEqual(c.settableKeys, ["brokerPermission"]);
});

test("message --key and --id --json: the messages with their bodies; a message not found stays an error on stderr", async () => {
  const byKey = json<MessageJson[]>(await cli(["message", "--topic", TOPIC, "--key", KEY, "--json"], { env }));
  // a field the message lacks is null, not left out: every message has the same fields
  assert.ok(byKey.every((m) => m.tags === null));
  assert.deepEqual(byKey.map((m) => [m.topic, m.keys, m.bodyEncoding, m.body]).sort(), [
    [TOPIC, KEY, "base64", BINARY.toString("base64")],
    [TOPIC, KEY, "utf8", "first"],
    [TOPIC, KEY, "utf8", "second\nline"],
  ]);

  const byId = json<MessageJson>(await cli(["message", "--id", firstId, "--json"], { env }));
  assert.equal(byId.msgId, firstId);
  assert.equal(byId.topic, TOPIC);
  assert.equal(byId.body, "first");

  const none = await cli(["message", "--id", "0".repeat(32), "--json"], { env });
  assert.equal(none.code, 1);
  assert.equal(none.out, "");
  assert.match(
    none.err,
    /^actormq: error QUERY_NOT_FOUND: No message found for id 0{32}: check it and the name servers given .*fileReservedTimeHours \(72 by default\)\.\n$/,
  );
});

test("consume --json: one JSON object per message per line, as message --json shows it, printed as it comes, and nothing else on stdout", async () => {
  const program = new Command("actormq");
  addConsumeCommand(program);
  const consume = program.commands.find((c) => c.name() === "consume") ?? assert.fail("consume");
  assert.match(consume.helpInformation().replace(/\s+/g, " "), / --json print each message as one JSON object on its own line \(NDJSON\)/);

  const topic = "JsonConsumeT";
  const producer = await Producer.start({ group: "json-consume-p", nameservers: cluster.nameservers });
  let out = "";
  let err = "";
  try {
    await producer.send({ topic, tags: "TagA", keys: "k1", body: "one" });
    await producer.send({ topic, tags: "TagB", keys: "k2", body: "two\nlines" });
    const child = spawn(
      process.execPath,
      [bin, "consume", "--topic", topic, "--group", "json-consume", "--from", "first", "--count", "3", "--json"],
      {
        env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn", ...env },
      },
    );
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const exit = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
    try {
      // a reader (`| jq`) gets each line as it comes: the first two while the third is not sent yet
      await waitFor(() => out.split("\n").length > 2 || child.exitCode !== null, 20_000, "the first two lines");
      assert.equal(child.exitCode, null, `still waiting for its third message: ${out}${err}`);
      await producer.send({ topic, tags: "TagC", keys: "k3", body: BINARY });
      assert.equal(await exit, 0, err);
    } finally {
      // a run cut short by a failed assertion never reaches its --count
      if (child.exitCode === null) child.kill();
    }
  } finally {
    await producer.close();
  }
  assert.ok(out.endsWith("\n"), out);
  const lines = out.slice(0, -1).split("\n");
  assert.equal(lines.length, 3, out);
  const msgs = lines.map((l) => JSON.parse(l) as MessageJson);
  assert.deepEqual(msgs.map((m) => [m.topic, m.tags, m.keys, m.bodyEncoding, m.body]).sort(), [
    [topic, "TagA", "k1", "utf8", "one"],
    [topic, "TagB", "k2", "utf8", "two\nlines"],
    [topic, "TagC", "k3", "base64", BINARY.toString("base64")],
  ]);
  for (const m of msgs) assert.match(m.msgId, /^[0-9A-F]{32}$/);
  assert.match(err, /actormq: consumed 3 message\(s\)\n$/);
});

test("cluster status --json: every process with its state; processes not running still exit 3 with the hint on stderr", async () => {
  const { dir, cleanup: done } = await tempDir();
  try {
    // a file as `cluster up` leaves it, every process stopped (pid 0 is never ours)
    const cf: ClusterFile = {
      version: 1,
      createdAt: new Date().toISOString(),
      nameservers: ["tcp://127.0.0.1:23000"],
      processes: planCluster({ dir, nameservers: 1, brokers: 1, slaves: 1 }),
    };
    writeClusterFile(dir, cf);
    const r = await cli(["cluster", "status", "--dir", dir, "--json"]);
    assert.match(r.err, /^actormq: 3 process\(es\) not running: namesrv-0, broker-a, broker-a-s1; /);
    const s = json<{ nameservers: string[]; starting: boolean; processes: ClusterMemberStatus[] }>(r, 3);
    assert.deepEqual(s.nameservers, cf.nameservers);
    assert.equal(s.starting, false);
    assert.deepEqual(
      s.processes.map((p) => [p.name, p.role, p.state]),
      [
        ["namesrv-0", "nameserver", "dead"],
        ["broker-a", "master", "dead"],
        ["broker-a-s1", "slave", "dead"],
      ],
    );
    assert.equal(s.processes[1]!.dir, cf.processes[1]!.dir);
    // a big cluster's status is more than a pipe takes at once (64 KiB): all of it reaches the reader
    const big = path.join(dir, "big");
    mkdirSync(big);
    const bigFile: ClusterFile = { ...cf, processes: planCluster({ dir: big, nameservers: 1, brokers: 60, slaves: 2 }) };
    writeClusterFile(big, bigFile);
    // through a shell pipe, as `| jq` reads it (a pipe Node itself spawns did not show the loss)
    const rb = await cli(
      ["-c", 'set -o pipefail; "$0" "$1" cluster status --dir "$2" --json | cat', process.execPath, bin, big],
      {},
      "bash",
    );
    assert.equal(rb.code, 3, rb.err);
    assert.ok(rb.out.length > 65_536, `${rb.out.length} bytes`);
    assert.equal((JSON.parse(rb.out) as { processes: unknown[] }).processes.length, bigFile.processes.length);
  } finally {
    await done();
  }
});
