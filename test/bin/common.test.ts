import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError } from "commander";
import type { Admin } from "../../actors/client/admin.ts";
import { parseFrom, skipStoredBefore } from "../../bin/commands/consume.ts";
import { hoursArg, intArg, percentArg, positiveIntArg, runUntilSignal, SIGNAL_REPEAT_GRACE_MS, timeArg } from "../../bin/common.ts";
import { MQError } from "../../transport/protocol.ts";

const refuses = (parse: (v: string) => unknown, v: string) =>
  assert.throws(() => parse(v), InvalidArgumentError, `${parse.name}(${JSON.stringify(v)}) is a usage error`);

test("intArg takes decimal digits only", () => {
  assert.equal(intArg("0"), 0);
  assert.equal(intArg("42"), 42);
  assert.equal(intArg("007"), 7);
  for (const v of ["", " ", " 1", "0x10", "1e3", "0b11", "0o7", "1.5", "-1", "+1", "abc", "99999999999999999999"]) refuses(intArg, v);
});

test("positiveIntArg takes decimal integers of 1 or more only", () => {
  assert.equal(positiveIntArg("1"), 1);
  assert.equal(positiveIntArg("42"), 42);
  assert.equal(positiveIntArg("007"), 7);
  for (const v of ["0", "00", "-1", "-0", "1.5", "1.0", "", " ", "0x10", "1e3", "+1", "abc", "99999999999999999999"])
    refuses(positiveIntArg, v);
});

test("hoursArg and percentArg take decimal numbers only", () => {
  assert.equal(hoursArg("0.5"), 0.5);
  assert.equal(hoursArg("72"), 72);
  assert.equal(percentArg("85"), 85);
  assert.equal(percentArg("99.5"), 99.5);
  for (const v of ["", " ", "0x10", "1e1", ".5", "5.", "Infinity", "0"]) refuses(hoursArg, v);
  for (const v of ["", "0x10", "1e1", "101", "0"]) refuses(percentArg, v);
});

test("timeArg refuses dates that do not exist instead of rolling them over", () => {
  assert.equal(timeArg("2024-02-29"), Date.UTC(2024, 1, 29));
  assert.equal(timeArg("2025-01-31T12:00:00Z"), Date.UTC(2025, 0, 31, 12));
  assert.equal(timeArg("1735732800000"), 1735732800000);
  for (const v of [
    "2025-02-29",
    "2025-02-30",
    "2025-02-31T00:00:00Z",
    "2025-04-31T12:00:00Z",
    "2025-13-01",
    "2025-00-10",
    "yesterday",
    "123",
  ])
    refuses(timeArg, v);
});

test("timeArg's refusal of a short number says epoch milliseconds take 10 digits or more: `--time 0` was told to give epoch milliseconds", () => {
  for (const v of ["0", "123456789"]) {
    assert.throws(
      () => timeArg(v),
      (e: Error) => e instanceof InvalidArgumentError && /10 digits or more/.test(e.message) && /1970-01-01/.test(e.message),
    );
    assert.throws(
      () => parseFrom(v),
      (e: Error) => e instanceof InvalidArgumentError && /10 digits or more/.test(e.message),
    );
  }
  assert.equal(timeArg("1970-01-01T00:00:00Z"), 0, "the earliest time, as the message suggests");
});

test("runUntilSignal: SIGHUP (terminal closed) shuts down like SIGINT and SIGTERM; a second signal exits 128 + its number, the same one only after the repeat grace (one Ctrl-C reaches node twice under npm start)", (t) => {
  const exits: (number | undefined)[] = [];
  t.mock.method(process, "exit", (code?: number) => void exits.push(code));
  t.mock.method(process.stdout, "write", () => true);
  t.mock.method(process.stderr, "write", () => true);
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
  let clock = 0;
  for (const [first, second, code] of [
    ["SIGHUP", "SIGTERM", 143],
    ["SIGINT", "SIGINT", 130],
    ["SIGTERM", "SIGHUP", 129],
  ] as const) {
    const before = new Map(signals.map((s) => [s, process.listeners(s)]));
    let closes = 0;
    runUntilSignal(
      () => {
        closes++;
        return new Promise(() => {}); // still shutting down when the second signal comes
      },
      () => clock,
    );
    try {
      process.emit(first, first);
      assert.equal(closes, 1, `${first} starts the shutdown`);
      if (second === first) {
        clock += SIGNAL_REPEAT_GRACE_MS - 1;
        process.emit(second, second);
        assert.deepEqual(exits, [], `${second} repeated within the grace is the same Ctrl-C: ignored`);
        assert.equal(closes, 1, "and starts no second shutdown");
        clock += 1;
      }
      process.emit(second, second);
      assert.deepEqual(exits.splice(0), [code], `${second} during the shutdown exits ${code}`);
    } finally {
      for (const s of signals) for (const l of process.listeners(s)) if (!before.get(s)!.includes(l)) process.off(s, l);
    }
  }
});

test("consume --from <time> with a --group: a progress look-up that fails skips nothing and says so, it does not fail the command", async () => {
  const from = parseFrom("2026-01-01T00:00:00Z");
  const flags = { group: "g", topic: "T", from, broadcast: false };
  const failing = (code: string) =>
    ({
      consumerProgress: async () => {
        throw new MQError(code as "NO_ROUTE", `${code} here`);
      },
    }) as unknown as Admin;
  for (const code of ["NO_ROUTE", "TIMEOUT"]) {
    const lines: string[] = [];
    assert.equal(await skipStoredBefore(failing(code), flags, (l) => lines.push(l)), undefined, code);
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, new RegExp(`group g .*${code} here.*printing every message`));
  }
  // a group last run broadcasting: the warning says so, not that the look-up failed
  const lines: string[] = [];
  assert.equal(await skipStoredBefore(failing("NO_PERMISSION"), flags, (l) => lines.push(l)), undefined);
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /group g was last run in broadcasting mode.*printing every message/);
  // a group no broker knows starts where --from says: what was stored before is skipped
  assert.equal(await skipStoredBefore(failing("SUBSCRIPTION_GROUP_NOT_EXIST"), flags, () => {}), from.consumeTimestamp);
});
