/**
 * PullConsumer: assign + poll + seek + manual commit, subscribe with rebalance and auto commit;
 * Admin.consumerProgress and resetOffsetByTimestamp against what it committed.
 */
import assert from "node:assert/strict";
import { mock, test } from "node:test";
import type { HoldContext } from "../../actors/broker/holdService.ts";
import type { PullRequest } from "../../actors/client/pullRequest.ts";
import { Admin, isMQError, MQError, Producer, PullConsumer, PushConsumer, startLocalCluster } from "../../index.ts";
import { BrokerActor, type PullMessageRequest } from "../../transport/protocol.ts";
import { tempDir, waitFor } from "../helpers.ts";

test("pull consumer: assign, poll, seek, commit; subscribe; progress and reset by timestamp", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  // closed in finally: a failed assertion must not leave a consumer (and the test process) running
  const consumers: PullConsumer[] = [];
  try {
    await admin.createTopic({ topic: "Polled", readQueueNums: 2, writeQueueNums: 2 });
    for (let i = 0; i < 100; i += 25)
      await producer.sendBatch(Array.from({ length: 25 }, (_, j) => ({ topic: "Polled", body: `p${i + j}` })));
    await new Promise((r) => setTimeout(r, 20));
    const midTs = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    for (let i = 100; i < 200; i += 25)
      await producer.sendBatch(Array.from({ length: 25 }, (_, j) => ({ topic: "Polled", body: `p${i + j}` })));

    const pc = await PullConsumer.start({
      group: "cgPoll",
      nameservers: cluster.nameservers,
      autoCommit: false,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    consumers.push(pc);
    const queues = await pc.fetchMessageQueues("Polled");
    assert.equal(queues.length, 2);
    await pc.assign(queues);
    const seen = new Set<string>();
    await waitFor(
      async () => {
        for (const m of await pc.poll(200)) seen.add(m.body.toString());
        return seen.size === 200;
      },
      10_000,
      "200 polled",
    );
    assert.deepEqual(await pc.poll(50), [], "nothing more to poll");
    await pc.commit();
    let progress = (await admin.consumerProgress("cgPoll")).filter((p) => p.topic === "Polled");
    assert.equal(progress.length, 2);
    assert.ok(
      progress.every((p) => p.lag === 0 && p.consumerOffset === p.brokerOffset),
      "committed everything",
    );
    // 200 messages pulled within the last minute: at least 200/60 per second, at most all of them in one second
    const { consumeTps } = await admin.examineConsumeStats("cgPoll");
    assert.ok(consumeTps >= 200 / 60 && consumeTps <= 200, `consume TPS ${consumeTps}`);

    // seek back on one queue: its messages come again from there
    const q0 = queues[0]!;
    await pc.seek(q0, 10);
    const again: number[] = [];
    await waitFor(
      async () => {
        for (const m of await pc.poll(200)) again.push(m.queueOffset);
        return again.length >= progress.find((p) => p.queueId === q0.queueId)!.brokerOffset - 10;
      },
      10_000,
      "re-polled after seek",
    );
    assert.equal(Math.min(...again), 10, "the replay starts exactly at the sought offset");
    assert.equal(again.filter((o) => o === 10).length, 1, "offset 10 comes once");
    await pc.close();

    // reset the group to the middle of the stream: a subscriber with auto commit starts there
    const reset = await admin.resetOffsetByTimestamp("cgPoll", "Polled", midTs);
    assert.equal(reset.length, 2);
    assert.equal(
      reset.reduce((s, r) => s + r.offset, 0),
      100,
      "reset to the first message after the timestamp",
    );
    const sub = await PullConsumer.start({ group: "cgPoll", nameservers: cluster.nameservers, autoCommitIntervalMs: 1000 });
    consumers.push(sub);
    await sub.subscribe("Polled", "*");
    await waitFor(() => sub.assignment().length === 2, 5_000, "both queues assigned");
    const after: string[] = [];
    await waitFor(
      async () => {
        for (const m of await sub.poll(200)) after.push(m.body.toString());
        return after.length >= 100;
      },
      10_000,
      "100 after the reset",
    );
    assert.deepEqual(new Set(after), new Set(Array.from({ length: 100 }, (_, i) => `p${100 + i}`)));
    await sub.close();
    progress = (await admin.consumerProgress("cgPoll")).filter((p) => p.topic === "Polled");
    assert.ok(
      progress.every((p) => p.lag === 0),
      "auto commit at close committed the polled messages",
    );
  } finally {
    await Promise.all(consumers.map((c) => c.close().catch(() => {})));
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: a subscribe that fails leaves it free to assign", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-badsub-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", autoCreateTopic: false } });
  const producer = await Producer.start({ group: "pgBadSub", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let pc: PullConsumer | undefined;
  try {
    await admin.createTopic({ topic: "PolledAfterBadSub", readQueueNums: 2, writeQueueNums: 2 });
    await producer.send({ topic: "PolledAfterBadSub", body: "after" });
    pc = await PullConsumer.start({
      group: "cgBadSubPull",
      nameservers: cluster.nameservers,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    await assert.rejects(pc.subscribe("PolledAfterBadSub", { sql92: "a >" }), (e: unknown) => isMQError(e, "SUBSCRIPTION_PARSE_FAILED"));
    await assert.rejects(pc.subscribe("bad topic!", "*"), (e: unknown) => isMQError(e, "MESSAGE_ILLEGAL"));
    // neither a message nor empty: say what it is
    await assert.rejects(
      pc.subscribe(5 as never, "*"),
      (e: unknown) =>
        isMQError(e, "MESSAGE_ILLEGAL") &&
        /^subscribe: the topic must be a topic name \(a string\), got 5/.test(String((e as Error).message)),
    );
    await assert.rejects(
      admin.createTopic({ topic: 5 as never }),
      (e: unknown) =>
        isMQError(e, "MESSAGE_ILLEGAL") &&
        /^createTopic: the topic must be a topic name \(a string\), got 5/.test(String((e as Error).message)),
    );
    // refused at once (a mistyped topic is seen) and not kept: the message says to subscribe again, not to wait
    await assert.rejects(
      pc.subscribe("NoSuchTopic", "*"),
      (e: unknown) =>
        isMQError(e, "TOPIC_NOT_EXIST") &&
        /NoSuchTopic/.test(String((e as Error).message)) &&
        /`actormq topic create NoSuchTopic`/.test(String((e as Error).message)) &&
        /then call subscribe again/.test(String((e as Error).message)),
    );
    const queues = await pc.fetchMessageQueues("PolledAfterBadSub");
    // a queue whose committed offset cannot be read: assign mode has no rebalance that would retry it
    await assert.rejects(
      pc.assign([{ topic: "PolledAfterBadSub", brokerName: "no-such-broker", queueId: 0 }]),
      (e: unknown) => isMQError(e, "QUERY_NOT_FOUND") && /assign/.test(String(e)) && !/rebalance/.test(String(e)),
    );
    await pc.assign(queues);
    assert.equal(pc.assignment().length, 2);
    const got: string[] = [];
    await waitFor(
      async () => {
        for (const m of await pc!.poll(200)) got.push(m.body.toString());
        return got.length > 0;
      },
      10_000,
      "the message through assign",
    );
    assert.deepEqual(got, ["after"]);
    // a re-subscribe whose route fetch fails keeps the expression the topic had
    const again = await PullConsumer.start({ group: "cgBadReSub", nameservers: cluster.nameservers });
    try {
      await again.subscribe("PolledAfterBadSub", "*");
      const host = (again as unknown as { host: { fetchSubscribeQueues: (topic: string) => Promise<unknown> } }).host;
      const fetch = mock.method(host, "fetchSubscribeQueues", async () => {
        throw new MQError("TOPIC_NOT_EXIST", "no route now");
      });
      await assert.rejects(again.subscribe("PolledAfterBadSub", "TagA"), (e: unknown) => isMQError(e, "TOPIC_NOT_EXIST"));
      fetch.mock.restore();
      const subs = (again as unknown as { subscriptions: { get(t: string): { subString: string } | undefined } }).subscriptions;
      assert.equal(subs.get("PolledAfterBadSub")?.subString, "*");
    } finally {
      await again.close();
    }
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

const offsetIllegalOf = (pc: PullConsumer): number =>
  (pc as unknown as { pullService: { stats: { offsetIllegal: number } } }).pullService.stats.offsetIllegal;
/** The held entry of a consumer's only queue: a new one once a moved offset is handled (assign restarts the queue). */
const heldOf = (pc: PullConsumer): unknown => [...(pc as unknown as { held: Map<string, unknown> }).held.values()][0];

test("pull consumer: seek outside the queue's offsets is refused; seek to the max offset is not", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-seekrange-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgSeekRange", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let pc: PullConsumer | undefined;
  try {
    await admin.createTopic({ topic: "SeekRange", readQueueNums: 1, writeQueueNums: 1 });
    for (let i = 0; i < 10; i++) await producer.send({ topic: "SeekRange", body: `a${i}` });
    pc = await PullConsumer.start({
      group: "cgSeekRange",
      nameservers: cluster.nameservers,
      autoCommit: false,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    const [q] = await pc.fetchMessageQueues("SeekRange");
    await pc.assign([q!]);
    let n = 0;
    await waitFor(async () => (n += (await pc!.poll(200)).length) === 10, 10_000, "10 polled");
    await pc.commit();
    // a stale or mistyped offset past the end would be committed by the next commit and stick
    await assert.rejects(pc.seek(q!, 1_000_000), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /Seek offset illegal/.test(String(e)));
    await assert.rejects(pc.seek(q!, 11), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"));
    await assert.rejects(pc.seek(q!, "1" as never), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /got "1"/.test(String(e)));
    assert.equal(offsetIllegalOf(pc), 0, "a refused seek does not move the pull");
    await pc.commit();
    const p = (await admin.consumerProgress("cgSeekRange")).find((x) => x.topic === "SeekRange")!;
    assert.equal(p.consumerOffset, 10, "a refused seek commits nothing");
    // the max offset is where the next message goes: a seek there waits for it
    await pc.seek(q!, 10);
    await producer.send({ topic: "SeekRange", body: "b10" });
    const got = await waitFor(async () => (await pc!.poll(200)).map((m) => m.queueOffset).join(), 10_000, "the next message");
    assert.equal(got, "10");
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: an offset the broker moved (admin reset) is not committed over by what poll returned before", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-reset-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgReset", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let pc: PullConsumer | undefined;
  try {
    await admin.createTopic({ topic: "ResetPolled", readQueueNums: 1, writeQueueNums: 1 });
    for (let i = 0; i < 10; i++) await producer.send({ topic: "ResetPolled", body: `a${i}` });
    pc = await PullConsumer.start({
      group: "cgResetPolled",
      nameservers: cluster.nameservers,
      autoCommit: false,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    const [q] = await pc.fetchMessageQueues("ResetPolled");
    await pc.assign([q!]);
    let n = 0;
    await waitFor(async () => (n += (await pc!.poll(200)).length) === 10, 10_000, "10 polled");
    // polled, not committed; the operator rewinds the group to the beginning
    await admin.resetOffsetByTimestamp("cgResetPolled", "ResetPolled", 0);
    // the held pull wakes, the broker moves it to the reset offset, the queue restarts there
    const before = heldOf(pc);
    await producer.send({ topic: "ResetPolled", body: "wake" });
    await waitFor(() => offsetIllegalOf(pc!) >= 1 && heldOf(pc!) !== before, 10_000, "PULL_OFFSET_MOVED handled");
    await pc.commit();
    const p = (await admin.consumerProgress("cgResetPolled")).find((x) => x.topic === "ResetPolled")!;
    assert.equal(p.consumerOffset, 0, "the reset survives a commit of nothing newly polled");
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: idle polls that time out leave no wake-up behind; a waiting poll still wakes on a message", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-idle-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgIdle", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let pc: PullConsumer | undefined;
  const waiters = () => (pc as unknown as { waiters: unknown[] }).waiters.length;
  try {
    await admin.createTopic({ topic: "IdlePolled", readQueueNums: 1, writeQueueNums: 1 });
    pc = await PullConsumer.start({ group: "cgIdlePolled", nameservers: cluster.nameservers });
    await pc.assign(await pc.fetchMessageQueues("IdlePolled"));
    for (let i = 0; i < 50; i++) assert.deepEqual(await pc.poll(1), []);
    assert.equal(waiters(), 0, "each timed-out poll removed its wake-up");
    const polled = pc.poll(10_000);
    assert.equal(waiters(), 1);
    await producer.send({ topic: "IdlePolled", body: "wake" });
    assert.deepEqual(
      (await polled).map((m) => m.body.toString()),
      ["wake"],
    );
    assert.equal(waiters(), 0);

    // two polls waiting: a message wakes both, one takes it, the other waits on for the next
    // (as RocketMQ's poll, which takes its turn, waits its whole timeout for a message)
    const settled: string[][] = [];
    const both = [pc.poll(10_000), pc.poll(10_000)].map((p) => p.then((ms) => settled.push(ms.map((m) => m.body.toString()))));
    await producer.send({ topic: "IdlePolled", body: "one" });
    await waitFor(() => settled.length > 0, 10_000, "a poll to take the message");
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(settled, [["one"]], "the other poll did not return empty before its timeout");
    await producer.send({ topic: "IdlePolled", body: "two" });
    await Promise.all(both);
    assert.deepEqual(settled, [["one"], ["two"]]);
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: a re-subscribe with another expression takes effect at once, without losing or repeating messages", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-resub-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgResub", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  let pc: PullConsumer | undefined;
  try {
    // one queue: the offsets the messages take follow the order they are sent in
    await admin.createTopic({ topic: "Resubbed", readQueueNums: 1, writeQueueNums: 1 });
    pc = await PullConsumer.start({
      group: "cgResub",
      nameservers: cluster.nameservers,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    const buffered = () => (pc as unknown as { buffer: unknown[] }).buffer.length;
    const send = (body: string, tags: string, properties?: Record<string, string>) =>
      producer.send({ topic: "Resubbed", body, tags, properties });
    const got: string[] = [];
    const pollUntil = (body: string, what: string) =>
      waitFor(
        async () => {
          for (const m of await pc!.poll(100)) got.push(m.body.toString());
          return got.includes(body);
        },
        5_000,
        what,
      );
    await pc.subscribe("Resubbed", "A");
    await send("a1", "A");
    await send("b1", "B");
    await pollUntil("a1", "a1 with A");
    assert.deepEqual(got.splice(0), ["a1"]);
    // a2 pulled but not polled when the expression changes: it is not returned, b2 after it is
    await send("a2", "A");
    await send("b2", "B");
    await waitFor(() => buffered() > 0, 5_000, "a2 pulled");
    await pc.subscribe("Resubbed", "B");
    // the pull held before with A would take a3 and move past b3
    await send("b3", "B");
    await send("a3", "A");
    await pollUntil("b3", "b3 with B");
    assert.deepEqual(got.splice(0), ["b2", "b3"]);
    // a change of expression type too
    await pc.subscribe("Resubbed", { sql92: "k = 'v'" });
    await send("c4", "C", { k: "v" });
    await send("b4", "B");
    await pollUntil("c4", "c4 with SQL92");
    assert.deepEqual(got.splice(0), ["c4"]);
    assert.deepEqual(await pc.poll(300), [], "nothing more");
  } finally {
    await pc?.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: a second push or pull consumer of its group in one client is refused up front and leaves nothing open", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-dup-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  // a client of its own: the consumers' instance must close with them
  const admin = await Admin.start({ nameservers: cluster.nameservers, instanceName: "admin" });
  const opened: { close(): Promise<void> }[] = [];
  const nodeOf = (c: unknown) => (c as { host: { node: { transport: { isClosed: boolean } } } }).host.node;
  const dup = (e: unknown) =>
    isMQError(e, "ILLEGAL_ARGUMENT") && /already has a consumer .*another instanceName/.test((e as Error).message);
  try {
    await admin.createTopic({ topic: "DupPolled", readQueueNums: 2, writeQueueNums: 2 });
    const pushOpts = { subscriptions: { DupPolled: "*" }, listener: async () => "CONSUME_SUCCESS" as const };
    // they would share one client id: the broker sees one member, and each would take every queue
    const pull = await PullConsumer.start({ group: "cgDupPull", nameservers: cluster.nameservers });
    opened.push(pull);
    await pull.subscribe("DupPolled");
    await assert.rejects(PullConsumer.start({ group: "cgDupPull", nameservers: cluster.nameservers }), dup);
    await assert.rejects(PushConsumer.start({ group: "cgDupPull", nameservers: cluster.nameservers, ...pushOpts }), dup);
    const push = await PushConsumer.start({ group: "cgDupPush", nameservers: cluster.nameservers, ...pushOpts });
    opened.push(push);
    await assert.rejects(PullConsumer.start({ group: "cgDupPush", nameservers: cluster.nameservers }), dup);
    // another instanceName is another client
    const other = await PullConsumer.start({ group: "cgDupPull", nameservers: cluster.nameservers, instanceName: "other" });
    await other.close();
    assert.equal(pull.assignment().length, 2);
    // the refused starts gave back the client instance they acquired: the last close closes it
    opened.splice(0);
    await pull.close();
    await push.close();
    assert.ok(nodeOf(pull).transport.isClosed, "the client instance is closed once its consumers are");
    // and the group is free again
    opened.push(await PullConsumer.start({ group: "cgDupPull", nameservers: cluster.nameservers }));
  } finally {
    for (const c of opened) await c.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: once closed, poll, commit, seek, assign, subscribe and fetchMessageQueues refuse with CLOSED", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-closed-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pgClosed", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  try {
    await admin.createTopic({ topic: "ClosedPolled", readQueueNums: 1, writeQueueNums: 1 });
    await producer.send({ topic: "ClosedPolled", body: "one" });
    const pc = await PullConsumer.start({ group: "cgClosedPoll", nameservers: cluster.nameservers, autoCommit: false });
    const queues = await pc.fetchMessageQueues("ClosedPolled");
    await pc.assign(queues);
    await pc.seek(queues[0]!, 0);
    await waitFor(async () => (await pc.poll(200)).length > 0, 10_000, "the message");
    await pc.close();
    // each resolved or acted on the closed consumer (a commit stored nothing of what poll returned)
    const closed = (e: unknown) => isMQError(e, "CLOSED") && /cgClosedPoll.*closed/.test((e as Error).message);
    await assert.rejects(pc.poll(0), closed);
    await assert.rejects(pc.commit(), closed);
    await assert.rejects(pc.seek(queues[0]!, 0), closed);
    await assert.rejects(pc.assign(queues), closed);
    await assert.rejects(pc.assign([]), closed);
    await assert.rejects(pc.subscribe("ClosedPolled"), closed);
    await assert.rejects(pc.fetchMessageQueues("ClosedPolled"), closed);
    assert.deepEqual(pc.assignment(), []);
  } finally {
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: its long-polled pulls ask the broker to hold them 20 s (RocketMQ's lite pull consumer), a push consumer's 15 s", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-suspend-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  // the broker's held pulls, read in place (a pick that takes none)
  const held = () => {
    const table = (cluster.brokers[0]!.ctx.node.actorOf(BrokerActor.HOLD)!.getSnapshot().context as HoldContext).table;
    const reqs: PullMessageRequest[] = [];
    for (const key of [...table.keys()])
      table.take(key, (h) => {
        reqs.push(h.req);
        return false;
      });
    return reqs;
  };
  let pc: PullConsumer | undefined;
  let push: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "EmptyLite", readQueueNums: 1, writeQueueNums: 1 });
    pc = await PullConsumer.start({ group: "liteSuspend", nameservers: cluster.nameservers });
    await pc.assign(await pc.fetchMessageQueues("EmptyLite"));
    push = await PushConsumer.start({
      group: "pushSuspend",
      nameservers: cluster.nameservers,
      subscriptions: { EmptyLite: "*" },
      listener: async () => "CONSUME_SUCCESS",
    });
    await waitFor(() => new Set(held().map((r) => r.consumerGroup)).size === 2, 15_000, "both groups' pulls held");
    const asked = new Map(held().map((r) => [r.consumerGroup, r.suspendTimeoutMillis]));
    assert.equal(asked.get("liteSuspend"), 20_000);
    assert.equal(asked.get("pushSuspend"), 15_000);
  } finally {
    await push?.close();
    await pc?.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: a subscribe racing close leaves no rebalancer running; the group's next consumer on the same client rebalances", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-subclose-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const { nameservers } = cluster;
  // keeps the default client instance open across the consumers' closes, as any producer of the process would
  const producer = await Producer.start({ group: "pgSubClose", nameservers });
  const admin = await Admin.start({ nameservers, instanceName: "admin" });
  const node = producer.clientInstance.node;
  const opened: PullConsumer[] = [];
  try {
    await admin.createTopic({ topic: "SubClose", readQueueNums: 4, writeQueueNums: 4 });
    const first = await PullConsumer.start({ group: "cgSubClose", nameservers });
    const subscribed = first.subscribe("SubClose").then(
      () => undefined,
      (e: unknown) => e,
    );
    await first.close();
    const err = await subscribed;
    assert.ok(err === undefined || isMQError(err, "CLOSED"), `subscribe racing close: ${String(err)}`);
    assert.ok(!node.actorOf("cgSubClose/pull-rebalancer"), "no rebalancer runs after close resolved");
    // the next member on the same client, and one on another: they share the queues
    const again = await PullConsumer.start({ group: "cgSubClose", nameservers, rebalanceIntervalMs: 500 });
    opened.push(again);
    const other = await PullConsumer.start({ group: "cgSubClose", nameservers, instanceName: "other", rebalanceIntervalMs: 500 });
    opened.push(other);
    await again.subscribe("SubClose");
    await other.subscribe("SubClose");
    const ids = (pc: PullConsumer) => pc.assignment().map((q) => q.queueId);
    await waitFor(
      () => ids(again).length === 2 && ids(other).length === 2 && !ids(again).some((q) => ids(other).includes(q)),
      10_000,
      "two members holding two queues each",
    ).catch((e: Error) => {
      throw new Error(`${e.message}: the first holds ${ids(again)}, the other ${ids(other)}`);
    });
  } finally {
    for (const c of opened) await c.close();
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: an assign racing close is refused with CLOSED and holds nothing once close resolved", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-assignclose-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers, instanceName: "admin" });
  try {
    await admin.createTopic({ topic: "AssignClose", readQueueNums: 4, writeQueueNums: 4 });
    const wrong: string[] = [];
    for (const when of ["at once", "after the route fetch", "after the first offset read"]) {
      const pc = await PullConsumer.start({ group: "cgAssignClose", nameservers: cluster.nameservers, instanceName: "assignClose" });
      const queues = await pc.fetchMessageQueues("AssignClose");
      const host = (pc as unknown as { host: { fetchSubscribeQueues: (topic: string) => Promise<unknown> } }).host;
      const store = (pc as unknown as { offsetStore: { readOffset: (...a: unknown[]) => Promise<number> } }).offsetStore;
      // close at a chosen await of assign
      let closing: Promise<void> | undefined;
      const closeAfter = <T>(p: Promise<T>): Promise<T> =>
        p.finally(() => {
          closing ??= pc.close();
        });
      const fetch = host.fetchSubscribeQueues.bind(host);
      const read = store.readOffset.bind(store);
      if (when === "after the route fetch") mock.method(host, "fetchSubscribeQueues", (t: string) => closeAfter(fetch(t)));
      if (when === "after the first offset read") mock.method(store, "readOffset", (...a: unknown[]) => closeAfter(read(...a)));
      const assigned = pc.assign(queues).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (when === "at once") closing = pc.close();
      const err = await assigned;
      await closing;
      mock.restoreAll();
      if (!isMQError(err, "CLOSED") || !/cgAssignClose.*closed/.test((err as Error).message)) wrong.push(`${when}: ${String(err)}`);
      if (pc.assignment().length > 0) wrong.push(`${when}: ${pc.assignment().length} queues held after close`);
    }
    assert.deepEqual(wrong, []);
  } finally {
    mock.restoreAll();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: assign() calls made at once take effect one after the other: the last one's queues are held, each pulled once", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-assigntwice-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", autoCreateTopic: false } });
  const { nameservers } = cluster;
  const admin = await Admin.start({ nameservers, instanceName: "admin" });
  const opened: PullConsumer[] = [];
  const start = async (group: string) => {
    const pc = await PullConsumer.start({ group, nameservers, instanceName: group, autoCommit: false });
    opened.push(pc);
    return pc;
  };
  const ids = (pc: PullConsumer) =>
    pc
      .assignment()
      .map((q) => q.queueId)
      .sort();
  const outcome = (r: PromiseSettledResult<void>[]) =>
    r.map((x) => (x.status === "fulfilled" ? "ok" : `${(x.reason as MQError).code}: ${(x.reason as Error).message}`));
  try {
    await admin.createTopic({ topic: "AssignTwice", readQueueNums: 4, writeQueueNums: 4 });
    const queues = await (await start("cgAssignProbe")).fetchMessageQueues("AssignTwice");
    // the route is known (looked up before): assign takes exactly the queues of the last call
    const known = await start("cgAssignKnown");
    await known.fetchMessageQueues("AssignTwice");
    assert.deepEqual(outcome(await Promise.allSettled([known.assign(queues.slice(0, 2)), known.assign(queues.slice(2))])), ["ok", "ok"]);
    assert.deepEqual(ids(known), [2, 3]);
    // the route not looked up yet: the second call does not read offsets before the first fetched it
    const fresh = await start("cgAssignFresh");
    assert.deepEqual(outcome(await Promise.allSettled([fresh.assign(queues.slice(0, 2)), fresh.assign(queues.slice(2))])), ["ok", "ok"]);
    assert.deepEqual(ids(fresh), [2, 3]);
    // the same queues twice: each is pulled by one loop, not one per call
    const same = await start("cgAssignSame");
    await same.fetchMessageQueues("AssignTwice");
    const pullService = (same as unknown as { pullService: { executeNow: (r: PullRequest) => void } }).pullService;
    const started = new Set<PullRequest>();
    const executeNow = pullService.executeNow.bind(pullService);
    mock.method(pullService, "executeNow", (r: PullRequest) => {
      started.add(r);
      executeNow(r);
    });
    await Promise.all([same.assign(queues), same.assign(queues)]);
    const held = (same as unknown as { held: Map<string, { pq: unknown }> }).held;
    const live = [...started].filter((r) => !r.pq.dropped);
    assert.equal(live.length, 4, "one pull loop per queue");
    assert.ok(
      live.every((r) => held.get(`${r.mq.topic}@${r.mq.brokerName}@${r.mq.queueId}`)?.pq === r.pq),
      "each live pull loop is the held queue's",
    );
  } finally {
    mock.restoreAll();
    for (const c of opened) await c.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: an assign of a topic whose route lookup failed looks it up again on the next assign", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-assignlater-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async", autoCreateTopic: false } });
  const { nameservers } = cluster;
  const admin = await Admin.start({ nameservers, instanceName: "admin" });
  const pc = await PullConsumer.start({ group: "cgAssignLater", nameservers, instanceName: "assignLater" });
  try {
    // the broker is known to the client from another topic: that says nothing of this one
    await admin.createTopic({ topic: "AssignKnown", readQueueNums: 1, writeQueueNums: 1 });
    await pc.fetchMessageQueues("AssignKnown");
    const q = { topic: "AssignedLater", brokerName: cluster.brokers[0]!.brokerName, queueId: 0 };
    await assert.rejects(pc.assign([q]), (e: unknown) => isMQError(e, "TOPIC_NOT_EXIST"));
    // refused again while the topic does not exist, not taken on the broker's known address
    await assert.rejects(pc.assign([q]), (e: unknown) => isMQError(e, "TOPIC_NOT_EXIST"));
    assert.deepEqual(pc.assignment(), []);
    await admin.createTopic({ topic: "AssignedLater", readQueueNums: 1, writeQueueNums: 1 });
    await pc.assign([q]);
    assert.deepEqual(pc.assignment(), [q]);
  } finally {
    await pc.close();
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

test("pull consumer: a seek racing close is refused with CLOSED and restarts nothing", async () => {
  const { dir, cleanup } = await tempDir("actormq-consume-pull-seekclose-");
  const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers, instanceName: "admin" });
  try {
    await admin.createTopic({ topic: "SeekClose", readQueueNums: 1, writeQueueNums: 1 });
    const wrong: string[] = [];
    for (const autoCommit of [true, false]) {
      const pc = await PullConsumer.start({
        group: "cgSeekClose",
        nameservers: cluster.nameservers,
        instanceName: "seekClose",
        autoCommit,
      });
      const queues = await pc.fetchMessageQueues("SeekClose");
      await pc.assign(queues);
      const sought = pc.seek(queues[0]!, 0).then(
        () => undefined,
        (e: unknown) => e,
      );
      await pc.close();
      const err = await sought;
      if (!isMQError(err, "CLOSED") || !/cgSeekClose.*closed/.test((err as Error).message))
        wrong.push(`autoCommit ${autoCommit}: ${err === undefined ? "resolved" : String(err)}`);
      if (pc.assignment().length > 0) wrong.push(`autoCommit ${autoCommit}: queues held after close`);
    }
    assert.deepEqual(wrong, []);
  } finally {
    await admin.close();
    await cluster.close();
    await cleanup();
  }
});

for (const racer of ["close", "assign([])"] as const) {
  test(`pull consumer: a queue whose offset the broker moved is not restarted once ${racer} let it go meanwhile`, async () => {
    const { dir, cleanup } = await tempDir("actormq-consume-pull-movedrace-");
    const cluster = await startLocalCluster({ dir, broker: { flush: "async" } });
    const producer = await Producer.start({ group: "pgMovedRace", nameservers: cluster.nameservers });
    const admin = await Admin.start({ nameservers: cluster.nameservers });
    const pc = await PullConsumer.start({
      group: "cgMovedRace",
      nameservers: cluster.nameservers,
      autoCommit: false,
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    });
    try {
      await admin.createTopic({ topic: "MovedRace", readQueueNums: 1, writeQueueNums: 1 });
      for (let i = 0; i < 10; i++) await producer.send({ topic: "MovedRace", body: `a${i}` });
      const [q] = await pc.fetchMessageQueues("MovedRace");
      await pc.assign([q!]);
      let n = 0;
      await waitFor(async () => (n += (await pc.poll(200)).length) === 10, 10_000, "10 polled");
      // the reset makes the next pull answer PULL_OFFSET_MOVED; its offset persist is held until the race ran
      await admin.resetOffsetByTimestamp("cgMovedRace", "MovedRace", 0);
      const store = (pc as unknown as { offsetStore: { persist(mq: unknown): Promise<void> } }).offsetStore;
      const persist = store.persist.bind(store);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let entered = false;
      let persisted!: Promise<void>;
      store.persist = (mq) => {
        entered = true;
        persisted = gate.then(() => persist(mq).catch(() => {}));
        return persisted;
      };
      await producer.send({ topic: "MovedRace", body: "wake" });
      await waitFor(() => entered, 10_000, "the moved offset being persisted");
      if (racer === "close") await pc.close();
      else await pc.assign([]);
      assert.deepEqual(pc.assignment(), []);
      release();
      await persisted;
      // what follows the persist runs in the same turn
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(pc.assignment(), [], `after ${racer} resolved, the consumer holds nothing`);
    } finally {
      await pc.close().catch(() => {});
      await admin.close();
      await producer.close();
      await cluster.close();
      await cleanup();
    }
  });
}
