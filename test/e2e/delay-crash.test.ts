/**
 * A broker killed with `kill -9` while delayed messages wait, then restarted on the same store,
 * delivers each waiting message exactly once more.
 *
 * What "exactly once more" means here: the scheduler advances a level's progress only after the
 * re-stored messages are on disk, and writes delayOffset.json shortly after each delivery batch.
 * So a message already delivered *and* recorded in delayOffset.json before the crash is not
 * delivered again, and every message still waiting at the crash is delivered once after the
 * restart, not before it is due. (A message re-stored in the few milliseconds between its put and
 * the progress write would be delivered twice: at-least-once, never lost. The test waits for the
 * progress file before killing, so it expects no duplicate at all.)
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { readDelayOffsets } from "../../actors/broker/scheduler.ts";
import { Admin, Producer } from "../../actors/client/index.ts";
import { MessageStore } from "../../store/index.ts";
import { decodeRecords, type MessageExt } from "../../transport/messageRecord.ts";
import { SCHEDULE_TOPIC } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { killServer, type ServerChild, spawnServer, stopServer } from "./fixtures/children.ts";

/** Level 1 is delivered before the crash; levels 2 and 3 wait through it. */
const LEVEL_MS = [200, 4_000, 5_000];
const LEVELS = LEVEL_MS.map((ms) => `${ms}ms`).join(" ");
const PER_LEVEL = 10;

function allMessages(store: MessageStore, topic: string, queues: number): MessageExt[] {
  const out: MessageExt[] = [];
  for (let q = 0; q < queues; q++) {
    for (let o = store.getMinOffset(topic, q); o < store.getMaxOffset(topic, q); ) {
      const r = store.getMessage("check", topic, q, o, 32);
      for (const b of r.buffers) out.push(...decodeRecords(b, "delay-crash"));
      if (r.nextBeginOffset <= o) break;
      o = r.nextBeginOffset;
    }
  }
  return out;
}

test("kill -9 while delayed messages wait: after a restart each is delivered exactly once, none early, none of the already delivered again", async () => {
  const { dir, cleanup } = await tempDir("actormq-delay-crash-");
  const storeDir = path.join(dir, "broker");
  const offsetFile = path.join(storeDir, "config", "delayOffset.json");
  const ns = await spawnServer("nameserver", { listen: EPHEMERAL, scanIntervalMs: 100 });
  const brokerOpts = {
    brokerName: "delay-crash",
    listen: EPHEMERAL,
    nameservers: [ns.address],
    storeDir,
    flush: "sync",
    messageDelayLevel: LEVELS,
    registerIntervalMs: 300,
  };
  let broker: ServerChild = await spawnServer("broker", brokerOpts);
  const producer = await Producer.start({ group: "delay-crash-pg", nameservers: [ns.address] });
  const admin = await Admin.start({ nameservers: [ns.address] });
  try {
    await admin.createTopic({ topic: "CrashDelayed", readQueueNums: 2, writeQueueNums: 2 });
    const levelOf = new Map<string, number>();
    for (let level = 1; level <= 3; level++) {
      const sends = Array.from({ length: PER_LEVEL }, (_, i) =>
        producer.send({ topic: "CrashDelayed", body: `L${level}-${i}`, delayLevel: level }),
      );
      for (const r of await Promise.all(sends)) levelOf.set(r.msgId, level);
    }
    // level 1 delivered and its progress on disk; levels 2 and 3 still waiting
    await waitFor(() => readDelayOffsets(offsetFile, 3)[0] === PER_LEVEL, 10_000, "level 1 delivered and recorded");
    const before = readDelayOffsets(offsetFile, 3);
    assert.deepEqual(before.slice(1), [0, 0], "levels 2 and 3 still wait at the crash");

    await killServer(broker);
    broker = await spawnServer("broker", brokerOpts);
    await waitFor(
      () => {
        const p = readDelayOffsets(offsetFile, 3);
        return p[1] === PER_LEVEL && p[2] === PER_LEVEL;
      },
      20_000,
      "levels 2 and 3 delivered after the restart",
    );
    assert.equal(await stopServer(broker), 0);

    const store = await MessageStore.open({ dir: storeDir, messageDelayLevel: LEVELS });
    try {
      const delivered = allMessages(store, "CrashDelayed", 2);
      const scheduled = new Map<string, MessageExt>();
      for (const m of allMessages(store, SCHEDULE_TOPIC, 3)) scheduled.set(m.msgId, m);
      const counts = new Map<string, number>();
      for (const m of delivered) counts.set(m.msgId, (counts.get(m.msgId) ?? 0) + 1);
      assert.equal(counts.size, 3 * PER_LEVEL, "every message delivered");
      for (const [msgId, n] of counts) assert.equal(n, 1, `message ${msgId} (level ${levelOf.get(msgId)}) delivered ${n} times`);
      for (const m of delivered) {
        const level = levelOf.get(m.msgId)!;
        const s = scheduled.get(m.msgId)!;
        assert.ok(s, `the scheduled record of ${m.msgId} exists`);
        const dueAt = s.storeTimestamp + LEVEL_MS[level - 1]!;
        assert.ok(m.storeTimestamp >= dueAt, `level ${level} message delivered ${dueAt - m.storeTimestamp} ms early`);
      }
    } finally {
      await store.close();
    }
  } finally {
    await producer.close();
    await admin.close();
    await stopServer(broker);
    await stopServer(ns);
    await cleanup();
  }
});
