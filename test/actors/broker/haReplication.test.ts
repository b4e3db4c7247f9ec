import assert from "node:assert/strict";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { haClientOf } from "../../../actors/broker/haClient.ts";
import { haServiceOf } from "../../../actors/broker/haService.ts";
import { syncOffsetsFromMaster } from "../../../actors/broker/slaveSync.ts";
import { Producer } from "../../../actors/client/index.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { ActorNode, type AskOptions, type Reply, type WireEvent } from "../../../actors/runtime/index.ts";
import { PushConsumer } from "../../../index.ts";
import { monotonicNow } from "../../../transport/clock.ts";
import { decodeRecords, encodeProperties } from "../../../transport/messageRecord.ts";
import { BrokerActor, isMQError, MQError, NAMESRV_ACTOR, type SendMessageReply, type TopicRouteData } from "../../../transport/protocol.ts";
import { TcpProxy } from "../../e2e/fixtures/tcpProxy.ts";
import { EPHEMERAL, fakeWallClock, SHORT_DELAY_LEVELS, tempDir, waitFor } from "../../helpers.ts";

/** Small segments so replication crosses segment ends (blank markers). */
const SEGMENT = 64 * 1024;

let ns: NameServer;
let raw: ActorNode;
let dir: string;
let cleanup: () => Promise<void>;
const open: Broker[] = [];

before(async () => {
  ({ dir, cleanup } = await tempDir("actormq-ha-"));
  ns = await NameServer.start({ listen: EPHEMERAL });
  raw = await ActorNode.start({ listen: null });
});
after(async () => {
  for (const b of open.reverse()) await b.close().catch(() => {});
  await raw.close();
  await ns.close();
  await cleanup();
});

async function startBroker(opts: Record<string, unknown>): Promise<Broker> {
  const b = await Broker.start({ listen: EPHEMERAL, nameservers: [ns.address], flush: "async", segmentBytes: SEGMENT, ...opts } as never);
  open.push(b);
  return b;
}

async function closeBroker(b: Broker): Promise<void> {
  await b.close();
  open.splice(open.indexOf(b), 1);
}

function send(b: Broker, topic: string, body: string, queueId = 0): Promise<SendMessageReply> {
  return raw
    .ref(b.address, BrokerActor.BROKER)
    .ask<SendMessageReply>(
      { type: "SEND_MESSAGE", producerGroup: "pg", topic, queueId, sysFlag: 0, bornTimestamp: Date.now() },
      { body: Buffer.from(body) },
    )
    .then((r) => r.fields);
}

async function sendMany(b: Broker, topic: string, n: number, prefix: string): Promise<void> {
  for (let i = 0; i < n; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, k) => send(b, topic, `${prefix}-${i + k}-${"x".repeat(200)}`, (i + k) % 4)),
    );
  }
}

/** Every commit-log byte of `b`, as readCommitLog hands them out. */
function commitLogBytes(b: Broker): Buffer {
  const parts: Buffer[] = [];
  let at = b.store.minPhyOffset;
  while (at < b.store.maxPhyOffset) {
    const chunk = b.store.readCommitLog(at, 1024 * 1024);
    assert.ok(chunk.length > 0, `commit log readable at ${at}`);
    parts.push(Buffer.from(chunk));
    at += chunk.length;
    if (chunk.length === 8) at = Math.ceil(at / SEGMENT) * SEGMENT; // a blank marker: the rest of the segment is padding
  }
  return Buffer.concat(parts);
}

function bodies(b: Broker, topic: string, queueId: number): string[] {
  const out: string[] = [];
  let offset = b.store.getMinOffset(topic, queueId);
  for (;;) {
    const r = b.store.getMessage("check", topic, queueId, offset, 32);
    if (r.status !== "FOUND") return out;
    for (const m of decodeRecords(Buffer.concat(r.buffers), "x")) out.push(m.body.toString());
    offset = r.nextBeginOffset;
  }
}

test("a slave catches up from zero across segment ends, with identical commit log and its own consume queues", async () => {
  const master = await startBroker({ brokerName: "ha1", storeDir: path.join(dir, "ha1-m") });
  await sendMany(master, "HaTopic", 800, "a");
  assert.ok(master.store.maxPhyOffset > 3 * SEGMENT, "the log spans several segments");
  const slave = await startBroker({ brokerName: "ha1", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha1-s") });
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 15_000, "slave caught up");
  assert.ok(commitLogBytes(slave).equals(commitLogBytes(master)), "the slave's commit log is the master's, byte for byte");
  for (let q = 0; q < 4; q++) assert.deepEqual(bodies(slave, "HaTopic", q), bodies(master, "HaTopic", q), `queue ${q}`);
  assert.equal(bodies(slave, "HaTopic", 0).length, 200);

  // live data keeps flowing, and the master knows the slave's progress
  await sendMany(master, "HaTopic", 100, "b");
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "slave follows new data");
  await waitFor(() => haServiceOf(master.ctx).slaveAckedOffset() === master.store.maxPhyOffset, 10_000, "master saw the acknowledgement");
  assert.equal(haServiceOf(master.ctx).liveSlaves().length, 1);

  // the slave refuses sends and is listed in the route under its broker id
  await assert.rejects(send(slave, "HaTopic", "no"), (e: unknown) => isMQError(e, "NO_PERMISSION"));
  const route = await waitFor(
    async () => {
      const r = await raw.ref(ns.address, NAMESRV_ACTOR).ask<TopicRouteData>({ type: "GET_ROUTEINFO_BY_TOPIC", topic: "HaTopic" });
      return r.fields.brokerDatas.find((bd) => bd.brokerName === "ha1" && bd.brokerAddrs["1"]);
    },
    5000,
    "slave in the route",
  );
  assert.equal(route.brokerAddrs["0"], master.address);
  assert.equal(route.brokerAddrs["1"], slave.address);
  // topic configs came from the master, so pulls on the slave find the topic
  await waitFor(() => slave.ctx.topics.get("HaTopic"), 5000, "topic config copied to the slave");
  await closeBroker(slave);
  await closeBroker(master);
});

test("an empty slave of a master whose oldest segments are deleted begins at the master's oldest offset; a slave left behind them is refused", async () => {
  const master = await startBroker({ brokerName: "ha4", storeDir: path.join(dir, "ha4-m") });
  const behindOpts = {
    brokerName: "ha4",
    brokerId: 2,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha4-s2"),
    haReconnectMs: 100,
  };
  let behind = await startBroker(behindOpts);
  await sendMany(master, "Gone", 100, "a");
  await waitFor(() => behind.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "the second slave caught up once");
  const behindAt = behind.store.maxPhyOffset;
  await closeBroker(behind);

  await sendMany(master, "Gone", 800, "b");
  assert.ok(master.store.deleteExpiredFiles(Date.now() + 365 * 24 * 3600_000) >= 2, "oldest segments deleted");
  const oldest = master.store.minPhyOffset;
  assert.ok(oldest > behindAt && oldest % SEGMENT === 0);

  const slaveOpts = { brokerName: "ha4", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha4-s1") };
  let slave = await startBroker(slaveOpts);
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 15_000, "the empty slave caught up");
  assert.equal(slave.store.minPhyOffset, oldest);
  assert.ok(commitLogBytes(slave).equals(commitLogBytes(master)), "the slave holds what the master holds, byte for byte");
  for (let q = 0; q < 4; q++) {
    assert.equal(slave.store.getMinOffset("Gone", q), master.store.getMinOffset("Gone", q), `queue ${q} begins where the master's does`);
    assert.deepEqual(bodies(slave, "Gone", q), bodies(master, "Gone", q), `queue ${q}`);
  }
  assert.ok(bodies(slave, "Gone", 0).length > 0);

  // restarted, it recovers a log that begins past zero and follows new data from its own offset
  await closeBroker(slave);
  await sendMany(master, "Gone", 50, "c");
  slave = await startBroker(slaveOpts);
  assert.equal(slave.store.minPhyOffset, oldest);
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 15_000, "the restarted slave caught up");
  for (let q = 0; q < 4; q++) {
    assert.equal(slave.store.getMinOffset("Gone", q), master.store.getMinOffset("Gone", q), `queue ${q} begins there after restart`);
    assert.deepEqual(bodies(slave, "Gone", q), bodies(master, "Gone", q), `queue ${q} after restart`);
  }

  // a slave holding bytes older than the master's oldest cannot be continued: refused, its store untouched;
  // the master logs the refusal once, not at every retry
  const warnings: unknown[] = [];
  const warn = master.ctx.logger.warn.bind(master.ctx.logger);
  master.ctx.logger.warn = ((obj: unknown, msg?: string) => {
    warnings.push(msg);
    warn(obj as object, msg);
  }) as typeof master.ctx.logger.warn;
  behind = await startBroker(behindOpts);
  await waitFor(() => haClientOf(behind.ctx).status.failures >= 3, 10_000, "the master refuses the stale slave");
  assert.deepEqual(
    warnings.filter((m) => m === "slave is behind the master's oldest segment"),
    ["slave is behind the master's oldest segment"],
  );
  assert.equal(behind.store.maxPhyOffset, behindAt);
  assert.equal(behind.store.minPhyOffset, 0);
  assert.equal(haClientOf(behind.ctx).status.connected, false);
  await closeBroker(behind);
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave copies its master's consumer offsets and delay-level progress", async () => {
  // progress of levels above the 18 configured (from a run with more levels) is kept on both sides
  const seedDelayOffsets = (storeDir: string, offsetTable: Record<string, number>) => {
    mkdirSync(path.join(storeDir, "config"), { recursive: true });
    writeFileSync(path.join(storeDir, "config", "delayOffset.json"), JSON.stringify({ offsetTable }));
  };
  seedDelayOffsets(path.join(dir, "ha5-m"), { "20": 6 });
  seedDelayOffsets(path.join(dir, "ha5-s"), { "19": 4 });
  const master = await startBroker({ brokerName: "ha5", storeDir: path.join(dir, "ha5-m") });
  const slaveDir = path.join(dir, "ha5-s");
  const slave = await startBroker({
    brokerName: "ha5",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: slaveDir,
    slaveSyncIntervalMs: 200,
  });
  await sendMany(master, "Offs", 40, "a");
  const commit = (queueId: number, commitOffset: number) =>
    raw
      .ref(master.address, BrokerActor.OFFSETS)
      .ask({ type: "UPDATE_CONSUMER_OFFSET", consumerGroup: "cg5", topic: "Offs", queueId, commitOffset });
  await commit(0, 7);
  await commit(3, 9);
  const slaveOffset = (queueId: number) =>
    raw
      .ref(slave.address, BrokerActor.OFFSETS)
      .ask<{ offset: number }>({ type: "QUERY_CONSUMER_OFFSET", consumerGroup: "cg5", topic: "Offs", queueId })
      .then(
        (r) => r.fields.offset,
        () => -1,
      );
  await waitFor(async () => (await slaveOffset(0)) === 7 && (await slaveOffset(3)) === 9, 10_000, "offsets copied to the slave");
  await commit(0, 5); // a smaller offset is copied too (a reset on the master)
  await waitFor(async () => (await slaveOffset(0)) === 5, 10_000, "the lower offset copied");

  // a message on delay level 1 (1 s) is delivered by the master; its progress reaches the slave's delayOffset.json
  const r = await raw.ref(master.address, BrokerActor.BROKER).ask<SendMessageReply>(
    {
      type: "SEND_MESSAGE",
      producerGroup: "pg",
      topic: "Offs",
      queueId: 0,
      sysFlag: 0,
      bornTimestamp: Date.now(),
      properties: encodeProperties({ DELAY: "1" }),
    },
    { body: Buffer.from("later") },
  );
  assert.equal(r.fields.status, "SEND_OK");
  const delayFile = path.join(slaveDir, "config", "delayOffset.json");
  await waitFor(
    () => {
      try {
        return (JSON.parse(readFileSync(delayFile, "utf8")) as { offsetTable: Record<string, number> }).offsetTable["1"] === 1;
      } catch {
        return false;
      }
    },
    15_000,
    "level 1's progress copied to the slave",
  );
  const copied = (JSON.parse(readFileSync(delayFile, "utf8")) as { offsetTable: Record<string, number> }).offsetTable;
  assert.deepEqual([copied["19"], copied["20"]], [4, 6], "the slave's own and the master's unconfigured levels kept");
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave keeps copying consumer offsets every slaveSyncIntervalMs after its wall clock steps back 1 h", async () => {
  const master = await startBroker({ brokerName: "ha5c", storeDir: path.join(dir, "ha5c-m"), haHoldMs: 300 });
  const slave = await startBroker({
    brokerName: "ha5c",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha5c-s"),
    slaveSyncIntervalMs: 200,
    haHoldMs: 300,
  });
  const commit = (commitOffset: number) =>
    raw
      .ref(master.address, BrokerActor.OFFSETS)
      .ask({ type: "UPDATE_CONSUMER_OFFSET", consumerGroup: "cg5c", topic: "Offs", queueId: 0, commitOffset });
  const slaveOffset = () =>
    raw
      .ref(slave.address, BrokerActor.OFFSETS)
      .ask<{ offset: number }>({ type: "QUERY_CONSUMER_OFFSET", consumerGroup: "cg5c", topic: "Offs", queueId: 0 })
      .then(
        (r) => r.fields.offset,
        () => -1,
      );
  await sendMany(master, "Offs", 10, "c");
  await commit(3);
  await waitFor(async () => (await slaveOffset()) === 3, 10_000, "the first copy");
  const clock = fakeWallClock();
  try {
    clock.jump(-3_600_000);
    await commit(8);
    // replication traffic keeps flowing: offsets are synced between transfers
    await waitFor(
      async () => (await send(master, "Offs", "more")) && (await slaveOffset()) === 8,
      5000,
      "the offset copied after the step",
    );
  } finally {
    clock.restore();
  }
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave resumes from its own offset after a restart, and reconnects by itself when the master restarts", async () => {
  const master0 = await startBroker({ brokerName: "ha2", storeDir: path.join(dir, "ha2-m"), haHoldMs: 500 });
  const masterListen = master0.address;
  const slaveOpts = {
    brokerName: "ha2",
    brokerId: 1,
    masterAddress: masterListen,
    storeDir: path.join(dir, "ha2-s"),
    haReconnectMs: 100,
    haHoldMs: 500,
  };
  let slave = await startBroker(slaveOpts);
  await sendMany(master0, "Resume", 300, "a");
  await waitFor(() => slave.store.maxPhyOffset === master0.store.maxPhyOffset, 10_000, "first catch-up");
  const had = slave.store.maxPhyOffset;
  await closeBroker(slave);

  await sendMany(master0, "Resume", 300, "b");
  const before = master0.store.maxPhyOffset;
  assert.ok(had > 0 && had < before, "the slave kept what it had");
  slave = await startBroker(slaveOpts);
  await waitFor(() => slave.store.maxPhyOffset === before, 10_000, "catch-up after restart");
  assert.ok(haClientOf(slave.ctx).status.bytes <= before - had + 64, "only the missing bytes were transferred");

  // the master restarts on the same address: the slave reconnects and follows new data
  await closeBroker(master0);
  await waitFor(() => !haClientOf(slave.ctx).status.connected, 15_000, "slave noticed the master is gone");
  const master1 = await startBroker({ brokerName: "ha2", listen: masterListen, storeDir: path.join(dir, "ha2-m"), haHoldMs: 500 });
  await sendMany(master1, "Resume", 100, "c");
  await waitFor(() => slave.store.maxPhyOffset === master1.store.maxPhyOffset, 15_000, "slave follows the restarted master");
  for (let q = 0; q < 4; q++) assert.deepEqual(bodies(slave, "Resume", q), bodies(master1, "Resume", q));
  await closeBroker(slave);
  await closeBroker(master1);
});

test("SYNC_MASTER: SEND_OK once the slave has the message; SLAVE_NOT_AVAILABLE without a slave or with one too far behind; FLUSH_SLAVE_TIMEOUT when the slave stops acknowledging", async () => {
  const master = await startBroker({
    brokerName: "ha3",
    role: "SYNC_MASTER",
    storeDir: path.join(dir, "ha3-m"),
    haSyncTimeoutMs: 300,
    haMaxGapNotInSync: 16 * 1024,
  });
  assert.equal((await send(master, "Sync", "alone")).status, "SLAVE_NOT_AVAILABLE", "no slave connected");

  const slave = await startBroker({ brokerName: "ha3", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha3-s") });
  await waitFor(() => haServiceOf(master.ctx).liveSlaves().length === 1, 10_000, "slave connected");
  for (let i = 0; i < 20; i++) {
    const r = await send(master, "Sync", `m${i}`);
    assert.equal(r.status, "SEND_OK");
    assert.ok(slave.store.maxPhyOffset > r.commitLogOffset, "the slave holds the message when the producer hears SEND_OK");
  }
  await closeBroker(slave);

  // a slave that reports once and then goes quiet: its request is held and never repeated
  const fakeSlave = await ActorNode.start({ listen: null });
  try {
    const pending = fakeSlave
      .ref(master.address, BrokerActor.HA)
      .ask({ type: "HA_TRANSFER", slaveId: 9, slaveAddr: "tcp://127.0.0.1:9", offset: master.store.maxPhyOffset }, { timeoutMs: 20_000 })
      .catch(() => undefined);
    await waitFor(
      () =>
        haServiceOf(master.ctx)
          .liveSlaves()
          .some((s) => s.slaveId === 9),
      5000,
      "quiet slave registered",
    );
    const t0 = Date.now();
    const r = await send(master, "Sync", "waits");
    assert.equal(r.status, "FLUSH_SLAVE_TIMEOUT");
    assert.ok(Date.now() - t0 >= 250, "the send waited for the slave");
    // the quiet slave is now far behind (gap > haMaxGapNotInSync): sends no longer wait
    await sendMany(master, "Gap", 100, "g");
    const t1 = Date.now();
    const r2 = await send(master, "Sync", "gap");
    assert.equal(r2.status, "SLAVE_NOT_AVAILABLE");
    assert.ok(Date.now() - t1 < 250, "answered without waiting");
    await closeBroker(master);
    await pending;
  } finally {
    await fakeSlave.close();
  }
});

test("SYNC_MASTER whose slave stops acknowledging (its link blackholed): a producer's send is answered FLUSH_SLAVE_TIMEOUT within its first attempt and stored once, not timed out and stored again by each retry", async () => {
  const master = await startBroker({ brokerName: "ha8", role: "SYNC_MASTER", storeDir: path.join(dir, "ha8-m") });
  const proxy = await TcpProxy.start(Number(new URL(master.address).port));
  const slave = await startBroker({ brokerName: "ha8", brokerId: 1, masterAddress: proxy.address, storeDir: path.join(dir, "ha8-s") });
  // the defaults: sendTimeoutMs 3000 (a first attempt of 2000 ms), haSyncTimeoutMs 5000
  const producer = await Producer.start({ group: "pg-ha8", nameservers: [ns.address] });
  const stored = () => [0, 1, 2, 3].reduce((n, q) => n + master.store.getMaxOffset("SyncStall", q), 0);
  try {
    await waitFor(() => haServiceOf(master.ctx).liveSlaves().length === 1, 10_000, "slave connected");
    assert.equal((await producer.send({ topic: "SyncStall", body: "warm" })).status, "SEND_OK");
    const before = stored();
    // both sockets stay open: the slave still counts as connected but acknowledges nothing more
    proxy.blackhole(0, proxy.accepted);
    const t0 = monotonicNow();
    const outcome = await producer.send({ topic: "SyncStall", body: "once" }).then(
      (r) => r.status,
      (e: unknown) => `threw ${(e as { code?: string }).code}`,
    );
    const took = monotonicNow() - t0;
    assert.equal(stored() - before, 1, `one send, one stored copy (outcome ${outcome})`);
    assert.equal(outcome, "FLUSH_SLAVE_TIMEOUT");
    assert.ok(took < 2000, `answered within the first attempt's 2000 ms (took ${Math.round(took)} ms)`);
  } finally {
    proxy.heal();
    await producer.close();
    await closeBroker(slave);
    await closeBroker(master);
    await proxy.close();
  }
});

test("SYNC_MASTER: a slave that vanishes without a word (kill -9) stops counting as connected after its hold and the slave's ask margin, not haSlaveExpireMs; sends then answer SLAVE_NOT_AVAILABLE at once", async () => {
  const hold = 500;
  const margin = Math.max(1000, hold); // the slave's own ask timeout is hold + margin
  const master = await startBroker({ brokerName: "ha7", role: "SYNC_MASTER", storeDir: path.join(dir, "ha7-m"), haHoldMs: hold });
  const slave = await startBroker({
    brokerName: "ha7",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha7-s"),
    haHoldMs: hold,
  });
  const ha = haServiceOf(master.ctx);
  await waitFor(() => ha.liveSlaves().length === 1, 10_000, "slave connected");
  // idle, the slave's requests are held and renewed: it counts as connected all along
  let notCounted = 0;
  const watch = setInterval(() => {
    if (ha.liveSlaves().length === 0) notCounted++;
  }, 20);
  try {
    const firstSeen = ha.liveSlaves()[0]!.lastSeenMs;
    await waitFor(() => (ha.liveSlaves()[0]?.lastSeenMs ?? 0) >= firstSeen + 4 * hold, 10_000, "several held requests renewed");
    assert.equal((await send(master, "Sync", "while connected")).status, "SEND_OK");
  } finally {
    clearInterval(watch);
  }
  assert.equal(notCounted, 0, "a live slave between two requests still counts");

  // no goodbye reaches the master, as with kill -9 (or a slave too old to say it leaves)
  (haClientOf(slave.ctx) as unknown as { leave: () => Promise<void> }).leave = async () => {};
  await closeBroker(slave);
  const t0 = Date.now();
  await waitFor(() => ha.liveSlaves().length === 0, 10_000, "the vanished slave no longer counts");
  const took = Date.now() - t0;
  assert.ok(took < hold + margin + 2000, `dropped after ${took} ms, not the ${ha.tuning.haSlaveExpireMs} ms of haSlaveExpireMs`);
  const t1 = Date.now();
  assert.equal((await send(master, "Sync", "after the slave vanished")).status, "SLAVE_NOT_AVAILABLE");
  assert.ok(Date.now() - t1 < 1000, "answered without waiting for the slave");
  await closeBroker(master);
});

test("SYNC_MASTER: a slave that stops gracefully tells its master, which answers sends SLAVE_NOT_AVAILABLE at once, waiting ones included, not after the slave's hold and margin", async () => {
  // default haHoldMs (5 s): without the goodbye the slave would count as connected up to 10 s more
  const master = await startBroker({ brokerName: "ha8", role: "SYNC_MASTER", storeDir: path.join(dir, "ha8-m"), haSyncTimeoutMs: 15_000 });
  const slave = await startBroker({ brokerName: "ha8", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha8-s") });
  const ha = haServiceOf(master.ctx);
  await waitFor(() => ha.liveSlaves().length === 1, 10_000, "slave connected");
  assert.equal((await send(master, "Sync", "while connected")).status, "SEND_OK");
  await closeBroker(slave);
  assert.equal(ha.liveSlaves().length, 0, "the slave no longer counts once its close returned");
  const t0 = Date.now();
  assert.equal((await send(master, "Sync", "after the slave left")).status, "SLAVE_NOT_AVAILABLE");
  assert.ok(Date.now() - t0 < 1000, "answered without waiting for the slave");

  // a send waiting for a slave is answered when that slave leaves, not after haSyncTimeoutMs
  const fakeSlave = await ActorNode.start({ listen: null });
  try {
    const slaveId = 9;
    const slaveAddr = "tcp://127.0.0.1:9";
    const held = fakeSlave
      .ref(master.address, BrokerActor.HA)
      .ask({ type: "HA_TRANSFER", slaveId, slaveAddr, offset: master.store.maxPhyOffset }, { timeoutMs: 20_000 });
    await waitFor(() => ha.liveSlaves().some((s) => s.slaveId === slaveId), 5000, "fake slave registered");
    const t1 = Date.now();
    const waiting = raw
      .ref(master.address, BrokerActor.BROKER)
      .ask<SendMessageReply>(
        { type: "SEND_MESSAGE", producerGroup: "pg", topic: "Sync", queueId: 0, sysFlag: 0, bornTimestamp: Date.now() },
        { body: Buffer.from("waits"), timeoutMs: 20_000 },
      );
    // the held request is answered with the message: the send now waits for the slave's acknowledgement
    await held;
    await fakeSlave.ref(master.address, BrokerActor.HA).ask({ type: "HA_LEAVE", slaveId, slaveAddr }, { timeoutMs: 5000 });
    assert.equal((await waiting).fields.status, "SLAVE_NOT_AVAILABLE");
    assert.ok(Date.now() - t1 < 2000, `answered ${Date.now() - t1} ms after the send, at the slave's leave`);
    assert.equal(ha.liveSlaves().length, 0);
  } finally {
    await fakeSlave.close();
  }
  await closeBroker(master);
});

/** Collects the messages `b`'s logger warns with. */
function warningsOf(b: Broker): string[] {
  const warnings: string[] = [];
  const warn = b.ctx.logger.warn.bind(b.ctx.logger);
  b.ctx.logger.warn = ((obj: unknown, msg?: string) => {
    warnings.push(String(msg));
    warn(obj as object, msg);
  }) as typeof b.ctx.logger.warn;
  return warnings;
}

test("a slave holding a tail its master lost is refused, not continued with the master's new records; a rebuilt slave copies the master", async () => {
  const masterOpts = { brokerName: "ha6", storeDir: path.join(dir, "ha6-m") };
  const slaveOpts = { brokerName: "ha6", brokerId: 1, storeDir: path.join(dir, "ha6-s"), haReconnectMs: 100 };
  let master = await startBroker(masterOpts);
  let slave = await startBroker({ ...slaveOpts, masterAddress: master.address });
  for (let i = 0; i < 60; i++) await send(master, "Torn", `old-${i}-${"x".repeat(100)}`);
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "slave caught up");
  const end = master.store.maxPhyOffset;
  assert.ok(end < SEGMENT);
  await closeBroker(slave);
  await closeBroker(master);
  // the master loses its last 2000 bytes (never flushed before a power loss), then takes new writes past them
  const fd = openSync(path.join(dir, "ha6-m", "commitlog", "0".padStart(20, "0")), "r+");
  writeSync(fd, Buffer.alloc(2000), 0, 2000, end - 2000);
  closeSync(fd);
  master = await startBroker(masterOpts);
  assert.ok(master.store.maxPhyOffset < end);
  for (let i = 0; i < 30; i++) await send(master, "Torn", `new-${i}-${"y".repeat(100)}`);
  assert.ok(master.store.maxPhyOffset > end);
  const warnings = warningsOf(master);
  slave = await startBroker({ ...slaveOpts, masterAddress: master.address });
  const status = haClientOf(slave.ctx).status;
  await waitFor(() => status.refused, 10_000, "the master refuses the slave");
  assert.match(status.refused!, /Rebuild the slave from the master/);
  assert.equal(slave.store.maxPhyOffset, end, "nothing appended to the slave");
  assert.equal(master.store.damage.replicationBytesSkipped, 0);
  assert.deepEqual(warnings, ["slave's commit log differs from the master's"]);
  await closeBroker(slave);

  // rebuilt from the master (an empty store): the master's log, byte for byte
  slave = await startBroker({ ...slaveOpts, storeDir: path.join(dir, "ha6-s2"), masterAddress: master.address });
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "the rebuilt slave caught up");
  assert.ok(commitLogBytes(slave).equals(commitLogBytes(master)));
  assert.equal(haClientOf(slave.ctx).status.refused, null);
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave with another segment size or broker name is refused before it appends anything", async () => {
  const master = await startBroker({ brokerName: "ha7", storeDir: path.join(dir, "ha7-m") });
  await sendMany(master, "Seg", 400, "a");
  assert.ok(master.store.maxPhyOffset > SEGMENT);
  const bigger = await startBroker({
    brokerName: "ha7",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha7-s1"),
    segmentBytes: 2 * SEGMENT,
  });
  const other = await startBroker({ brokerName: "ha7x", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha7-s2") });
  await waitFor(() => haClientOf(bigger.ctx).status.refused && haClientOf(other.ctx).status.refused, 10_000, "both refused");
  assert.match(haClientOf(bigger.ctx).status.refused!, new RegExp(`segmentBytes ${SEGMENT} on an empty store directory`));
  assert.match(haClientOf(other.ctx).status.refused!, /configured as broker ha7x/);
  assert.equal(bigger.store.maxPhyOffset, 0);
  assert.equal(other.store.maxPhyOffset, 0);
  await closeBroker(other);
  await closeBroker(bigger);
  await closeBroker(master);
});

test("HA_TRANSFER from a peer whose offset is not a record boundary of the master is refused, with no damage counted; so is a slaveId that is no broker id", async () => {
  const master = await startBroker({ brokerName: "ha8", storeDir: path.join(dir, "ha8-m") });
  const sent: SendMessageReply[] = [];
  for (let i = 0; i < 5; i++) sent.push(await send(master, "H", `msg-${i}-${"z".repeat(50)}`));
  const transfer = (fields: Record<string, unknown>) =>
    raw.ref(master.address, BrokerActor.HA).ask({ type: "HA_TRANSFER", slaveId: 9, slaveAddr: "tcp://x:1", empty: false, ...fields });
  const refused = (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT");
  // inside the first record, with no tail check, and with a check that does not end there
  await assert.rejects(transfer({ offset: 7 }), refused);
  await assert.rejects(transfer({ offset: 7, tailAt: 0, tailCrc: 0 }), refused);
  // a boundary with a wrong CRC of the record before it
  await assert.rejects(transfer({ offset: sent[2]!.commitLogOffset, tailAt: sent[1]!.commitLogOffset, tailCrc: 1 }), refused);
  assert.equal(master.store.damage.replicationBytesSkipped, 0, "no damage reported for a healthy log");
  // a slave id that is not a broker id (past 2^53 two would share a key), before anything is served
  for (const slaveId of [2 ** 53 + 2, -1, 1.5, "1"])
    await assert.rejects(
      transfer({ slaveId, offset: sent[4]!.commitLogOffset }),
      (e) => isMQError(e, "INVALID_PARAMETER") && /slaveId must be an integer from 0 .* to 2\^53-1/.test(e.message),
      String(slaveId),
    );
  await assert.rejects(
    raw.ref(master.address, BrokerActor.HA).ask({ type: "HA_LEAVE", slaveId: 2 ** 53 + 2, slaveAddr: "tcp://x:1" }),
    (e) => isMQError(e, "INVALID_PARAMETER") && /slaveId must be an integer from 0 .* to 2\^53-1/.test(e.message),
  );
  // a boundary without a check is served
  const ok = await transfer({ slaveId: 10, offset: sent[4]!.commitLogOffset });
  assert.ok((ok.body?.length ?? 0) > 0);
  await closeBroker(master);
});

test("refused peers are remembered and logged within bounds", async () => {
  const master = await startBroker({ brokerName: "ha9", storeDir: path.join(dir, "ha9-m") });
  await send(master, "H", "one");
  const warnings = warningsOf(master);
  const transfer = (fields: Record<string, unknown>) =>
    raw.ref(master.address, BrokerActor.HA).ask({ type: "HA_TRANSFER", empty: false, ...fields });
  const service = haServiceOf(master.ctx) as unknown as { refused: Map<string, number>; expireSlaves(now: number): void };
  const ahead = master.store.maxPhyOffset + 1;
  for (let i = 0; i < 1100; i += 100)
    await Promise.all(
      Array.from({ length: 100 }, (_, k) =>
        transfer({ slaveId: i + k, slaveAddr: `tcp://h${i + k}:1`, offset: ahead }).catch(() => undefined),
      ),
    );
  assert.ok(service.refused.size <= 1024, `refused peers remembered: ${service.refused.size}`);
  assert.equal(warnings.length, 1, "refusals are logged at most once per interval");
  service.expireSlaves(monotonicNow() + 60_000);
  assert.equal(service.refused.size, 0, "peers that stopped asking are forgotten");
  await closeBroker(master);
});

test("a master whose commit log lacks a middle segment file refuses the slave at that gap, saying so on both sides, once; an empty slave begins after the gap", async () => {
  const masterOpts = { brokerName: "ha10", storeDir: path.join(dir, "ha10-m") };
  const slaveOpts = { brokerName: "ha10", brokerId: 1, storeDir: path.join(dir, "ha10-s"), haReconnectMs: 100 };
  let master = await startBroker(masterOpts);
  let slave = await startBroker({ ...slaveOpts, masterAddress: master.address });
  await sendMany(master, "Hole", 100, "a");
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "slave caught up");
  const slaveAt = slave.store.maxPhyOffset;
  await closeBroker(slave);
  await sendMany(master, "Hole", 1000, "b");
  await closeBroker(master);
  // someone deletes a segment file past the slave's offset, neither the first nor the last
  const gapFrom = (Math.floor(slaveAt / SEGMENT) + 1) * SEGMENT;
  rmSync(path.join(dir, "ha10-m", "commitlog", String(gapFrom).padStart(20, "0")));
  master = await startBroker(masterOpts);
  assert.deepEqual(master.store.recovery.missingLog, [{ from: gapFrom, to: gapFrom + SEGMENT }]);
  assert.ok(master.store.maxPhyOffset > gapFrom + SEGMENT);
  const errors: string[] = [];
  const error = master.ctx.logger.error.bind(master.ctx.logger);
  master.ctx.logger.error = ((obj: unknown, msg?: string) => {
    errors.push(String(msg));
    error(obj as object, msg);
  }) as typeof master.ctx.logger.error;

  slave = await startBroker({ ...slaveOpts, masterAddress: master.address });
  const status = haClientOf(slave.ctx).status;
  await waitFor(() => status.refused, 10_000, "the slave says why it stops");
  assert.match(status.refused!, new RegExp(`missing the bytes from ${gapFrom} to ${gapFrom + SEGMENT}`));
  assert.match(status.refused!, new RegExp(String(gapFrom).padStart(20, "0")));
  await waitFor(() => status.failures >= 3, 10_000, "the slave retries");
  assert.equal(slave.store.maxPhyOffset, gapFrom, "the slave copied up to the gap");
  assert.deepEqual(
    errors.filter((m) => /missing/.test(m)),
    ["a slave cannot be served: the commit log is missing a segment file"],
    "the master logs the gap once",
  );
  await closeBroker(slave);

  // an empty slave begins after the gap (as RocketMQ begins a new slave at the master's last segment)
  const fresh = await startBroker({ ...slaveOpts, brokerId: 2, storeDir: path.join(dir, "ha10-s2"), masterAddress: master.address });
  await waitFor(() => fresh.store.maxPhyOffset === master.store.maxPhyOffset, 15_000, "the empty slave caught up");
  assert.equal(fresh.store.minPhyOffset, gapFrom + SEGMENT);
  for (let at = gapFrom + SEGMENT; at < master.store.maxPhyOffset; ) {
    const m = master.store.readCommitLog(at, 1024 * 1024);
    assert.ok(m.length > 0 && m.equals(fresh.store.readCommitLog(at, 1024 * 1024)), `same bytes at ${at}`);
    at = m.length === 8 ? Math.ceil((at + 8) / SEGMENT) * SEGMENT : at + m.length;
  }
  assert.ok(bodies(fresh, "Hole", 0).length > 0);
  assert.deepEqual(bodies(fresh, "Hole", 0), bodies(master, "Hole", 0).slice(-bodies(fresh, "Hole", 0).length));
  await closeBroker(fresh);
  await closeBroker(master);
});

test("a slave whose master is down logs the failed config copy once, not at every reconnect attempt, and says when it works again", async () => {
  const masterOpts = { brokerName: "ha11", storeDir: path.join(dir, "ha11-m"), haHoldMs: 500 };
  let master = await startBroker(masterOpts);
  const slave = await startBroker({
    brokerName: "ha11",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha11-s"),
    haReconnectMs: 50,
    haHoldMs: 500,
    slaveSyncIntervalMs: 100,
  });
  const status = haClientOf(slave.ctx).status;
  await waitFor(() => status.connected, 10_000, "slave connected");
  const warnings = warningsOf(slave);
  const infos: string[] = [];
  const info = slave.ctx.logger.info.bind(slave.ctx.logger);
  slave.ctx.logger.info = ((obj: unknown, msg?: string) => {
    infos.push(String(msg));
    info(obj as object, msg);
  }) as typeof slave.ctx.logger.info;
  const debugs: string[] = [];
  const debug = slave.ctx.logger.debug.bind(slave.ctx.logger);
  slave.ctx.logger.debug = ((obj: unknown, msg?: string) => {
    debugs.push(String(msg));
    debug(obj as object, msg);
  }) as typeof slave.ctx.logger.debug;
  const listen = master.address;
  await closeBroker(master);
  const failures = status.failures;
  // the copy runs beside the transfers and waits out its ask's timeout (the master's port is silent):
  // two failed copies show it is warned once, not at each (every copy costs seconds)
  await waitFor(() => status.failures >= failures + 2, 30_000, "the slave retried twice");
  await waitFor(() => debugs.includes("config sync from master failed again"), 30_000, "a second copy failed");
  assert.equal(warnings.filter((m) => m === "config sync from master failed").length, 1, warnings.join("\n"));
  master = await startBroker({ ...masterOpts, listen });
  await waitFor(() => status.connected, 15_000, "slave reconnected");
  await waitFor(() => infos.includes("config sync from master works again"), 5_000, "the recovery is logged");
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave whose masterAddress names another slave is told so and logs it; one whose master never answered warns once, not never", async () => {
  const master = await startBroker({ brokerName: "ha12", storeDir: path.join(dir, "ha12-m") });
  const slave1 = await startBroker({ brokerName: "ha12", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha12-s1") });
  await waitFor(() => haClientOf(slave1.ctx).status.connected, 10_000, "first slave connected");
  // a second slave pointed at the first: refused, and the refusal is the reason it shows
  const slave2 = await startBroker({
    brokerName: "ha12",
    brokerId: 2,
    masterAddress: slave1.address,
    storeDir: path.join(dir, "ha12-s2"),
    haReconnectMs: 50,
  });
  const status2 = haClientOf(slave2.ctx).status;
  await waitFor(() => status2.refused, 10_000, "the slave says why it copies nothing");
  assert.match(status2.refused!, /is a slave; replicate from its master/);
  await closeBroker(slave2);

  // a master address nothing answers at (a closed node's): warned once, with the reason
  const gone = await ActorNode.start({ listen: EPHEMERAL });
  const goneAddr = gone.address!;
  await gone.close();
  const slave3 = await startBroker({
    brokerName: "ha12",
    brokerId: 3,
    masterAddress: goneAddr,
    storeDir: path.join(dir, "ha12-s3"),
    haReconnectMs: 50,
    haHoldMs: 200,
  });
  const warnings = warningsOf(slave3);
  const status3 = haClientOf(slave3.ctx).status;
  await waitFor(() => status3.failures >= 2, 20_000, "two failed attempts");
  assert.deepEqual(
    warnings.filter((m) => m.startsWith("replication from master")),
    ["replication from master failed"],
  );
  await closeBroker(slave3);
  await closeBroker(slave1);
  await closeBroker(master);
});

/**
 * Puts `ask` in front of every ask `b` makes from now on (`pass` sends the ask on as it was); returns
 * the function that takes it away again.
 */
function interceptAsks(b: Broker, ask: (event: WireEvent, pass: () => Promise<Reply<unknown>>) => Promise<Reply<unknown>>): () => void {
  const node = b.ctx.node;
  const original = node.ref;
  const ref = original.bind(node);
  node.ref = (address, name) => {
    const r = ref(address, name);
    return {
      name: r.name,
      address: r.address,
      send: r.send.bind(r),
      ask: <T>(event: WireEvent, opts?: AskOptions) => ask(event, () => r.ask(event, opts)) as Promise<Reply<T>>,
    };
  };
  return () => {
    node.ref = original;
  };
}

/**
 * Makes `b`'s asks of `types` take `delayMs` longer (a master slow to answer them), from now on,
 * or fail with SYSTEM_ERROR while `failing.on`. Returns how many such asks were made.
 */
function slowAsks(b: Broker, types: string[], delayMs: number, failing = { on: false }): { count: number } {
  const seen = { count: 0 };
  interceptAsks(b, (event, pass) => {
    if (!types.includes(event.type)) return pass();
    seen.count++;
    if (failing.on) return Promise.reject(new MQError("SYSTEM_ERROR", `${event.type} failed on the master`));
    return new Promise((resolve) => setTimeout(resolve, delayMs)).then(pass);
  });
  return seen;
}

test("SYNC_MASTER: a slave acknowledges the bytes it appended without waiting for its copy of the master's configs, however slow that copy is", async () => {
  const master = await startBroker({ brokerName: "ha13", role: "SYNC_MASTER", storeDir: path.join(dir, "ha13-m"), haSyncTimeoutMs: 1000 });
  const slave = await startBroker({
    brokerName: "ha13",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha13-s"),
    // a copy is due after every transfer
    slaveSyncIntervalMs: 1,
  });
  await waitFor(() => haServiceOf(master.ctx).liveSlaves().length === 1, 10_000, "slave connected");
  assert.equal((await send(master, "SlowCfg", "warm")).status, "SEND_OK");
  // the master answers the slave's config reads 2.5 s late (loaded, or far away); its HA answers are prompt
  const slow = slowAsks(slave, ["GET_ALL_TOPIC_CONFIG"], 2500);
  for (let i = 0; i < 3; i++) {
    const t0 = monotonicNow();
    const r = await send(master, "SlowCfg", `m${i}`);
    assert.equal(r.status, "SEND_OK", `send ${i} answered ${r.status} after ${Math.round(monotonicNow() - t0)} ms`);
    assert.ok(slave.store.maxPhyOffset > r.commitLogOffset, "the slave holds the message");
  }
  // the configs are still copied, late
  await waitFor(() => slow.count > 0 && slave.ctx.topics.get("SlowCfg"), 10_000, "the topic copied to the slave");
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave whose copy of the master's consumer offsets keeps failing warns once, not at every copy, and says when it works again", async () => {
  const master = await startBroker({ brokerName: "ha14", storeDir: path.join(dir, "ha14-m"), haHoldMs: 100 });
  const slave = await startBroker({
    brokerName: "ha14",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha14-s"),
    haHoldMs: 100,
    slaveSyncIntervalMs: 50,
  });
  await waitFor(() => haClientOf(slave.ctx).status.connected, 10_000, "slave connected");
  const warnings = warningsOf(slave);
  const infos: string[] = [];
  const info = slave.ctx.logger.info.bind(slave.ctx.logger);
  slave.ctx.logger.info = ((obj: unknown, msg?: string) => {
    infos.push(String(msg));
    info(obj as object, msg);
  }) as typeof slave.ctx.logger.info;
  // the master's configs are read, its offsets are not (an offsets actor that fails)
  const failing = { on: true };
  const offsetAsks = slowAsks(slave, ["GET_ALL_CONSUMER_OFFSET"], 0, failing);
  await waitFor(() => offsetAsks.count >= 4, 10_000, "four failed offset copies");
  assert.deepEqual(
    warnings.filter((m) => m.startsWith("offset copy")),
    ["offset copy from master failed"],
  );
  failing.on = false;
  await waitFor(() => infos.includes("offset copy from master works again"), 10_000, "the recovery is logged");
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave without masterAddress whose first name server refuses connections finds its master on the next one at once, not after the 3 s request timeout", async () => {
  const down = await NameServer.start({ listen: EPHEMERAL, logLevel: "silent" });
  await down.close(); // as if its process died: connections to it are refused
  const master = await startBroker({ brokerName: "ha15", storeDir: path.join(dir, "ha15-m") });
  const t0 = monotonicNow();
  const slave = await startBroker({
    brokerName: "ha15",
    brokerId: 1,
    nameservers: [down.address, ns.address],
    storeDir: path.join(dir, "ha15-s"),
  });
  // the master counts the slave from its first request (the slave's status only from the first answer)
  await waitFor(() => haServiceOf(master.ctx).liveSlaves().length === 1, 10_000, "slave connected");
  const took = monotonicNow() - t0;
  assert.equal(haClientOf(slave.ctx).status.masterAddress, master.address);
  assert.ok(took < 2000, `replicating ${Math.round(took)} ms after the start`);
  await closeBroker(slave);
  await closeBroker(master);
});

test("SYNC_MASTER: a send-back is answered once a slave holds the retry copy; without a slave (SLAVE_NOT_AVAILABLE) or with one that does not confirm (FLUSH_SLAVE_TIMEOUT) it fails, so the consumer falls back to its own copy", async () => {
  const master = await startBroker({ brokerName: "ha16", role: "SYNC_MASTER", storeDir: path.join(dir, "ha16-m"), haSyncTimeoutMs: 300 });
  const sendBack = (offset: number) =>
    raw
      .ref(master.address, BrokerActor.SENDBACK)
      .ask({ type: "CONSUMER_SEND_MSG_BACK", group: "cg16", offset, delayLevel: 0, originMsgId: "U16", maxReconsumeTimes: 16 })
      .then(
        () => "ok",
        (e: unknown) => `${(e as MQError).code}: ${(e as Error).message}`,
      );
  const stored = await send(master, "Back", "failed by the listener");
  assert.equal(stored.status, "SLAVE_NOT_AVAILABLE", "no slave yet");
  assert.match(await sendBack(stored.commitLogOffset), /^SYSTEM_ERROR: .*SLAVE_NOT_AVAILABLE/);

  const slave = await startBroker({ brokerName: "ha16", brokerId: 1, masterAddress: master.address, storeDir: path.join(dir, "ha16-s") });
  await waitFor(() => haServiceOf(master.ctx).liveSlaves().length === 1, 10_000, "slave connected");
  for (let i = 0; i < 5; i++) {
    assert.equal(await sendBack(stored.commitLogOffset), "ok");
    assert.equal(slave.store.maxPhyOffset, master.store.maxPhyOffset, "the slave holds the retry copy when the consumer hears success");
  }
  await closeBroker(slave);

  // a slave that reports once and then goes quiet: its request is held and never repeated
  const fakeSlave = await ActorNode.start({ listen: null });
  try {
    const pending = fakeSlave
      .ref(master.address, BrokerActor.HA)
      .ask({ type: "HA_TRANSFER", slaveId: 9, slaveAddr: "tcp://127.0.0.1:9", offset: master.store.maxPhyOffset }, { timeoutMs: 20_000 })
      .catch(() => undefined);
    await waitFor(() => haServiceOf(master.ctx).liveSlaves().length === 1, 5000, "quiet slave registered");
    assert.match(await sendBack(stored.commitLogOffset), /^SYSTEM_ERROR: .*FLUSH_SLAVE_TIMEOUT/);
    await closeBroker(master);
    await pending;
  } finally {
    await fakeSlave.close();
  }
});

test("SYNC_MASTER without a slave: a consumer's failed message, refused back there, is retried through its own copy on another broker too", async () => {
  const group = "cg17";
  const a = await startBroker({
    brokerName: "ha17a",
    role: "SYNC_MASTER",
    storeDir: path.join(dir, "ha17-a"),
    messageDelayLevel: SHORT_DELAY_LEVELS,
  });
  const b = await startBroker({ brokerName: "ha17b", storeDir: path.join(dir, "ha17-b"), messageDelayLevel: SHORT_DELAY_LEVELS });
  await a.createTopic({ topic: "BackA", readQueueNums: 1, writeQueueNums: 1 });
  // the group's retry topic on the other broker, where the consumer's own copy can go
  await b.createTopic({ topic: `%RETRY%${group}`, readQueueNums: 1, writeQueueNums: 1 });
  const deliveries: { reconsumeTimes: number; brokerName: string }[] = [];
  const consumer = await PushConsumer.start({
    group,
    nameservers: [ns.address],
    subscriptions: { BackA: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs) => {
      for (const m of msgs) deliveries.push({ reconsumeTimes: m.reconsumeTimes, brokerName: m.brokerName });
      return deliveries.length < 2 ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  try {
    assert.equal((await send(a, "BackA", "fails once")).status, "SLAVE_NOT_AVAILABLE", "stored on the master alone");
    // the master keeps the copy it stored (a duplicate, as in RocketMQ): the consumer's own one is what is durable
    await waitFor(() => deliveries.some((d) => d.brokerName === "ha17b"), 15_000, "the retry from the other broker");
    assert.deepEqual(
      deliveries.find((d) => d.brokerName === "ha17b"),
      { reconsumeTimes: 1, brokerName: "ha17b" },
      "retried from the consumer's copy on the other broker",
    );
    assert.equal(b.store.getMaxOffset(`%RETRY%${group}`, 0), 1);
  } finally {
    await consumer.close();
    await closeBroker(b);
    await closeBroker(a);
  }
});

test("a slave closed while its copy of the master's configs waits for an answer writes nothing after it closed", async () => {
  const master = await startBroker({ brokerName: "ha18", storeDir: path.join(dir, "ha18-m"), haHoldMs: 100 });
  const slaveDir = path.join(dir, "ha18-s");
  const slave = await startBroker({ brokerName: "ha18", brokerId: 1, masterAddress: master.address, storeDir: slaveDir, haHoldMs: 100 });
  await master.createTopic({ topic: "Warm18", readQueueNums: 1, writeQueueNums: 1 });
  await waitFor(() => slave.ctx.topics.get("Warm18"), 10_000, "the first copy done");
  // the master's topics are read at once, but their answer reaches the copy only when the test says so
  let release = () => {};
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const held = { count: 0, answered: 0 };
  interceptAsks(slave, (event, pass) => {
    if (event.type !== "GET_ALL_TOPIC_CONFIG") return pass();
    held.count++;
    return pass().then(async (answer) => {
      await gate;
      held.answered++;
      return answer;
    });
  });
  await master.createTopic({ topic: "Late18", readQueueNums: 1, writeQueueNums: 1 });
  await waitFor(() => held.count > 0, 10_000, "a copy waiting for the master's topics");
  await closeBroker(slave);
  release();
  await waitFor(() => held.answered > 0, 5000, "the held answer delivered");
  const client = haClientOf(slave.ctx) as unknown as { syncing: Promise<void> | null };
  await waitFor(() => client.syncing === null, 5000, "the copy over");
  assert.equal(slave.ctx.topics.get("Late18"), undefined, "no topic taken after close");
  const onDisk = JSON.parse(readFileSync(path.join(slaveDir, "config", "topics.json"), "utf8")) as {
    topicConfigTable: Record<string, unknown>;
  };
  assert.equal(onDisk.topicConfigTable.Late18, undefined, "topics.json not written after close");
  await closeBroker(master);
});

test("a slave takes the master's delay-level progress only once it holds the due messages that progress re-stored: restarted as master it would not deliver them", async () => {
  const master = await startBroker({
    brokerName: "ha19",
    storeDir: path.join(dir, "ha19-m"),
    haHoldMs: 100,
    messageDelayLevel: SHORT_DELAY_LEVELS,
  });
  const slaveDir = path.join(dir, "ha19-s");
  const slave = await startBroker({
    brokerName: "ha19",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: slaveDir,
    haHoldMs: 100,
    slaveSyncIntervalMs: 50,
    messageDelayLevel: SHORT_DELAY_LEVELS,
  });
  await master.createTopic({ topic: "Due19", readQueueNums: 1, writeQueueNums: 1 });
  // the message waits at level 10 (1 s) and reaches the slave's schedule queue
  const r = await raw.ref(master.address, BrokerActor.BROKER).ask<SendMessageReply>(
    {
      type: "SEND_MESSAGE",
      producerGroup: "pg",
      topic: "Due19",
      queueId: 0,
      sysFlag: 0,
      bornTimestamp: Date.now(),
      properties: encodeProperties({ DELAY: "10" }),
    },
    { body: Buffer.from("due") },
  );
  assert.equal(r.fields.status, "SEND_OK");
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "the schedule record on the slave");
  // from now on the slave's transfers that bring bytes are held (its log lags), and its next config
  // copy waits until the master has re-stored the due message
  let releaseTransfers = () => {};
  const transfers = new Promise<void>((res) => {
    releaseTransfers = res;
  });
  let releaseCopy = () => {};
  const copy = new Promise<void>((res) => {
    releaseCopy = res;
  });
  const delayCopies = { answered: 0 };
  interceptAsks(slave, (event, pass) => {
    if (event.type === "GET_ALL_TOPIC_CONFIG") return copy.then(pass);
    if (event.type === "GET_ALL_DELAY_OFFSET")
      return pass().then((a) => {
        delayCopies.answered++;
        return a;
      });
    if (event.type !== "HA_TRANSFER") return pass();
    return pass().then(async (a) => {
      if (a.body && a.body.length > 0) await transfers;
      return a;
    });
  });
  const delayProgress = (b: Broker) =>
    raw
      .ref(b.address, BrokerActor.SCHEDULER)
      .ask<{ offsetTable: Record<string, number> }>({ type: "GET_ALL_DELAY_OFFSET" })
      .then((a) => a.fields.offsetTable["10"]);
  await waitFor(async () => (await delayProgress(master)) === 1, 10_000, "the master re-stored the due message");
  assert.equal(master.store.getMaxOffset("Due19", 0), 1);
  const copied = delayCopies.answered;
  releaseCopy();
  await waitFor(() => delayCopies.answered > copied, 10_000, "the slave read the master's delay progress");
  const slaveProgress = () =>
    (JSON.parse(readFileSync(path.join(slaveDir, "config", "delayOffset.json"), "utf8")) as { offsetTable: Record<string, number> })
      .offsetTable["10"] ?? 0;
  // the slave's own log may not hold the re-stored message yet: then its progress must not count it
  const client = haClientOf(slave.ctx) as unknown as { syncing: Promise<void> | null };
  await waitFor(() => client.syncing === null, 10_000, "the copy over");
  assert.equal(slave.store.getMaxOffset("Due19", 0), 0, "the re-stored message not on the slave yet");
  assert.equal(slaveProgress(), 0, "the slave's progress does not count a message it lacks");
  releaseTransfers();
  await waitFor(() => slave.store.getMaxOffset("Due19", 0) === 1 && slaveProgress() === 1, 10_000, "the progress taken with the message");
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave catching up a backlog takes the master's delay-level progress of an older copy once it reaches it, though a newer copy points further ahead", async () => {
  const master = await startBroker({
    brokerName: "ha20",
    storeDir: path.join(dir, "ha20-m"),
    haHoldMs: 100,
    haTransferBatchBytes: 4096,
    messageDelayLevel: SHORT_DELAY_LEVELS,
  });
  const slaveDir = path.join(dir, "ha20-s");
  const slave = await startBroker({
    brokerName: "ha20",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: slaveDir,
    haHoldMs: 100,
    messageDelayLevel: SHORT_DELAY_LEVELS,
  });
  await master.createTopic({ topic: "Due20", readQueueNums: 1, writeQueueNums: 1 });
  await master.createTopic({ topic: "Bulk20", readQueueNums: 4, writeQueueNums: 4 });
  const sendDue = async () => {
    const r = await raw.ref(master.address, BrokerActor.BROKER).ask<SendMessageReply>(
      {
        type: "SEND_MESSAGE",
        producerGroup: "pg",
        topic: "Due20",
        queueId: 0,
        sysFlag: 0,
        bornTimestamp: Date.now(),
        properties: encodeProperties({ DELAY: "10" }),
      },
      { body: Buffer.from("due") },
    );
    assert.equal(r.fields.status, "SEND_OK");
  };
  await sendDue();
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset, 10_000, "the schedule record on the slave");
  const client = haClientOf(slave.ctx) as unknown as { syncing: Promise<void> | null };
  await waitFor(() => client.syncing === null, 10_000, "the slave's first config copy over");
  // from now on each slave transfer that brings bytes is held until the test lets it through
  const held: (() => void)[] = [];
  const restoreAsks = interceptAsks(slave, (event, pass) => {
    if (event.type !== "HA_TRANSFER") return pass();
    return pass().then(async (a) => {
      if (a.body && a.body.length > 0) await new Promise<void>((res) => held.push(res));
      return a;
    });
  });
  const masterProgress = () =>
    raw
      .ref(master.address, BrokerActor.SCHEDULER)
      .ask<{ offsetTable: Record<string, number> }>({ type: "GET_ALL_DELAY_OFFSET" })
      .then((a) => a.fields.offsetTable["10"]);
  const slaveProgress = () =>
    (JSON.parse(readFileSync(path.join(slaveDir, "config", "delayOffset.json"), "utf8")) as { offsetTable: Record<string, number> })
      .offsetTable["10"] ?? 0;
  // a backlog, then the first due message re-stored: the slave copies that progress, far behind
  await sendMany(master, "Bulk20", 40, "one");
  await waitFor(async () => (await masterProgress()) === 1, 10_000, "the master re-stored the first due message");
  const first = master.store.maxPhyOffset;
  await syncOffsetsFromMaster(slave.ctx, master.address);
  assert.ok(slave.store.maxPhyOffset < first, "the slave lags the first copy");
  // more backlog and a second due message: the next copy points further ahead
  await sendDue();
  await sendMany(master, "Bulk20", 100, "two");
  await waitFor(async () => (await masterProgress()) === 2, 10_000, "the master re-stored the second due message");
  const second = master.store.maxPhyOffset;
  await syncOffsetsFromMaster(slave.ctx, master.address);
  assert.ok(slave.store.maxPhyOffset < first, "the slave still lags the first copy");
  assert.equal(slaveProgress(), 0);
  // one transfer at a time until the slave holds what the first copy counted
  while (slave.store.maxPhyOffset < first) {
    await waitFor(() => held.length > 0, 10_000, "a held transfer");
    held.shift()!();
    await waitFor(() => held.length > 0, 10_000, "the transfer appended and the next one held");
  }
  assert.ok(slave.store.maxPhyOffset < second, "the slave has not reached the second copy yet");
  assert.equal(slaveProgress(), 1, "the first copy's progress is taken once the slave holds what it counts");
  // the rest: the second copy's progress is taken once the slave reaches it
  restoreAsks();
  for (const release of held.splice(0)) release();
  await waitFor(() => slave.store.maxPhyOffset === master.store.maxPhyOffset && slaveProgress() === 2, 10_000, "the second copy taken");
  await closeBroker(slave);
  await closeBroker(master);
});

test("a slave whose config copy fails while its master is up (it cannot write topics.json) tries again after a backoff, not at every transfer", async () => {
  const master = await startBroker({ brokerName: "ha21", storeDir: path.join(dir, "ha21-m"), haHoldMs: 100 });
  const slave = await startBroker({
    brokerName: "ha21",
    brokerId: 1,
    masterAddress: master.address,
    storeDir: path.join(dir, "ha21-s"),
    haHoldMs: 100,
    haReconnectMs: 5_000,
  });
  const client = haClientOf(slave.ctx);
  await waitFor(() => client.status.connected, 10_000, "slave connected");
  await waitFor(() => (client as unknown as { syncing: Promise<void> | null }).syncing === null, 10_000, "the first copy over");
  const warnings = warningsOf(slave);
  // the slave's topics.json cannot be written
  const createOrUpdate = slave.ctx.topics.createOrUpdate;
  slave.ctx.topics.createOrUpdate = () => Promise.reject(new Error("EACCES: permission denied, open 'topics.json'"));
  let copies = 0;
  const restoreAsks = interceptAsks(slave, (event, pass) => {
    if (event.type === "GET_ALL_TOPIC_CONFIG") copies++;
    return pass();
  });
  // a new topic on the master: the slave's next copy has one to write, and fails
  await master.createTopic({ topic: "Busy21", readQueueNums: 4, writeQueueNums: 4 });
  await waitFor(() => warnings.includes("config sync from master failed"), 10_000, "the copy failed");
  const failedAt = copies;
  // a busy master: each send gives the slave a transfer at once
  const transfers = client.status.transfers;
  for (let i = 0; i < 100; i++) await send(master, "Busy21", `m-${i}`, i % 4);
  await waitFor(() => client.status.offset === master.store.maxPhyOffset, 10_000, "the slave caught up");
  assert.ok(client.status.transfers - transfers >= 20, `${client.status.transfers - transfers} transfers`);
  assert.ok(copies - failedAt <= 1, `${copies - failedAt} config copies during ${client.status.transfers - transfers} transfers`);
  // writable again: the copy is tried again after its backoff, with no new config version to trigger it
  restoreAsks();
  slave.ctx.topics.createOrUpdate = createOrUpdate;
  await waitFor(() => slave.ctx.topics.get("Busy21") !== undefined, 15_000, "the copy retried");
  await closeBroker(slave);
  await closeBroker(master);
});
