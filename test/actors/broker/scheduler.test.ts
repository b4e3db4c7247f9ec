/**
 * The delay-level delivery service (reference §13) over a real store: due messages move to their
 * real topic and queue without DELAY, never before they are due; progress survives a restart
 * through delayOffset.json; a failed re-store is retried.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, test } from "node:test";
import pino from "pino";
import { scheduleTarget } from "../../../actors/broker/delayRouting.ts";
import { type DelayDeliveryDeps, DelayDeliveryService, readDelayOffsets, timeUpBatch } from "../../../actors/broker/scheduler.ts";
import { MessageStore, type PutBatch, type PutResult } from "../../../store/index.ts";
import { decodeRecords, type MessageExt } from "../../../transport/messageRecord.ts";
import { MessageConst, MQError } from "../../../transport/protocol.ts";
import { tempDir, waitFor } from "../../helpers.ts";

const LEVEL_MS = [150, 300, 600];
const LEVELS = LEVEL_MS.map((ms) => `${ms}ms`).join(" ");

let dir: string;
let store: MessageStore;
let cleanup: () => Promise<void>;
const services: DelayDeliveryService[] = [];

beforeEach(async () => {
  ({ dir, cleanup } = await tempDir("actormq-scheduler-"));
  store = await MessageStore.open({ dir, flush: "async", messageDelayLevel: LEVELS });
});

afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
  await store.close();
  await cleanup();
});

const offsetFile = () => path.join(dir, "config", "delayOffset.json");

function startService(overrides: Partial<DelayDeliveryDeps> = {}): DelayDeliveryService {
  let service: DelayDeliveryService | undefined;
  const deps: DelayDeliveryDeps = {
    store,
    put: (b) => store.putMessages(b),
    levels: LEVEL_MS,
    brokerName: "b1",
    offsetFile: offsetFile(),
    persistIntervalMs: 10_000,
    logger: pino({ level: "silent" }),
    // the actor delivers TICK on its own turn; so does this
    wake: (level) => setImmediate(() => service?.tick(level)),
    subscribeArrivals: (l) => store.onArrival(l),
    ...overrides,
  };
  service = new DelayDeliveryService(deps);
  services.push(service);
  service.start();
  return service;
}

/** Stores a message with a delay level the way the send path does; returns its schedule store time. */
async function sendDelayed(level: number, body: string, realQueue = 0, maxLevel = LEVEL_MS.length): Promise<number> {
  const t = scheduleTarget(
    "Real",
    realQueue,
    { [MessageConst.DELAY]: String(level), [MessageConst.UNIQ_KEY]: body, [MessageConst.TAGS]: "T" },
    maxLevel,
  )!;
  const r = await store.putMessage({
    topic: t.topic,
    queueId: t.queueId,
    body: Buffer.from(body),
    properties: t.properties,
    bornTimestamp: Date.now(),
    bornHost: "10.0.0.2:1",
    reconsumeTimes: 2,
  });
  const rec = store.viewMessage(r.commitLogOffset)!;
  return decodeRecords(rec, "b1")[0]!.storeTimestamp;
}

function realMessages(queueId = 0): MessageExt[] {
  const out: MessageExt[] = [];
  for (let o = 0; o < store.getMaxOffset("Real", queueId); o++) {
    const r = store.getMessage("t", "Real", queueId, o, 1);
    if (r.status === "FOUND") out.push(decodeRecords(r.buffers[0]!, "b1")[0]!);
  }
  return out;
}

test("due messages move to REAL_TOPIC / REAL_QID without DELAY, each level at its own time, never early", async () => {
  startService();
  const dueAt = new Map<string, number>();
  for (const [level, body, q] of [
    [3, "c", 1],
    [1, "a", 0],
    [2, "b", 1],
    [1, "a2", 0],
  ] as const) {
    const storeTs = await sendDelayed(level, body, q);
    dueAt.set(body, storeTs + LEVEL_MS[level - 1]!);
  }
  assert.equal(store.getMaxOffset("Real", 0) + store.getMaxOffset("Real", 1), 0, "nothing is visible before it is due");
  await waitFor(() => store.getMaxOffset("Real", 0) + store.getMaxOffset("Real", 1) === 4, 5_000, "all four delivered");
  const got = [...realMessages(0), ...realMessages(1)];
  assert.deepEqual(got.map((m) => m.body.toString()).sort(), ["a", "a2", "b", "c"]);
  for (const m of got) {
    const body = m.body.toString();
    assert.equal(m.queueId, body.startsWith("a") ? 0 : 1);
    assert.ok(m.storeTimestamp >= dueAt.get(body)!, `${body} stored at ${m.storeTimestamp}, due ${dueAt.get(body)}`);
    assert.ok(m.storeTimestamp - dueAt.get(body)! < 200, `${body} late by ${m.storeTimestamp - dueAt.get(body)!} ms`);
    assert.equal(m.properties[MessageConst.DELAY], undefined);
    assert.equal(m.properties[MessageConst.REAL_TOPIC], "Real");
    assert.equal(m.properties[MessageConst.UNIQ_KEY], body);
    assert.equal(m.tags, "T");
    assert.equal(m.reconsumeTimes, 2, "reconsumeTimes kept");
    assert.equal(m.bornHost, "10.0.0.2:1");
  }
  // level 1's two messages keep their order
  assert.deepEqual(
    realMessages(0).map((m) => m.body.toString()),
    ["a", "a2"],
  );
});

test("progress is persisted; a restarted service neither repeats delivered messages nor misses waiting ones", async () => {
  const first = startService();
  await sendDelayed(1, "m1");
  await sendDelayed(1, "m2");
  await waitFor(() => store.getMaxOffset("Real", 0) === 2, 5_000, "first two delivered");
  await waitFor(() => readDelayOffsets(offsetFile(), 3)[0] === 2, 2_000, "progress written after the batch");
  await sendDelayed(3, "m3"); // waits 600 ms
  await first.close();
  services.splice(services.indexOf(first), 1);
  assert.deepEqual(readDelayOffsets(offsetFile(), 3), [2, 0, 0]);
  assert.equal(store.getMaxOffset("Real", 0), 2, "m3 not delivered while nothing ran");

  startService();
  await waitFor(() => store.getMaxOffset("Real", 0) === 3, 5_000, "m3 delivered after the restart");
  assert.deepEqual(
    realMessages().map((m) => m.body.toString()),
    ["m1", "m2", "m3"],
  );
});

test("a stored offset beyond the queue is corrected to its end; a damaged file starts from 0", async () => {
  fs.mkdirSync(path.dirname(offsetFile()), { recursive: true });
  fs.writeFileSync(offsetFile(), JSON.stringify({ offsetTable: { "1": 99, "2": -4, "3": "x" } }));
  assert.deepEqual(readDelayOffsets(offsetFile(), 3), [99, 0, 0]);
  await sendDelayed(1, "late-1");
  const s = startService();
  assert.deepEqual(s.progress(), [1, 0, 0], "offset 99 corrected to the queue's end (1)");
  await sendDelayed(1, "late-2");
  await waitFor(() => store.getMaxOffset("Real", 0) === 1, 5_000, "the new message delivered");
  assert.equal(realMessages()[0]!.body.toString(), "late-2");

  fs.writeFileSync(offsetFile(), "{ not json");
  fs.rmSync(`${offsetFile()}.bak`, { force: true });
  assert.deepEqual(readDelayOffsets(offsetFile(), 3), [0, 0, 0]);
});

test("a level whose offset is not valid takes its .bak's, rather than delivering its level again from the oldest message", () => {
  fs.mkdirSync(path.dirname(offsetFile()), { recursive: true });
  fs.writeFileSync(offsetFile(), JSON.stringify({ offsetTable: { "1": "NaN", "2": 5, "3": -1 } }));
  fs.writeFileSync(`${offsetFile()}.bak`, JSON.stringify({ offsetTable: { "1": 7, "2": 3, "3": "x" } }));
  // level 2's own value wins; level 3 has no valid one anywhere
  assert.deepEqual(readDelayOffsets(offsetFile(), 3), [7, 5, 0]);
});

test("progress of levels not configured now is kept, so configuring them again resumes there instead of re-delivering", async () => {
  // level 5's three messages were delivered by a broker with 5 levels, then it restarted with 3
  for (let i = 0; i < 3; i++) await sendDelayed(5, `old-${i}`, 0, 5);
  fs.mkdirSync(path.dirname(offsetFile()), { recursive: true });
  fs.writeFileSync(offsetFile(), JSON.stringify({ offsetTable: { "1": 0, "2": 0, "3": 0, "4": 0, "5": 3 } }));
  const stored = () => (JSON.parse(fs.readFileSync(offsetFile(), "utf8")) as { offsetTable: Record<string, number> }).offsetTable;
  const three = startService();
  await sendDelayed(1, "now");
  await waitFor(() => readDelayOffsets(offsetFile(), 3)[0] === 1, 5_000, "level 1's progress written");
  assert.deepEqual(stored(), { "1": 1, "2": 0, "3": 0, "4": 0, "5": 3 }, "levels 4 and 5 kept by the periodic write");
  assert.deepEqual(three.offsetTable(), { "1": 1, "2": 0, "3": 0, "4": 0, "5": 3 }, "and in GET_ALL_DELAY_OFFSET's answer");
  await three.close();
  services.splice(services.indexOf(three), 1);
  assert.deepEqual(stored(), { "1": 1, "2": 0, "3": 0, "4": 0, "5": 3 }, "and by the write at close");

  const five = startService({ levels: [...LEVEL_MS, 150, 150] });
  assert.equal(five.progress()[4], 3, "level 5 resumes after its delivered messages");
  // level 5 delivers in order: a reset level would re-deliver old-0..2 before this one
  await sendDelayed(5, "new", 0, 5);
  await waitFor(() => five.progress()[4] === 4, 5_000, "level 5's new message delivered");
  assert.deepEqual(
    realMessages().map((m) => m.body.toString()),
    ["now", "new"],
  );
});

test("messages waiting at a level not configured now are reported at start, and delivered once the level is configured again", async () => {
  // a broker with 5 levels stored them, then restarted with 3: RocketMQ leaves them waiting too
  for (let i = 0; i < 2; i++) await sendDelayed(5, `waiting-${i}`, 0, 5);
  await sendDelayed(4, "waiting-4", 0, 5);
  const warnings: { fields: Record<string, unknown>; msg: string }[] = [];
  const logger = {
    warn: (fields: Record<string, unknown>, msg: string) => warnings.push({ fields, msg }),
    error: () => {},
  } as unknown as DelayDeliveryDeps["logger"];
  const three = startService({ logger });
  assert.deepEqual(warnings.map((w) => [w.fields.delayLevel, w.fields.waiting]).sort(), [
    [4, 1],
    [5, 2],
  ]);
  const five = warnings.find((w) => w.fields.delayLevel === 5)!;
  assert.match(
    five.msg,
    /2 delayed messages wait at delay level 5, which messageDelayLevel \(3 levels\) does not configure.*at least 5 levels/,
  );
  await three.close();
  services.splice(services.indexOf(three), 1);
  assert.equal(store.getMaxOffset("Real", 0), 0, "nothing delivered while the levels were not configured");

  const all = startService({ levels: [...LEVEL_MS, 150, 150] });
  await waitFor(() => store.getMaxOffset("Real", 0) === 3, 5_000, "the waiting messages delivered");
  assert.deepEqual(
    realMessages()
      .map((m) => m.body.toString())
      .sort(),
    ["waiting-0", "waiting-1", "waiting-4"],
  );
  await all.close();
  services.splice(services.indexOf(all), 1);
  // delivered: a restart with 3 levels has nothing to report
  warnings.length = 0;
  startService({ logger });
  assert.deepEqual(warnings, []);
});

test("a failed re-store is retried, and the message is delivered once", async () => {
  let failures = 1;
  const put = async (b: PutBatch): Promise<PutResult> => {
    if (failures > 0) {
      failures--;
      throw new MQError("SYSTEM_BUSY", "busy");
    }
    return store.putMessages(b);
  };
  const s = startService({ put });
  await sendDelayed(1, "retry-me");
  await waitFor(() => store.getMaxOffset("Real", 0) === 1, 5_000, "delivered after the retry");
  assert.equal(s.stats.putFailures, 1);
  await waitFor(() => s.progress()[0] === 1, 2_000, "progress moved past it");
  assert.equal(store.getMaxOffset("Real", 0), 1);
});

test("a re-store answered FLUSH_DISK_TIMEOUT (stored, its flush late) is not put again: a slow disk makes no duplicates", async () => {
  let slow = 1;
  const put = async (b: PutBatch): Promise<PutResult> => {
    const r = await store.putMessages(b);
    if (slow > 0) {
      slow--;
      return { ...r, status: "FLUSH_DISK_TIMEOUT" };
    }
    return r;
  };
  const s = startService({ put });
  await sendDelayed(1, "slow-disk");
  await sendDelayed(1, "after-it");
  await waitFor(() => s.progress()[0] === 2, 5_000, "progress moved past both");
  assert.deepEqual(
    realMessages().map((m) => m.body.toString()),
    ["slow-disk", "after-it"],
  );
  assert.equal(s.stats.putFailures, 0);
});

test("a level longer than Node's timer limit (2^31-1 ms) waits without its timer firing over and over", async () => {
  const DAY_MS = 24 * 3600_000;
  let wakes = 0;
  let service: DelayDeliveryService | undefined;
  service = startService({
    levels: [150, 300, 30 * DAY_MS],
    wake: (level) => {
      wakes++;
      setImmediate(() => service?.tick(level));
    },
  });
  await sendDelayed(3, "next month");
  await waitFor(() => wakes > 0, 2_000, "the level looked at its new head");
  await new Promise((r) => setTimeout(r, 300)); // a timer armed past the limit fires after 1 ms, every ms
  assert.equal(wakes, 1, "the level's timer did not fire early");
  assert.deepEqual(service.progress(), [0, 0, 0], "nothing delivered");
  assert.equal(store.getMaxOffset("Real", 0), 0);
});

test("timeUpBatch drops DELAY, keeps the rest, and refuses a record without REAL_TOPIC", () => {
  const m = {
    properties: { [MessageConst.DELAY]: "2", [MessageConst.REAL_TOPIC]: "T", [MessageConst.REAL_QUEUE_ID]: "3", KEYS: "k" },
    body: Buffer.from("x"),
    flag: 1,
    bornTimestamp: 5,
    bornHost: "1.2.3.4:5",
    sysFlag: 0,
    reconsumeTimes: 4,
  } as unknown as MessageExt;
  const b = timeUpBatch(m)!;
  assert.equal(b.topic, "T");
  assert.equal(b.queueId, 3);
  assert.equal(b.reconsumeTimes, 4);
  assert.ok(!b.body.includes(Buffer.from("DELAY")));
  assert.ok(b.body.includes(Buffer.from("KEYS")));
  assert.equal(timeUpBatch({ ...m, properties: { [MessageConst.DELAY]: "2" } } as MessageExt), null);
});
