/**
 * Tokenizer for RocketMQ's SQL92 message selectors (`SelectorParser.jj`): longest match wins,
 * keywords are case-insensitive and beat identifiers of the same length, `--` comments need a
 * line end and `/* *\/` comments a close, exactly as JavaCC's generated token manager behaves.
 */

export type TokenKind =
  | "NOT"
  | "AND"
  | "OR"
  | "BETWEEN"
  | "IN"
  | "TRUE"
  | "FALSE"
  | "NULL"
  | "IS"
  | "CONTAINS"
  | "STARTSWITH"
  | "ENDSWITH"
  | "NOW"
  | "DECIMAL"
  | "FLOAT"
  | "STRING"
  | "ID"
  | "="
  | "<>"
  | ">"
  | ">="
  | "<"
  | "<="
  | "("
  | ")"
  | ","
  | "+"
  | "-"
  | "EOF";

export interface Token {
  kind: TokenKind;
  /** the matched source text (for STRING: with quotes, undecoded) */
  image: string;
  /** offset of the first character in the selector */
  pos: number;
}

const KEYWORDS = new Set<TokenKind>([
  "NOT",
  "AND",
  "OR",
  "BETWEEN",
  "IN",
  "TRUE",
  "FALSE",
  "NULL",
  "IS",
  "CONTAINS",
  "STARTSWITH",
  "ENDSWITH",
  "NOW",
]);

const WHITESPACE = /[ \t\n\r\f]+/y;
const LINE_COMMENT = /--[^\n\r]*(?:\r\n|\n|\r)/y;
const BLOCK_COMMENT = /\/\*[^*]*\*+(?:[^*/][^*]*\*+)*\//y;
const DECIMAL = /(?:0|[1-9][0-9]*[lL]?)/y;
const FLOAT = /(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)/y;
const STRING = /'(?:''|[^'])*'/y;
const IDENT = /[a-zA-Z_$][a-zA-Z0-9_$]*/y;

/** A lexical or syntax error at a position of the selector. */
export class SelectorSyntaxError extends Error {
  constructor(
    message: string,
    readonly pos: number,
  ) {
    super(message);
  }
}

function matchAt(re: RegExp, text: string, pos: number): string | null {
  re.lastIndex = pos;
  const m = re.exec(text);
  return m ? m[0] : null;
}

/** Splits a selector into tokens, ending with one EOF token. */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let pos = 0;
  const n = text.length;
  // A `--` is a comment only if a line end follows it somewhere; checking that up front keeps a run
  // of dashes from rescanning the rest of the selector at each dash.
  const lastLineEnd = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r"));
  // FLOAT failing at a digit fails at the digit after it too (same characters follow), so a run of
  // zeros (one DECIMAL "0" per digit) does not rescan the run at each zero.
  let floatMissAt = -2;
  while (pos < n) {
    const skip =
      matchAt(WHITESPACE, text, pos) ??
      (pos + 2 <= lastLineEnd ? matchAt(LINE_COMMENT, text, pos) : null) ??
      matchAt(BLOCK_COMMENT, text, pos);
    if (skip !== null) {
      pos += skip.length;
      continue;
    }
    const c = text[pos]!;
    if ((c >= "0" && c <= "9") || c === ".") {
      const d = matchAt(DECIMAL, text, pos) ?? "";
      const f = floatMissAt === pos - 1 ? "" : (matchAt(FLOAT, text, pos) ?? "");
      if (f.length === 0) floatMissAt = pos;
      if (d.length === 0 && f.length === 0) throw new SelectorSyntaxError(`unexpected character '${c}'`, pos);
      const kind: TokenKind = f.length > d.length ? "FLOAT" : "DECIMAL";
      const image = kind === "FLOAT" ? f : d;
      tokens.push({ kind, image, pos });
      pos += image.length;
      continue;
    }
    if (c === "'") {
      const s = matchAt(STRING, text, pos);
      if (s === null)
        throw new SelectorSyntaxError("unterminated string literal (strings are quoted with ' and a quote inside is written '')", pos);
      tokens.push({ kind: "STRING", image: s, pos });
      pos += s.length;
      continue;
    }
    const id = matchAt(IDENT, text, pos);
    if (id !== null) {
      const upper = id.toUpperCase() as TokenKind;
      tokens.push({ kind: KEYWORDS.has(upper) ? upper : "ID", image: id, pos });
      pos += id.length;
      continue;
    }
    const two = text.slice(pos, pos + 2);
    if (two === "<>" || two === ">=" || two === "<=") {
      tokens.push({ kind: two, image: two, pos });
      pos += 2;
      continue;
    }
    if (c === "=" || c === ">" || c === "<" || c === "(" || c === ")" || c === "," || c === "+" || c === "-") {
      tokens.push({ kind: c, image: c, pos });
      pos += 1;
      continue;
    }
    throw new SelectorSyntaxError(`unexpected character '${c}'`, pos);
  }
  tokens.push({ kind: "EOF", image: "", pos: n });
  return tokens;
}
