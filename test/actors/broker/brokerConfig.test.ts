import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Broker } from "../../../actors/broker/broker.ts";
import { type BrokerOptions, resolveBrokerConfig } from "../../../actors/broker/brokerConfig.ts";
import { MQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, runFixture, tempDir } from "../../helpers.ts";

const base: BrokerOptions = { brokerName: "b", nameservers: [], storeDir: "/tmp/never-created" };

function refused(opts: Partial<BrokerOptions>, message: RegExp): void {
  assert.throws(
    () => resolveBrokerConfig({ ...base, ...opts }),
    (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && message.test(e.message),
  );
}

test("brokerConfig: a SLAVE needs brokerId > 0 (brokerId 0 would take the master's route entry)", () => {
  refused({ role: "SLAVE" }, /SLAVE needs brokerId > 0/);
  refused({ role: "SLAVE", brokerId: 0 }, /SLAVE needs brokerId > 0/);
  assert.equal(resolveBrokerConfig({ ...base, role: "SLAVE", brokerId: 2 }).brokerId, 2);
});

test("brokerConfig: a brokerId that is not an integer from 0 to 2^53-1 is refused, saying what is allowed", async () => {
  // past 2^53 ids are not exact: 2^53 + 1 reads as 2^53, two slaves would share one route entry
  for (const v of [2 ** 53, 2 ** 53 + 2, 1e300, Number.POSITIVE_INFINITY, -1, 1.5, Number.NaN, "1"])
    refused(
      { role: "SLAVE", brokerId: v as never },
      /^brokerId must be an integer from 0 \(the master\) to 2\^53-1 \(9007199254740991; slaves 1, 2, \.\.\.\), got /,
    );
  assert.equal(resolveBrokerConfig({ ...base, brokerId: Number.MAX_SAFE_INTEGER }).brokerId, Number.MAX_SAFE_INTEGER);
  const { dir, cleanup } = await tempDir();
  try {
    const storeDir = path.join(dir, "store");
    await assert.rejects(
      Broker.start({ brokerName: "big", listen: EPHEMERAL, nameservers: [], storeDir, brokerId: 2 ** 53 + 2 }),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /brokerId must be .* got 9007199254740994/.test(e.message),
    );
    assert.equal(existsSync(storeDir), false, "the broker did not start");
  } finally {
    await cleanup();
  }
});

test("brokerConfig: master roles need brokerId 0", () => {
  refused({ role: "SYNC_MASTER", brokerId: 2 }, /SYNC_MASTER.*brokerId 0/);
  refused({ role: "ASYNC_MASTER", brokerId: 1 }, /ASYNC_MASTER.*brokerId 0/);
  assert.equal(resolveBrokerConfig({ ...base, role: "SYNC_MASTER" }).brokerId, 0);
});

test("brokerConfig: an unknown role is refused", () => {
  refused({ role: "slave" as never }, /role "slave"/);
  refused({ role: "MASTER" as never }, /ASYNC_MASTER, SYNC_MASTER or SLAVE/);
});

test("brokerConfig: defaults stay: ASYNC_MASTER id 0, and brokerId > 0 alone means SLAVE", () => {
  const m = resolveBrokerConfig(base);
  assert.deepEqual([m.role, m.brokerId], ["ASYNC_MASTER", 0]);
  const s = resolveBrokerConfig({ ...base, brokerId: 1 });
  assert.deepEqual([s.role, s.brokerId], ["SLAVE", 1]);
});

test("brokerConfig: registerIntervalMs and heartbeatTimeoutMs must be positive integers, brokerPermission a perm bit set", () => {
  // registerIntervalMs 0 (or NaN, or past setTimeout's range) would re-register with every name server back to back
  for (const v of [0, -1, Number.NaN, 1.5, 2 ** 31, "30000"]) refused({ registerIntervalMs: v as never }, /registerIntervalMs must be/);
  // past 2^31 - 1 ms (24.8 days) a name server would in effect never drop the broker; name servers refuse it too
  for (const v of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, 1.5, 2 ** 31, 1e300, "120000"])
    refused({ heartbeatTimeoutMs: v as never }, /heartbeatTimeoutMs must be/);
  for (const v of [-1, 16, 2.5, Number.NaN, "6"]) refused({ brokerPermission: v as never }, /brokerPermission must be/);
  // name servers would drop the broker between two of its registrations: it would flap in and out of the routes
  refused({ heartbeatTimeoutMs: 1500 }, /heartbeatTimeoutMs 1500 .* registerIntervalMs 30000/);
  refused({ registerIntervalMs: 2000, heartbeatTimeoutMs: 2000 }, /heartbeatTimeoutMs 2000 .* registerIntervalMs 2000/);
  const c = resolveBrokerConfig({ ...base, registerIntervalMs: 300, heartbeatTimeoutMs: 1500, brokerPermission: 4 });
  assert.deepEqual([c.registerIntervalMs, c.heartbeatTimeoutMs, c.brokerPermission], [300, 1500, 4]);
  for (const p of [0, 2, 6]) assert.equal(resolveBrokerConfig({ ...base, brokerPermission: p }).brokerPermission, p);
});

test("brokerConfig: segmentBytes and maxMessageBytes must be whole numbers of bytes; segmentBytes 0 is refused, not taken as the default", () => {
  for (const v of [65536.5, 4095, 0, Number.NaN]) refused({ segmentBytes: v }, new RegExp(`^segmentBytes must be .*>= 4096.*not ${v}`));
  for (const v of [0, -1, 1.5, Number.NaN]) refused({ maxMessageBytes: v }, new RegExp(`^maxMessageBytes must be .*not ${v}`));
  assert.equal(resolveBrokerConfig({ ...base, segmentBytes: 4096 }).segmentBytes, 4096);
  assert.equal(resolveBrokerConfig(base).segmentBytes, undefined);
});

test("brokerConfig: storeMaxInFlight must be an integer >= 1 (0 or less answers every send SYSTEM_BUSY, NaN never answers)", () => {
  for (const v of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "4096"])
    refused({ storeMaxInFlight: v as never }, new RegExp(`^storeMaxInFlight must be an integer .*not ${String(v)}`));
  assert.equal(resolveBrokerConfig({ ...base, storeMaxInFlight: 1 }).storeMaxInFlight, 1);
  assert.equal(resolveBrokerConfig(base).storeMaxInFlight, 4096);
});

test("brokerConfig: clusterName must be a name the name servers register (not empty, a broker name's characters)", () => {
  for (const v of ["", "a b", "c@d", 7, null]) refused({ clusterName: v as never }, /^clusterName .* is not valid/);
  refused({ clusterName: "__proto__" }, /reserved/);
  assert.equal(resolveBrokerConfig({ ...base, clusterName: "Prod-1.eu_west" }).clusterName, "Prod-1.eu_west");
  assert.equal(resolveBrokerConfig(base).clusterName, "DefaultCluster");
});

test("brokerConfig: a name server address with a port above 65535 is refused (libzmq would connect to port mod 65536)", () => {
  refused({ nameservers: ["tcp://127.0.0.1:9876", "tcp://127.0.0.1:75412"] }, /nameservers.*tcp:\/\/127\.0\.0\.1:75412.*port/);
  assert.deepEqual(resolveBrokerConfig({ ...base, nameservers: ["tcp://127.0.0.1:9876"] }).nameservers, ["tcp://127.0.0.1:9876"]);
});

test("brokerConfig: a masterAddress that is not a string is refused (the slave would start and never replicate)", () => {
  for (const v of [10911, null, ["tcp://127.0.0.1:10911"]])
    refused({ role: "SLAVE", brokerId: 1, masterAddress: v as never }, /^masterAddress must be .*tcp:\/\/.*got /);
  refused({ masterAddress: "tcp://127.0.0.1:70000" }, /masterAddress tcp:\/\/127\.0\.0\.1:70000 has no valid port/);
  assert.equal(
    resolveBrokerConfig({ ...base, role: "SLAVE", brokerId: 1, masterAddress: "tcp://127.0.0.1:10911" }).masterAddress,
    "tcp://127.0.0.1:10911",
  );
  assert.equal(resolveBrokerConfig({ ...base, role: "SLAVE", brokerId: 1 }).masterAddress, undefined);
});

test('brokerConfig: autoCreateTopic, autoCreateSubscriptionGroup and longPolling must be true or false ("false" turned them on)', () => {
  for (const k of ["autoCreateTopic", "autoCreateSubscriptionGroup", "longPolling"] as const) {
    for (const v of ["false", "true", 0, 1, null]) refused({ [k]: v as never }, new RegExp(`^${k} must be true or false`));
    assert.equal(resolveBrokerConfig({ ...base, [k]: false })[k], false);
    assert.equal(resolveBrokerConfig(base)[k], true);
  }
});

test("brokerConfig: messageDelayLevel must be a list of durations (empty or blank left the broker with no scheduler and no send-back)", () => {
  for (const v of ["", "   ", "\t"]) refused({ messageDelayLevel: v }, /^messageDelayLevel is empty/);
  for (const v of [5, null, ["1s"]]) refused({ messageDelayLevel: v as never }, /^messageDelayLevel must be a string/);
  refused({ messageDelayLevel: "1s 1x" }, /^messageDelayLevel entry 2 "1x"/);
  assert.equal(resolveBrokerConfig({ ...base, messageDelayLevel: " 100ms 1s " }).messageDelayLevel, " 100ms 1s ");
  assert.equal(resolveBrokerConfig(base).messageDelayLevel, undefined);
});

test("Broker.start: a metricsListen that is no host:port string is ILLEGAL_ARGUMENT before anything starts", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const storeDir = path.join(dir, "store");
    for (const metricsListen of [9100, 0, { port: 9100 }, "9100", "localhost"]) {
      await assert.rejects(
        Broker.start({ brokerName: "m", listen: EPHEMERAL, nameservers: [], storeDir, metricsListen } as unknown as BrokerOptions),
        (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /metrics/.test(e.message),
        String(metricsListen),
      );
      assert.equal(existsSync(storeDir), false, "the broker did not start");
    }
  } finally {
    await cleanup();
  }
});

test("Broker.start: a tuning option given but not an integer in its range is ILLEGAL_ARGUMENT naming it, its value and the range, before anything starts", async () => {
  const T = 2 ** 31 - 1;
  const ranges: Record<string, [number, number]> = {
    lockMaxLiveTimeMs: [1, T],
    holdCheckIntervalMs: [1, T],
    shortPollingTimeMills: [1, T],
    channelExpiredTimeoutMs: [1, T],
    clientScanIntervalMs: [1, T],
    delayOffsetPersistIntervalMs: [1, T],
    flushConsumerOffsetIntervalMs: [1, T],
    queueHandOverTimeoutMs: [1, T],
    haTransferBatchBytes: [1, T],
    haHoldMs: [1, Math.floor(T / 2)],
    haSyncTimeoutMs: [1, T],
    haMaxGapNotInSync: [1, Number.MAX_SAFE_INTEGER],
    haSlaveExpireMs: [1, T],
    haReconnectMs: [1, T],
    slaveSyncIntervalMs: [1, T],
    accessMessageInMemoryMaxRatio: [0, 100],
    physicalMemoryBytes: [1, Number.MAX_SAFE_INTEGER],
  };
  const { dir, cleanup } = await tempDir();
  try {
    const storeDir = path.join(dir, "store");
    const start = (tuning: Record<string, unknown>) =>
      Broker.start({ brokerName: "t", listen: EPHEMERAL, nameservers: [], storeDir, ...tuning } as BrokerOptions);
    for (const [name, [min, max]] of Object.entries(ranges)) {
      for (const v of ["5000", Number.NaN, Number.POSITIVE_INFINITY, min - 1, max + 2, 1.5, null]) {
        const shown = typeof v === "string" ? `"${v}"` : String(v);
        await assert.rejects(
          start({ [name]: v }),
          (e: unknown) =>
            e instanceof MQError &&
            e.code === "ILLEGAL_ARGUMENT" &&
            e.message === `${name} must be an integer in [${min}, ${max}], got ${shown}.`,
          `${name} ${shown}`,
        );
      }
    }
    for (const name of ["enablePropertyFilter", "slaveReadEnable"])
      await assert.rejects(
        start({ [name]: "false" }),
        (e: unknown) =>
          e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message === `${name} must be true or false, got "false".`,
        name,
      );
    assert.equal(existsSync(storeDir), false, "the broker did not start");
    // each at the ends of its range is taken
    for (const end of [0, 1] as const) {
      const broker = await start({
        ...Object.fromEntries(Object.entries(ranges).map(([name, r]) => [name, r[end]])),
        enablePropertyFilter: false,
        slaveReadEnable: true,
      });
      await broker.close();
    }
  } finally {
    await cleanup();
  }
});

test("Broker.start with a storeDir that cannot be made (on /proc, under a file) is refused with ILLEGAL_ARGUMENT naming it, at once", async () => {
  const { dir, cleanup } = await tempDir();
  const file = path.join(dir, "a-file");
  writeFileSync(file, "");
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "startBroker.ts");
  try {
    for (const storeDir of ["/proc/actormq-store", "/proc/actormq-store/b", path.join(file, "b")]) {
      // in a child, SIGKILLed after 30 s: Node's recursive mkdir spun forever on /proc, blocking the event loop
      const r = JSON.parse(await runFixture(fixture, [], { STORE_DIR: storeDir }, 30_000));
      assert.equal(r.code, "ILLEGAL_ARGUMENT", `${storeDir}: ${JSON.stringify(r)}`);
      assert.ok(r.message.includes(storeDir), r.message);
    }
  } finally {
    await cleanup();
  }
});
