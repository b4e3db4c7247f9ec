import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { compileSql92 } from "../../filter/index.ts";
import { tokenize } from "../../filter/sql92/lexer.ts";
import { parseJavaDouble, SelectorEvalError } from "../../filter/sql92/values.ts";
import { isMQError } from "../../transport/protocol.ts";

type Props = Record<string, unknown>;

function matches(expr: string, props: Props): boolean {
  return compileSql92(expr)(props);
}

function assertParseError(expr: string): void {
  assert.throws(
    () => compileSql92(expr),
    (e: unknown) => isMQError(e, "SUBSCRIPTION_PARSE_FAILED"),
    `expected a parse error for ${JSON.stringify(expr)}`,
  );
}

describe("SQL92 selectors: reference vectors (RocketMQ ExpressionTest / ParserTest)", () => {
  const and4 = "a=3 and b<>4 And c>5 AND d<=4";
  const or4 = "a=3 or b<>4 Or c>5 OR d<=4";

  it("#1-3 AND chain with numbers and strings", () => {
    assert.equal(matches(and4, { a: 3, b: 5, c: 6, d: 1 }), true);
    assert.equal(matches(and4, { a: "3", b: "5", c: "6", d: "1" }), true);
    assert.equal(matches(and4, { a: "4", b: "5", c: "6", d: "1" }), false);
  });

  it("#4-8 OR chain", () => {
    assert.equal(matches(or4, { a: "3" }), true);
    assert.equal(matches(or4, { a: "4", b: "5" }), true);
    assert.equal(matches(or4, { a: "4", b: "4", c: "6" }), true);
    assert.equal(matches(or4, { a: "4", b: "4", c: "3", d: "2" }), true);
    assert.equal(matches(or4, { a: "4", b: "4", c: "3", d: "10" }), false);
  });

  it("#9-12 IN / NOT IN", () => {
    for (const a of ["3", "4", "5"]) assert.equal(matches("a in ('3', '4', '5')", { a }), true);
    assert.equal(matches("a in ('3', '4', '5')", { a: "8" }), false);
    assert.equal(matches("a not in ('3', '4', '5')", { a: "8" }), true);
    assert.equal(matches("a not in ('3', '4', '5')", { a: "3" }), false);
  });

  it("#13-16 BETWEEN is inclusive, NOT BETWEEN its complement", () => {
    for (const a of ["2", "10", "3"]) {
      assert.equal(matches("a between 2 and 10", { a }), true, a);
      assert.equal(matches("a not between 2 and 10", { a }), false, a);
    }
    for (const a of ["1", "11"]) {
      assert.equal(matches("a between 2 and 10", { a }), false, a);
      assert.equal(matches("a not between 2 and 10", { a }), true, a);
    }
  });

  it("#17-22 IS NULL / IS NOT NULL", () => {
    assert.equal(matches("a is null", { abc: "2" }), true);
    assert.equal(matches("a is null", { a: "2" }), false);
    assert.equal(matches("a is not null", { a: "2" }), true);
    assert.equal(matches("a is not null", { abc: "2" }), false);
    assert.equal(matches("a is not null and a='hello'", { a: "hello" }), true);
    assert.equal(matches("a is not null and a='hello'", {}), false);
  });

  it("#23-24 booleans compare with strings", () => {
    assert.equal(matches("a=TRUE OR b=FALSE", { a: "true", b: "false" }), true);
    assert.equal(matches("a=TRUE OR b=FALSE", { a: "false", b: "true" }), false);
  });

  it("#25-27 IS NULL OR equality", () => {
    const e = "a is null OR a='hello'";
    assert.equal(matches(e, {}), true);
    assert.equal(matches(e, { a: "hello" }), true);
    assert.equal(matches(e, { a: "abc" }), false);
  });

  it("#28-31 decimals, exponents, and two strings ordered as doubles", () => {
    assert.equal(matches("a > 3.1E10", { a: "3.1415E10" }), true);
    assert.equal(matches("a > 3.14", { a: "3.1415" }), true);
    assert.equal(matches("a > b", { a: "10", b: "20" }), false);
    assert.equal(matches("a > b", { a: "20", b: "10" }), true);
  });

  it("#32 '' escapes a quote", () => {
    assert.equal(matches("TAGS is not null and TAGS='''''tag'''''", { TAGS: "''tag''" }), true);
    assert.equal(matches("TAGS is not null and TAGS='''''tag'''''", { TAGS: "'tag'" }), false);
  });

  it("#33-36 CONTAINS / STARTSWITH / ENDSWITH and their NOT forms", () => {
    const v = { value: "axb" };
    assert.equal(matches("value contains 'x'", v), true);
    assert.equal(matches("value startswith 'ax'", v), true);
    assert.equal(matches("value endswith 'xb'", v), true);
    assert.equal(matches("value not contains 'x'", v), false);
    assert.equal(matches("value not startswith 'ax'", v), false);
    assert.equal(matches("value not endswith 'xb'", v), false);
    const w = { value: "abb" };
    for (const op of ["contains", "startswith", "endswith"]) {
      assert.equal(matches(`value ${op} 'x'`, w), false, op);
      assert.equal(matches(`value not ${op} 'x'`, w), true, op);
      assert.equal(matches(`value ${op} ''`, v), false, op);
      assert.equal(matches(`value not ${op} ''`, v), false, op);
    }
  });

  it("#37 CONTAINS on a missing or non-string value is false in both forms", () => {
    for (const props of [{}, { value: null }, { value: 1.23 }, { value: true }, { value: { x: 1 } }] as Props[]) {
      assert.equal(matches("value contains 'x'", props), false);
      assert.equal(matches("value not contains 'x'", props), false);
    }
  });

  it("#38-40 literals on the left of CONTAINS, no regex semantics", () => {
    assert.equal(matches("'axb' contains 'x'", {}), true);
    assert.equal(matches("'axb' contains 'u'", {}), false);
    assert.equal(matches("'axb' not contains 'u'", {}), true);
    assert.equal(matches("' ' contains ' '", {}), true);
    assert.equal(matches("'axb' contains '.'", {}), false);
  });

  it("#41 combined NOT IN, BETWEEN with a number, NOT CONTAINS", () => {
    assert.equal(matches("a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'", { a: "3", b: 3, c: "axbdc" }), true);
  });

  it("#42 NOW is the current time in ms", () => {
    assert.equal(matches("a <= now", { a: String(Date.now()) }), true);
    assert.equal(matches("a <= now", { a: String(Date.now() + 3_600_000) }), false);
  });

  it("#43-44 a value that is not a number makes BETWEEN fail to match", () => {
    assert.equal(matches("key is not null and key between 0 and 100", { key: "con" }), false);
    assert.equal(matches("a between 0 and 100", { a: "abc" }), false);
    assert.equal(matches("a not between 0 and 100", { a: "abc" }), false);
  });

  it("#45 two string properties compare as strings for = and <>", () => {
    assert.equal(matches("a=b", { a: "3.14", b: "3.14" }), true);
    assert.equal(matches("a<>b", { a: "3.14", b: "3.14" }), false);
    assert.equal(matches("a<>b", { a: "3.14", b: "3.141" }), true);
  });

  it("#46-49 parse errors", () => {
    assertParseError("value contains x");
    assertParseError("value contains 123");
    assertParseError("'axb' contains ");
    assertParseError("a and between 2 and 10");
    assertParseError(" a between 10 and 0");
    assertParseError("a > 100000000000000000000000");
  });

  it("#50 whitespace is insignificant", () => {
    const spaced = compileSql92("a=3  and    b<>4 And c>5 AND d<=4");
    const tight = compileSql92(and4);
    const orForm = compileSql92(or4);
    const samples: Props[] = [
      { a: "3", b: "5", c: "6", d: "1" },
      { a: "3", b: "4", c: "6", d: "1" },
      { a: "4", b: "4", c: "3", d: "2" },
    ];
    for (const s of samples) assert.equal(spaced(s), tight(s));
    assert.notDeepEqual(samples.map(spaced), samples.map(orForm));
  });

  it("#51 valid parses", () => {
    for (const e of [
      "a in ('3','4','5')",
      "(a not in ('6','4','5')) or (b in ('3','4','5'))",
      "(a between 2 and 10) AND (b not between 6 and 9)",
      "a is null",
      "a is not null",
      "a <= now",
      "a=3 and b contains 'xxx' and c not contains 'xxx'",
    ]) {
      assert.equal(typeof compileSql92(e), "function", e);
    }
  });

  it("#52 TAGS IN selects exactly TagA and TagB", () => {
    const f = compileSql92("(TAGS is not null and TAGS in ('TagA', 'TagB'))");
    const tags = ["TagA", "TagB", "TagC"].flatMap((t) => Array.from({ length: 16 }, () => t));
    assert.equal(tags.filter((t) => f({ TAGS: t })).length, 32);
    assert.equal(f({}), false);
  });
});

describe("SQL92 selectors: type and null rules", () => {
  it("string property vs integer literal is parsed as an int; a decimal string is an error (no match)", () => {
    assert.equal(matches("a = 3", { a: "3" }), true);
    assert.equal(matches("a = 3", { a: "+3" }), true);
    assert.equal(matches("a = 3", { a: "3.0" }), false);
    assert.equal(matches("a <> 3", { a: "3.0" }), false, "an error makes <> fail too");
    assert.equal(matches("a = 3.0", { a: "3" }), true);
    assert.equal(matches("a > 2147483647", { a: "2147483648" }), false, "int literal vs out-of-int-range string is an error");
    assert.equal(matches("a > 2147483647L", { a: "2147483648" }), false, "2147483647L still fits an int");
    assert.equal(matches("a > 2147483648", { a: "2147483649" }), true, "long literal parses the string as a long");
    assert.equal(matches("a = 9007199254740993", { a: "9007199254740993" }), true, "longs compare exactly");
    assert.equal(matches("a > 9007199254740992", { a: "9007199254740993" }), true, "beyond 2^53");
    assert.equal(matches("a = 3.0", { a: " 3 " }), true, "Double.valueOf trims blanks");
    assert.equal(matches("a = 3", { a: " 3" }), false, "Integer.valueOf does not");
    assert.equal(matches("a = 1.5", { a: "1.5f" }), true, "Java float suffixes are accepted");
    assert.equal(matches("a > 1.0E308", { a: "Infinity" }), true);
  });

  it("missing properties: comparisons are unknown, OR/AND follow three-valued logic", () => {
    assert.equal(matches("a > 1", {}), false);
    assert.equal(matches("NOT (a > 1)", {}), false);
    assert.equal(matches("a <> 1", {}), false);
    assert.equal(matches("a > 1 OR b = 'x'", { b: "x" }), true);
    assert.equal(matches("a > 1 AND b = 'x'", { b: "x" }), false);
    assert.equal(matches("NOT (a > 1 AND b = 'y')", { b: "x" }), true, "unknown AND false is false");
  });

  it("RocketMQ's null asymmetry: a literal on the left of = with a missing property is false, not unknown", () => {
    assert.equal(matches("'x' <> a", {}), true);
    assert.equal(matches("a <> 'x'", {}), false);
    assert.equal(matches("a = b", {}), true, "two missing properties are equal");
  });

  it("booleans: Java Boolean.valueOf on strings, ordering is rejected at compile time", () => {
    assert.equal(matches("a = TRUE", { a: "TRUE" }), true);
    assert.equal(matches("a = TRUE", { a: "yes" }), false);
    assert.equal(matches("a = FALSE", { a: "yes" }), true);
    assertParseError("a > TRUE");
    assertParseError("a > 'x'");
    assertParseError("TRUE = 1");
    assertParseError("a = NULL");
    assertParseError("a > NULL");
  });

  it("a bare property is a boolean cast: only real booleans are true", () => {
    assert.equal(matches("a", { a: true }), true);
    assert.equal(matches("a", { a: "true" }), false);
    assert.equal(matches("NOT a", { a: "true" }), true);
    assert.equal(matches("NOT a", {}), false);
  });

  it("unary minus, floats and long literals", () => {
    assert.equal(matches("a > -5", { a: "-3" }), true);
    assert.equal(matches("a < -5.5", { a: "-6" }), true);
    assert.equal(matches("a between -10 and -1", { a: "-3" }), true);
    assert.equal(matches("a = .5", { a: "0.5" }), true);
    assert.equal(matches("a = 5.", { a: "5" }), true);
    assert.equal(matches("a = 5E2", { a: "500" }), true);
    assert.equal(matches("a = 10L", { a: "10" }), true);
    assertParseError("a = 1e999");
    assertParseError("a > 0.0");
    assertParseError("a > 9223372036854775808");
  });

  it("keywords are case-insensitive, property names are exact", () => {
    assert.equal(matches("A = 'x'", { a: "x" }), false);
    assert.equal(matches("A = 'x'", { A: "x" }), true);
    assert.equal(matches("a IS NOT NULL aNd a BeTwEeN 1 AnD 2", { a: "1" }), true);
  });

  it("comments are skipped", () => {
    assert.equal(matches("a = 1 /* block */ and -- line\n b = 2", { a: "1", b: "2" }), true);
  });

  it("property names never reach the prototype", () => {
    assert.equal(matches("constructor is null", {}), true);
    assert.equal(matches("toString is not null", {}), false);
  });

  it("syntax errors name what was expected", () => {
    for (const bad of [
      "",
      "   ",
      "a =",
      "a = 1 b = 2",
      "(a = 1",
      "a = 1)",
      "a in ()",
      "a in (1)",
      "5",
      "'x'",
      "a ! 1",
      "NOT a BETWEEN 1 AND 2",
      "a not 1",
      "a is 1",
      "'a' in ('a')",
      "a = 'unterminated",
      "a = 1 /* open",
      "a > (b = 1)",
    ]) {
      assertParseError(bad);
    }
    try {
      compileSql92("a = 1 b = 2");
      assert.fail("no error");
    } catch (e) {
      assert.match((e as Error).message, /expected AND, OR or the end of the expression but found 'b'/);
    }
  });

  it("a compiled selector is reused and never throws", () => {
    const f = compileSql92("a > 5 AND b = 'x'");
    assert.equal(f({ a: "6", b: "x" }), true);
    assert.equal(f({ a: "oops", b: "x" }), false);
    assert.equal(f({ a: "7", b: "y" }), false);
  });
});

describe("SQL92 selectors: properties", () => {
  const names = fc.constantFrom("a", "b", "c");
  const value = fc.oneof(fc.integer({ min: -20, max: 20 }).map(String), fc.constantFrom("x", "y", "true", "1.5"));
  const atom = fc.oneof(
    fc
      .tuple(names, fc.constantFrom("=", "<>", ">", ">=", "<", "<="), fc.integer({ min: -20, max: 20 }))
      .map(([n, op, v]) => `${n} ${op} ${v}`),
    fc.tuple(names, fc.constantFrom("x", "y", "5")).map(([n, v]) => `${n} = '${v}'`),
    fc.tuple(names, fc.integer({ min: -5, max: 0 }), fc.integer({ min: 0, max: 5 })).map(([n, lo, hi]) => `${n} between ${lo} and ${hi}`),
    fc.tuple(names, fc.constantFrom("x", "y")).map(([n, v]) => `${n} in ('${v}', '3')`),
    names.map((n) => `${n} is null`),
  );
  const expr = fc.letrec<{ e: string }>((tie) => ({
    e: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      atom,
      fc.tuple(tie("e"), fc.constantFrom("AND", "OR"), tie("e")).map(([l, op, r]) => `(${l}) ${op} (${r})`),
      tie("e").map((e) => `NOT (${e})`),
    ),
  })).e;

  it("NOT (e) is the negation of e when every property is a number string", () => {
    const numeric = fc.record({
      a: fc.integer({ min: -20, max: 20 }).map(String),
      b: fc.integer({ min: -20, max: 20 }).map(String),
      c: fc.integer({ min: -20, max: 20 }).map(String),
    });
    const numericAtom = fc.oneof(
      fc
        .tuple(names, fc.constantFrom("=", "<>", ">", ">=", "<", "<="), fc.integer({ min: -20, max: 20 }))
        .map(([n, op, v]) => `${n} ${op} ${v}`),
      fc
        .tuple(names, fc.integer({ min: -5, max: 0 }), fc.integer({ min: 0, max: 5 }))
        .map(([n, lo, hi]) => `${n} not between ${lo} and ${hi}`),
    );
    const numericExpr = fc.letrec<{ e: string }>((tie) => ({
      e: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        numericAtom,
        fc.tuple(tie("e"), fc.constantFrom("AND", "OR"), tie("e")).map(([l, op, r]) => `(${l}) ${op} (${r})`),
      ),
    })).e;
    fc.assert(
      fc.property(numericExpr, numeric, (e, props) => compileSql92(`NOT (${e})`)(props) === !compileSql92(e)(props)),
      { numRuns: 300 },
    );
  });

  it("e and NOT (e) never both match, whatever the properties", () => {
    const props = fc.record({ a: value, b: value, c: value }, { requiredKeys: [] });
    fc.assert(
      fc.property(expr, props, (e, p) => !(compileSql92(e)(p) && compileSql92(`NOT (${e})`)(p))),
      { numRuns: 300 },
    );
  });

  it("the compiler throws nothing but MQError SUBSCRIPTION_PARSE_FAILED on arbitrary input", () => {
    const alphabet = fc.constantFrom(
      "a",
      "b",
      " ",
      "'",
      "(",
      ")",
      "=",
      "<",
      ">",
      "-",
      "+",
      ".",
      "1",
      "0",
      "e",
      ",",
      "*",
      "/",
      "\n",
      "AND ",
      "OR ",
      "NOT ",
      "IN ",
      "IS ",
      "NULL ",
      "BETWEEN ",
      "TRUE ",
      "CONTAINS ",
      "now ",
    );
    const input = fc.oneof(
      fc.string(),
      fc.array(alphabet, { maxLength: 30 }).map((xs) => xs.join("")),
    );
    fc.assert(
      fc.property(input, (s) => {
        try {
          const f = compileSql92(s);
          return typeof f({ a: "1", b: "x" }) === "boolean";
        } catch (e) {
          return isMQError(e, "SUBSCRIPTION_PARSE_FAILED");
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe("SQL92 selectors: cost stays linear in the size of values and selectors", () => {
  // The broker evaluates selectors on its event loop, so a property value or a selector that made a
  // regular expression backtrack would stall every other request.
  it("long AND / OR chains (generated selectors) evaluate in full: 20 000 terms match what they should", () => {
    const n = 20_000;
    const ors = compileSql92(Array.from({ length: n }, (_, i) => `id = '${i}'`).join(" OR "));
    for (const [id, want] of [
      ["0", true],
      ["19999", true],
      ["20000", false],
    ] as const)
      assert.equal(ors({ id }), want, `OR chain, id ${id}`);
    assert.equal(ors({}), false, "OR of unknowns is not a match");
    const ands = compileSql92(Array.from({ length: n }, (_, i) => `k${i % 7} = 'v'`).join(" AND "));
    const all = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`k${i}`, "v"]));
    assert.equal(ands(all), true, "AND chain, every term true");
    assert.equal(ands({ ...all, k6: "w" }), false, "AND chain, one term false");
    // three-valued: unknown OR true is true, unknown AND true is unknown (no match), NOT unknown is unknown
    assert.equal(matches("a = 1 OR b = 'x'", { b: "x" }), true);
    assert.equal(matches("NOT (a = 1 AND b = 'x')", { b: "x" }), false);
    assert.equal(matches("NOT (a = 1 OR b = 'x')", { b: "y" }), false);
    assert.equal(matches("NOT (a = 1 OR b = 'x' OR c = 2)", { b: "y", c: "3" }), false);
    assert.equal(matches("NOT (a = 1 AND b = 'x' AND c = 2)", { a: "1", b: "y" }), true, "false AND unknown is false");
  });

  it("a run of more than 256 comparisons without AND or OR is refused SUBSCRIPTION_PARSE_FAILED (each nests the last)", () => {
    assert.equal(matches(`a${" = a".repeat(255)}`, { a: "1" }), false, "256 compile");
    for (const op of [" = a", " <> a", " IS NULL", " IS NOT NULL"])
      assert.throws(
        () => compileSql92(`a${op.repeat(300)}`),
        (e) => isMQError(e, "SUBSCRIPTION_PARSE_FAILED") && /more than 256 comparisons in a row/.test((e as Error).message),
        op,
      );
  });

  it("a selector nested too deeply to evaluate safely is refused; one that compiles evaluates right from a deep call stack", () => {
    // evaluating each nested operator is one more call: a selector that compiled could overflow the
    // stack on each message (the error swallowed as "no match") when evaluated below other frames
    const deepCall = (d: number, f: () => boolean): boolean => (d === 0 ? f() : deepCall(d - 1, f));
    let chains = "a";
    for (let i = 0; i < 100; i++) chains = `(${chains}${" = a".repeat(250)})`;
    const cases: [string, Props, boolean][] = [
      [chains, { a: true }, true],
      [`${"NOT ".repeat(9000)}(a = '1')`, { a: "1" }, true],
      [`a = ${"-".repeat(9000)}1`, { a: "1" }, true],
      [`${"(".repeat(3000)}a = '1'${")".repeat(3000)}`, { a: "1" }, true],
      [`a = '1'${" OR (a = '2'".repeat(3000)}${")".repeat(3000)}`, { a: "1" }, true],
    ];
    for (const [expr, props, want] of cases) {
      let f: ((p: Props) => boolean) | undefined;
      try {
        f = compileSql92(expr);
      } catch (e) {
        assert.ok(
          isMQError(e, "SUBSCRIPTION_PARSE_FAILED") && /nested too deeply|more than 256 parentheses/.test((e as Error).message),
          (e as Error).message,
        );
      }
      if (f)
        assert.equal(
          deepCall(3000, () => f(props)),
          want,
          `${expr.slice(0, 40)}... evaluated 3000 calls deep`,
        );
    }
    for (const expr of cases.map((c) => c[0])) assertParseError(expr);
    // within the limits: compiles and evaluates from deep in the stack
    let near = "a";
    for (let i = 0; i < 4; i++) near = `(${near}${" = a".repeat(250)})`;
    assert.equal(
      deepCall(5000, () => compileSql92(near)({ a: true })),
      true,
    );
    const f = compileSql92(`${"NOT ".repeat(254)}(a = '1')`);
    assert.equal(
      deepCall(5000, () => f({ a: "1" })),
      true,
    );
    assert.equal(
      deepCall(5000, () => compileSql92(`a = ${"-".repeat(256)}1`)({ a: "1" })),
      true,
    );
  });

  it("a 30 000-digit property value compared with a float is decided quickly", () => {
    const f = compileSql92("a > 5.5");
    for (const [a, want] of [
      [`${"1".repeat(30000)}x`, false],
      ["1".repeat(30000), true],
      [`${"1".repeat(30000)}.${"1".repeat(30000)}e`, false],
    ] as const) {
      const t0 = performance.now();
      assert.equal(f({ a }), want);
      const ms = performance.now() - t0;
      assert.ok(ms < 500, `evaluating a ${a.length}-character value took ${ms.toFixed(0)} ms`);
    }
  });

  it("Double.valueOf accepts and rejects what Java's grammar does", () => {
    for (const [s, want] of [
      ["1", 1],
      ["1.", 1],
      [".5", 0.5],
      ["1e5", 100000],
      ["1.5E-3d", 0.0015],
      ["NaN", Number.NaN],
      ["+Infinity", Number.POSITIVE_INFINITY],
      ["-1f", -1],
      [" 2.5D ", 2.5],
    ] as const) {
      assert.equal(parseJavaDouble(s), want, JSON.stringify(s));
    }
    for (const s of [".", "e5", "1..2", "", "+", "1e", "1e+", "1.5dd", "0x1p3", "infinity", "1 2"]) {
      assert.throws(() => parseJavaDouble(s), SelectorEvalError, JSON.stringify(s));
    }
  });

  it("Double.valueOf's accepted set is that of the straightforward grammar", () => {
    // The obvious transcription of Java's grammar, ambiguous (and so slow on long digit runs) but a
    // fine reference on short strings.
    const reference = /^[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)$/;
    const chars = fc.constantFrom("0", "1", "9", ".", "e", "E", "+", "-", "f", "D", "x", "NaN", "Infinity");
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 12 }), (xs) => {
        const s = xs.join("");
        let ok = true;
        try {
          parseJavaDouble(s);
        } catch {
          ok = false;
        }
        return ok === reference.test(s);
      }),
      { numRuns: 2000 },
    );
  });

  it("long runs of dashes or zeros in a selector are tokenized quickly and as before", () => {
    for (const s of ["-".repeat(50000), `a = 1 ${"-".repeat(50000)}`, "0".repeat(50000), `a = ${"0".repeat(50000)}e`]) {
      const t0 = performance.now();
      assertParseError(s);
      const ms = performance.now() - t0;
      assert.ok(ms < 500, `compiling a ${s.length}-character selector took ${ms.toFixed(0)} ms`);
    }
    const images = (s: string) => tokenize(s).map((t) => t.image);
    assert.deepEqual(images("--x\n--y"), ["-", "-", "y", ""], "a -- without a line end after it is two minus signs");
    assert.deepEqual(images("-- x\r"), [""]);
    assert.deepEqual(images("000 1"), ["0", "0", "0", "1", ""]);
    assert.deepEqual(images("0001.5 00e1 00e"), ["0001.5", "00e1", "0", "0", "e", ""]);
  });
});
