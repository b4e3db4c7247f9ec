/**
 * Arguments of the wrong shape are refused with ILLEGAL_ARGUMENT saying what to give, not a
 * TypeError or a client that runs with something else than was meant: instance names, a push
 * consumer's subscriptions, PullConsumer.seek's queue, and resetOffsetByTimestamp's time.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, isMQError, Producer, PullConsumer, PushConsumer, startLocalCluster } from "../../../index.ts";
import { refusal, tempDir } from "../../helpers.ts";

/** Nothing listens there: clients start without asking it anything. */
const nameservers = ["tcp://127.0.0.1:1"];
const listener = async () => "CONSUME_SUCCESS" as const;

test("an instanceName that is not 1-128 bytes free of '@' and control characters is ILLEGAL_ARGUMENT for every client", async () => {
  const bad: unknown[] = ["", "a@b", "tab\there", "line\n", "nul\u0000", "x".repeat(129), "é".repeat(65), 42, null, ["a"]];
  for (const instanceName of bad)
    for (const [what, start] of [
      ["Producer", () => Producer.start({ group: "pgInst", nameservers, instanceName } as never)],
      [
        "PushConsumer",
        () => PushConsumer.start({ group: "cgInst", nameservers, subscriptions: { T: "*" }, listener, instanceName } as never),
      ],
      ["PullConsumer", () => PullConsumer.start({ group: "cgInst", nameservers, instanceName } as never)],
      ["Admin", () => Admin.start({ nameservers, instanceName } as never)],
    ] as const) {
      const e = await refusal(start);
      assert.ok(
        isMQError(e, "ILLEGAL_ARGUMENT") &&
          (e as Error).message.startsWith("instanceName ") &&
          /without '@' or control characters/.test((e as Error).message),
        `${what} ${JSON.stringify(instanceName)}: ${String(e)}`,
      );
    }
  // names such as the examples' and tests' pass
  for (const instanceName of ["c0", "orderly-1", "worker#2", "two words", "x".repeat(128), "é".repeat(64)]) {
    const p = await Producer.start({ group: "pgInst", nameservers, instanceName });
    await p.close();
  }
});

test("PushConsumer subscriptions given as an array or a Map are ILLEGAL_ARGUMENT, not topics named 0, 1, ... or none", async () => {
  for (const [subscriptions, shown] of [
    [["TopicA"], /as an array/],
    [[["TopicA", "*"]], /as an array/],
    [new Map([["TopicA", "*"]]), /as a Map.*Object\.fromEntries/],
  ] as const) {
    const e = await refusal(() =>
      PushConsumer.start({ group: "cgSubs", nameservers, subscriptions: subscriptions as never, listener, instanceName: "subs" }),
    );
    assert.ok(
      isMQError(e, "ILLEGAL_ARGUMENT") &&
        shown.test((e as Error).message) &&
        /\{ TopicA: "\*", TopicB: "TagA \|\| TagB" \}/.test((e as Error).message),
      `${JSON.stringify([...subscriptions])}: ${String(e)}`,
    );
  }
});

test("PullConsumer.seek without a queue { topic, brokerName, queueId } is ILLEGAL_ARGUMENT, not a TypeError", async () => {
  const pc = await PullConsumer.start({ group: "cgSeekArgs", nameservers, instanceName: "seekArgs" });
  try {
    for (const queue of [null, undefined, "T@b@0", 0])
      await assert.rejects(
        pc.seek(queue as never, 0),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^seek takes a queue \{ topic, brokerName, queueId \}/.test(e.message),
        String(queue),
      );
    await assert.rejects(
      pc.seek({ topic: "T" } as never, 0),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /an object without them/.test(e.message),
    );
    // a queue of the right shape that it does not hold: as before
    await assert.rejects(
      pc.seek({ topic: "T", brokerName: "b", queueId: 0 }, 0),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /is not assigned to this consumer/.test(e.message),
    );
  } finally {
    await pc.close();
  }
});

test("resetOffsetByTimestamp refuses a time that is not an integer of ms >= 0 (or a valid Date), and it and consumerProgress a group that is no string, with ILLEGAL_ARGUMENT before asking a broker", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const cluster = await startLocalCluster({ dir: path.join(dir, "c"), broker: { flush: "async" } });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  try {
    await admin.createTopic({ topic: "ResetTs", readQueueNums: 1, writeQueueNums: 1 });
    for (const ts of [
      "2025-01-31T12:00:00Z",
      "1700000000000",
      -1,
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      null,
      undefined,
      new Date("soon"),
    ])
      await assert.rejects(
        admin.resetOffsetByTimestamp("cgResetTs", "ResetTs", ts as never),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^resetOffsetByTimestamp needs a time in ms since the epoch/.test(e.message),
        String(ts),
      );
    // a group that is no string: refused before any broker is asked, naming the call
    for (const group of [5, null, undefined, { name: "g" }, Object.create(null)]) {
      await assert.rejects(
        admin.resetOffsetByTimestamp(group as never, "ResetTs", 0),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^resetOffsetByTimestamp needs the consumer group's name/.test(e.message),
        typeof group,
      );
      await assert.rejects(
        admin.consumerProgress(group as never),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^examineConsumeStats needs the consumer group's name/.test(e.message),
        typeof group,
      );
    }
    // a valid time (a Date too) reaches the brokers, which do not know the group
    for (const ts of [Date.now(), new Date(0)])
      await assert.rejects(
        admin.resetOffsetByTimestamp("cgResetTs", "ResetTs", ts),
        (e) => isMQError(e, "SUBSCRIPTION_GROUP_NOT_EXIST"),
        String(ts),
      );
  } finally {
    await admin.close();
    await cluster.close();
  }
});

test("a wrong option value is shown as it was given: a string quoted (not read as the number it spells), an object without a prototype by its type rather than a TypeError", async () => {
  const bare = Object.create(null) as never;
  const cases: [string, () => Promise<unknown>, string, RegExp][] = [
    ["Producer group", () => Producer.start({ group: bare, nameservers }), "ILLEGAL_ARGUMENT", /a value of type object/],
    [
      "PushConsumer model",
      () => PushConsumer.start({ group: "cgShown", nameservers, subscriptions: { T: "*" }, listener, model: bare }),
      "ILLEGAL_ARGUMENT",
      /a value of type object/,
    ],
    [
      "PushConsumer consumeFromWhere",
      () => PushConsumer.start({ group: "cgShown", nameservers, subscriptions: { T: "*" }, listener, consumeFromWhere: bare }),
      "ILLEGAL_ARGUMENT",
      /a value of type object/,
    ],
    [
      "PushConsumer consumeTimeoutMinutes",
      () =>
        PushConsumer.start({ group: "cgShown", nameservers, subscriptions: { T: "*" }, listener, consumeTimeoutMinutes: "15" as never }),
      "ILLEGAL_ARGUMENT",
      /got "15"/,
    ],
    [
      "PullConsumer consumeFromWhere",
      () => PullConsumer.start({ group: "cgShown", nameservers, consumeFromWhere: bare }),
      "ILLEGAL_ARGUMENT",
      /a value of type object/,
    ],
  ];
  for (const [what, start, code, shown] of cases) {
    const e = await refusal(start);
    assert.ok(isMQError(e, code as never), `${what}: ${String(e)}`);
    assert.match((e as Error).message, shown, what);
  }
});
