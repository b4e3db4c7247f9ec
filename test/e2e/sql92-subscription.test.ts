/**
 * SQL92 subscriptions end to end: a push consumer subscribed with `{ sql92 }` receives exactly
 * the messages whose properties (set by the producer) match, evaluated on the broker at pull
 * time; the others never reach the listener. An expression that does not parse fails
 * PushConsumer.start with SUBSCRIPTION_PARSE_FAILED. On a broker without property filtering the
 * pulls fail, and the consumers say so in a warning.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { pullLog } from "../../actors/client/pullService.ts";
import { Admin, isMQError, type MessageExt, Producer, PullConsumer, PushConsumer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const EXPR = "(a BETWEEN 10 AND 29 AND color IN ('red', 'green')) OR (vip = TRUE AND price > 99.5) OR name IS NOT NULL";

/** The properties of message i, and whether EXPR matches them (worked out independently of the filter code). */
function propsOf(i: number): { props: Record<string, string>; match: boolean } {
  const color = ["red", "blue", "green"][i % 3]!;
  const props: Record<string, string> = { a: String(i), color };
  if (i % 7 === 0) props.vip = i % 2 === 0 ? "true" : "false";
  if (i % 5 === 0) props.price = i % 10 === 0 ? "120.25" : "99.5";
  if (i === 51) props.name = "someone";
  if (i === 52) props.a = "not-a-number"; // a string never compares with a number: no match
  const inRange = i >= 10 && i <= 29 && i !== 52 && color !== "blue";
  const vip = props.vip === "true" && props.price === "120.25";
  return { props, match: inRange || vip || i === 51 };
}

test("sql92 subscription receives exactly the matching messages", async () => {
  const { dir, cleanup } = await tempDir("actormq-sql92-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgSql", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let consumer: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "Sql92Topic", readQueueNums: 4, writeQueueNums: 4 });
    const got: MessageExt[] = [];
    consumer = await PushConsumer.start({
      group: "cgSql",
      nameservers: cluster.nameservers,
      subscriptions: { Sql92Topic: { sql92: EXPR } },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs) => {
        got.push(...msgs);
        return "CONSUME_SUCCESS";
      },
    });
    const N = 120;
    const expected = new Set<string>();
    for (let i = 0; i < N; i++) {
      const { props, match } = propsOf(i);
      await producer.send({ topic: "Sql92Topic", body: `m${i}`, properties: props });
      if (match) expected.add(`m${i}`);
    }
    assert.ok(expected.size > 10 && expected.size < N - 10, "both matching and non-matching messages were sent");
    // a matching sentinel last on every queue: once all are in, every earlier message was pulled
    for (let q = 0; q < 4; q++) {
      await producer.send(
        { topic: "Sql92Topic", body: `end${q}`, properties: { name: "sentinel" } },
        { selector: (queues) => queues.find((x) => x.queueId === q)!, arg: q },
      );
    }
    await waitFor(() => [0, 1, 2, 3].every((q) => got.some((m) => m.body.toString() === `end${q}`)), 20_000, "the sentinel of every queue");
    await waitFor(() => consumer!.processQueueStats().every((s) => s.msgCount === 0), 10_000, "every pulled message consumed");

    const bodies = got.map((m) => m.body.toString()).filter((b) => !b.startsWith("end"));
    assert.deepEqual([...bodies].sort(), [...expected].sort(), "exactly the matching messages, each once");
    for (const m of got) assert.equal(m.topic, "Sql92Topic");
    const unmatched = got.filter((m) => !m.body.toString().startsWith("end") && !propsOf(Number(m.body.toString().slice(1))).match);
    assert.equal(unmatched.length, 0, "no non-matching message reached the listener");
  } finally {
    await consumer?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("an unparsable sql92 expression fails PushConsumer.start with SUBSCRIPTION_PARSE_FAILED", async () => {
  const { dir, cleanup } = await tempDir("actormq-sql92-bad-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  try {
    for (const bad of ["a >", "a = 'x' AND", "a BETWEEN 1", "(a = 1", "a IN ()", "= 3"]) {
      await assert.rejects(
        PushConsumer.start({
          group: "cgSqlBad",
          nameservers: cluster.nameservers,
          subscriptions: { Sql92Topic: { sql92: bad } },
          listener: async () => "CONSUME_SUCCESS",
        }),
        (e: unknown) => isMQError(e, "SUBSCRIPTION_PARSE_FAILED"),
        `"${bad}" is rejected`,
      );
    }
    // the same start with a valid expression works, so the failure above is the expression's
    const ok = await PushConsumer.start({
      group: "cgSqlBad",
      nameservers: cluster.nameservers,
      subscriptions: { Sql92Topic: { sql92: "a > 3" } },
      listener: async () => "CONSUME_SUCCESS",
    });
    await ok.close();
  } finally {
    await cluster.close();
    await cleanup();
  }
});

test("a SQL92 subscription on a broker without property filtering is warned about, once per queue per 30 s", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-sql92-off-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", enablePropertyFilter: false } as never });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const warnings: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(pullLog(), "warn", (fields: Record<string, unknown>, msg: string) => void warnings.push({ fields, msg }));
  let push: PushConsumer | undefined;
  let pull: PullConsumer | undefined;
  try {
    await admin.createTopic({ topic: "SqlOff", readQueueNums: 1, writeQueueNums: 1 });
    await admin.createTopic({ topic: "SqlOffPull", readQueueNums: 1, writeQueueNums: 1 });
    push = await PushConsumer.start({
      group: "cgSqlOff",
      nameservers: cluster.nameservers,
      subscriptions: { SqlOff: { sql92: "a = 1" } },
      listener: async () => "CONSUME_SUCCESS",
    });
    // three failed pulls of the one queue (retried every second), one warning
    await waitFor(() => push!.pullService.stats.errors >= 3, 10_000, "three failed pulls");
    const forPush = warnings.filter((w) => w.fields.topic === "SqlOff");
    assert.equal(forPush.length, 1, JSON.stringify(warnings));
    const w = forPush[0]!;
    assert.equal(w.fields.group, "cgSqlOff");
    assert.equal(w.fields.queueId, 0);
    assert.equal(w.fields.brokerName, cluster.brokers[0]!.brokerName);
    assert.equal(w.fields.broker, cluster.brokers[0]!.address);
    assert.equal(w.fields.code, "SYSTEM_ERROR");
    assert.match(w.msg, /SqlOff/);
    assert.match(w.msg, /enablePropertyFilter/);

    pull = await PullConsumer.start({ group: "cgSqlOffPull", nameservers: cluster.nameservers });
    await pull.subscribe("SqlOffPull", { sql92: "a = 1" });
    await waitFor(() => warnings.some((x) => x.fields.topic === "SqlOffPull"), 10_000, "the pull consumer's warning");
    const p = warnings.find((x) => x.fields.topic === "SqlOffPull")!;
    assert.equal(p.fields.group, "cgSqlOffPull");
    assert.equal(p.fields.code, "SYSTEM_ERROR");
    assert.match(p.msg, /enablePropertyFilter/);
  } finally {
    await pull?.close();
    await push?.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});
