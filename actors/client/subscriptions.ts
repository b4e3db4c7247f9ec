/**
 * A consumer's subscription table (RocketMQ's `RebalanceImpl.subscriptionInner`): every topic the
 * user subscribed, parsed once at start, plus the group's retry topic in clustering mode.
 */
import { parseSubscription, SUB_ALL, type SubscriptionExpression, tagStringMatches } from "../../filter/index.ts";
import { checkTopic, type MessageModel, MQError, RETRY_GROUP_TOPIC_PREFIX, type SubscriptionData } from "../../transport/protocol.ts";

/** The retry topic of a consumer group: `%RETRY%<group>`. */
export function retryTopicOf(group: string): string {
  return RETRY_GROUP_TOPIC_PREFIX + group;
}

/** Topic to parsed subscription. */
export class SubscriptionTable {
  private readonly subs = new Map<string, SubscriptionData>();

  /**
   * Parses every subscription now, so a bad expression fails the consumer's start.
   * @throws MQError SUBSCRIPTION_PARSE_FAILED, MESSAGE_ILLEGAL (bad topic name)
   */
  static build(group: string, subscriptions: Record<string, SubscriptionExpression>, model: MessageModel): SubscriptionTable {
    const t = new SubscriptionTable();
    if (!subscriptions || typeof subscriptions !== "object") {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Consumer group "${group}" needs subscriptions: { [topic]: "*" | "TagA || TagB" | { sql92 } }.`,
      );
    }
    // an array would subscribe topics "0", "1", ... with the entries as expressions; a Map's
    // entries are no own properties, so it would subscribe nothing
    if (Array.isArray(subscriptions) || subscriptions instanceof Map)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Consumer group "${group}" got subscriptions as ${Array.isArray(subscriptions) ? "an array" : "a Map"}: give an object of topic to expression, ` +
          `such as { TopicA: "*", TopicB: "TagA || TagB" }${Array.isArray(subscriptions) ? "" : " (Object.fromEntries(map))"}.`,
      );
    for (const [topic, expr] of Object.entries(subscriptions)) t.subscribe(topic, expr);
    if (model === "CLUSTERING") t.subscribe(retryTopicOf(group), SUB_ALL);
    return t;
  }

  /** Adds or replaces one topic's subscription. */
  subscribe(topic: string, expr: SubscriptionExpression): SubscriptionData {
    checkTopic(topic, "subscribe");
    const sd = parseSubscription(topic, expr);
    this.subs.set(topic, sd);
    return sd;
  }

  /** Puts back a subscription {@link get} returned (a change that failed further on). */
  restore(topic: string, sd: SubscriptionData): void {
    this.subs.set(topic, sd);
  }

  unsubscribe(topic: string): void {
    this.subs.delete(topic);
  }

  get(topic: string): SubscriptionData | undefined {
    return this.subs.get(topic);
  }

  topics(): string[] {
    return [...this.subs.keys()];
  }

  /** The subscriptions as sent in heartbeats. */
  all(): SubscriptionData[] {
    return [...this.subs.values()];
  }

  /** Marks a topic's subscription as changed (after its queue set changed), as RocketMQ does. */
  touch(topic: string): void {
    const sd = this.subs.get(topic);
    if (sd) sd.subVersion = Math.max(Date.now(), sd.subVersion + 1);
  }

  /** The client's exact re-check of a message's TAGS against the subscription. */
  static matches(sd: SubscriptionData | undefined, tags: string | undefined): boolean {
    return tagStringMatches(sd, tags);
  }
}
