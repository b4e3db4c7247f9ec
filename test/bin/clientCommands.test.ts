import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, test } from "node:test";
import { consumerTableOf } from "../../actors/broker/consumerManager.ts";
import { type LocalCluster, startLocalCluster } from "../../actors/localCluster.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { bin, cli, oneLine } from "./cliRun.ts";

let cluster: LocalCluster;
let cleanup: () => Promise<void>;
let env: Record<string, string>;

before(async () => {
  const t = await tempDir();
  cleanup = t.cleanup;
  cluster = await startLocalCluster({ dir: t.dir, brokers: 2 });
  env = { ACTORMQ_NAMESRV: cluster.nameservers[0]! };
});

after(async () => {
  await cluster.close();
  await cleanup();
});

test("topic create, list and route show the topic on both brokers", async () => {
  const c = await cli(["topic", "create", "CliTopic", "--queues", "2"], { env });
  assert.equal(c.code, 0, c.err);
  assert.match(c.out, /created on 2 broker/);
  const l = await cli(["topic", "list"], { env });
  assert.ok(l.out.split("\n").includes("CliTopic"), l.out);
  const r = await cli(["topic", "route", "CliTopic"], { env });
  assert.match(r.out.split("\n")[0]!, /^BROKER\s+ROLE\s+ADDRESS\s+READ QUEUES\s+WRITE QUEUES\s+PERM$/);
  assert.match(r.out, /broker-a\s+master\s+tcp:\/\/\S+\s+2\s+2\s+6/);
  assert.match(r.out, /broker-b\s+master/);
  const missing = await cli(["topic", "route", "NoSuchTopic"], { env });
  assert.equal(missing.code, 1);
  assert.match(oneLine(missing.err), /^actormq: error TOPIC_NOT_EXIST: .*NoSuchTopic.*`actormq topic create NoSuchTopic`/);
  const none = await cli(["topic", "create", "CliNone", "--brokers", ""], { env });
  assert.equal(none.code, 1);
  assert.match(oneLine(none.err), /^actormq: error ILLEGAL_ARGUMENT: .*names no broker/);
});

test("topic create takes read and write queue counts apart; a count not given keeps the topic's; bad counts are refused before anything is created", async () => {
  const c = await cli(["topic", "create", "CliRw", "--read-queues", "4", "--write-queues", "2"], { env });
  assert.equal(c.code, 0, c.err);
  assert.match(c.out, /created on 2 broker\(s\) with 4 read \/ 2 write queues each/);
  const routeRows = async () => (await cli(["topic", "route", "CliRw"], { env })).out.trim().split("\n").slice(1);
  for (const row of await routeRows()) assert.match(row, /master\s+tcp:\/\/\S+\s+4\s+2\s+6$/);
  // making it read only must not reset its queue counts to a default
  assert.equal((await cli(["topic", "create", "CliRw", "--perm", "4"], { env })).code, 0);
  for (const row of await routeRows()) assert.match(row, /master\s+tcp:\/\/\S+\s+4\s+2\s+4$/);
  // nor changing its queue counts reset its perm: it stays read only until --perm says otherwise
  assert.equal((await cli(["topic", "create", "CliRw", "--write-queues", "0", "--brokers", "broker-a"], { env })).code, 0);
  assert.match((await routeRows()).join("\n"), /broker-a\s+master\s+tcp:\/\/\S+\s+4\s+0\s+4/);
  assert.equal((await cli(["topic", "create", "CliRw", "--perm", "6", "--brokers", "broker-a"], { env })).code, 0);
  assert.match((await routeRows()).join("\n"), /broker-a\s+master\s+tcp:\/\/\S+\s+4\s+0\s+6/);
  for (const [args, why] of [
    [["--queues", "2", "--read-queues", "3"], /either --queues, or --read-queues/],
    [["--read-queues", "2", "--write-queues", "3"], /--write-queues 3 is more than --read-queues 2: .*never be consumed/],
  ] as const) {
    const bad = await cli(["topic", "create", "CliRwBad", ...args], { env });
    assert.equal(bad.code, 2, `a usage error: ${args.join(" ")}`);
    assert.match(oneLine(bad.err), /^actormq: error ILLEGAL_ARGUMENT: /);
    assert.match(bad.err, why);
  }
  const list = await cli(["topic", "list"], { env });
  assert.ok(!list.out.split("\n").includes("CliRwBad"), list.out);
});

test("topic status shows each write queue's min and max offset and its last message's store time", async () => {
  assert.equal((await cli(["topic", "create", "CliStatus", "--queues", "2"], { env })).code, 0);
  const before = Date.now();
  const s = await cli(["send", "--topic", "CliStatus", "one"], { env });
  assert.equal(s.code, 0, s.err);
  const r = await cli(["topic", "status", "CliStatus"], { env });
  assert.equal(r.code, 0, r.err);
  assert.match(r.out.split("\n")[0]!, /^BROKER\s+WRITE QUEUE\s+MIN\s+MAX\s+LAST UPDATED$/);
  const rows = r.out
    .trim()
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/));
  assert.deepEqual(
    rows.map((x) => `${x[0]}/${x[1]}`),
    ["broker-a/0", "broker-a/1", "broker-b/0", "broker-b/1"],
    r.out,
  );
  const stored = rows.filter((x) => x[3] === "1");
  assert.equal(stored.length, 1, r.out);
  assert.equal(stored[0]![2], "0");
  const t = Date.parse(stored[0]![4]!);
  assert.ok(t >= before - 1000 && t <= Date.now(), `last updated ${stored[0]![4]}`);
  for (const x of rows.filter((y) => y !== stored[0])) assert.deepEqual(x.slice(2), ["0", "0", "-"]);
  const missing = await cli(["topic", "status", "NoSuchTopic"], { env });
  assert.equal(missing.code, 1);
  assert.match(oneLine(missing.err), /^actormq: error TOPIC_NOT_EXIST: /);
});

test("send from args and stdin, consume --from first --count, progress and reset-offset", async () => {
  await cli(["topic", "create", "CliFlow", "--queues", "1"], { env });
  const s1 = await cli(["send", "--topic", "CliFlow", "--keys", "k1", "--count", "2", "alpha"], { env });
  assert.equal(s1.code, 0, s1.err);
  assert.equal(
    s1.out
      .trim()
      .split("\n")
      .filter((l) => l.startsWith("SEND_OK")).length,
    2,
  );
  const s2 = await cli(["send", "--topic", "CliFlow", "--tags", "T"], { env, input: "beta\ngamma\n" });
  assert.equal(s2.code, 0, s2.err);
  assert.equal(s2.out.trim().split("\n").length, 2);

  const c = await cli(["consume", "--topic", "CliFlow", "--group", "cli-g", "--from", "first", "--count", "4"], { env });
  assert.equal(c.code, 0, c.err);
  const bodies = c.out
    .trim()
    .split("\n")
    .map((l) => l.split(" ").at(-1))
    .sort();
  assert.deepEqual(bodies, ["alpha", "alpha", "beta", "gamma"]);

  const p = await cli(["progress", "--group", "cli-g"], { env });
  assert.equal(p.code, 0, p.err);
  const rows = p.out.split("\n").filter((l) => l.startsWith("CliFlow"));
  assert.equal(rows.length, 2);
  const brokerOffsets = rows.map((r) => Number(r.trim().split(/\s+/)[3])).reduce((a, b) => a + b, 0);
  assert.equal(brokerOffsets, 4);
  assert.match(p.out, /total lag 0, consume TPS \d+\.\d/);
  assert.ok(Number(/consume TPS (\d+\.\d)/.exec(p.out)?.[1]) > 0, "the 4 messages consumed count in the group's TPS");

  const r = await cli(["reset-offset", "--group", "cli-g", "--topic", "CliFlow", "--time", "2000-01-01T00:00:00Z"], { env });
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(
    r.out
      .split("\n")
      .filter((l) => l.startsWith("CliFlow"))
      .map((l) => l.trim().split(/\s+/)[3]),
    ["0", "0"],
  );
});

test("bad input: malformed time, unknown flag, malformed --from, --tag with --sql: one line, non-zero", async () => {
  const t = await cli(["reset-offset", "--group", "g", "--topic", "T", "--time", "yesterday"], { env });
  assert.equal(t.code, 2);
  assert.match(oneLine(t.err), /not a time/);
  const u = await cli(["topic", "list", "--frobnicate"], { env });
  assert.equal(u.code, 2);
  assert.match(oneLine(u.err), /unknown option '--frobnicate'/);
  const f = await cli(["consume", "--topic", "T", "--from", "someday"], { env });
  assert.equal(f.code, 2);
  assert.match(oneLine(f.err), /--from <where>' argument 'someday' is invalid\. "someday" is not first, last or a time/);
  const both = await cli(["consume", "--topic", "T", "--tag", "A", "--sql", "a > 1"], { env });
  assert.equal(both.code, 1);
  assert.match(oneLine(both.err), /either --tag or --sql/);
  const h = await cli(["send", "--help"]);
  assert.equal(h.code, 0);
  assert.match(h.out, /--delay-level/);
  assert.match(h.out, /log level \(default: \$ACTORMQ_LOG_LEVEL\s+or\s+warn\)/, "clients log at warn unless told otherwise");
});

test("consume --count leaves the messages past the count to the group: none sent to %RETRY%, the next run starts after the printed ones", async () => {
  await cli(["topic", "create", "CliCount", "--queues", "1", "--brokers", "broker-a"], { env });
  const s = await cli(["send", "--topic", "CliCount", "-q", "m1", "m2", "m3", "m4", "m5", "m6"], { env });
  assert.equal(s.code, 0, s.err);
  const bodies = (out: string) =>
    out
      .trim()
      .split("\n")
      .map((l) => l.split(" ").at(-1));
  const first = await cli(["consume", "--topic", "CliCount", "--group", "cli-count", "--from", "first", "--count", "2"], { env });
  assert.equal(first.code, 0, first.err);
  assert.deepEqual(bodies(first.out), ["m1", "m2"]);
  const p = await cli(["progress", "--group", "cli-count"], { env });
  assert.match(p.out, /^CliCount\s+broker-a\s+0\s+6\s+2\s+4$/m);
  assert.match(p.out, /^%RETRY%cli-count\s+broker-a\s+0\s+0\s+0\s+0$/m);
  const rest = await cli(["consume", "--topic", "CliCount", "--group", "cli-count", "--count", "4"], { env });
  assert.equal(rest.code, 0, rest.err);
  assert.deepEqual(bodies(rest.out), ["m3", "m4", "m5", "m6"]);
  assert.match(rest.out, /reconsume=0 m3/);
});

test("client commands without a reachable name server fail with one line instead of waiting", async () => {
  const noNamesrv = { ACTORMQ_NAMESRV: "tcp://127.0.0.1:1" };
  const runs = [
    ["consume", "--topic", "T", "--count", "1"],
    ["send", "--topic", "T", "x"],
    ["topic", "list"],
  ];
  const results = await Promise.all(runs.map((args) => cli(args, { env: noNamesrv })));
  for (const [i, r] of results.entries()) {
    const args = runs[i]!;
    assert.equal(r.code, 1, `${args.join(" ")}: ${r.out}${r.err}`);
    assert.match(
      oneLine(r.err),
      /^actormq: error TIMEOUT: No name server answered \S+ \(tcp:\/\/127\.0\.0\.1:1: No reply to \S+ from actor namesrv/,
    );
  }
});

test("message --key with --topic lists the key's messages; --id shows the one sent; unknown ones say so", async () => {
  await cli(["topic", "create", "CliLookup", "--queues", "1"], { env });
  const s = await cli(["send", "--topic", "CliLookup", "--keys", "lookup-k", "--count", "2", "found-me"], { env });
  assert.equal(s.code, 0, s.err);
  const msgId = s.out.trim().split("\n")[0]!.split(" ")[1]!;
  const byKey = await cli(["message", "--key", "lookup-k", "--topic", "CliLookup"], { env });
  assert.equal(byKey.code, 0, byKey.err);
  const lines = byKey.out.trim().split("\n");
  assert.equal(lines.length, 2);
  for (const l of lines) assert.match(l, /^CliLookup broker-[ab]:0@\d+ \S+ tags= keys=lookup-k reconsume=0 found-me$/);
  const byId = await cli(["message", "--id", msgId], { env });
  assert.equal(byId.code, 0, byId.err);
  assert.equal(byId.out.trim().split(" ")[2], msgId);
  // --topic with --id holds the lookup to that topic, as Admin.viewMessage(id, topic) does
  const elsewhere = await cli(["message", "--id", msgId, "--topic", "CliLookupNone"], { env });
  assert.equal(elsewhere.code, 1, elsewhere.out);
  assert.match(oneLine(elsewhere.err), /error TOPIC_NOT_EXIST/);
  const none = await cli(["message", "--key", "nobody", "--topic", "CliLookup"], { env });
  assert.equal(none.code, 1);
  assert.match(oneLine(none.err), /error QUERY_NOT_FOUND: No message found/);
  // a well-formed id of no message is not found; a malformed one is refused, saying what an id is
  const unknownId = await cli(["message", "--id", "0".repeat(32)], { env });
  assert.equal(unknownId.code, 1);
  assert.match(
    oneLine(unknownId.err),
    /^actormq: error QUERY_NOT_FOUND: No message found for id 0{32}: check it and the name servers given .*fileReservedTimeHours \(72 by default\)\.$/,
  );
  const malformed = await cli(["message", "--id", "zzz"], { env });
  assert.equal(malformed.code, 1);
  assert.equal(malformed.out, "");
  assert.match(
    oneLine(malformed.err),
    /^actormq: error ILLEGAL_ARGUMENT: viewMessage: "zzz" is not a message id: an id is 32 hex characters, either the offset msg id .* or the unique key id /,
  );
});

/** The command with a reader that starts reading stdout only after `lateMs` (`| less`, a busy `| jq`). */
function lateReader(args: string[], lateMs: number): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn", ...env } });
  child.stdin.end();
  child.stdout.pause();
  const chunks: Buffer[] = [];
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  setTimeout(() => {
    child.stdout.on("data", (d: Buffer) => chunks.push(d));
    child.stdout.resume();
  }, lateMs);
  return new Promise((resolve) =>
    child.stdout.once("close", async () => resolve({ code: await exit, out: Buffer.concat(chunks).toString(), err })),
  );
}

test("output larger than a pipe's buffer reaches a reader that is late: message --id, message --key and consume print every byte before they exit", async () => {
  await cli(["topic", "create", "CliLate", "--queues", "1"], { env });
  const body = "b".repeat(1024 * 1024);
  const s = await cli(["send", "--topic", "CliLate", "--keys", "late-k"], { env, input: `${body}\n` });
  assert.equal(s.code, 0, s.err);
  const msgId = s.out.trim().split(" ")[1]!;
  for (const args of [
    ["message", "--id", msgId],
    ["message", "--key", "late-k", "--topic", "CliLate"],
    ["consume", "--topic", "CliLate", "--group", "cli-late", "--from", "first", "--count", "1"],
  ]) {
    const r = await lateReader(args, 500);
    assert.equal(r.code, 0, r.err);
    assert.ok(r.out.endsWith(` ${body}\n`), `${args[0]} printed ${r.out.length} bytes of the ${body.length}-byte body's line`);
  }
  // a reader that leaves before the rest is flushed (`| head -c 100`): exit 0 without a word, no wait
  const h = headed(["message", "--id", msgId], 0);
  h.child.stdin.end();
  await h.headDone;
  assert.equal(await h.exit, 0, h.err());
  assert.doesNotMatch(h.err(), /EPIPE|Unhandled|at /);
});

/** The command with stdout read until `lines` lines arrived, then closed, as `| head -<lines>` does. */
function headed(args: string[], lines: number) {
  const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn", ...env } });
  let out = "";
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const headDone = new Promise<void>((resolve) =>
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.split("\n").length > lines) {
        child.stdout.destroy();
        resolve();
      }
    }),
  );
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, headDone, exit, out: () => out, err: () => err };
}

test("a reader that closes the pipe early (`| head`): consume and send exit 0 quietly; consume commits the printed messages, not the unprinted", async () => {
  await cli(["topic", "create", "CliPipe", "--queues", "1", "--brokers", "broker-a"], { env });
  const s = await cli(["send", "--topic", "CliPipe", "-q", "p1", "p2", "p3"], { env });
  assert.equal(s.code, 0, s.err);
  const c = headed(["consume", "--topic", "CliPipe", "--group", "cli-pipe", "--from", "first"], 3);
  c.child.stdin.end();
  await c.headDone;
  // written after the reader went away: EPIPE
  const s2 = await cli(["send", "--topic", "CliPipe", "-q", "p4", "p5"], { env });
  assert.equal(s2.code, 0, s2.err);
  assert.equal(await c.exit, 0, c.err());
  assert.doesNotMatch(c.err(), /EPIPE|Unhandled|at /);
  const p = await cli(["progress", "--group", "cli-pipe"], { env });
  assert.match(p.out, /^CliPipe\s+broker-a\s+0\s+5\s+3\s+2$/m, "the three printed are committed, the two unprinted are not");

  const snd = headed(["send", "--topic", "CliPipe"], 1);
  snd.child.stdin.write("q1\n");
  await snd.headDone;
  snd.child.stdin.end("q2\nq3\n");
  assert.equal(await snd.exit, 0, snd.err());
  assert.doesNotMatch(snd.err(), /EPIPE|Unhandled|at /);
});

test("`consume | head` whose reader leaves while the consumer is still starting (messages already on several queues): it closes the consumer, commits what it printed and leaves the group", async () => {
  await cli(["topic", "create", "CliPipeEarly", "--queues", "8", "--brokers", "broker-a"], { env });
  const s = await cli(["send", "--topic", "CliPipeEarly", "-q", "--count", "40", "m"], { env });
  assert.equal(s.code, 0, s.err);
  const c = headed(["consume", "--topic", "CliPipeEarly", "--group", "cli-pipe-early", "--from", "first"], 3);
  c.child.stdin.end();
  await c.headDone;
  // a write after the reader left gets EPIPE; when every message was printed before it left, the
  // next one (sent here until the command exits) is that write
  let exited = false;
  const exit = c.exit.finally(() => (exited = true));
  while (!exited) await cli(["send", "--topic", "CliPipeEarly", "-q", "more"], { env });
  assert.equal(await exit, 0, c.err());
  const p = await cli(["progress", "--group", "cli-pipe-early"], { env });
  const committed = [...p.out.matchAll(/^CliPipeEarly\s+broker-a\s+\d+\s+\d+\s+(\d+)\s+\d+$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  assert.ok(committed >= 3, `the printed messages are committed: ${p.out}`);
  for (const b of cluster.brokers)
    assert.equal(consumerTableOf(b.ctx).group("cli-pipe-early")?.clients.size ?? 0, 0, `${b.address} still lists the gone consumer`);
});

test("consume stops cleanly on SIGHUP (terminal closed): exit 0, the printed messages committed", async () => {
  await cli(["topic", "create", "CliHup", "--queues", "1", "--brokers", "broker-a"], { env });
  const s = await cli(["send", "--topic", "CliHup", "-q", "h1", "h2"], { env });
  assert.equal(s.code, 0, s.err);
  const child = spawn(process.execPath, [bin, "consume", "--topic", "CliHup", "--group", "cli-hup", "--from", "first"], {
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn", ...env },
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  child.stdin.end();
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  try {
    await waitFor(() => out.split("\n").length > 2, 30_000, `the two messages to be printed (${err})`);
    child.kill("SIGHUP");
    assert.equal(await exit, 0, err);
    assert.match(err, /consumed 2 message\(s\)/);
    const p = await cli(["progress", "--group", "cli-hup"], { env });
    assert.match(p.out, /^CliHup\s+broker-a\s+0\s+2\s+2\s+0$/m);
  } finally {
    child.kill("SIGKILL");
  }
});

test("reset-offset and progress of a group no broker knows (a typo, an invalid name): one line, exit 1, nothing created", async () => {
  await cli(["topic", "create", "CliPhantom", "--queues", "2"], { env });
  const s = await cli(["send", "--topic", "CliPhantom", "-q", "x1", "x2"], { env });
  assert.equal(s.code, 0, s.err);
  for (const group of ["typo-group", "not a group!"]) {
    const r = await cli(["reset-offset", "--group", group, "--topic", "CliPhantom", "--time", "2000-01-01T00:00:00Z"], { env });
    assert.equal(r.code, 1, r.out);
    assert.match(oneLine(r.err), /^actormq: error SUBSCRIPTION_GROUP_NOT_EXIST: .*does not exist/);
    const p = await cli(["progress", "--group", group], { env });
    assert.equal(p.code, 1, p.out);
    assert.match(oneLine(p.err), /^actormq: error SUBSCRIPTION_GROUP_NOT_EXIST: .*does not exist/);
  }
});

test("progress and reset-offset of a broadcasting group whose members are gone: one line saying its members keep the offsets, exit 1", async () => {
  const { dir, cleanup: removeHome } = await tempDir();
  try {
    await cli(["topic", "create", "CliBcast", "--queues", "1", "--brokers", "broker-a"], { env });
    const s = await cli(["send", "--topic", "CliBcast", "-q", "b1", "b2"], { env });
    assert.equal(s.code, 0, s.err);
    // its offsets file goes under $HOME/.actormq_offsets
    const c = await cli(["consume", "--topic", "CliBcast", "--group", "cli-bcast", "--broadcast", "--from", "first", "--count", "2"], {
      env: { ...env, HOME: dir },
    });
    assert.equal(c.code, 0, c.err);
    const p = await cli(["progress", "--group", "cli-bcast"], { env });
    assert.equal(p.code, 1, p.out);
    assert.equal(p.out, "");
    assert.match(
      oneLine(p.err),
      /^actormq: error NO_PERMISSION: Consumer group cli-bcast consumes in broadcasting mode: .*cli-bcast\/offsets\.json/,
    );
    const r = await cli(["reset-offset", "--group", "cli-bcast", "--topic", "CliBcast", "--time", "2000-01-01T00:00:00Z"], { env });
    assert.equal(r.code, 1, r.out);
    assert.match(oneLine(r.err), /^actormq: error NO_PERMISSION: Consumer group cli-bcast consumes in broadcasting mode/);
  } finally {
    await removeHome();
  }
});

test("consume --from <time> on a young topic prints only what was stored from then on; a group that already consumed the topic keeps its offsets", async () => {
  await cli(["topic", "create", "CliFromTime", "--queues", "1", "--brokers", "broker-a"], { env });
  const s = await cli(["send", "--topic", "CliFromTime", "-q", "old-1", "old-2"], { env });
  assert.equal(s.code, 0, s.err);
  // a group that consumed one message before the time
  const g = await cli(["consume", "--topic", "CliFromTime", "--group", "cli-from-old", "--from", "first", "--count", "1"], { env });
  assert.equal(g.code, 0, g.err);
  const from = Date.now() + 1;
  await waitFor(() => Date.now() > from, 1000, "the clock to pass --from");
  const n = await cli(["send", "--topic", "CliFromTime", "-q", "new-1"], { env });
  assert.equal(n.code, 0, n.err);
  const body = (out: string) => out.trim().split("\n").at(-1)!.split(" ").at(-1);
  // young topic: its queue starts at 0 for a new group (RocketMQ's rule) and the older messages are skipped
  for (const args of [[], ["--group", "cli-from-new"]]) {
    const c = await cli(["consume", "--topic", "CliFromTime", ...args, "--from", String(from), "--count", "1"], { env });
    assert.equal(c.code, 0, c.err);
    assert.equal(body(c.out), "new-1", `${args.join(" ")}: ${c.out}`);
  }
  const p = await cli(["progress", "--group", "cli-from-new"], { env });
  assert.match(p.out, /^CliFromTime\s+broker-a\s+0\s+3\s+3\s+0$/m, "the skipped messages are committed with the printed one");
  const kept = await cli(["consume", "--topic", "CliFromTime", "--group", "cli-from-old", "--from", String(from), "--count", "1"], { env });
  assert.equal(kept.code, 0, kept.err);
  assert.equal(body(kept.out), "old-2", "a group with committed offsets goes on from them");
});
