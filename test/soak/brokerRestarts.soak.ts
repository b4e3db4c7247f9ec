/**
 * Soak: one of two brokers (child processes, sync flush) is killed with kill -9 and restarted on
 * the same address and store, again and again, while a producer sends and a push consumer
 * consumes.
 *
 * Each restart: the broker is serving again within RESTART_BOUND_MS, its "store recovered" line
 * says `abnormal` (the abort marker of the killed run), reports no damaged region, and the
 * recovered log ends past every record this broker acknowledged before the kill (so no
 * acknowledged record was cut), and what it reports truncated is no more than a torn tail. At the end every acknowledged message was consumed.
 * Length: SOAK_MINUTES (default 2); seed of the kill timing: SOAK_SEED (printed).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, type SendResult } from "../../index.ts";
import { parseOffsetMsgId } from "../../transport/messageRecord.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killChild, pause, type ServerProcess, soakDurationMs, soakRandom, spawnServer, stopChild } from "./fixtures/soakProcesses.ts";

const TOPIC = "SoakRestarts";
const GROUP = "soak-restarts-cg";
/** Messages a second the producer aims at. */
const RATE = 200;
const BATCH_SIZE = 10;
const SINGLES_PER_ROUND = 10;
/** Random uptime of the restarted broker before the next kill -9. */
const UPTIME_MS: [number, number] = [3_000, 9_000];
/** A restarted broker must print its ready line within this bound. */
const RESTART_BOUND_MS = 20_000;
const DRAIN_TIMEOUT_MS = 120_000;
/**
 * Most bytes a recovery after kill -9 may cut: a torn tail is at most the appends in flight at the
 * kill (sync flush, so nothing acknowledged), far below a segment. The unused, pre-allocated rest
 * of the last segment is not "cut".
 */
const TORN_TAIL_BOUND_BYTES = 16 * 1024 * 1024;

interface Restart {
  n: number;
  readyAfterMs: number;
  mode: unknown;
  endOffset: number;
  truncatedBytes: unknown;
  damagedRegions: unknown;
  ackedEndBeforeKill: number;
}

test("kill -9 and restart of a broker, repeatedly, while producing and consuming: each recovery is abnormal, undamaged, keeps every acknowledged record; every acknowledged message consumed", {
  timeout: soakDurationMs() + 10 * 60_000,
}, async (t) => {
  const durationMs = soakDurationMs();
  const rnd = soakRandom();
  t.diagnostic(`duration ${durationMs} ms, SOAK_SEED=${rnd.seed}`);
  const { dir, cleanup } = await tempDir("actormq-soak-restarts-");
  const servers: ServerProcess[] = [];
  let producer: Producer | undefined;
  let consumer: PushConsumer | undefined;
  let admin: Admin | undefined;
  t.after(async () => {
    await consumer?.close().catch(() => undefined);
    await producer?.close().catch(() => undefined);
    await admin?.close().catch(() => undefined);
    for (const s of servers.reverse()) await stopChild(s.child, s.exited);
    await cleanup();
  });

  const ns = await spawnServer("nameserver", { listen: EPHEMERAL, scanIntervalMs: 200 });
  servers.push(ns);
  const brokerOpts = (name: string, listen: string) => ({
    brokerName: name,
    listen,
    nameservers: [ns.address],
    storeDir: path.join(dir, name),
    flush: "sync",
    registerIntervalMs: 500,
    heartbeatTimeoutMs: 2000,
  });
  servers.push(await spawnServer("broker", brokerOpts("soak-a", EPHEMERAL)));
  let b = await spawnServer("broker", brokerOpts("soak-b", EPHEMERAL));
  servers.push(b);
  const bAddress = b.address;

  admin = await Admin.start({ nameservers: [ns.address] });
  await admin.createTopic({ topic: TOPIC, readQueueNums: 4, writeQueueNums: 4 });
  producer = await Producer.start({
    group: "soak-restarts-pg",
    nameservers: [ns.address],
    pollNameServerIntervalMs: 500,
    notAvailableDuration: [0, 0, 500, 1000, 1000, 1000, 2000],
  });
  const consumed = new Set<string>();
  let deliveries = 0;
  consumer = await PushConsumer.start({
    group: GROUP,
    nameservers: [ns.address],
    subscriptions: { [TOPIC]: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    pollNameServerIntervalMs: 500,
    heartbeatBrokerIntervalMs: 1000,
    persistConsumerOffsetIntervalMs: 1000,
    listener: async (msgs: MessageExt[]) => {
      deliveries += msgs.length;
      for (const m of msgs) consumed.add(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });

  const acked = new Set<string>();
  const sendStats = { notOk: 0, failed: 0, onB: 0 };
  /** highest commit-log offset + 1 of a record soak-b acknowledged in its current run */
  let ackedEndOnB = 0;
  const note = (bodies: string[], r: PromiseSettledResult<SendResult>) => {
    if (r.status === "rejected") {
      sendStats.failed += bodies.length;
      return;
    }
    if (r.value.status !== "SEND_OK") {
      sendStats.notOk += bodies.length;
      return;
    }
    for (const body of bodies) acked.add(body);
    if (r.value.queue.brokerName === "soak-b") {
      sendStats.onB += bodies.length;
      for (const id of r.value.offsetMsgId.split(",")) ackedEndOnB = Math.max(ackedEndOnB, parseOffsetMsgId(id).commitLogOffset + 1);
    }
  };
  const runStart = Date.now();
  const deadline = runStart + durationMs;
  const maxMessages = Math.ceil((RATE * durationMs) / 1000);
  const production = (async () => {
    let seq = 0;
    while (Date.now() < deadline && seq < maxMessages) {
      const batch = Array.from({ length: BATCH_SIZE }, () => ({ topic: TOPIC, body: `r-${seq++}`, keys: `k-${seq}` }));
      const singles = Array.from({ length: SINGLES_PER_ROUND }, () => ({ topic: TOPIC, body: `r-${seq++}`, keys: `k-${seq}` }));
      const [rb, ...rs] = await Promise.allSettled([producer!.sendBatch(batch), ...singles.map((m) => producer!.send(m))]);
      note(
        batch.map((m) => m.body),
        rb!,
      );
      for (const [i, r] of rs.entries()) note([singles[i]!.body], r);
      const due = runStart + (seq / RATE) * 1000;
      if (due > Date.now()) await pause(due - Date.now());
    }
  })();

  const restarts: Restart[] = [];
  const problems: string[] = [];
  /** the recovery line's figures, checked apart so a wrong report does not hide the recovery itself */
  const reportProblems: string[] = [];
  let previousEnd = 0;
  // kill -9 while at least the minimum uptime remains before the deadline, so the run ends with soak-b serving
  while (Date.now() + UPTIME_MS[0] < deadline) {
    await pause(Math.min(rnd.between(...UPTIME_MS), deadline - Date.now()));
    if (Date.now() >= deadline) break;
    await killChild(b.child, b.exited);
    const ackedEndBeforeKill = ackedEndOnB;
    ackedEndOnB = 0;
    const t0 = Date.now();
    servers.pop();
    b = await spawnServer("broker", brokerOpts("soak-b", bAddress));
    servers.push(b);
    const readyAfterMs = Date.now() - t0;
    const rec = b.lines.find((l) => l.msg === "store recovered");
    const r: Restart = {
      n: restarts.length + 1,
      readyAfterMs,
      mode: rec?.mode,
      endOffset: Number(rec?.endOffset ?? -1),
      truncatedBytes: rec?.truncatedBytes,
      damagedRegions: rec?.damagedRegions,
      ackedEndBeforeKill,
    };
    restarts.push(r);
    if (!rec) problems.push(`restart ${r.n}: no "store recovered" line`);
    if (readyAfterMs > RESTART_BOUND_MS) problems.push(`restart ${r.n}: serving after ${readyAfterMs} ms, above ${RESTART_BOUND_MS} ms`);
    if (r.mode !== "abnormal") problems.push(`restart ${r.n}: recovery mode ${String(r.mode)} after kill -9, expected abnormal`);
    if (typeof r.truncatedBytes !== "number" || r.truncatedBytes > TORN_TAIL_BOUND_BYTES) {
      reportProblems.push(
        `restart ${r.n}: recovery reports ${String(r.truncatedBytes)} bytes truncated, more than a torn tail (${TORN_TAIL_BOUND_BYTES})`,
      );
    }
    if (r.damagedRegions !== 0) problems.push(`restart ${r.n}: ${String(r.damagedRegions)} damaged regions after a plain kill -9`);
    if (r.endOffset < ackedEndBeforeKill)
      problems.push(`restart ${r.n}: log recovered to ${r.endOffset}, below acknowledged record end ${ackedEndBeforeKill}`);
    if (r.endOffset < previousEnd)
      problems.push(`restart ${r.n}: log recovered to ${r.endOffset}, below the previous recovery's ${previousEnd}`);
    previousEnd = Math.max(previousEnd, r.endOffset);
  }
  await production;

  const missing = () => [...acked].filter((body) => !consumed.has(body));
  await waitFor(() => missing().length === 0, DRAIN_TIMEOUT_MS, "every acknowledged message consumed", 250).catch(() => undefined);
  const lost = missing();

  t.diagnostic(
    `acknowledged ${acked.size} (${sendStats.onB} on soak-b), not acknowledged: ${sendStats.failed} failed, ${sendStats.notOk} not SEND_OK`,
  );
  t.diagnostic(`consumed ${consumed.size} distinct in ${deliveries} deliveries (${deliveries - consumed.size} re-deliveries)`);
  t.diagnostic(
    `restarts: ${restarts.length}, ready after ${restarts.map((r) => r.readyAfterMs).join("/")} ms, truncated bytes ${restarts.map((r) => String(r.truncatedBytes)).join("/")}`,
  );

  assert.ok(restarts.length >= 2, `the broker was restarted repeatedly (${restarts.length} times)`);
  assert.ok(sendStats.onB > 0, "soak-b acknowledged messages");
  await consumer.close();
  consumer = undefined;
  const exits: (number | null | "hung")[] = [];
  for (const s of servers.slice(1)) exits.push(await stopChild(s.child, s.exited));

  await t.test("every acknowledged message consumed", () => {
    assert.deepEqual(lost.slice(0, 20), [], `${lost.length} acknowledged messages never consumed (first 20 shown)`);
  });
  await t.test(
    "every restart: serving within the bound, abnormal recovery, no damaged region, log end past every acknowledged record",
    () => {
      assert.deepEqual(problems, []);
    },
  );
  await t.test("every recovery reports as truncated no more than a torn tail", () => {
    assert.deepEqual(reportProblems, []);
  });
  await t.test("brokers close cleanly at the end", () => {
    assert.deepEqual(exits, [0, 0]);
  });
});
