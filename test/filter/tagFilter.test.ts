import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseSubscription, tagMatches, tagStringMatches, tagsCodeOf, tagsHashCode } from "../../filter/index.ts";
import { isMQError } from "../../transport/protocol.ts";

describe("tagsHashCode = Java String.hashCode", () => {
  it("matches values computed by Java", () => {
    assert.equal(tagsHashCode(""), 0);
    assert.equal(tagsHashCode("a"), 97);
    assert.equal(tagsHashCode("TagA"), 2598919);
    assert.equal(tagsHashCode("hello"), 99162322);
    assert.equal(tagsHashCode("Hello, World!"), 1498789909);
    // overflow wraps to negative int32
    assert.equal(tagsHashCode("polygenelubricants"), -2147483648);
    // UTF-16 code units, not code points
    assert.equal(tagsHashCode("\u{1F600}"), 0xd83d * 31 + 0xde00);
  });
  it("a message without a tag has code 0", () => {
    assert.equal(tagsCodeOf(undefined), 0);
    assert.equal(tagsCodeOf("TagA"), 2598919);
  });
});

describe("parseSubscription (FilterAPI.buildSubscriptionData)", () => {
  it("* and empty subscribe to everything", () => {
    for (const e of ["*", "", "  ", " * "]) {
      const s = parseSubscription("T", e, 7);
      assert.deepEqual(s, { topic: "T", subString: "*", expressionType: "TAG", tagsSet: [], codeSet: [], subVersion: 7 });
    }
  });
  it("splits on ||, trims, keeps case and the verbatim subString", () => {
    const s = parseSubscription("T", "TAG1 || Tag2 || tag3");
    assert.deepEqual(s.tagsSet, ["TAG1", "Tag2", "tag3"]);
    assert.deepEqual(s.codeSet, ["TAG1", "Tag2", "tag3"].map(tagsHashCode));
    assert.equal(s.subString, "TAG1 || Tag2 || tag3");
    assert.deepEqual(parseSubscription("T", "A || B").tagsSet, ["A", "B"]);
    assert.deepEqual(parseSubscription("T", "A ||  || A||B ").tagsSet, ["A", "B"]);
  });
  it("trims as Java's String.trim: control characters go, other Unicode spaces stay", () => {
    assert.deepEqual(parseSubscription("T", "\u0001TagA\t|| TagB\u00a0").tagsSet, ["TagA", "TagB\u00a0"]);
    assert.deepEqual(parseSubscription("T", "\u00a0").tagsSet, ["\u00a0"]);
    assert.equal(parseSubscription("T", "\u0000*\n").subString, "*");
  });
  it("SQL92 subscriptions are compiled and typed", () => {
    const s = parseSubscription("T", { sql92: "a > 5 AND b = 'x'" });
    assert.equal(s.expressionType, "SQL92");
    assert.equal(s.subString, "a > 5 AND b = 'x'");
    assert.deepEqual(s.tagsSet, []);
  });
  it("bad expressions fail with SUBSCRIPTION_PARSE_FAILED", () => {
    for (const bad of ["||", " || ", { sql92: "" }, { sql92: "a >" }, 5 as unknown as string]) {
      assert.throws(
        () => parseSubscription("T", bad),
        (e: unknown) => isMQError(e, "SUBSCRIPTION_PARSE_FAILED") && /TagA|sql92|selector/i.test((e as Error).message),
      );
    }
  });

  it("an expression with an unpaired surrogate (which no message can carry) is refused, not left to match nothing", () => {
    for (const bad of ["TagA || Tag\ud83d", "\ude00", { sql92: "a = 'x\ud800'" }])
      assert.throws(
        () => parseSubscription("T", bad),
        (e: unknown) => isMQError(e, "SUBSCRIPTION_PARSE_FAILED") && /unpaired surrogate/.test((e as Error).message),
        JSON.stringify(bad),
      );
    assert.deepEqual(parseSubscription("T", "\u{1F600} || A").tagsSet, ["\u{1F600}", "A"]);
  });

  it("an SQL92 selector that is not a string is told so, not called empty", () => {
    for (const [bad, got] of [
      [123, "number"],
      [null, "null"],
      [["a = 1"], "an array"],
    ] as const)
      assert.throws(
        () => parseSubscription("T", { sql92: bad as unknown as string }),
        (e: unknown) =>
          isMQError(e, "SUBSCRIPTION_PARSE_FAILED") && new RegExp(`must be a string .* got ${got}\\.$`).test((e as Error).message),
      );
  });
});

describe("tag matching", () => {
  const ab = parseSubscription("T", "TagA || TagB");
  const all = parseSubscription("T", "*");
  const sql = parseSubscription("T", { sql92: "a = 1" });

  it("broker pre-filter compares hash codes", () => {
    assert.equal(tagMatches(ab, tagsHashCode("TagA")), true);
    assert.equal(tagMatches(ab, tagsHashCode("TagC")), false);
    assert.equal(tagMatches(ab, 0), false, "no tag");
    assert.equal(tagMatches(all, tagsHashCode("TagC")), true);
    assert.equal(tagMatches(all, 0), true);
    assert.equal(tagMatches(sql, 123), true);
    assert.equal(tagMatches(undefined, 123), true);
    assert.equal(tagMatches(ab, null), true);
  });
  it("a hash collision passes the broker but not the client re-check", () => {
    // "Aa" and "BB" share Java hash code 2112
    const s = parseSubscription("T", "Aa");
    assert.equal(tagsHashCode("Aa"), tagsHashCode("BB"));
    assert.equal(tagMatches(s, tagsHashCode("BB")), true);
    assert.equal(tagStringMatches(s, "BB"), false);
    assert.equal(tagStringMatches(s, "Aa"), true);
  });
  it("client re-check: case-sensitive, messages without a tag dropped unless *", () => {
    assert.equal(tagStringMatches(ab, "taga"), false);
    assert.equal(tagStringMatches(ab, undefined), false);
    assert.equal(tagStringMatches(all, undefined), true);
    assert.equal(tagStringMatches(sql, undefined), true);
  });
});
