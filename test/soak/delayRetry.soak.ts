/**
 * Soak: many delayed messages (short custom delay levels) and a listener that fails a share of
 * them, across kill -9 restarts of the broker (a child process, sync flush, same address and store).
 *
 * Each message carries its rule in its body: it fails while `reconsumeTimes < f` (f = 0, 1 or 2)
 * or always. With maxReconsumeTimes 2 the rules say: a message with f <= 2 is consumed, every
 * successful delivery having reconsumeTimes exactly f, and never reaches the DLQ; a message that
 * always fails is delivered (and fails) at reconsumeTimes 0, 1 and 2, lands in `%DLQ%<group>`
 * with reconsumeTimes above 2, and is never consumed successfully. No delayed message is
 * delivered before its level's delay, no retry before its retry level's delay (or the client's
 * local re-consume delay when the send-back could not reach the broker).
 * Length: SOAK_MINUTES (default 2); seed: SOAK_SEED (printed).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, type MessageExt, Producer, PushConsumer, type SendResult } from "../../index.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killChild, pause, type ServerProcess, soakDurationMs, soakRandom, spawnServer, stopChild } from "./fixtures/soakProcesses.ts";

const TOPIC = "SoakDelayRetry";
const GROUP = "soak-delay-cg";
const DLQ = `%DLQ%${GROUP}`;
const MAX_RECONSUME_TIMES = 2;
/** 18 levels 250 ms apart: level n waits n x 250 ms (retries use levels 3 + reconsumeTimes). */
const LEVEL_STEP_MS = 250;
const LEVELS = Array.from({ length: 18 }, (_, i) => `${(i + 1) * LEVEL_STEP_MS}ms`).join(" ");
const levelMs = (level: number) => level * LEVEL_STEP_MS;
/** Local re-consume delay when a send-back fails (the broker is down). */
const RECONSUME_LATER_DELAY_MS = 500;
/** Messages a second the producer aims at. */
const RATE = 40;
/** Highest delay level the producer uses. */
const MAX_SEND_LEVEL = 8;
/** Random uptime of the broker between kill -9 restarts. */
const UPTIME_MS: [number, number] = [20_000, 40_000];
const DRAIN_TIMEOUT_MS = 120_000;
/** The rule "fails always" (any value above MAX_RECONSUME_TIMES, written as a plain digit in the body). */
const ALWAYS = 9;

interface Rule {
  /** failures before success, or ALWAYS */
  f: number;
  /** delay level sent with (0 = none) */
  level: number;
}

interface Seen {
  at: number;
  reconsumeTimes: number;
  ok: boolean;
  bornTimestamp: number;
  /** where it was read: topic, queue id and offset (two stored copies differ here, a repeated delivery does not) */
  from: string;
}

/** Body `d-<seq>-<f>-<level>`: the listener reads the rule from the message itself. */
function ruleOf(body: string): Rule {
  const [, , f, level] = body.split("-");
  return { f: Number(f), level: Number(level) };
}

test("delayed messages and failing listeners across broker kill -9 restarts: each message consumed or dead-lettered exactly as the retry rules say, none early", {
  timeout: soakDurationMs() + 10 * 60_000,
}, async (t) => {
  const durationMs = soakDurationMs();
  const rnd = soakRandom();
  t.diagnostic(`duration ${durationMs} ms, SOAK_SEED=${rnd.seed}`);
  const { dir, cleanup } = await tempDir("actormq-soak-delay-");
  const servers: ServerProcess[] = [];
  let producer: Producer | undefined;
  let consumer: PushConsumer | undefined;
  let dlqReader: PushConsumer | undefined;
  let admin: Admin | undefined;
  t.after(async () => {
    await dlqReader?.close().catch(() => undefined);
    await consumer?.close().catch(() => undefined);
    await producer?.close().catch(() => undefined);
    await admin?.close().catch(() => undefined);
    for (const s of servers.reverse()) await stopChild(s.child, s.exited);
    await cleanup();
  });

  const ns = await spawnServer("nameserver", { listen: EPHEMERAL, scanIntervalMs: 200 });
  servers.push(ns);
  const brokerOpts = (listen: string) => ({
    brokerName: "soak-delay",
    listen,
    nameservers: [ns.address],
    storeDir: path.join(dir, "broker"),
    flush: "sync",
    messageDelayLevel: LEVELS,
    registerIntervalMs: 500,
  });
  let broker = await spawnServer("broker", brokerOpts(EPHEMERAL));
  servers.push(broker);
  const brokerAddress = broker.address;

  admin = await Admin.start({ nameservers: [ns.address] });
  await admin.createTopic({ topic: TOPIC, readQueueNums: 4, writeQueueNums: 4 });
  producer = await Producer.start({ group: "soak-delay-pg", nameservers: [ns.address], pollNameServerIntervalMs: 500 });

  const seen = new Map<string, Seen[]>();
  const dead = new Map<string, MessageExt[]>();
  const consumeOptions = {
    nameservers: [ns.address],
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET" as const,
    pollNameServerIntervalMs: 500,
    heartbeatBrokerIntervalMs: 1000,
    persistConsumerOffsetIntervalMs: 1000,
  };
  consumer = await PushConsumer.start({
    ...consumeOptions,
    group: GROUP,
    subscriptions: { [TOPIC]: "*" },
    maxReconsumeTimes: MAX_RECONSUME_TIMES,
    reconsumeLaterDelayMs: RECONSUME_LATER_DELAY_MS,
    listener: async (msgs) => {
      const at = Date.now();
      let failed = false;
      for (const m of msgs) {
        const body = m.body.toString();
        const { f } = ruleOf(body);
        const ok = f !== ALWAYS && m.reconsumeTimes >= f;
        failed ||= !ok;
        const list = seen.get(body) ?? [];
        list.push({
          at,
          reconsumeTimes: m.reconsumeTimes,
          ok,
          bornTimestamp: m.bornTimestamp,
          from: `${m.topic}:${m.queueId}@${m.queueOffset}`,
        });
        seen.set(body, list);
      }
      return failed ? "RECONSUME_LATER" : "CONSUME_SUCCESS";
    },
  });
  dlqReader = await PushConsumer.start({
    ...consumeOptions,
    group: "soak-delay-dlq-reader",
    subscriptions: { [DLQ]: "*" },
    listener: async (msgs) => {
      for (const m of msgs) {
        const body = m.body.toString();
        dead.set(body, [...(dead.get(body) ?? []), m]);
      }
      return "CONSUME_SUCCESS";
    },
  });

  const acked = new Set<string>();
  const sendStats = { delayed: 0, immediate: 0, failed: 0, notOk: 0 };
  const note = (bodies: string[], r: PromiseSettledResult<SendResult>) => {
    if (r.status === "rejected") sendStats.failed += bodies.length;
    else if (r.value.status !== "SEND_OK") sendStats.notOk += bodies.length;
    else for (const b of bodies) acked.add(b);
  };
  const pickF = () => {
    const r = rnd.next();
    return r < 0.7 ? 0 : r < 0.8 ? 1 : r < 0.9 ? 2 : ALWAYS;
  };
  const runStart = Date.now();
  const deadline = runStart + durationMs;
  const maxMessages = Math.ceil((RATE * durationMs) / 1000);
  const production = (async () => {
    let seq = 0;
    while (Date.now() < deadline && seq < maxMessages) {
      // a round: 6 delayed single sends and a batch of 4 undelayed messages
      const delayed = Array.from({ length: 6 }, () => {
        const level = rnd.between(1, MAX_SEND_LEVEL);
        return { topic: TOPIC, body: `d-${seq++}-${pickF()}-${level}`, delayLevel: level, keys: `k${seq}` };
      });
      const batch = Array.from({ length: 4 }, () => ({ topic: TOPIC, body: `d-${seq++}-${pickF()}-0`, keys: `k${seq}` }));
      const [rb, ...rs] = await Promise.allSettled([producer!.sendBatch(batch), ...delayed.map((m) => producer!.send(m))]);
      note(
        batch.map((m) => m.body),
        rb!,
      );
      for (const [i, r] of rs.entries()) note([delayed[i]!.body], r);
      sendStats.delayed += delayed.length;
      sendStats.immediate += batch.length;
      const due = runStart + (seq / RATE) * 1000;
      if (due > Date.now()) await pause(due - Date.now());
    }
  })();

  const restarts: { n: number; at: number; readyAfterMs: number; mode: unknown }[] = [];
  // the first kill lands in the first half of the run, so every run has at least one restart
  let uptime = rnd.between(Math.min(UPTIME_MS[0], durationMs / 4), Math.min(UPTIME_MS[1], durationMs / 2));
  while (Date.now() + uptime < deadline) {
    await pause(uptime);
    await killChild(broker.child, broker.exited);
    const t0 = Date.now();
    servers.pop();
    broker = await spawnServer("broker", brokerOpts(brokerAddress));
    servers.push(broker);
    restarts.push({
      n: restarts.length + 1,
      at: t0 - runStart,
      readyAfterMs: Date.now() - t0,
      mode: broker.lines.find((l) => l.msg === "store recovered")?.mode,
    });
    uptime = rnd.between(...UPTIME_MS);
  }
  await production;

  const settled = (body: string) => {
    const { f } = ruleOf(body);
    return f === ALWAYS ? dead.has(body) : (seen.get(body) ?? []).some((s) => s.ok);
  };
  await waitFor(() => [...acked].every(settled), DRAIN_TIMEOUT_MS, "every acknowledged message consumed or dead-lettered", 250).catch(
    () => undefined,
  );

  const problems: string[] = [];
  let duplicates = 0;
  let deadCount = 0;
  /** A few duplicated messages with their deliveries (ms into the run, reconsumeTimes, ok), for the report. */
  const duplicateExamples: string[] = [];
  const describe = (body: string, ds: Seen[]) =>
    `${body}: ${ds.map((d) => `${d.at - runStart}ms/r${d.reconsumeTimes}/${d.ok ? "ok" : "fail"}/${d.from}`).join(" ")}`;
  for (const body of acked) {
    const { f, level } = ruleOf(body);
    const ds = seen.get(body) ?? [];
    const oks = ds.filter((d) => d.ok);
    const first = ds.find((d) => d.reconsumeTimes === 0);
    if (level > 0 && first && first.at < first.bornTimestamp + levelMs(level)) {
      problems.push(`${body}: delivered ${first.bornTimestamp + levelMs(level) - first.at} ms before its level ${level} delay`);
    }
    for (const d of ds.filter((x) => x.reconsumeTimes > 0)) {
      const wait = Math.min(levelMs(3 + d.reconsumeTimes - 1), RECONSUME_LATER_DELAY_MS);
      if (!ds.some((p) => p.reconsumeTimes === d.reconsumeTimes - 1 && p.at + wait <= d.at)) {
        problems.push(
          `${body}: retry with reconsumeTimes ${d.reconsumeTimes} came less than ${wait} ms after a delivery with ${d.reconsumeTimes - 1}`,
        );
      }
    }
    if (f === ALWAYS) {
      const copies = dead.get(body) ?? [];
      if (copies.length === 0) problems.push(`${body}: always fails but is not in ${DLQ}`);
      if (oks.length > 0) problems.push(`${body}: always fails but was consumed successfully`);
      for (let k = 0; k <= MAX_RECONSUME_TIMES; k++) {
        if (copies.length > 0 && !ds.some((d) => d.reconsumeTimes === k))
          problems.push(`${body}: dead-lettered without a delivery at reconsumeTimes ${k}`);
      }
      for (const c of copies) {
        if (c.reconsumeTimes <= MAX_RECONSUME_TIMES)
          problems.push(`${body}: in ${DLQ} with reconsumeTimes ${c.reconsumeTimes}, not above ${MAX_RECONSUME_TIMES}`);
      }
      deadCount += copies.length > 0 ? 1 : 0;
      duplicates += Math.max(0, copies.length - 1);
      if (copies.length > 1 && duplicateExamples.length < 5) duplicateExamples.push(`${describe(body, ds)} (${copies.length} DLQ copies)`);
    } else {
      if (oks.length === 0)
        problems.push(
          `${body}: fails ${f} times then succeeds, but was never consumed successfully (deliveries at reconsumeTimes ${ds.map((d) => d.reconsumeTimes).join(",")})`,
        );
      for (const d of oks)
        if (d.reconsumeTimes !== f) problems.push(`${body}: consumed at reconsumeTimes ${d.reconsumeTimes}, expected ${f}`);
      if (dead.has(body)) problems.push(`${body}: fails ${f} <= ${MAX_RECONSUME_TIMES} times but is in ${DLQ}`);
      duplicates += Math.max(0, oks.length - 1);
      if (oks.length > 1 && duplicateExamples.length < 5) duplicateExamples.push(describe(body, ds));
    }
  }

  t.diagnostic(
    `sent ${JSON.stringify(sendStats)}; acknowledged ${acked.size}; dead-lettered ${deadCount}; deliveries ${[...seen.values()].reduce((n, l) => n + l.length, 0)}`,
  );
  t.diagnostic(`restarts: ${JSON.stringify(restarts)}; duplicate successes or DLQ copies: ${duplicates}`);
  if (duplicateExamples.length > 0)
    t.diagnostic(`duplicated (ms into the run/reconsumeTimes/result/topic:queue@offset): ${duplicateExamples.join("; ")}`);

  assert.ok(restarts.length >= 1, "the broker was restarted at least once");
  assert.ok(
    restarts.every((r) => r.mode === "abnormal"),
    `every restart after kill -9 recovered in abnormal mode: ${JSON.stringify(restarts)}`,
  );
  assert.ok(acked.size > 0 && deadCount > 0, "messages were acknowledged and some dead-lettered");
  assert.deepEqual(problems.slice(0, 30), [], `${problems.length} messages broke the delay/retry rules (first 30 shown)`);
  await dlqReader.close();
  dlqReader = undefined;
  await consumer.close();
  consumer = undefined;
  assert.equal(await stopChild(broker.child, broker.exited), 0, "broker closed cleanly");
});
