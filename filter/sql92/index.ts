/**
 * SQL92 message selectors, RocketMQ dialect: `compileSql92(expr)` parses once and returns a
 * predicate over a message's properties.
 */
import { MQError } from "../../transport/protocol.ts";
import { SelectorSyntaxError } from "./lexer.ts";
import { parseSelector, type SelectorProperties } from "./parser.ts";

export type { SelectorProperties } from "./parser.ts";

/** A compiled selector: true when the message's properties match. Never throws. */
export type Sql92Predicate = (props: SelectorProperties) => boolean;

const GRAMMAR_HINT =
  "Selectors use property names, 'quoted strings', numbers, TRUE/FALSE, comparisons = <> > >= < <=, " +
  "AND/OR/NOT, parentheses, [NOT] BETWEEN x AND y, [NOT] IN ('a', 'b'), IS [NOT] NULL and [NOT] CONTAINS/STARTSWITH/ENDSWITH 'x'.";

/**
 * Compiles an SQL92 selector with RocketMQ's grammar and type rules. Property values are
 * strings, converted to the type of the other side of a comparison as RocketMQ does; a missing
 * property is null (only `IS NULL` is true for it); a value that cannot be converted makes the
 * message not match, as does any result that is not TRUE.
 *
 * @throws MQError SUBSCRIPTION_PARSE_FAILED when the selector is not valid.
 */
export function compileSql92(expr: string): Sql92Predicate {
  if (typeof expr !== "string" || expr.trim().length === 0) {
    throw new MQError(
      "SUBSCRIPTION_PARSE_FAILED",
      `The SQL92 selector is empty: give an expression such as "a > 5 AND b = 'x'". ${GRAMMAR_HINT}`,
    );
  }
  let root: ReturnType<typeof parseSelector>;
  try {
    root = parseSelector(expr);
  } catch (e) {
    if (e instanceof SelectorSyntaxError) {
      throw new MQError(
        "SUBSCRIPTION_PARSE_FAILED",
        `Invalid SQL92 selector "${expr}": ${e.message} (at character ${e.pos + 1}). ${GRAMMAR_HINT}`,
        { cause: e },
      );
    }
    // e.g. a stack overflow on absurdly deep nesting
    throw new MQError(
      "SUBSCRIPTION_PARSE_FAILED",
      `Invalid SQL92 selector "${expr}": ${(e as Error)?.message ?? String(e)}. ${GRAMMAR_HINT}`,
      { cause: e },
    );
  }
  const ev = root.ev;
  return (props) => {
    try {
      return ev(props) === true;
    } catch {
      // RocketMQ swallows evaluation errors (unparseable numbers, ...) and filters the message out.
      return false;
    }
  };
}
