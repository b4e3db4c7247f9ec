/**
 * Message filtering shared by brokers and clients: tag subscriptions and SQL92 selectors.
 */
export { SUB_ALL, parseSubscription, tagsHashCode, tagsCodeOf, tagMatches, tagStringMatches } from "./tagFilter.ts";
export type { SubscriptionExpression } from "./tagFilter.ts";
export { compileSql92 } from "./sql92/index.ts";
export type { Sql92Predicate, SelectorProperties } from "./sql92/index.ts";
export { javaStringHashCode } from "./javaHash.ts";
