/**
 * The client's send-back (reference §12.1): a send-back the broker refuses is logged at warn,
 * naming group, topic, msgId, the code and the broker's message, at most once per code per interval;
 * the consumer's own retry copy that follows a failed send-back (its properties, the brokers it
 * tries) and when the message stays local.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  createSendBack,
  retryCopyOf,
  retryCopyTargets,
  SEND_BACK_FAILURE_LOG_INTERVAL_MS,
  type SendBackHost,
  sendBackLog,
} from "../../../actors/client/sendBack.ts";
import { decodeProperties, type MessageExt, MessageSysFlag } from "../../../transport/messageRecord.ts";
import { BrokerActor, MessageConst, MQError } from "../../../transport/protocol.ts";
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

// --- the consumer's own retry copy when the send-back fails (reference §12.1) -----------------

function failed(overrides: Partial<MessageExt> = {}): MessageExt {
  return {
    ...msg("U1"),
    topic: "Orders",
    brokerName: "a",
    body: Buffer.from("hello"),
    flag: 7,
    sysFlag: 0,
    properties: {
      [MessageConst.UNIQ_KEY]: "U1",
      [MessageConst.TAGS]: "TagA",
      [MessageConst.KEYS]: "k1",
      [MessageConst.CONSUME_START_TIME]: "123",
      region: "eu",
    },
    ...overrides,
  } as MessageExt;
}

test("retryCopyOf: RocketMQ's fallback properties: RETRY_TOPIC, ORIGIN_MESSAGE_ID, RECONSUME_TIME + 1, MAX_RECONSUME_TIMES, delay 3 + reconsumeTimes", () => {
  const m = failed({ reconsumeTimes: 2 });
  const copy = retryCopyOf(m, "g", 0, 16);
  assert.equal(copy.topic, "%RETRY%g");
  assert.equal(copy.body, m.body);
  assert.equal(copy.flag, 7);
  assert.equal(copy.sysFlag, 0);
  assert.equal(copy.reconsumeTimes, 3);
  assert.equal(copy.toDLQ, false);
  assert.deepEqual(copy.properties, {
    [MessageConst.UNIQ_KEY]: "U1",
    [MessageConst.TAGS]: "TagA",
    [MessageConst.KEYS]: "k1",
    region: "eu",
    [MessageConst.RETRY_TOPIC]: "Orders",
    [MessageConst.ORIGIN_MESSAGE_ID]: "U1",
    [MessageConst.RECONSUME_TIME]: "3",
    [MessageConst.MAX_RECONSUME_TIMES]: "16",
    [MessageConst.DELAY]: "5",
  });
  assert.equal(m.properties[MessageConst.CONSUME_START_TIME], "123", "the consumed message is not changed");
  assert.equal(m.properties[MessageConst.DELAY], undefined);

  // a retried message keeps its first id and original topic; a level the listener asked for is kept
  const retried = failed({
    msgId: "U1",
    properties: { [MessageConst.ORIGIN_MESSAGE_ID]: "FIRST", [MessageConst.RETRY_TOPIC]: "Orders", [MessageConst.DELAY]: "4" },
  });
  const c2 = retryCopyOf(retried, "g", 7, 16);
  assert.equal(c2.properties[MessageConst.ORIGIN_MESSAGE_ID], "FIRST");
  assert.equal(c2.properties[MessageConst.RETRY_TOPIC], "Orders");
  assert.equal(c2.properties[MessageConst.DELAY], "7");
  // one whose topic was not restored still names its original topic
  const unrestored = failed({ topic: "%RETRY%g", properties: { [MessageConst.RETRY_TOPIC]: "Orders" } });
  assert.equal(retryCopyOf(unrestored, "g", 0, 16).properties[MessageConst.RETRY_TOPIC], "Orders");
  // a body still compressed (LZ4 from another client) travels with its compression bits
  const lz4 = MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_LZ4_TYPE;
  assert.equal(retryCopyOf(failed({ sysFlag: lz4 | MessageSysFlag.BORNHOST_V6 }), "g", 0, 16).sysFlag, lz4);
});

test("retryCopyOf: past maxReconsumeTimes, or asked for the dead-letter queue, the copy carries DELAY -1 for %DLQ%", () => {
  // reconsumeTimes 15 of 16: the 16th retry still goes through the retry topic, at level 18
  const last = retryCopyOf(failed({ reconsumeTimes: 15 }), "g", 0, 16);
  assert.deepEqual([last.toDLQ, last.reconsumeTimes, last.properties[MessageConst.DELAY]], [false, 16, "18"]);
  // reconsumeTimes 16 of 16: used up (the broker's send-back dead-letters it too)
  const dead = retryCopyOf(failed({ reconsumeTimes: 16 }), "g", 0, 16);
  assert.deepEqual([dead.toDLQ, dead.reconsumeTimes, dead.properties[MessageConst.DELAY]], [true, 17, "-1"]);
  assert.equal(dead.properties[MessageConst.RECONSUME_TIME], "17");
  const asked = retryCopyOf(failed({ reconsumeTimes: 0 }), "g", -1, 16);
  assert.deepEqual([asked.toDLQ, asked.reconsumeTimes, asked.properties[MessageConst.DELAY]], [true, 1, "-1"]);
  const none = retryCopyOf(failed(), "g", 0, 0);
  assert.equal(none.toDLQ, true, "maxReconsumeTimes 0: no retry");
});

test("retryCopyTargets: one queue per broker, other brokers first, unreachable ones after them, the failed broker last", () => {
  const q = (brokerName: string, queueId: number) => ({ topic: "%RETRY%g", brokerName, queueId });
  const queues = [q("a", 0), q("b", 0), q("b", 1), q("c", 0), q("d", 0)];
  for (let i = 0; i < 20; i++) {
    const t = retryCopyTargets(queues, "a", (n) => n === "c");
    assert.equal(t.length, 4);
    assert.deepEqual(
      t
        .slice(0, 2)
        .map((x) => x.brokerName)
        .sort(),
      ["b", "d"],
    );
    assert.deepEqual(
      t.slice(2).map((x) => x.brokerName),
      ["c", "a"],
    );
  }
  assert.deepEqual(retryCopyTargets([q("a", 0)], "a"), [q("a", 0)], "the failed broker when it is the only one");
  assert.deepEqual(retryCopyTargets([], "a"), []);
});

interface Asked {
  addr: string;
  actor: string;
  event: Record<string, unknown>;
  body?: Buffer;
}

/** A host with brokers a (tcp://10.0.0.1) and b (tcp://10.0.0.2); `answer` decides each ask. */
function fallbackHost(
  answer: (a: Asked) => Promise<unknown>,
  queues = ["a", "b"],
): { host: SendBackHost; asked: Asked[]; refreshed: boolean[] } {
  const asked: Asked[] = [];
  const refreshed: boolean[] = [];
  const addrs: Record<string, string> = { a: "tcp://10.0.0.1:10911", b: "tcp://10.0.0.2:10911" };
  const node = {
    ref: (addr: string, actor: string) => ({
      ask: (event: Record<string, unknown>, opts?: { body?: Buffer }) => {
        const a = { addr, actor, event, body: opts?.body };
        asked.push(a);
        return answer(a);
      },
    }),
  } as unknown as SendBackHost["node"];
  const host: SendBackHost = {
    node,
    brokerAddress: (name) => addrs[name],
    publishQueues: async (topic, refresh) => {
      refreshed.push(refresh === true);
      return queues.map((brokerName) => ({ topic, brokerName, queueId: 0 }));
    },
  };
  return { host, asked, refreshed };
}

test("a send-back that fails is followed by the consumer's own copy to %RETRY%<group> on another broker, logged at warn", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(sendBackLog(), "warn", (fields: Record<string, unknown>, m: string) => void lines.push({ fields, msg: m }));
  const { host, asked } = fallbackHost(async (a) => {
    if (a.actor === BrokerActor.SENDBACK) throw new MQError("TIMEOUT", "no answer within 5000 ms");
    return { fields: { status: "SEND_OK" } };
  });
  const m = failed({ reconsumeTimes: 1 });
  assert.deepEqual(await createSendBack(host, "g", 16)([m], 0), [], "taken by the retry copy: not consumed again locally");
  assert.deepEqual(
    asked.map((a) => [a.addr, a.actor]),
    [
      ["tcp://10.0.0.1:10911", BrokerActor.SENDBACK],
      ["tcp://10.0.0.2:10911", BrokerActor.BROKER],
    ],
    "the send-back to the message's broker a, then the copy to broker b",
  );
  const send = asked[1]!.event;
  assert.equal(send.type, "SEND_MESSAGE");
  assert.equal(send.topic, "%RETRY%g");
  assert.equal(send.producerGroup, "CLIENT_INNER_PRODUCER");
  assert.equal(send.reconsumeTimes, 2, "RECONSUME_TIME travels as the request's reconsumeTimes");
  assert.equal(send.flag, 7);
  assert.equal(asked[1]!.body!.toString(), "hello");
  const props = decodeProperties(send.properties as string);
  assert.equal(props[MessageConst.RECONSUME_TIME], undefined, "moved into the request, as RocketMQ's producer does");
  assert.equal(props[MessageConst.MAX_RECONSUME_TIMES], "16");
  assert.equal(props[MessageConst.RETRY_TOPIC], "Orders");
  assert.equal(props[MessageConst.ORIGIN_MESSAGE_ID], "U1");
  assert.equal(props[MessageConst.DELAY], "4");
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.fields.code, "TIMEOUT");
  assert.equal(lines[0]!.fields.retryCopyBroker, "b");
  assert.match(lines[0]!.msg, /sent its own copy to %RETRY%g through broker b instead/);
});

test("the retry copy tries the next broker when one fails, and the message stays local only when every one fails", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(sendBackLog(), "warn", (fields: Record<string, unknown>, m: string) => void lines.push({ fields, msg: m }));
  // the send-back is refused; broker b refuses the copy too, a (the message's own) takes it
  const first = fallbackHost(async (a) => {
    if (a.actor === BrokerActor.SENDBACK) throw new MQError("SUBSCRIPTION_GROUP_NOT_EXIST", "no group");
    if (a.addr.includes("10.0.0.2")) throw new MQError("NO_PERMISSION", "read only");
    return { fields: { status: "SEND_OK" } };
  });
  assert.deepEqual(await createSendBack(first.host, "g", 16)([failed()], 0), []);
  assert.deepEqual(
    first.asked.map((a) => a.addr.slice(6, 14)),
    ["10.0.0.1", "10.0.0.2", "10.0.0.1"],
  );
  assert.equal(lines.at(-1)!.fields.retryCopyBroker, "a");

  // every broker fails: the caller keeps the message, and the log says both failed
  const none = fallbackHost(async (a) => {
    throw new MQError(a.actor === BrokerActor.SENDBACK ? "TIMEOUT" : "SYSTEM_BUSY", "busy");
  });
  const m = failed();
  assert.deepEqual(await createSendBack(none.host, "g", 16)([m], 0), [m]);
  assert.equal(lines.at(-1)!.fields.retryCopyCode, "SYSTEM_BUSY");
  assert.match(lines.at(-1)!.msg, /failed too, with SYSTEM_BUSY: busy The consumer keeps the message and retries it locally/);

  // the retry topic only on the failed broker in the cached route: the route is asked for again first
  const only = fallbackHost(
    async (a) => {
      if (a.actor === BrokerActor.SENDBACK) throw new MQError("TIMEOUT", "x");
      return { fields: {} };
    },
    ["a"],
  );
  assert.deepEqual(await createSendBack(only.host, "g", 16)([failed()], 0), []);
  assert.deepEqual(only.refreshed, [false, true]);
});

// --- send-backs that a dropped queue or the consumer's close cut short -------------------------

/** A promise with its settle functions. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

test("a send-back failing after its queue was dropped is not followed by a copy: the message is returned unsent (its offset stays before it)", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(sendBackLog(), "warn", (fields: Record<string, unknown>, m: string) => void lines.push({ fields, msg: m }));
  const answer = deferred<unknown>();
  const { host, asked } = fallbackHost((a) => (a.actor === BrokerActor.SENDBACK ? answer.promise : Promise.resolve({ fields: {} })));
  const queue = { dropped: false };
  const m = failed();
  const pending = createSendBack(host, "g", 16)([m], 0, { queue });
  // the queue moves to another member while the send-back waits; then the send-back fails
  queue.dropped = true;
  answer.reject(new MQError("TIMEOUT", "no answer within 5000 ms"));
  assert.deepEqual(await pending, [m], "not sent back: the caller leaves it unacknowledged");
  assert.deepEqual(
    asked.map((a) => a.actor),
    [BrokerActor.SENDBACK],
    "no copy to %RETRY%g: the queue's next owner consumes the message from the queue",
  );
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.fields.notCopied, "queueDropped");
  assert.match(lines[0]!.msg, /not acknowledged/);
});

test("close: no copy once it began; it waits for the send-backs in flight, and after it resolved nothing is sent or logged", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(sendBackLog(), "warn", (fields: Record<string, unknown>, m: string) => void lines.push({ fields, msg: m }));
  const answers: ReturnType<typeof deferred<unknown>>[] = [];
  const { host, asked } = fallbackHost((a) => {
    if (a.actor !== BrokerActor.SENDBACK) return Promise.resolve({ fields: {} });
    const d = deferred<unknown>();
    answers.push(d);
    return d.promise;
  });
  const sendBack = createSendBack(host, "g", 16);
  const [m1, m2] = [failed({ msgId: "M1" }), failed({ msgId: "M2" })];
  const first = sendBack([m1], 0);
  const second = sendBack([m2], 0);
  assert.equal(sendBack.inFlight, 2);
  let closed: boolean | undefined;
  const closing = sendBack.close(60_000).then((settled) => (closed = settled));
  // the first fails while closing: no copy, logged, returned unsent
  answers[0]!.reject(new MQError("TIMEOUT", "no answer"));
  assert.deepEqual(await first, [m1]);
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.fields.notCopied, "closing");
  assert.equal(closed, undefined, "close still waits for the second");
  // the second succeeds: close resolves, all settled
  answers[1]!.resolve({ fields: {} });
  assert.deepEqual(await second, []);
  await closing;
  assert.equal(closed, true);
  assert.equal(sendBack.inFlight, 0);
  assert.deepEqual(
    asked.map((a) => a.actor),
    [BrokerActor.SENDBACK, BrokerActor.SENDBACK],
    "no copy",
  );
  // after close: nothing is sent, every message comes back unsent
  const m3 = failed({ msgId: "M3" });
  assert.deepEqual(await sendBack([m3], 0), [m3]);
  assert.equal(asked.length, 2);
  assert.equal(lines.length, 1);
});

test("close gives up after its wait: a send-back ending later starts no copy and logs nothing", async (t) => {
  const lines: unknown[] = [];
  t.mock.method(sendBackLog(), "warn", (...a: unknown[]) => void lines.push(a));
  const answer = deferred<unknown>();
  const { host, asked } = fallbackHost((a) => (a.actor === BrokerActor.SENDBACK ? answer.promise : Promise.resolve({ fields: {} })));
  const sendBack = createSendBack(host, "g", 16);
  const m = failed();
  const pending = sendBack([m], 0);
  assert.equal(await sendBack.close(1), false, "not settled within the wait");
  answer.reject(new MQError("TIMEOUT", "no answer"));
  assert.deepEqual(await pending, [m]);
  assert.equal(asked.length, 1, "no copy");
  assert.equal(lines.length, 0, "nothing logged after close resolved");
  assert.equal(sendBack.inFlight, 0);
});
