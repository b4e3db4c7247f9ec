/**
 * The value model of RocketMQ's selector evaluation, which runs on Java objects: String, Boolean,
 * Integer, Long and Double (no Float/Byte/Short can arise from a parsed selector), plus null.
 * Strings and booleans are JS primitives; the three numeric classes are kept apart because Java's
 * conversion rules depend on them (`"3.5" = 3` is a NumberFormatException, `"3.5" = 3.0` is true).
 */

/** Java `Integer`. */
export class JInt {
  constructor(readonly v: number) {}
  toString(): string {
    return String(this.v);
  }
}
/** Java `Long` (exact, as a bigint). */
export class JLong {
  constructor(readonly v: bigint) {}
  toString(): string {
    return String(this.v);
  }
}
/** Java `Double`. */
export class JDouble {
  constructor(readonly v: number) {}
  toString(): string {
    return String(this.v);
  }
}
/** Any other property value (an object, an array): comparable with nothing, contained in nothing. */
export class JOther {
  constructor(readonly v: unknown) {}
  toString(): string {
    return "<object>";
  }
}

export type JValue = null | string | boolean | JInt | JLong | JDouble | JOther;

/**
 * Raised while evaluating a selector on one message (Java's NumberFormatException,
 * ClassCastException, ...). RocketMQ swallows these and filters the message out.
 */
export class SelectorEvalError extends Error {}

const INT_MIN = -2147483648;
const INT_MAX = 2147483647;
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;
const JAVA_INTEGER = /^[+-]?[0-9]+$/;
// Each string has one way to match (`[0-9]+\.?[0-9]*` had many for a digit run, so a long run with a
// bad tail backtracked quadratically on the broker's event loop).
const JAVA_DOUBLE = /^[+-]?(?:NaN|Infinity|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)$/;

/** Java `String.trim`: strips characters up to U+0020 at both ends (not other Unicode spaces). */
export function javaTrim(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && s.charCodeAt(start) <= 0x20) start++;
  while (end > start && s.charCodeAt(end - 1) <= 0x20) end--;
  return s.slice(start, end);
}

/** Java `Integer.valueOf(String)`. */
export function parseJavaInt(s: string): number {
  if (!JAVA_INTEGER.test(s)) throw new SelectorEvalError(`For input string: "${s}"`);
  const n = Number(s);
  if (n < INT_MIN || n > INT_MAX) throw new SelectorEvalError(`For input string: "${s}" (out of int range)`);
  return n;
}

/** Java `Long.valueOf(String)`. */
export function parseJavaLong(s: string): bigint {
  if (!JAVA_INTEGER.test(s)) throw new SelectorEvalError(`For input string: "${s}"`);
  const n = BigInt(s);
  if (n < LONG_MIN || n > LONG_MAX) throw new SelectorEvalError(`For input string: "${s}" (out of long range)`);
  return n;
}

/** Java `Double.valueOf(String)` (decimal forms; hexadecimal floating literals are not accepted). */
export function parseJavaDouble(s: string): number {
  const t = javaTrim(s);
  if (!JAVA_DOUBLE.test(t)) throw new SelectorEvalError(`For input string: "${s}"`);
  const last = t[t.length - 1];
  const body = last === "f" || last === "F" || last === "d" || last === "D" ? t.slice(0, -1) : t;
  return Number(body);
}

/** Java `Boolean.valueOf(String)`: true only for "true" in any case, never fails. */
export function parseJavaBoolean(s: string): boolean {
  return s.length === 4 && s.toLowerCase() === "true";
}

/** Java `Double.compare`: NaN above everything and equal to itself, -0.0 below 0.0. */
export function compareDouble(a: number, b: number): number {
  if (a < b) return -1;
  if (a > b) return 1;
  const aNaN = Number.isNaN(a);
  const bNaN = Number.isNaN(b);
  if (aNaN || bNaN) return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
  if (a === 0 && b === 0) {
    const aNeg = Object.is(a, -0);
    const bNeg = Object.is(b, -0);
    return aNeg === bNeg ? 0 : aNeg ? -1 : 1;
  }
  return 0;
}

function sign(a: number | bigint, b: number | bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareString(a: string, b: string): number {
  // JS relational operators compare UTF-16 code units, as Java's String.compareTo does.
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * RocketMQ's `ComparisonExpression.__compare` with string conversion on: values of different
 * classes are converted towards the other side (widening numbers, parsing strings); a pair
 * that cannot be converted compares as "less than" (-1). Parse failures throw.
 */
export function compareValues(lv: Exclude<JValue, null>, rv: Exclude<JValue, null>): number {
  if (typeof lv === "string") {
    if (typeof rv === "string") return compareString(lv, rv);
    if (typeof rv === "boolean") return sign(Number(parseJavaBoolean(lv)), Number(rv));
    if (rv instanceof JInt) return sign(parseJavaInt(lv), rv.v);
    if (rv instanceof JLong) return sign(parseJavaLong(lv), rv.v);
    if (rv instanceof JDouble) return compareDouble(parseJavaDouble(lv), rv.v);
    return -1;
  }
  if (typeof lv === "boolean") {
    if (typeof rv === "boolean") return sign(Number(lv), Number(rv));
    // Java casts the Boolean to String here and fails with a ClassCastException.
    if (typeof rv === "string") throw new SelectorEvalError("java.lang.Boolean cannot be cast to java.lang.String");
    return -1;
  }
  if (lv instanceof JInt) {
    if (rv instanceof JInt) return sign(lv.v, rv.v);
    if (rv instanceof JLong) return sign(BigInt(lv.v), rv.v);
    if (rv instanceof JDouble) return compareDouble(lv.v, rv.v);
    if (typeof rv === "string") return sign(lv.v, parseJavaInt(rv));
    return -1;
  }
  if (lv instanceof JLong) {
    if (rv instanceof JLong) return sign(lv.v, rv.v);
    if (rv instanceof JInt) return sign(lv.v, BigInt(rv.v));
    if (rv instanceof JDouble) return compareDouble(Number(lv.v), rv.v);
    if (typeof rv === "string") return sign(lv.v, parseJavaLong(rv));
    return -1;
  }
  if (lv instanceof JDouble) {
    if (rv instanceof JDouble) return compareDouble(lv.v, rv.v);
    if (rv instanceof JInt) return compareDouble(lv.v, rv.v);
    if (rv instanceof JLong) return compareDouble(lv.v, Number(rv.v));
    if (typeof rv === "string") return compareDouble(lv.v, parseJavaDouble(rv));
    return -1;
  }
  // JOther: only equal to itself
  return lv === rv ? 0 : -1;
}

/** Maps a property value as it arrives (normally a string) onto the Java value model. */
export function toJValue(v: unknown): JValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") {
    if (Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX) return new JInt(v);
    if (Number.isSafeInteger(v)) return new JLong(BigInt(v));
    return new JDouble(v);
  }
  if (typeof v === "bigint") return v >= INT_MIN && v <= INT_MAX ? new JInt(Number(v)) : new JLong(BigInt.asIntN(64, v));
  if (v instanceof JInt || v instanceof JLong || v instanceof JDouble) return v;
  return new JOther(v);
}
