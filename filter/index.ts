/**
 * Message filtering shared by brokers and clients: tag subscriptions and SQL92 selectors.
 */

export { javaStringHashCode } from "./javaHash.ts";
export type { SelectorProperties, Sql92Predicate } from "./sql92/index.ts";
export { compileSql92 } from "./sql92/index.ts";
export type { SubscriptionExpression } from "./tagFilter.ts";
export { parseSubscription, SUB_ALL, tagMatches, tagStringMatches, tagsCodeOf, tagsHashCode } from "./tagFilter.ts";
