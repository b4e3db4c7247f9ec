/**
 * The client's send-back (reference §12.1): a send-back the broker refuses is logged at warn,
 * naming group, topic, msgId, the code and the broker's message, at most once per code per interval.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createSendBack, SEND_BACK_FAILURE_LOG_INTERVAL_MS, type SendBackHost, sendBackLog } from "../../../actors/client/sendBack.ts";
import type { MessageExt } from "../../../transport/messageRecord.ts";
import { MQError } from "../../../transport/protocol.ts";
import { monotonicFollowsDate } from "../../helpers.ts";

function msg(id: string): MessageExt {
  return {
    topic: "T",
    brokerName: "b",
    queueId: 0,
    queueOffset: 0,
    commitLogOffset: 100,
    msgId: id,
    properties: {},
    reconsumeTimes: 0,
  } as unknown as MessageExt;
}

function host(answer: () => Promise<unknown>): SendBackHost {
  return {
    node: { ref: () => ({ ask: answer }) } as unknown as SendBackHost["node"],
    brokerAddress: (name) => (name === "b" ? "tcp://10.0.0.1:10911" : undefined),
  };
}

test("a refused send-back is logged at warn (group, topic, msgId, code, message), once per code per interval", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(sendBackLog(), "warn", (fields: Record<string, unknown>, m: string) => void lines.push({ fields, msg: m }));
  let error = new MQError("INVALID_PARAMETER", "CONSUMER_SEND_MSG_BACK's delayLevel must be an integer.");
  const sendBack = createSendBack(
    host(async () => {
      throw error;
    }),
    "g",
    16,
  );
  const m1 = msg("M1");
  assert.deepEqual(await sendBack([m1], 0), [m1], "a refused message is consumed again locally");
  assert.equal(lines.length, 1);
  assert.deepEqual(lines[0]!.fields, {
    group: "g",
    topic: "T",
    msgId: "M1",
    broker: "tcp://10.0.0.1:10911",
    delayLevel: 0,
    code: "INVALID_PARAMETER",
    error: error.message,
    suppressed: 0,
  });
  assert.match(lines[0]!.msg, /INVALID_PARAMETER/);
  assert.match(lines[0]!.msg, /delayLevel must be an integer/);

  // the same code again within the interval: counted, not logged; another code: its own line
  t.mock.timers.tick(SEND_BACK_FAILURE_LOG_INTERVAL_MS - 1);
  await sendBack([msg("M2"), msg("M3")], 0);
  assert.equal(lines.length, 1);
  error = new MQError("NO_PERMISSION", "The retry topic is not writable.");
  await sendBack([msg("M4")], 0);
  assert.equal(lines.length, 2);
  assert.equal(lines[1]!.fields.code, "NO_PERMISSION");
  error = new MQError("INVALID_PARAMETER", "again");
  t.mock.timers.tick(1);
  await sendBack([msg("M5")], 0);
  assert.equal(lines.length, 3, "logged again once the interval has passed");
  assert.equal(lines[2]!.fields.suppressed, 2, "with the count of those not logged meanwhile");

  // a message whose broker has no address is not sent back either: said so
  const lost = { ...msg("M6"), brokerName: "gone" } as MessageExt;
  assert.deepEqual(await sendBack([lost], 0), [lost]);
  assert.equal(lines.length, 4);
  assert.match(lines[3]!.msg, /gone/);
});

test("a send-back that succeeds logs nothing", async (t) => {
  const lines: unknown[] = [];
  t.mock.method(sendBackLog(), "warn", (...a: unknown[]) => void lines.push(a));
  const sendBack = createSendBack(
    host(async () => ({ fields: {} })),
    "g",
    16,
  );
  assert.deepEqual(await sendBack([msg("M1")], 0), []);
  assert.equal(lines.length, 0);
});
