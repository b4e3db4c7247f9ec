import assert from "node:assert/strict";
import { test } from "node:test";
import { type Message, prepareBatch, prepareMessage } from "../../../actors/client/messageBuilder.ts";
import { parseSubscription } from "../../../filter/index.ts";
import { decodeProperties, forEachBatchMessage, MAX_MESSAGE_PROPERTIES_BYTES } from "../../../transport/messageRecord.ts";
import { isMQError } from "../../../transport/protocol.ts";

test("properties carry tags, keys, delay and a unique key", () => {
  const p = prepareMessage({ topic: "T", body: "hi", tags: "TagA", keys: ["k1", "k2"], delayLevel: 3, properties: { a: "1" } });
  const props = decodeProperties(p.properties);
  assert.equal(props.TAGS, "TagA");
  assert.equal(props.KEYS, "k1 k2");
  assert.equal(props.DELAY, "3");
  assert.equal(props.a, "1");
  // names that only resemble system ones are the user's
  const own = decodeProperties(prepareMessage({ topic: "T", body: "x", properties: { delay: "3", Tags: "t", DELAY_: "1" } }).properties);
  assert.deepEqual([own.delay, own.Tags, own.DELAY_, own.DELAY], ["3", "t", "1", undefined]);
  assert.equal(props.UNIQ_KEY, p.uniqKey);
  assert.equal(p.body.toString(), "hi");
  const ids = new Set(Array.from({ length: 1000 }, () => prepareMessage({ topic: "T", body: "x" }).uniqKey));
  assert.equal(ids.size, 1000);
});

test("bad messages are MESSAGE_ILLEGAL", () => {
  const bad = [
    { topic: "", body: "x" },
    { topic: "a b", body: "x" },
    { topic: "x".repeat(128), body: "x" },
    { topic: "T", body: "" },
    { topic: "T", body: Buffer.alloc(4 * 1024 * 1024 + 1) },
    { topic: "T", body: 5 },
    { topic: "T", body: "x", properties: { a: "\u0001" } },
    // an own "__proto__" key (as JSON.parse makes): decoded into an object it would be the prototype
    { topic: "T", body: "x", properties: JSON.parse('{"__proto__": "x"}') },
    { topic: "__proto__", body: "x" },
    // RocketMQ's putUserProperty rules: no system names, no blank names or values
    { topic: "T", body: "x", properties: { DELAY: "3" } },
    { topic: "T", body: "x", properties: { UNIQ_KEY: "mine" } },
    { topic: "T", body: "x", properties: { TAGS: "a" } },
    { topic: "T", body: "x", properties: { "__CRC32#": "1" } },
    { topic: "T", body: "x", properties: { " ": "1" } },
    { topic: "T", body: "x", properties: { a: "" } },
    { topic: "T", body: "x", properties: { a: "  " } },
    { topic: "T", body: "x", flag: 1.5 },
    { topic: "T", body: "x", flag: 2 ** 31 },
    // null is no flag, as a null tags, keys or delayLevel is refused (it was read as 0)
    { topic: "T", body: "x", flag: null as never },
    // an array would be stored as properties named "0", "1"
    { topic: "T", body: "x", properties: ["a", "b"] },
  ];
  for (const m of bad)
    assert.throws(
      () => prepareMessage(m as never),
      (e) => isMQError(e, "MESSAGE_ILLEGAL"),
      JSON.stringify(m).slice(0, 60),
    );
});

test("a batch is one body of one topic", () => {
  const b = prepareBatch([
    { topic: "T", body: "a" },
    { topic: "T", body: "bb", tags: "x" },
  ]);
  const seen: string[] = [];
  assert.equal(
    forEachBatchMessage(b.body, (s, e) => seen.push(b.body.toString("utf8", s, e))),
    2,
  );
  assert.deepEqual(seen, ["a", "bb"]);
  assert.equal(b.uniqKeys.length, 2);
  assert.throws(
    () =>
      prepareBatch([
        { topic: "T", body: "a" },
        { topic: "U", body: "a" },
      ]),
    (e) => isMQError(e, "MESSAGE_ILLEGAL"),
  );
  assert.throws(
    () => prepareBatch([]),
    (e) => isMQError(e, "MESSAGE_ILLEGAL"),
  );
  assert.throws(
    () =>
      prepareBatch(
        [
          { topic: "T", body: Buffer.alloc(3000) },
          { topic: "T", body: Buffer.alloc(3000) },
        ],
        4000,
      ),
    (e) => isMQError(e, "MESSAGE_ILLEGAL"),
  );
});

test("a batch to a retry topic is MESSAGE_ILLEGAL (RocketMQ: retry group is not supported for batching)", () => {
  assert.throws(
    () =>
      prepareBatch([
        { topic: "%RETRY%cg", body: "a" },
        { topic: "%RETRY%cg", body: "b" },
      ]),
    (e) => isMQError(e, "MESSAGE_ILLEGAL") && /retry topic/.test((e as Error).message),
  );
  // one message to it is still allowed, as in RocketMQ
  assert.equal(prepareMessage({ topic: "%RETRY%cg", body: "a" }).topic, "%RETRY%cg");
});

test("a batch entry that is not a message object is MESSAGE_ILLEGAL naming its index", () => {
  for (const [batch, index] of [
    [[null], 0],
    [[undefined], 0],
    [["T"], 0],
    [[{ topic: "T", body: "a" }, null], 1],
    [[{ topic: "T", body: "a" }, undefined], 1],
  ] as const) {
    assert.throws(
      () => prepareBatch(batch as never),
      (e) => isMQError(e, "MESSAGE_ILLEGAL") && (e as Error).message.includes(`message ${index}`),
      JSON.stringify(batch),
    );
  }
});

/**
 * The most the broker adds to a message's properties: sending it back (RETRY_TOPIC = the longest
 * topic, ORIGIN_MESSAGE_ID = a 32-character id, DELAY = a level) through the delay levels (REAL_TOPIC =
 * the longest topic, %RETRY%<group> included, REAL_QID = a queue id), level and queue id 10 digits.
 */
const BROKER_ADDS =
  ["RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELAY", "REAL_TOPIC", "REAL_QID"].reduce((n, name) => n + name.length + 2, 0) +
  127 +
  32 +
  10 +
  127 +
  10;

test("properties are refused by the client at the store's limit (32 767 bytes less the CRC property) less what the broker adds when it sends the message back", () => {
  const limit = MAX_MESSAGE_PROPERTIES_BYTES - BROKER_ADDS;
  const sized = (bytes: number, delayLevel?: number) => {
    // "big" \u0001 value \u0002 plus the WAIT and UNIQ_KEY (and DELAY) properties every message carries
    const base = Buffer.byteLength(prepareMessage({ topic: "T", body: "x", delayLevel, properties: { big: "v" } }).properties) - 1;
    return { topic: "T", body: "x", delayLevel, properties: { big: "v".repeat(bytes - base) } };
  };
  assert.equal(Buffer.byteLength(prepareMessage(sized(limit)).properties), limit);
  assert.equal(Buffer.byteLength(prepareMessage(sized(limit, 3)).properties), limit, "a delayed message has the same limit");
  for (const build of [(m: ReturnType<typeof sized>) => prepareMessage(m), (m: ReturnType<typeof sized>) => prepareBatch([m])])
    assert.throws(
      () => build(sized(limit + 1)),
      (e) =>
        isMQError(e, "MESSAGE_ILLEGAL") &&
        new RegExp(`are ${limit + 1} bytes; at most ${limit} are allowed`).test((e as Error).message) &&
        /retries/.test((e as Error).message),
    );
  assert.throws(
    () => prepareMessage(sized(limit + 1, 3)),
    (e) => isMQError(e, "MESSAGE_ILLEGAL"),
  );
  assert.ok(prepareBatch([sized(limit)]).body.length > limit, "a batch member at the limit is taken");
  // multi-byte text is counted in UTF-8 bytes
  const wide = sized(limit - 2);
  wide.properties.big = `${wide.properties.big.slice(1)}\u00e9`;
  assert.equal(Buffer.byteLength(prepareMessage(wide).properties), limit - 1);
});

test("text UTF-8 cannot carry (an unpaired surrogate) is MESSAGE_ILLEGAL, not turned into U+FFFD on the way", () => {
  // a string cut in the middle of an emoji ends in half a surrogate pair: stored as UTF-8 it would
  // come back as U+FFFD, a different tag, key or value (a tag subscription would never match it)
  for (const fields of [
    { tags: "Tag\ud83d" },
    { keys: "k\ude00" },
    { keys: ["ok", "\ud83d"] },
    { properties: { "a\ud800": "v" } },
    { properties: { a: "v\udfff" } },
    { body: "x\ud800" },
  ] as Partial<Message>[])
    assert.throws(
      () => prepareMessage({ topic: "T", body: "x", ...fields }),
      (e) => isMQError(e, "MESSAGE_ILLEGAL") && /unpaired surrogate/.test((e as Error).message),
      JSON.stringify(fields),
    );
  // paired surrogates (an emoji) are text like any other, and come back as sent
  const p = prepareMessage({
    topic: "T",
    body: "\u{1F600}",
    tags: "\u{1F600}",
    keys: "\u{1F600}",
    properties: { "\u{1F600}": "\u{1F600}" },
  });
  const back = decodeProperties(Buffer.from(p.properties, "utf8").toString("utf8"));
  assert.deepEqual([back.TAGS, back.KEYS, back["\u{1F600}"], p.body.toString("utf8")], Array(4).fill("\u{1F600}"));
});

test("delayLevel is a 32-bit int as in RocketMQ: a larger one is refused, not stored in exponent form and read back as level 1", () => {
  for (const delayLevel of [2 ** 31, 1e21, 1e300, Number.MAX_VALUE])
    assert.throws(
      () => prepareMessage({ topic: "T", body: "x", delayLevel }),
      (e) => isMQError(e, "MESSAGE_ILLEGAL") && /delayLevel must be an integer from 0 to 2147483647/.test((e as Error).message),
      String(delayLevel),
    );
  // a level past the broker's last is still taken: the broker uses its last level (RocketMQ's rule)
  assert.equal(decodeProperties(prepareMessage({ topic: "T", body: "x", delayLevel: 2 ** 31 - 1 }).properties).DELAY, "2147483647");
});

test("a tag no tag subscription could select is MESSAGE_ILLEGAL: blank, containing ||, or padded", () => {
  // subscriptions split on || and trim each tag (as Java trims), so such a message would reach only
  // "*" and SQL92 subscribers; RocketMQ 5's client refuses blank tags and tags with "|" too
  for (const tags of [" ", "\t", "TagA||TagB", "TagA || TagB", " TagA", "TagA ", "TagA\n", "\u0000TagA"])
    assert.throws(
      () => prepareMessage({ topic: "T", body: "x", tags }),
      (e) => isMQError(e, "MESSAGE_ILLEGAL") && /no tag subscription could select it/.test((e as Error).message),
      JSON.stringify(tags),
    );
  // what a subscription can name is taken: inner spaces, one "|", "*", non-ASCII, other Unicode spaces
  for (const tags of ["Tag A", "A|B", "*", "\u00e9t\u00e9", "\u00a0TagA"]) {
    const sent = decodeProperties(prepareMessage({ topic: "T", body: "x", tags }).properties).TAGS;
    assert.equal(sent, tags);
    assert.ok(parseSubscription("T", `Other || ${tags}`).tagsSet.includes(tags), JSON.stringify(tags));
  }
});

test("properties given as a Map are MESSAGE_ILLEGAL, not silently dropped (a Map has no own entries to read)", () => {
  assert.throws(
    () => prepareMessage({ topic: "T", body: "x", properties: new Map([["region", "eu"]]) as never }),
    (e) => isMQError(e, "MESSAGE_ILLEGAL") && /Object\.fromEntries/.test((e as Error).message),
  );
  const nullProto = Object.assign(Object.create(null) as Record<string, string>, { region: "eu" });
  assert.equal(decodeProperties(prepareMessage({ topic: "T", body: "x", properties: nullProto }).properties).region, "eu");
});

test("a delayLevel or flag of the wrong type is shown as given: a string quoted, an object without a prototype by its type, not a TypeError", () => {
  const bare = Object.create(null) as never;
  for (const [msg, shown] of [
    [{ topic: "T", body: "x", delayLevel: "3" as never }, /not "3"/],
    [{ topic: "T", body: "x", delayLevel: bare }, /not a value of type object/],
    [{ topic: "T", body: "x", flag: "1" as never }, /not "1"/],
    [{ topic: "T", body: "x", flag: bare }, /not a value of type object/],
  ] as const)
    assert.throws(
      () => prepareMessage(msg),
      (e) => isMQError(e, "MESSAGE_ILLEGAL") && shown.test((e as Error).message),
    );
});

test("RocketMQ's names of message fields named otherwise here (delayTimeLevel, tag, key) are refused, naming ours: the message would be sent without its delay, tag or key", () => {
  for (const [field, ours] of [
    ["delayTimeLevel", "delayLevel"],
    ["tag", "tags"],
    ["key", "keys"],
  ] as const) {
    const msg = { topic: "T", body: "x", [field]: field === "delayTimeLevel" ? 3 : "v" } as unknown as Message;
    for (const build of [() => prepareMessage(msg), () => prepareBatch([{ topic: "T", body: "ok" }, msg])])
      assert.throws(build, (e) => isMQError(e, "MESSAGE_ILLEGAL") && new RegExp(`\\b${field}\\b.*\\b${ours}\\b`).test(String(e)), field);
  }
  // other fields a message carries are no matter
  const p = prepareMessage({ topic: "T", body: "x", tags: "a", keys: "k", delayLevel: 2, extra: 1 } as unknown as Message);
  assert.equal(decodeProperties(p.properties).DELAY, "2");
});
