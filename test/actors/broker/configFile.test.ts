import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { ConfigFile } from "../../../actors/broker/configFile.ts";
import { ConsumerOffsetManager } from "../../../actors/broker/consumerOffsetManager.ts";
import { checkDelayOffsetFile } from "../../../actors/broker/scheduler.ts";
import { SubscriptionGroupManager } from "../../../actors/broker/subscriptionGroupManager.ts";
import { TopicConfigManager } from "../../../actors/broker/topicConfigManager.ts";
import { MQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../../helpers.ts";

// A file where the config directory should be makes every write fail (like EACCES or ENOSPC)
// until it is removed: a transient disk problem. The files already written go with the directory.
function blockConfigDir(dir: string): () => void {
  const p = path.join(dir, "config");
  rmSync(p, { recursive: true, force: true });
  writeFileSync(p, "not a directory");
  return () => rmSync(p);
}

test("ConfigFile: a failed write does not wedge later writes", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  let state = { v: 1 };
  const f = new ConfigFile(dir, "topics.json", () => state);
  const unblock = blockConfigDir(dir);
  await assert.rejects(f.persist(), /I\/O error while creating the directory .*config/);
  unblock();
  state = { v: 2 };
  await f.persist();
  assert.deepEqual(JSON.parse(readFileSync(f.path, "utf8")), { v: 2 });
});

test("ConfigFile: a persist made any number of microtasks after another resolves only once its state is on disk", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  // two requests of one frame are handled a microtask or a few apart: one of them can land after
  // the write loop's last check and before its promise settled
  for (let ticks = 0; ticks < 8; ticks++) {
    let state = { ticks, v: 1 };
    const f = new ConfigFile(dir, "topics.json", () => state);
    const first = f.persist();
    for (let i = 0; i < ticks; i++) await Promise.resolve();
    state = { ticks, v: 2 };
    await f.persist();
    assert.deepEqual(JSON.parse(readFileSync(f.path, "utf8")), state, `persist ${ticks} microtasks after the first: its state is on disk`);
    await first;
  }
});

test("TopicConfigManager: topics created during a failed write are written by the next change and by close", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { storeDir: dir, autoCreateTopic: true, defaultQueueNums: 4 };
  const m = await TopicConfigManager.load(opts);
  const unblock = blockConfigDir(dir);
  m.getOrAutoCreate("AutoCreatedDuringFailure"); // its background write fails
  await assert.rejects(m.createOrUpdate({ topicName: "CreatedDuringFailure", readQueueNums: 1, writeQueueNums: 1, perm: 6, order: false }));
  unblock();
  await m.createOrUpdate({ topicName: "CreatedLater", readQueueNums: 4, writeQueueNums: 4, perm: 6, order: false });
  const onDisk = Object.keys((await TopicConfigManager.load(opts)).all());
  for (const t of ["AutoCreatedDuringFailure", "CreatedDuringFailure", "CreatedLater"]) assert.ok(onDisk.includes(t), `${t} in ${onDisk}`);

  // a background write that fails while nothing else changes: close writes the table
  const unblock2 = blockConfigDir(dir);
  m.getOrAutoCreate("AutoCreatedBeforeClose");
  unblock2();
  await m.close();
  const again = Object.keys((await TopicConfigManager.load(opts)).all());
  assert.ok(again.includes("AutoCreatedBeforeClose"), `${again}`);
});

/** A logger that keeps what it is told: warnings in `lines`, errors in `errors`. */
function recordingLogger() {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  const errors: { fields: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    errors,
    warn: (fields: object, msg: string) => lines.push({ fields: fields as Record<string, unknown>, msg }),
    error: (fields: object, msg: string) => errors.push({ fields: fields as Record<string, unknown>, msg }),
  };
}

test("auto-created topics and groups whose background write fails are logged at error level with the file", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const logger = recordingLogger();
  const topics = await TopicConfigManager.load({ storeDir: dir, autoCreateTopic: true, defaultQueueNums: 4, logger });
  const groups = await SubscriptionGroupManager.load({ storeDir: dir, autoCreateSubscriptionGroup: true, logger });
  const unblock = blockConfigDir(dir);
  topics.getOrAutoCreate("AutoCreatedOnFullDisk");
  groups.findOrAutoCreate("auto-created-group");
  await waitFor(() => logger.errors.length === 2, 5000, "both failed writes logged");
  assert.deepEqual(
    logger.errors.map((e) => path.basename(e.fields.file as string)),
    ["topics.json", "subscriptionGroup.json"],
  );
  for (const e of logger.errors) assert.match(e.msg, /failed.*next change or close/);
  assert.deepEqual(logger.lines, [], "no warnings");
  unblock();
});

function writeConfig(dir: string, name: string, text: string): string {
  mkdirSync(path.join(dir, "config"), { recursive: true });
  const f = path.join(dir, "config", name);
  writeFileSync(f, text);
  return f;
}

const GOOD = { topicName: "Good", readQueueNums: 4, writeQueueNums: 4, perm: 6 };

test("TopicConfigManager: an invalid entry of topics.json is skipped with a warning naming file and topic, and the file is kept", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const text = JSON.stringify({
    topicConfigTable: { Good: GOOD, Edited: { topicName: "Edited", readQueueNums: "16", writeQueueNums: 16, perm: 6 } },
    dataVersion: 3,
  });
  const f = writeConfig(dir, "topics.json", text);
  const logger = recordingLogger();
  const m = await TopicConfigManager.load({ storeDir: dir, autoCreateTopic: false, defaultQueueNums: 4, logger });
  assert.ok(m.get("Good"));
  assert.equal(m.get("Edited"), undefined);
  assert.equal(logger.lines.length, 1);
  const [w] = logger.lines;
  assert.equal(w!.fields.file, f);
  assert.equal(w!.fields.topic, "Edited");
  assert.match(w!.msg, /topic "Edited" in topics.json is not valid and was skipped: readQueueNums .* not 16/);
  // the next write leaves the entry out; the user's version survives as the copy
  await m.createOrUpdate({ topicName: "Other", readQueueNums: 1, writeQueueNums: 1, perm: 6, order: false });
  await m.createOrUpdate({ topicName: "Other2", readQueueNums: 1, writeQueueNums: 1, perm: 6, order: false });
  assert.equal(readFileSync(w!.fields.keptAs as string, "utf8"), text);
});

test("TopicConfigManager: an invalid entry of topics.json whose .bak holds a valid one loads the .bak's, with a warning", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const edited = { topicName: "Edited", readQueueNums: 8, writeQueueNums: 8, perm: 6 };
  writeConfig(dir, "topics.json.bak", JSON.stringify({ topicConfigTable: { Good: GOOD, Edited: edited }, dataVersion: 2 }));
  writeConfig(
    dir,
    "topics.json",
    JSON.stringify({
      topicConfigTable: { Good: GOOD, Edited: { ...edited, readQueueNums: "16" }, Lost: { topicName: "Lost" } },
      dataVersion: 3,
    }),
  );
  const logger = recordingLogger();
  const m = await TopicConfigManager.load({ storeDir: dir, autoCreateTopic: false, defaultQueueNums: 4, logger });
  // skipped, the topic's messages could not be reached until it was created again (with other queue counts)
  assert.deepEqual(m.get("Edited"), { ...edited, order: false });
  assert.equal(m.get("Lost"), undefined, "no valid entry anywhere: skipped");
  assert.equal(logger.lines.length, 2);
  const fromBak = logger.lines.find((l) => l.fields.topic === "Edited")!;
  assert.match(fromBak.msg, /topic "Edited" in topics.json is not valid: .* was loaded from its backup topics.json.bak instead/);
  // the next write puts it in the file
  await m.createOrUpdate({ topicName: "Other", readQueueNums: 1, writeQueueNums: 1, perm: 6, order: false });
  await waitFor(
    () => JSON.parse(readFileSync(path.join(dir, "config", "topics.json"), "utf8")).topicConfigTable.Edited?.readQueueNums === 8,
    5000,
    "written",
  );
});

test("TopicConfigManager: topics.json that is not JSON loads its .bak with a warning; without a .bak the load is refused", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { storeDir: dir, autoCreateTopic: false, defaultQueueNums: 4 };
  writeConfig(dir, "topics.json.bak", JSON.stringify({ topicConfigTable: { Good: GOOD }, dataVersion: 1 }));
  const broken = '{ "topicConfigTable": { "Good": {}, "New": {},, } }';
  const f = writeConfig(dir, "topics.json", broken);
  const logger = recordingLogger();
  const m = await TopicConfigManager.load({ ...opts, logger });
  assert.ok(m.get("Good"), "loaded from the backup");
  assert.equal(logger.lines.length, 1);
  assert.equal(logger.lines[0]!.fields.file, f);
  assert.match(logger.lines[0]!.msg, /topics.json cannot be loaded: loaded its backup instead/);
  await m.createOrUpdate({ topicName: "Other", readQueueNums: 1, writeQueueNums: 1, perm: 6, order: false });
  assert.equal(readFileSync(logger.lines[0]!.fields.keptAs as string, "utf8"), broken, "the hand edit is kept");

  rmSync(`${f}.bak`);
  writeFileSync(f, broken);
  await assert.rejects(
    TopicConfigManager.load(opts),
    (e: unknown) => e instanceof MQError && e.code === "MALFORMED" && e.message.includes(f) && /no readable backup/.test(e.message),
  );
  // valid JSON without the table (an edit that dropped the wrapper) is refused too
  writeFileSync(f, JSON.stringify({ Good: GOOD }));
  await assert.rejects(TopicConfigManager.load(opts), /has no "topicConfigTable" object/);
});

test("SubscriptionGroupManager: a broken subscriptionGroup.json without a .bak refuses the load; a non-object entry is reported", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { storeDir: dir, autoCreateSubscriptionGroup: true };
  const f = writeConfig(dir, "subscriptionGroup.json", "{ oops");
  await assert.rejects(SubscriptionGroupManager.load(opts), (e: unknown) => e instanceof MQError && e.code === "MALFORMED");
  writeFileSync(f, JSON.stringify({ subscriptionGroupTable: { g1: { retryMaxTimes: 3 }, g2: 7 }, dataVersion: 1 }));
  const logger = recordingLogger();
  const m = await SubscriptionGroupManager.load({ ...opts, logger });
  assert.equal(m.get("g1")?.retryMaxTimes, 3);
  assert.equal(m.get("g2"), undefined);
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.file, l.fields.group]),
    [[f, "g2"]],
  );
});

test("SubscriptionGroupManager: an invalid group of subscriptionGroup.json whose .bak holds it valid is loaded from the .bak, with a warning", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  writeConfig(
    dir,
    "subscriptionGroup.json.bak",
    JSON.stringify({ subscriptionGroupTable: { g: { retryMaxTimes: 3, consumeEnable: false } } }),
  );
  writeConfig(
    dir,
    "subscriptionGroup.json",
    JSON.stringify({ subscriptionGroupTable: { g: { retryMaxTimes: "three", consumeEnable: false } } }),
  );
  const logger = recordingLogger();
  const m = await SubscriptionGroupManager.load({ storeDir: dir, autoCreateSubscriptionGroup: true, logger });
  // skipped, the group would be made again with the defaults at its next heartbeat (consumeEnable true)
  assert.equal(m.get("g")?.retryMaxTimes, 3);
  assert.equal(m.get("g")?.consumeEnable, false);
  assert.equal(logger.lines.length, 1);
  assert.match(
    logger.lines[0]!.msg,
    /group "g" in subscriptionGroup.json is not valid: .* was loaded from its backup subscriptionGroup.json.bak instead/,
  );
});

test("SubscriptionGroupManager: an entry of subscriptionGroup.json the broker could not use is skipped with a warning, and the file is kept", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const text = JSON.stringify({
    subscriptionGroupTable: {
      good: { retryQueueNums: 2, retryMaxTimes: -1 },
      bcast: { messageModel: "BROADCASTING" },
      wide: { retryQueueNums: 2000 },
      words: { retryQueueNums: "two" },
      off: { consumeEnable: "false" },
      model: { messageModel: "broadcast" },
      "bad name": {},
    },
    dataVersion: 4,
  });
  const f = writeConfig(dir, "subscriptionGroup.json", text);
  const logger = recordingLogger();
  const m = await SubscriptionGroupManager.load({ storeDir: dir, autoCreateSubscriptionGroup: true, logger });
  assert.equal(m.get("good")?.retryQueueNums, 2);
  assert.deepEqual(Object.keys(m.all()), ["good", "bcast"]);
  assert.equal(m.get("bcast")?.messageModel, "BROADCASTING");
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.file, l.fields.group]),
    [
      [f, "wide"],
      [f, "words"],
      [f, "off"],
      [f, "model"],
      [f, "bad name"],
    ],
  );
  assert.match(logger.lines[0]!.msg, /group "wide" in subscriptionGroup.json is not valid and was skipped: retryQueueNums .*2000/);
  assert.match(logger.lines[2]!.msg, /consumeEnable/);
  assert.match(logger.lines[3]!.msg, /messageModel .*"CLUSTERING" or "BROADCASTING"/);
  // the next write leaves the entries out; the user's version survives as the copy
  await m.createOrUpdate({ groupName: "other" });
  assert.equal(readFileSync(logger.lines[0]!.fields.keptAs as string, "utf8"), text);
});

test("Broker.start refuses a store whose topics.json is not JSON and has no backup, and releases what it opened", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  writeConfig(dir, "topics.json", "{ not json");
  const opts = { brokerName: "cfg", nameservers: [], storeDir: dir, listen: EPHEMERAL };
  // a broker that starts anyway is closed, so the failed assertion does not leave it running
  const started = Broker.start(opts).then(async (b) => void (await b.close()));
  await assert.rejects(started, /topics.json cannot be loaded .* no readable backup/);
  // the store lock and port were released: fixed, it starts
  rmSync(path.join(dir, "config", "topics.json"));
  const b = await Broker.start(opts);
  await b.close();
});

test("Broker.start refuses consumerOffset.json or delayOffset.json that is not JSON and has no backup", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { brokerName: "cfg", nameservers: [], storeDir: dir, listen: EPHEMERAL };
  for (const name of ["consumerOffset.json", "delayOffset.json"]) {
    const f = writeConfig(dir, name, "{ not json");
    // starting anyway would reset every group's (or delay level's) progress without a word
    const started = Broker.start(opts).then(async (b) => void (await b.close()));
    await assert.rejects(started, (e: unknown) => e instanceof MQError && e.code === "MALFORMED" && e.message.includes(f), name);
    rmSync(f);
  }
  const b = await Broker.start(opts);
  await b.close();
});

test("ConsumerOffsetManager: consumerOffset.json that is not JSON loads its .bak with a warning", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  writeConfig(dir, "consumerOffset.json.bak", JSON.stringify({ offsetTable: { "T@g": { "0": 7 } } }));
  const f = writeConfig(dir, "consumerOffset.json", "{ broken");
  const logger = recordingLogger();
  const m = ConsumerOffsetManager.load(f, logger);
  assert.equal(m.queryOffset("g", "T", 0), 7);
  assert.equal(logger.lines.length, 1);
  assert.match(logger.lines[0]!.msg, /consumerOffset.json cannot be loaded: loaded its backup instead/);
  assert.equal(readFileSync(logger.lines[0]!.fields.keptAs as string, "utf8"), "{ broken");
});

test("ConsumerOffsetManager: a fractional offset in consumerOffset.json is not loaded (every pull of it would be refused)", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const f = writeConfig(dir, "consumerOffset.json", JSON.stringify({ offsetTable: { "T@g": { "0": 2.5, "1": 3 } } }));
  const m = ConsumerOffsetManager.load(f, recordingLogger());
  assert.equal(m.queryOffset("g", "T", 0), -1);
  assert.equal(m.queryOffset("g", "T", 1), 3);
});

test("ConsumerOffsetManager: invalid entries of consumerOffset.json are skipped with a warning naming file and entry, and the file is kept", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const text = JSON.stringify({ offsetTable: { "T@g": { "0": "100", "1": 200, x: 3 }, NoGroup: { "0": 1 }, "U@g": [5] } });
  const f = writeConfig(dir, "consumerOffset.json", text);
  const logger = recordingLogger();
  const m = ConsumerOffsetManager.load(f, logger);
  assert.equal(m.queryOffset("g", "T", 0), -1);
  assert.equal(m.queryOffset("g", "T", 1), 200);
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.file, l.fields.entry]),
    [
      [f, 'offset of "T@g" queue 0'],
      [f, 'offset of "T@g" queue x'],
      [f, 'offsets of "NoGroup"'],
      [f, 'offsets of "U@g"'],
    ],
  );
  assert.match(logger.lines[0]!.msg, /offset of "T@g" queue 0 in consumerOffset.json is not valid and was skipped: .*not "100"/);
  // the next write leaves the entries out; the user's version survives as the copy
  m.commitOffset("g", "T", 1, 201);
  m.persist();
  assert.equal(readFileSync(logger.lines[0]!.fields.keptAs as string, "utf8"), text);
});

test("delayOffset.json: invalid entries are skipped with a warning naming file and level, and the file is kept", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const text = JSON.stringify({ offsetTable: { "1": "5", "2": 3, "3": 1.5, x: 2 } });
  const f = writeConfig(dir, "delayOffset.json", text);
  const logger = recordingLogger();
  checkDelayOffsetFile(f, logger);
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.file, l.fields.entry]),
    [
      [f, "offset of level 1"],
      [f, "offset of level 3"],
      [f, 'level "x"'],
    ],
  );
  assert.match(logger.lines[0]!.msg, /offset of level 1 in delayOffset.json is not valid and was skipped: .*not "5"/);
  assert.equal(readFileSync(logger.lines[0]!.fields.keptAs as string, "utf8"), text);
});

test("Broker.start refuses consumerOffset.json or delayOffset.json without an offsetTable object, and leaves it as it is", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { brokerName: "cfg", nameservers: [], storeDir: dir, listen: EPHEMERAL };
  for (const [name, text] of [
    ["consumerOffset.json", JSON.stringify({ "T@g": { "0": 100 } })],
    ["delayOffset.json", JSON.stringify({ "1": 5 })],
  ] as const) {
    const f = writeConfig(dir, name, text);
    // loading it as empty would restart every group (or delay level) at its start, then write that over the file
    const started = Broker.start(opts).then(async (b) => void (await b.close()));
    await assert.rejects(
      started,
      (e: unknown) => e instanceof MQError && e.code === "MALFORMED" && e.message.includes(f) && e.message.includes('"offsetTable"'),
      name,
    );
    assert.equal(readFileSync(f, "utf8"), text);
    rmSync(f);
  }
});

test('TopicConfigManager: an order that is not a boolean in topics.json is an invalid entry ("false" made an ordered topic)', async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const f = writeConfig(
    dir,
    "topics.json",
    JSON.stringify({
      topicConfigTable: {
        Good: GOOD,
        Ordered: { ...GOOD, topicName: "Ordered", order: true },
        Quoted: { ...GOOD, topicName: "Quoted", order: "false" },
      },
    }),
  );
  const logger = recordingLogger();
  const m = await TopicConfigManager.load({ storeDir: dir, autoCreateTopic: false, defaultQueueNums: 4, logger });
  assert.equal(m.get("Good")?.order, false, "no order is not ordered");
  assert.equal(m.get("Ordered")?.order, true);
  assert.equal(m.get("Quoted"), undefined);
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.file, l.fields.topic]),
    [[f, "Quoted"]],
  );
  assert.match(logger.lines[0]!.msg, /topic "Quoted" in topics.json is not valid and was skipped: order .*true or false, not "false"/);
});

test("a broker state file holding null is damaged, not missing: its .bak is loaded with a warning, without one the start is refused", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { brokerName: "cfg", nameservers: [], storeDir: dir, listen: EPHEMERAL };
  const offsets = JSON.stringify({ offsetTable: { "T@g": { "0": 500 } } });
  writeConfig(dir, "consumerOffset.json.bak", offsets);
  const f = writeConfig(dir, "consumerOffset.json", "null");
  const logger = recordingLogger();
  const m = ConsumerOffsetManager.load(f, logger);
  assert.equal(m.queryOffset("g", "T", 0), 500, "the offsets of the .bak, not none");
  assert.equal(logger.lines.length, 1);
  assert.match(logger.lines[0]!.msg, /consumerOffset.json cannot be loaded: loaded its backup instead/);
  assert.equal(logger.lines[0]!.fields.error, "the file holds null");
  assert.equal(readFileSync(logger.lines[0]!.fields.keptAs as string, "utf8"), "null");
  m.persist();
  assert.equal(readFileSync(`${f}.bak`, "utf8"), offsets, "the write kept the good .bak");
  rmSync(path.join(dir, "config"), { recursive: true });

  const topics = { storeDir: dir, autoCreateTopic: true, defaultQueueNums: 4 };
  writeConfig(dir, "topics.json", "null");
  await assert.rejects(
    TopicConfigManager.load(topics),
    (e: unknown) => e instanceof MQError && e.code === "MALFORMED" && /holds null/.test(e.message),
  );
  writeConfig(dir, "subscriptionGroup.json", "null");
  await assert.rejects(
    SubscriptionGroupManager.load({ storeDir: dir, autoCreateSubscriptionGroup: true }),
    (e: unknown) => e instanceof MQError && e.code === "MALFORMED",
  );
  rmSync(path.join(dir, "config"), { recursive: true });
  for (const name of ["consumerOffset.json", "delayOffset.json"]) {
    const g = writeConfig(dir, name, "null");
    const started = Broker.start(opts).then(async (b) => void (await b.close()));
    await assert.rejects(started, (e: unknown) => e instanceof MQError && e.code === "MALFORMED" && e.message.includes(g), name);
    assert.equal(readFileSync(g, "utf8"), "null", `${name} left as it is`);
    rmSync(g);
  }
});

test("a broker state file that is missing while its .bak exists is loaded from the .bak with a warning saying so", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  writeConfig(dir, "topics.json.bak", JSON.stringify({ topicConfigTable: { Good: GOOD }, dataVersion: 1 }));
  const logger = recordingLogger();
  const m = await TopicConfigManager.load({ storeDir: dir, autoCreateTopic: false, defaultQueueNums: 4, logger });
  assert.ok(m.get("Good"), "loaded from the backup");
  assert.equal(logger.lines.length, 1);
  assert.equal(logger.lines[0]!.fields.file, path.join(dir, "config", "topics.json"));
  assert.match(logger.lines[0]!.msg, /topics.json is missing: loaded its backup .*topics.json.bak/);
});

test("TopicConfigManager: an entry of topics.json whose topicName is not its key is skipped with a warning, and replaces no other topic", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  // Payments copied from Orders, its topicName left as it was
  const f = writeConfig(
    dir,
    "topics.json",
    JSON.stringify({
      topicConfigTable: {
        Orders: { ...GOOD, topicName: "Orders", readQueueNums: 8, writeQueueNums: 8 },
        Payments: { ...GOOD, topicName: "Orders", readQueueNums: 2, writeQueueNums: 2 },
      },
    }),
  );
  const logger = recordingLogger();
  const m = await TopicConfigManager.load({ storeDir: dir, autoCreateTopic: false, defaultQueueNums: 4, logger });
  assert.equal(m.get("Orders")?.readQueueNums, 8, "Orders is not replaced by the copy");
  assert.equal(m.get("Payments"), undefined);
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.file, l.fields.topic, l.fields.topicName]),
    [[f, "Payments", "Orders"]],
  );
  assert.match(logger.lines[0]!.msg, /topic "Payments" in topics.json is not valid and was skipped: its topicName is "Orders"/);
  await m.close();
  assert.deepEqual(Object.keys(JSON.parse(readFileSync(f, "utf8")).topicConfigTable).sort(), ["Orders", "SCHEDULE_TOPIC_XXXX"]);
});

test("ConsumerOffsetManager: an invalid offset of consumerOffset.json whose .bak holds a valid one loads the .bak's, with a warning, and survives the next write", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  // an offset edited wrong: skipped without its backup's value, the group would start the queue
  // from consumeFromWhere (consuming it again from its first offset), and the next write would
  // replace the .bak with the damaged file
  const bak = writeConfig(dir, "consumerOffset.json.bak", JSON.stringify({ offsetTable: { "T@g": { "0": 500, "1": 40, "2": 7 } } }));
  const f = writeConfig(
    dir,
    "consumerOffset.json",
    JSON.stringify({ offsetTable: { "T@g": { "0": "NaN", "1": 41, "2": -1 }, "U@g": { "0": 1e300 } } }),
  );
  const logger = recordingLogger();
  const m = ConsumerOffsetManager.load(f, logger);
  assert.equal(m.queryOffset("g", "T", 0), 500, "the .bak's offset, not none");
  assert.equal(m.queryOffset("g", "T", 1), 41, "a valid entry of the file wins over the .bak's");
  assert.equal(m.queryOffset("g", "T", 2), 7);
  assert.equal(m.queryOffset("g", "U", 0), -1, "not in the .bak either: skipped");
  assert.deepEqual(
    logger.lines.map((l) => [l.fields.entry, l.fields.loaded]),
    [
      ['offset of "T@g" queue 0', bak],
      ['offset of "T@g" queue 2', bak],
      ['offset of "U@g" queue 0', undefined],
    ],
  );
  assert.match(
    logger.lines[0]!.msg,
    /offset of "T@g" queue 0 in consumerOffset.json is not valid: .* loaded 500 from its backup consumerOffset.json.bak instead/,
  );
  m.persist();
  const written = JSON.parse(readFileSync(f, "utf8")) as { offsetTable: Record<string, Record<string, number>> };
  assert.deepEqual(written.offsetTable["T@g"], { "0": 500, "1": 41, "2": 7 });
});
