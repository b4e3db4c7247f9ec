/**
 * Tag subscriptions (RocketMQ `FilterAPI.buildSubscriptionData`) and the two tag checks: the
 * broker's hash pre-filter on consume-queue entries and the client's exact re-check on the TAGS
 * string (two tags may share a hash code).
 */
import { isWellFormedText, MQError, type SubscriptionData } from "../transport/protocol.ts";
import { javaStringHashCode } from "./javaHash.ts";
import { compileSql92 } from "./sql92/index.ts";
import { javaTrim } from "./sql92/values.ts";

/** The subscription expression that matches every message. */
export const SUB_ALL = "*";

/** A subscription as a user writes it: a tag expression (`"*"`, `"TagA || TagB"`) or an SQL92 selector. */
export type SubscriptionExpression = string | { sql92: string };

/** Java `String.hashCode` of a tag: the value stored in a consume-queue entry's tag slot. */
export function tagsHashCode(tag: string): number {
  return javaStringHashCode(tag);
}

/** The tag code a message gets in its consume-queue entry: 0 when it has no tag. */
export function tagsCodeOf(tags: string | null | undefined): number {
  return tags ? javaStringHashCode(tags) : 0;
}

/**
 * Refuses an expression with an unpaired surrogate: it reaches the broker as UTF-8, which replaces
 * it with U+FFFD, and no message can carry it (producers refuse it), so it could match nothing.
 */
function checkWellFormed(topic: string, expr: string): void {
  if (isWellFormedText(expr)) return;
  throw new MQError(
    "SUBSCRIPTION_PARSE_FAILED",
    `The subscription ${JSON.stringify(expr)} of topic "${topic}" contains an unpaired surrogate (half of a character such as an emoji, often left by cutting a string), which no message can carry: fix the text.`,
  );
}

/**
 * Builds the SubscriptionData a consumer announces in its heartbeats.
 *
 * - `"*"`, `""` (or only blanks) match everything: subString `*`, empty tagsSet.
 * - `"TagA || TagB"`: split on `||`, each part trimmed as Java trims (characters up to U+0020 only),
 *   blanks dropped; tags are case-sensitive.
 * - `{ sql92 }`: the selector is compiled once here so a bad one fails at subscribe time.
 *
 * @throws MQError SUBSCRIPTION_PARSE_FAILED on an expression that names no tag, a bad selector, or
 *   text with an unpaired surrogate.
 */
export function parseSubscription(topic: string, expr: SubscriptionExpression, subVersion: number = Date.now()): SubscriptionData {
  if (typeof expr === "object" && expr !== null && "sql92" in expr) {
    const sql = expr.sql92;
    if (typeof sql !== "string")
      throw new MQError(
        "SUBSCRIPTION_PARSE_FAILED",
        `The SQL92 subscription of topic "${topic}" must be a string such as { sql92: "a > 5 AND b = 'x'" }, got ${Array.isArray(sql) ? "an array" : sql === null ? "null" : typeof sql}.`,
      );
    if (sql.trim().length === 0) {
      throw new MQError(
        "SUBSCRIPTION_PARSE_FAILED",
        `The SQL92 subscription of topic "${topic}" is empty: give a selector such as { sql92: "a > 5 AND b = 'x'" }, or subscribe with "*".`,
      );
    }
    checkWellFormed(topic, sql);
    compileSql92(sql);
    return { topic, subString: sql, expressionType: "SQL92", tagsSet: [], codeSet: [], subVersion };
  }
  if (expr === null || expr === undefined) expr = SUB_ALL;
  if (typeof expr !== "string") {
    throw new MQError(
      "SUBSCRIPTION_PARSE_FAILED",
      `The subscription of topic "${topic}" must be a tag expression string ("*", "TagA || TagB") or { sql92: "..." }, got ${typeof expr}.`,
    );
  }
  checkWellFormed(topic, expr);
  const trimmed = javaTrim(expr);
  if (trimmed.length === 0 || trimmed === SUB_ALL) {
    return { topic, subString: SUB_ALL, expressionType: "TAG", tagsSet: [], codeSet: [], subVersion };
  }
  const tagsSet: string[] = [];
  const codeSet: number[] = [];
  for (const part of expr.split("||")) {
    const tag = javaTrim(part);
    if (tag.length === 0 || tagsSet.includes(tag)) continue;
    tagsSet.push(tag);
    const code = javaStringHashCode(tag);
    if (!codeSet.includes(code)) codeSet.push(code);
  }
  if (tagsSet.length === 0) {
    throw new MQError(
      "SUBSCRIPTION_PARSE_FAILED",
      `The tag expression "${expr}" of topic "${topic}" names no tag: write tags separated by "||" (e.g. "TagA || TagB"), or "*" for all messages.`,
    );
  }
  return { topic, subString: expr, expressionType: "TAG", tagsSet, codeSet, subVersion };
}

/**
 * Broker pre-filter on a consume-queue entry (`ExpressionMessageFilter.isMatchedByConsumeQueue`):
 * true when there is no subscription, it is `*` or SQL92 (checked later on the properties), the
 * entry has no tag code, or the subscription's codes contain it. A hash collision passes; the
 * client re-checks with {@link tagStringMatches}.
 */
export function tagMatches(sub: SubscriptionData | null | undefined, tagsCode: number | null | undefined): boolean {
  if (!sub || tagsCode === null || tagsCode === undefined) return true;
  if (sub.expressionType === "SQL92" || sub.subString === SUB_ALL) return true;
  // Consume-queue slots are 8 bytes; Java compares the (int) cast of the stored long.
  return sub.codeSet.includes(tagsCode | 0);
}

/**
 * Client re-filter on the TAGS string (`PullAPIWrapper.processPullResult`): with a non-empty
 * tagsSet only messages whose tag is in it pass; a message without a tag does not.
 */
export function tagStringMatches(sub: SubscriptionData | null | undefined, tags: string | null | undefined): boolean {
  if (!sub || sub.expressionType === "SQL92" || sub.tagsSet.length === 0) return true;
  return tags !== null && tags !== undefined && sub.tagsSet.includes(tags);
}
