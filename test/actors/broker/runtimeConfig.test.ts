import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { resolveBrokerConfig } from "../../../actors/broker/brokerConfig.ts";
import { parseBrokerConfigUpdate, RuntimeConfig } from "../../../actors/broker/runtimeConfig.ts";
import { Admin } from "../../../actors/client/index.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { BrokerActor, type BrokerConfigReply, isMQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir } from "../../helpers.ts";

let ns: NameServer;
let admin: Admin;
let raw: ActorNode;

before(async () => {
  ns = await NameServer.start({ listen: EPHEMERAL });
  admin = await Admin.start({ nameservers: [ns.address] });
  raw = await ActorNode.start({ listen: null });
});
after(async () => {
  await raw.close();
  await admin.close();
  await ns.close();
});

function startBroker(storeDir: string, extra: { brokerPermission?: number } = {}): Promise<Broker> {
  return Broker.start({ brokerName: "rc", listen: EPHEMERAL, nameservers: [ns.address], storeDir, flush: "async", ...extra });
}

function ask<T>(b: Broker, type: string, fields: object = {}) {
  return raw.ref(b.address, BrokerActor.BROKER).ask<T>({ type, ...fields });
}

async function routePerm(topic: string): Promise<number | undefined> {
  return (await admin.topicRoute(topic)).queueDatas.find((q) => q.brokerName === "rc")?.perm;
}

test("an update names the settable keys and their values when it has an unknown key or a bad value; nothing is applied", () => {
  const refused = (props: unknown, re: RegExp) =>
    assert.throws(
      () => parseBrokerConfigUpdate(props),
      (e) => isMQError(e, "INVALID_PARAMETER") && re.test(e.message),
    );
  refused({ flush: "sync" }, /"flush" cannot be changed on a running broker; the settable keys are brokerPermission: 6 .*, 4 .* or 2/);
  refused({ brokerPermission: 4, nope: 1 }, /"nope" cannot be changed/);
  for (const bad of [0, 1, 3, 5, 7, 16, -4, 4.5, "four", "", true, null])
    refused({ brokerPermission: bad }, /brokerPermission must be 6 \(read and write\), 4 \(read only.*\) or 2 \(write only\), not /);
  refused({}, /needs properties/);
  refused(null, /needs properties/);
  assert.deepEqual(parseBrokerConfigUpdate({ brokerPermission: "4" }), { brokerPermission: 4 });
  assert.deepEqual(parseBrokerConfigUpdate({ brokerPermission: 2 }), { brokerPermission: 2 });
});

test("UPDATE_BROKER_CONFIG brokerPermission 4: routes show it at once and sends are refused; broker.json keeps it over a restart, an explicit start option wins", async () => {
  const { dir, cleanup } = await tempDir();
  let b = await startBroker(dir);
  try {
    await b.createTopic({ topic: "Drain", readQueueNums: 2, writeQueueNums: 2 });
    assert.equal(await routePerm("Drain"), 6);
    const cfg = (await ask<BrokerConfigReply>(b, "GET_BROKER_CONFIG")).fields;
    assert.equal(cfg.brokerName, "rc");
    assert.equal(cfg.brokerAddr, b.address);
    assert.equal(cfg.brokerConfig.brokerPermission, 6);
    assert.equal(cfg.brokerConfig.flush, "async");
    assert.deepEqual(cfg.brokerConfig.nameservers, [ns.address]);
    assert.deepEqual(cfg.settableKeys, ["brokerPermission"]);

    // refused: nothing changes, nothing is written
    await assert.rejects(ask(b, "UPDATE_BROKER_CONFIG", { properties: { brokerPermission: 5 } }), (e) => isMQError(e, "INVALID_PARAMETER"));
    await assert.rejects(ask(b, "UPDATE_BROKER_CONFIG", { properties: { listen: "x" } }), (e) => isMQError(e, "INVALID_PARAMETER"));
    assert.equal(b.ctx.config.brokerPermission, 6);
    const file = path.join(dir, "config", "broker.json");
    assert.throws(() => readFileSync(file), /ENOENT/);

    const r = await ask<{ updated: object; previous: object }>(b, "UPDATE_BROKER_CONFIG", { properties: { brokerPermission: "4" } });
    assert.deepEqual(r.fields, { updated: { brokerPermission: 4 }, previous: { brokerPermission: 6 } });
    // registered before the answer: no wait for the next 30 s round
    assert.equal(await routePerm("Drain"), 4);
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { brokerConfig: { brokerPermission: 4 } });
    await assert.rejects(
      raw
        .ref(b.address, BrokerActor.BROKER)
        .ask(
          { type: "SEND_MESSAGE", producerGroup: "p", topic: "Drain", queueId: 0, sysFlag: 0, bornTimestamp: Date.now() },
          { body: Buffer.from("x") },
        ),
      (e) => isMQError(e, "NO_PERMISSION") && /not writable \(brokerPermission 4\)/.test(e.message),
    );
    assert.equal((await ask<BrokerConfigReply>(b, "GET_BROKER_CONFIG")).fields.brokerConfig.brokerPermission, 4);

    await b.close();
    b = await startBroker(dir);
    assert.equal(b.ctx.config.brokerPermission, 4, "a restart keeps the permission set at runtime");
    assert.equal(await routePerm("Drain"), 4);
    await b.close();

    b = await startBroker(dir, { brokerPermission: 6 });
    assert.equal(b.ctx.config.brokerPermission, 6, "an explicit start option wins over broker.json");
    assert.equal(await routePerm("Drain"), 6);
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { brokerConfig: { brokerPermission: 4 } }, "the file is left as it was");
    await b.close();

    // back to read and write at runtime, through the admin API (by broker name)
    b = await startBroker(dir);
    assert.equal(await routePerm("Drain"), 4);
    assert.deepEqual(await admin.updateBrokerConfig("rc", { brokerPermission: 6 }), {
      updated: { brokerPermission: 6 },
      previous: { brokerPermission: 4 },
    });
    assert.equal(await routePerm("Drain"), 6);
    assert.equal((await admin.brokerConfig(b.address)).brokerConfig.brokerPermission, 6);
    await assert.rejects(
      admin.brokerConfig("no-such-broker"),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /No broker named no-such-broker/.test(e.message),
    );
  } finally {
    await b.close();
    await cleanup();
  }
});

test("a broker.json entry that is not valid is skipped with a warning (the start value stays); one that is not JSON refuses the start", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    let b = await startBroker(dir);
    await b.close();
    const file = path.join(dir, "config", "broker.json");
    writeFileSync(file, JSON.stringify({ brokerConfig: { brokerPermission: 9 } }));
    b = await startBroker(dir);
    assert.equal(b.ctx.config.brokerPermission, 6);
    await b.close();
    writeFileSync(file, "{ not json");
    await assert.rejects(startBroker(dir), (e) => isMQError(e, "MALFORMED") && /broker\.json/.test(e.message));
  } finally {
    await cleanup();
  }
});

test("a broker.json setting that is not valid is loaded from its .bak when the .bak's is valid, with a warning naming both", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    mkdirSync(path.join(dir, "config"));
    const file = path.join(dir, "config", "broker.json");
    writeFileSync(file, JSON.stringify({ brokerConfig: { brokerPermission: 9 } }));
    writeFileSync(`${file}.bak`, JSON.stringify({ brokerConfig: { brokerPermission: 4 } }));
    const b = await startBroker(dir);
    try {
      assert.equal(b.ctx.config.brokerPermission, 4, "the .bak's permission, not the start value");
    } finally {
      await b.close();
    }
    const lines: { fields: Record<string, unknown>; msg: string }[] = [];
    const record = (fields: object, msg: string) => void lines.push({ fields: fields as Record<string, unknown>, msg });
    const opts = { brokerName: "rc", nameservers: [ns.address], storeDir: dir };
    const config = resolveBrokerConfig(opts);
    RuntimeConfig.load(config, opts, { warn: record, error: record, info: () => {} });
    assert.equal(config.brokerPermission, 4);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.fields.loaded, `${file}.bak`);
    assert.match(
      lines[0]!.msg,
      /setting "brokerPermission" in broker\.json is not valid: brokerPermission must be .* was loaded from its backup broker\.json\.bak instead/,
    );
    // no valid .bak entry either: skipped, the start value stays
    writeFileSync(`${file}.bak`, JSON.stringify({ brokerConfig: { brokerPermission: 5 } }));
    const again = resolveBrokerConfig(opts);
    RuntimeConfig.load(again, opts, { warn: record, error: record, info: () => {} });
    assert.equal(again.brokerPermission, 6);
    assert.match(lines[1]!.msg, /setting "brokerPermission" in broker\.json is not valid and was skipped/);
  } finally {
    await cleanup();
  }
});
