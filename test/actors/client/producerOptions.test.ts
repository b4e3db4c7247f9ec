/**
 * Producer.start refuses fault-strategy options it cannot work with with ILLEGAL_ARGUMENT naming the
 * option, before it takes a client instance; a start that fails after taking one gives it back.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ClientInstance } from "../../../actors/client/index.ts";
import { MQError, Producer, type ProducerOptions } from "../../../index.ts";

// nothing listens there: these producers never send
const nameservers = ["tcp://127.0.0.1:1"];

/** True when a producer of `instanceName` started now is the instance's only holder (its close closes it). */
async function onlyHolder(instanceName: string): Promise<boolean> {
  const p = await Producer.start({ group: "pgOk", nameservers, instanceName });
  const inst = p.clientInstance;
  await p.close();
  return inst.closed;
}

test("bad latencyMax / notAvailableDuration are refused with ILLEGAL_ARGUMENT and hold no client instance", async () => {
  const bad: [Partial<ProducerOptions>, string][] = [
    [{ latencyMax: [1, 2] }, "latencyMax"], // 2 thresholds, 7 default durations
    [{ notAvailableDuration: [0] }, "latencyMax"],
    [{ latencyMax: [1, 2], notAvailableDuration: [0, 1, 2] }, "latencyMax"],
    [{ latencyMax: [], notAvailableDuration: [] }, "latencyMax"],
    [{ latencyMax: 50 as never }, "latencyMax"],
    [{ latencyMax: "50,100" as never, notAvailableDuration: "0,0" as never }, "latencyMax"],
    [{ latencyMax: [0, -1], notAvailableDuration: [0, 0] }, "latencyMax"],
    [{ latencyMax: [0, Number.NaN], notAvailableDuration: [0, 0] }, "latencyMax"],
    [{ latencyMax: [0, "5" as never], notAvailableDuration: [0, 0] }, "latencyMax"],
    [{ latencyMax: [0, 5], notAvailableDuration: [0, Number.POSITIVE_INFINITY] }, "notAvailableDuration"],
    [{ latencyMax: [0, 5], notAvailableDuration: null as never }, "notAvailableDuration"],
    [{ latencyMax: [0, 5], notAvailableDuration: [0, -2] }, "notAvailableDuration"],
  ];
  for (const [opts, name] of bad) {
    await assert.rejects(
      Producer.start({ group: "pgBad", nameservers, instanceName: "badFault", ...opts }),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.startsWith(name),
      JSON.stringify(opts),
    );
  }
  assert.ok(await onlyHolder("badFault"), "the refused starts left no reference to the client instance");
  const p = await Producer.start({ group: "pgOk", nameservers, latencyMax: [0, 100], notAvailableDuration: [0, 1000] });
  await p.close();
});

test("sendLatencyFaultEnable must be true or false (a string was read by truthiness)", async () => {
  for (const v of ["false", "true", 0, null]) {
    await assert.rejects(
      Producer.start({ group: "pgBad", nameservers, instanceName: "badFault", sendLatencyFaultEnable: v as never }),
      (e: unknown) =>
        e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.startsWith("sendLatencyFaultEnable must be true or false"),
      String(v),
    );
  }
  assert.ok(await onlyHolder("badFault"), "the refused starts left no reference to the client instance");
});

test("a start that fails after taking the client instance gives it back", async (t) => {
  t.mock.method(ClientInstance.prototype, "addHeartbeatSource", () => {
    throw new Error("no heartbeat");
  });
  await assert.rejects(Producer.start({ group: "pgFail", nameservers, instanceName: "failAfter" }), /no heartbeat/);
  t.mock.restoreAll();
  assert.ok(await onlyHolder("failAfter"), "the failed start left no reference to the client instance");
});

test("numeric producer options out of range or of the wrong type are refused with ILLEGAL_ARGUMENT naming the option and its range", async () => {
  const bad: [keyof ProducerOptions, unknown, string][] = [
    // a timer's delay past 2^31 - 1 ms fires at once: every send would time out after 1 ms
    ["sendTimeoutMs", 2 ** 31, "[1, 2147483647]"],
    ["sendTimeoutMs", 0, "[1, 2147483647]"],
    ["sendTimeoutMs", Number.NaN, "[1, 2147483647]"],
    ["sendTimeoutMs", Number.POSITIVE_INFINITY, "[1, 2147483647]"],
    ["sendTimeoutMs", "3000", "[1, 2147483647]"],
    ["retryTimesWhenSendFailed", -1, "[0, 2147483647]"],
    ["retryTimesWhenSendFailed", 1.5, "[0, 2147483647]"],
    ["retryTimesWhenSendFailed", 2 ** 31, "[0, 2147483647]"],
    ["retryTimesWhenSendFailed", "2", "[0, 2147483647]"],
    ["maxMessageBytes", 0, "[1, 2147483647]"],
    ["maxMessageBytes", 2 ** 32, "[1, 2147483647]"],
    ["maxMessageBytes", null, "[1, 2147483647]"],
    ["compressMsgBodyOverHowmuch", -1, "[0, 2147483647]"],
    ["compressMsgBodyOverHowmuch", 2 ** 40, "[0, 2147483647]"],
    ["compressMsgBodyOverHowmuch", true, "[0, 2147483647]"],
  ];
  for (const [name, value, range] of bad) {
    await assert.rejects(
      Producer.start({ group: "pgBad", nameservers, instanceName: "badRange", [name]: value }),
      (e: unknown) =>
        e instanceof MQError &&
        e.code === "ILLEGAL_ARGUMENT" &&
        e.message.startsWith(`${name} must be an integer in ${range}, got ${typeof value === "string" ? `"${value}"` : String(value)}`),
      `${name}: ${String(value)}`,
    );
  }
  assert.ok(await onlyHolder("badRange"), "the refused starts left no reference to the client instance");
  // the ends of each range are taken
  const p = await Producer.start({
    group: "pgOk",
    nameservers,
    sendTimeoutMs: 2 ** 31 - 1,
    retryTimesWhenSendFailed: 0,
    maxMessageBytes: 1,
    compressMsgBodyOverHowmuch: 0,
  });
  await p.close();
});
