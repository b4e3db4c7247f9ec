/**
 * Recursive-descent parser for RocketMQ's SQL92 selectors that compiles while it parses: every
 * production returns a {@link Node} whose `ev` closure evaluates it on a property map, so a
 * selector is parsed once and each message costs only closure calls.
 *
 * The productions, precedence and compile-time checks follow RocketMQ's `SelectorParser.jj` and
 * `ComparisonExpression` (themselves ActiveMQ's, minus LIKE and arithmetic). One deliberate
 * difference: RocketMQ's grammar stops at the first token that cannot continue the expression and
 * silently ignores the rest (`a = 1 b = 2` means `a = 1`); here trailing tokens are an error.
 */
import { SelectorSyntaxError, type Token, type TokenKind, tokenize } from "./lexer.ts";
import { compareDouble, compareValues, JDouble, JInt, JLong, type JValue, parseJavaDouble, SelectorEvalError, toJValue } from "./values.ts";

/** The property map a selector is evaluated on (values are strings on the wire). */
export type SelectorProperties = Readonly<Record<string, unknown>>;

/**
 * A compiled sub-expression. `kind` carries what RocketMQ's checks look at: a constant literal,
 * a constant that is also boolean (TRUE/FALSE/NULL), a boolean expression, a bare property, or
 * some other value (a negation).
 */
export interface Node {
  kind: "const" | "boolConst" | "bool" | "prop" | "value";
  ev: (p: SelectorProperties) => JValue;
  /** the constant's value (evaluated now for NOW); only for const/boolConst */
  constValue?: () => JValue;
  /** human-readable form for error messages */
  text: string;
  /** how deeply evaluating it nests calls: 1 for a literal or a property, 1 + the deepest operand's otherwise */
  depth: number;
}

const hasOwn = Object.prototype.hasOwnProperty;
const INT_MAX = 2147483647n;
const LONG_MAX = 2n ** 63n - 1n;

function fail(message: string, pos: number): never {
  throw new SelectorSyntaxError(message, pos);
}

function constNode(value: JValue, text: string, kind: "const" | "boolConst" = "const"): Node {
  return { kind, ev: () => value, constValue: () => value, text, depth: 1 };
}

const TRUE_NODE = constNode(true, "TRUE", "boolConst");
const FALSE_NODE = constNode(false, "FALSE", "boolConst");
const NULL_NODE = constNode(null, "NULL", "boolConst");

function isConst(n: Node): boolean {
  return n.kind === "const" || n.kind === "boolConst";
}
function isBool(n: Node): boolean {
  return n.kind === "bool" || n.kind === "boolConst";
}

/** Decodes a STRING token: strip the quotes, `''` is one quote. */
function decodeString(image: string): string {
  return image.slice(1, -1).replace(/''/g, "'");
}

function quote(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

// -------------------------------------------------------------------------------------------
// Node builders (RocketMQ's expression classes)

function booleanCast(n: Node): Node {
  return {
    kind: "bool",
    text: n.text,
    depth: n.depth + 1,
    ev: (p) => {
      const v = n.ev(p);
      if (v === null) return null;
      return typeof v === "boolean" ? v : false;
    },
  };
}

function asBoolean(n: Node, pos: number): Node {
  if (isBool(n)) return n;
  if (n.kind === "prop") return booleanCast(n);
  return fail(`expression ${n.text} will not result in a boolean value`, pos);
}

function not(n: Node): Node {
  return {
    kind: "bool",
    text: `(NOT ${n.text})`,
    depth: n.depth + 1,
    ev: (p) => {
      const v = n.ev(p);
      return v === null ? null : !v;
    },
  };
}

/**
 * Longest run of comparisons without AND/OR between them (`a = b = c ...`): each nests the one
 * before, and evaluation recurses through all of them.
 */
const MAX_OPERATOR_CHAIN = 256;

function chainTooLong(t: Token): never {
  return fail(`more than ${MAX_OPERATOR_CHAIN} comparisons in a row without AND or OR`, t.pos);
}

/**
 * Most parentheses, NOTs and signs a selector may open around one operand: the parser recurses on
 * each (several calls per parenthesis), so this keeps parsing well inside the stack wherever it runs.
 */
const MAX_SELECTOR_NESTING = 256;

/**
 * Deepest a compiled selector may nest calls when it evaluates a message (each operator calls its
 * operands' `ev`). Without a bound a selector that compiled could overflow the stack when run from
 * a deeper call stack (the broker's pull path), and the error counted as "no match" for every message.
 */
const MAX_SELECTOR_DEPTH = 1024;

function tooNested(pos: number): never {
  return fail(`more than ${MAX_SELECTOR_NESTING} parentheses, NOTs or signs are open here`, pos);
}

function tooDeep(pos: number): never {
  return fail(
    `the expression is nested too deeply (more than ${MAX_SELECTOR_DEPTH} levels of operators, counting parentheses and chained comparisons): flatten it with AND / OR`,
    pos,
  );
}

function deepest(nodes: Node[]): number {
  let d = 0;
  for (let i = 0; i < nodes.length; i++) if (nodes[i]!.depth > d) d = nodes[i]!.depth;
  return d;
}

/*
 * `a AND b AND c ...` and `a OR b OR c ...` are one node over all their terms, evaluated in a loop
 * left to right with the three-valued rules (the first false / true decides; else unknown if any
 * term was). Nested two-term nodes would recurse once per term: a generated selector of ~8 000
 * ORs overflowed the stack on every message, and the error counted as "no match".
 */
function and(terms: Node[]): Node {
  return {
    kind: "bool",
    text: `(${terms.map((t) => t.text).join(" AND ")})`,
    depth: deepest(terms) + 1,
    ev: (p) => {
      let unknown = false;
      for (let i = 0; i < terms.length; i++) {
        const v = terms[i]!.ev(p);
        if (v === false) return false;
        if (v === null) unknown = true;
      }
      return unknown ? null : true;
    },
  };
}

function or(terms: Node[]): Node {
  return {
    kind: "bool",
    text: `(${terms.map((t) => t.text).join(" OR ")})`,
    depth: deepest(terms) + 1,
    ev: (p) => {
      let unknown = false;
      for (let i = 0; i < terms.length; i++) {
        const v = terms[i]!.ev(p);
        if (v === true) return true;
        if (v === null) unknown = true;
      }
      return unknown ? null : false;
    },
  };
}

function doEqual(l: Node, r: Node, text: string): Node {
  return {
    kind: "bool",
    text,
    depth: Math.max(l.depth, r.depth) + 1,
    ev: (p) => {
      const lv = l.ev(p);
      const rv = r.ev(p);
      if (lv === null || rv === null) {
        // Java: null on the left only => unknown; null on the right only => false; both => equal.
        if (lv === null && rv === null) return true;
        return lv === null ? null : false;
      }
      return compareValues(lv, rv) === 0;
    },
  };
}

function checkEqualOperand(n: Node, pos: number): void {
  if (isConst(n) && n.constValue!() === null) fail(`'${n.text}' cannot be compared (use IS NULL / IS NOT NULL)`, pos);
}

function equal(l: Node, r: Node, pos: number): Node {
  checkEqualOperand(l, pos);
  checkEqualOperand(r, pos);
  if (isConst(l) && isConst(r) && isBool(l) && !isBool(r)) fail(`'${l.text}' cannot be compared with '${r.text}'`, pos);
  return doEqual(l, r, `(${l.text} = ${r.text})`);
}

function checkLessThanOperand(n: Node, pos: number): void {
  if (isConst(n)) {
    const v = n.constValue!();
    if (v instanceof JInt || v instanceof JLong || v instanceof JDouble) return;
    fail(`value ${n.text} cannot be compared with >, >=, < or <= (only numbers can)`, pos);
  }
  if (isBool(n)) fail(`value ${n.text} cannot be compared with >, >=, < or <= (it is a boolean expression)`, pos);
}

type Ordering = ">" | ">=" | "<" | "<=";

function ordered(l: Node, r: Node, op: Ordering, pos: number): Node {
  checkLessThanOperand(l, pos);
  checkLessThanOperand(r, pos);
  const holds: (c: number) => boolean = op === ">" ? (c) => c > 0 : op === ">=" ? (c) => c >= 0 : op === "<" ? (c) => c < 0 : (c) => c <= 0;
  return {
    kind: "bool",
    text: `(${l.text} ${op} ${r.text})`,
    depth: Math.max(l.depth, r.depth) + 1,
    ev: (p) => {
      const lv = l.ev(p);
      if (lv === null) return null;
      const rv = r.ev(p);
      if (rv === null) return null;
      if (typeof lv === "string" && typeof rv === "string") {
        // Two strings are only ordered as numbers: both parsed as doubles, or an error.
        return holds(compareDouble(parseJavaDouble(lv), parseJavaDouble(rv)));
      }
      return holds(compareValues(lv, rv));
    },
  };
}

function between(value: Node, low: Node, high: Node, pos: number): Node {
  if (isConst(low) && isConst(high)) {
    const lv = low.constValue!();
    const hv = high.constValue!();
    if (lv === null || hv === null) fail("illegal values of BETWEEN: the bounds can not be NULL", pos);
    let c: number;
    try {
      c = compareValues(hv, lv);
    } catch {
      return fail(`illegal values of BETWEEN: ${low.text} and ${high.text} cannot be compared`, pos);
    }
    if (c < 0) fail(`illegal values of BETWEEN: the low bound ${low.text} must be less than or equal to the high bound ${high.text}`, pos);
  }
  return and([ordered(value, low, ">=", pos), ordered(value, high, "<=", pos)]);
}

function notBetween(value: Node, low: Node, high: Node, pos: number): Node {
  return or([ordered(value, low, "<", pos), ordered(value, high, ">", pos)]);
}

function inList(left: Node, values: string[], negated: boolean, pos: number): Node {
  if (left.kind !== "prop") fail(`IN needs a property on its left, got ${left.text}`, pos);
  const set = new Set(values);
  return {
    kind: "bool",
    text: `${left.text} ${negated ? "NOT IN" : "IN"} (${values.map(quote).join(", ")})`,
    depth: left.depth + 1,
    ev: (p) => {
      const v = left.ev(p);
      if (typeof v !== "string") return null;
      return set.has(v) !== negated;
    },
  };
}

type StringTest = "CONTAINS" | "STARTSWITH" | "ENDSWITH";

function stringTest(left: Node, op: StringTest, search: string, negated: boolean): Node {
  const test: (s: string) => boolean =
    op === "CONTAINS" ? (s) => s.includes(search) : op === "STARTSWITH" ? (s) => s.startsWith(search) : (s) => s.endsWith(search);
  return {
    kind: "bool",
    text: `(${left.text} ${negated ? "NOT " : ""}${op} ${quote(search)})`,
    depth: left.depth + 1,
    ev: (p) => {
      if (search.length === 0) return false;
      const v = left.ev(p);
      if (typeof v !== "string") return false;
      return test(v) !== negated;
    },
  };
}

function negateValue(v: JValue): JValue {
  if (v instanceof JInt) return new JInt(-v.v | 0);
  if (v instanceof JLong) return new JLong(BigInt.asIntN(64, -v.v));
  if (v instanceof JDouble) return new JDouble(-v.v);
  return null;
}

function negate(n: Node): Node {
  const text = `(- ${n.text})`;
  if (n.kind === "const" && n.text !== "NOW") {
    // A negated literal is not a ConstantExpression in RocketMQ (so it escapes the constant
    // checks) but its value never changes: compute it once.
    const v = negateValue(n.constValue!());
    return { kind: "value", text, ev: () => v, depth: 1 };
  }
  return { kind: "value", text, ev: (p) => negateValue(n.ev(p)), depth: n.depth + 1 };
}

function property(name: string): Node {
  return {
    kind: "prop",
    text: name,
    depth: 1,
    ev: (p) => (hasOwn.call(p, name) ? toJValue(p[name]) : null),
  };
}

function decimalLiteral(image: string, pos: number): Node {
  const digits = image.endsWith("l") || image.endsWith("L") ? image.slice(0, -1) : image;
  const n = BigInt(digits);
  if (n > LONG_MAX) fail(`integer literal ${image} is out of the long range (max ${LONG_MAX})`, pos);
  return constNode(n <= INT_MAX ? new JInt(Number(n)) : new JLong(n), digits);
}

function floatLiteral(image: string, pos: number): Node {
  const v = Number(image);
  if (v > Number.MAX_VALUE) fail(`floating-point literal ${image} is greater than ${Number.MAX_VALUE}`, pos);
  // RocketMQ rejects literals below Double.MIN_VALUE, which includes 0.0: write 0 instead.
  if (v < Number.MIN_VALUE)
    fail(`floating-point literal ${image} is less than ${Number.MIN_VALUE} (write an integer 0 instead of 0.0)`, pos);
  return constNode(new JDouble(v), image);
}

const NOW_NODE: Node = {
  kind: "const",
  text: "NOW",
  depth: 1,
  ev: () => new JLong(BigInt(Date.now())),
  constValue: () => new JLong(BigInt(Date.now())),
};

// -------------------------------------------------------------------------------------------
// The grammar

const COMPARISON_STARTERS = new Set<TokenKind>([">", ">=", "<", "<=", "CONTAINS", "STARTSWITH", "ENDSWITH", "BETWEEN", "IN", "NOT"]);

class Parser {
  private i = 0;
  /** parentheses, NOT and signs open around the current position */
  private level = 0;
  constructor(private readonly tokens: Token[]) {}

  private peek(k = 0): Token {
    return this.tokens[Math.min(this.i + k, this.tokens.length - 1)]!;
  }
  private next(): Token {
    const t = this.peek();
    if (this.i < this.tokens.length - 1) this.i++;
    return t;
  }
  private expect(kind: TokenKind, what: string): Token {
    const t = this.peek();
    if (t.kind !== kind) this.unexpected(t, what);
    return this.next();
  }
  private unexpected(t: Token, expected: string): never {
    const found = t.kind === "EOF" ? "end of expression" : `'${t.image}'`;
    return fail(`expected ${expected} but found ${found}`, t.pos);
  }

  /** Counts one more parenthesis, NOT or sign around what is parsed next (the parser recurses on each). */
  private enter(pos: number): void {
    if (++this.level > MAX_SELECTOR_NESTING) tooNested(pos);
  }

  selector(): Node {
    const start = this.peek().pos;
    const e = this.orExpression();
    const t = this.peek();
    if (t.kind !== "EOF") this.unexpected(t, "AND, OR or the end of the expression");
    const root = asBoolean(e, start);
    // a node is deeper than each of its operands, so bounding the root bounds every evaluation (the
    // loops above stop a deep chain early, before it costs much to build)
    return root.depth > MAX_SELECTOR_DEPTH ? tooDeep(start) : root;
  }

  private orExpression(): Node {
    const first = this.andExpression();
    if (this.peek().kind !== "OR") return first;
    const terms = [asBoolean(first, this.peek().pos)];
    while (this.peek().kind === "OR") {
      const pos = this.next().pos;
      terms.push(asBoolean(this.andExpression(), pos));
    }
    return or(terms);
  }

  private andExpression(): Node {
    const first = this.equalityExpression();
    if (this.peek().kind !== "AND") return first;
    const terms = [asBoolean(first, this.peek().pos)];
    while (this.peek().kind === "AND") {
      const pos = this.next().pos;
      terms.push(asBoolean(this.equalityExpression(), pos));
    }
    return and(terms);
  }

  private equalityExpression(): Node {
    let left = this.comparisonExpression();
    for (let n = 0; ; n++) {
      const t = this.peek();
      if (left.depth > MAX_SELECTOR_DEPTH) tooDeep(t.pos);
      if (n === MAX_OPERATOR_CHAIN && (t.kind === "=" || t.kind === "<>" || t.kind === "IS")) chainTooLong(t);
      if (t.kind === "=") {
        this.next();
        left = equal(left, this.comparisonExpression(), t.pos);
      } else if (t.kind === "<>") {
        this.next();
        left = not(equal(left, this.comparisonExpression(), t.pos));
      } else if (t.kind === "IS") {
        this.next();
        if (this.peek().kind === "NULL") {
          this.next();
          left = doEqual(left, NULL_NODE, `(${left.text} IS NULL)`);
        } else {
          this.expect("NOT", "NULL or NOT NULL after IS");
          this.expect("NULL", "NULL after IS NOT");
          left = not(doEqual(left, NULL_NODE, `(${left.text} IS NULL)`));
        }
      } else {
        return left;
      }
    }
  }

  private comparisonExpression(): Node {
    let left = this.unaryExpr();
    for (let n = 0; ; n++) {
      const t = this.peek();
      if (left.depth > MAX_SELECTOR_DEPTH) tooDeep(t.pos);
      if (!COMPARISON_STARTERS.has(t.kind)) return left;
      if (n === MAX_OPERATOR_CHAIN) chainTooLong(t);
      this.next();
      let negated = false;
      let op = t.kind;
      if (op === "NOT") {
        const u = this.peek();
        if (u.kind !== "BETWEEN" && u.kind !== "IN" && u.kind !== "CONTAINS" && u.kind !== "STARTSWITH" && u.kind !== "ENDSWITH") {
          this.unexpected(u, "BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT");
        }
        this.next();
        negated = true;
        op = u.kind;
      }
      switch (op) {
        case ">":
        case ">=":
        case "<":
        case "<=":
          left = ordered(left, this.unaryExpr(), op, t.pos);
          break;
        case "CONTAINS":
        case "STARTSWITH":
        case "ENDSWITH":
          left = stringTest(left, op, this.stringLiteral(`a quoted string after ${op}`), negated);
          break;
        case "BETWEEN": {
          const low = this.unaryExpr();
          this.expect("AND", "AND between the bounds of BETWEEN");
          const high = this.unaryExpr();
          left = negated ? notBetween(left, low, high, t.pos) : between(left, low, high, t.pos);
          break;
        }
        case "IN": {
          this.expect("(", "'(' after IN");
          const values = [this.stringLiteral("a quoted string in the IN list")];
          while (this.peek().kind === ",") {
            this.next();
            values.push(this.stringLiteral("a quoted string in the IN list"));
          }
          this.expect(")", "',' or ')' in the IN list");
          left = inList(left, values, negated, t.pos);
          break;
        }
      }
    }
  }

  private unaryExpr(): Node {
    const t = this.peek();
    if (t.kind !== "+" && t.kind !== "-" && t.kind !== "NOT") return this.primaryExpr();
    this.next();
    this.enter(t.pos);
    const operand = this.unaryExpr();
    this.level--;
    if (t.kind === "+") return operand;
    if (t.kind === "-") return negate(operand);
    return not(asBoolean(operand, t.pos));
  }

  private primaryExpr(): Node {
    const t = this.next();
    switch (t.kind) {
      case "STRING":
        return constNode(decodeString(t.image), t.image);
      case "DECIMAL":
        return decimalLiteral(t.image, t.pos);
      case "FLOAT":
        return floatLiteral(t.image, t.pos);
      case "TRUE":
        return TRUE_NODE;
      case "FALSE":
        return FALSE_NODE;
      case "NULL":
        return NULL_NODE;
      case "NOW":
        return NOW_NODE;
      case "ID":
        return property(t.image);
      case "(": {
        this.enter(t.pos);
        const e = this.orExpression();
        this.expect(")", "')'");
        this.level--;
        return e;
      }
      default:
        return this.unexpected(t, "a property name, a literal, NOT, '-' or '('");
    }
  }

  private stringLiteral(what: string): string {
    return decodeString(this.expect("STRING", what).image);
  }
}

/**
 * Parses and compiles a selector into its root node (a boolean expression).
 * @throws SelectorSyntaxError with the position of the problem.
 */
export function parseSelector(text: string): Node {
  return new Parser(tokenize(text)).selector();
}

export { SelectorEvalError };
