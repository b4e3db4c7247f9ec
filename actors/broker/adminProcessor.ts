/**
 * Admin requests on the broker (RocketMQ's `AdminBrokerProcessor`, the part about topics and
 * groups): create/update and delete a topic (then re-register so name servers serve the new route
 * at once), list topic configs, create/update, list and delete subscription groups, runtime info
 * (brokerStats.ts), the broker's config and its runtime changes (runtimeConfig.ts).
 */
import {
  checkNotSystemTopic,
  checkTopic,
  type DeleteSubscriptionGroupReply,
  type DeleteTopicReply,
  MQError,
  PERM_READ_WRITE,
  type QueueTopicStats,
  type SubscriptionGroupConfig,
  type TopicConfigTable,
  type TopicStatsReply,
  topicCreateCommand,
} from "../../transport/protocol.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { brokerRuntimeInfo } from "./brokerStats.ts";
import { consumerOffsetsOf } from "./consumerOffsetManager.ts";
import { brokerConfigReply, updateBrokerConfig } from "./runtimeConfig.ts";
import { checkGroupName } from "./subscriptionGroupManager.ts";

/** Admin request types the `broker` actor routes here. */
export const ADMIN_REQUESTS = [
  "UPDATE_AND_CREATE_TOPIC",
  "GET_ALL_TOPIC_CONFIG",
  "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
  "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
  "GET_BROKER_RUNTIME_INFO",
  "GET_TOPIC_STATS_INFO",
  "GET_BROKER_CONFIG",
  "UPDATE_BROKER_CONFIG",
  "DELETE_TOPIC_IN_BROKER",
  "DELETE_SUBSCRIPTIONGROUP",
] as const;
export type AdminRequestType = (typeof ADMIN_REQUESTS)[number];

function int(v: unknown, name: string, dflt: number): number;
function int(v: unknown, name: string, dflt?: number): number | undefined;
function int(v: unknown, name: string, dflt?: number): number | undefined {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v)) throw new MQError("INVALID_PARAMETER", `"${name}" must be an integer.`);
  return v;
}

/** Handles one admin request; resolves with the reply fields or rejects with a coded MQError. */
export async function processAdmin(ctx: BrokerContext, type: AdminRequestType, ev: Record<string, unknown>): Promise<object> {
  switch (type) {
    case "UPDATE_AND_CREATE_TOPIC": {
      const topicName = ev.topicName ?? ev.topic;
      if (typeof topicName !== "string") throw new MQError("INVALID_PARAMETER", "UPDATE_AND_CREATE_TOPIC needs topicName.");
      checkNotSystemTopic(topicName);
      // a new topic given no count gets the asker's default (Admin: 8), else this broker's
      const q = int(ev.defaultQueueNums, "defaultQueueNums", ctx.config.defaultQueueNums);
      // perm and order not given keep the topic's own: re-running a create to change its queue
      // counts must not make a read-only topic writable again or an ordered one unordered
      const existing = ctx.topics.get(topicName);
      const tc = await ctx.topics.createOrUpdate({
        topicName,
        ...ctx.topics.queueNumsFor(topicName, int(ev.readQueueNums, "readQueueNums"), int(ev.writeQueueNums, "writeQueueNums"), q),
        perm: int(ev.perm, "perm", existing?.perm ?? PERM_READ_WRITE),
        // createOrUpdate refuses anything but true or false
        order: (ev.order ?? existing?.order ?? false) as boolean,
      });
      await ctx.registerNow();
      return { topicConfig: tc };
    }
    case "GET_ALL_TOPIC_CONFIG":
      return {
        topicConfigTable: ctx.topics.all(),
        dataVersion: ctx.topics.dataVersion,
        deletedTopics: ctx.store.deletedTopics(),
      } satisfies TopicConfigTable;
    case "DELETE_TOPIC_IN_BROKER":
      return deleteTopic(ctx, ev.topic, ev.deletedAt);
    case "DELETE_SUBSCRIPTIONGROUP":
      return deleteGroup(ctx, ev.groupName, ev.cleanOffset);
    case "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP": {
      if (typeof ev.groupName !== "string") throw new MQError("INVALID_PARAMETER", "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP needs groupName.");
      const known: (keyof SubscriptionGroupConfig)[] = [
        "consumeEnable",
        "consumeFromMinEnable",
        "consumeBroadcastEnable",
        "consumeMessageOrderly",
        "retryQueueNums",
        "retryMaxTimes",
        "brokerId",
        "whichBrokerWhenConsumeSlowly",
        "notifyConsumerIdsChangedEnable",
        "consumeTimeoutMinute",
      ];
      const req: Record<string, unknown> = { groupName: ev.groupName };
      for (const k of known) if (ev[k] !== undefined) req[k] = ev[k];
      const cfg = await ctx.groups.createOrUpdate(req as { groupName: string });
      return { subscriptionGroupConfig: cfg };
    }
    case "GET_ALL_SUBSCRIPTIONGROUP_CONFIG":
      return { subscriptionGroupTable: ctx.groups.all(), dataVersion: ctx.groups.dataVersion };
    case "GET_BROKER_RUNTIME_INFO":
      return brokerRuntimeInfo(ctx);
    case "GET_TOPIC_STATS_INFO":
      return topicStats(ctx, ev.topic);
    case "GET_BROKER_CONFIG":
      return brokerConfigReply(ctx);
    case "UPDATE_BROKER_CONFIG":
      return updateBrokerConfig(ctx, ev.properties);
  }
}

/**
 * RocketMQ's deleteTopic: the topic's config, its consumer offsets (of every group) and its
 * messages in the store (MessageStore.deleteTopics) go, then the broker registers again so name
 * servers drop its queues at once. Retry and DLQ topics may be deleted (the admin's group deletion
 * does); TBW102 and SCHEDULE_TOPIC_XXXX may not. A topic the broker does not have is deleted all
 * the same (`existed: false`): a deletion retried after a partial failure completes. A slave
 * deletes its store's records below `deletedAt`, its master's offset, so that what it copies of
 * the old topic afterwards is skipped too.
 */
async function deleteTopic(ctx: BrokerContext, topic: unknown, deletedAt: unknown): Promise<DeleteTopicReply> {
  if (typeof topic !== "string") throw new MQError("INVALID_PARAMETER", "DELETE_TOPIC_IN_BROKER needs a topic.");
  try {
    checkTopic(topic, "deleteTopic");
  } catch (e) {
    throw new MQError("INVALID_PARAMETER", (e as Error).message);
  }
  checkNotSystemTopic(topic);
  const at = int(deletedAt, "deletedAt");
  if (at !== undefined && at < 0) throw new MQError("INVALID_PARAMETER", `"deletedAt" must be >= 0, not ${at}.`);
  // the config goes last: a deletion cut short (a crash, a full disk) leaves the topic listed, so
  // the admin finds it and a deletion run again completes it
  await ctx.store.deleteTopics([topic], ctx.config.role === "SLAVE" ? at : undefined);
  const marks = ctx.store.deletedTopics();
  const after = Object.hasOwn(marks, topic) ? marks[topic]! : 0;
  const offsets = consumerOffsetsOf(ctx);
  offsets.removeWhere((t) => t === topic);
  await offsets.persist();
  const existed = (await ctx.topics.delete(topic)) !== undefined;
  await ctx.registerNow();
  return { existed, deletedAt: after };
}

/**
 * RocketMQ's deleteSubscriptionGroup: the group's config goes; with `cleanOffset` its consumer
 * offsets too. Members still online re-create the group (as auto-created) with their next heartbeat.
 */
async function deleteGroup(ctx: BrokerContext, group: unknown, cleanOffset: unknown): Promise<DeleteSubscriptionGroupReply> {
  try {
    checkGroupName(group);
  } catch (e) {
    throw new MQError("INVALID_PARAMETER", `DELETE_SUBSCRIPTIONGROUP: ${(e as Error).message}`);
  }
  if (cleanOffset !== undefined && typeof cleanOffset !== "boolean")
    throw new MQError("INVALID_PARAMETER", `"cleanOffset" must be true or false, not ${String(cleanOffset)}.`);
  const existed = await ctx.groups.delete(group);
  let offsetsRemoved = 0;
  if (cleanOffset === true) {
    const offsets = consumerOffsetsOf(ctx);
    offsetsRemoved = offsets.removeWhere((_, g) => g === group);
    await offsets.persist();
  }
  return { existed, offsetsRemoved };
}

/**
 * RocketMQ's getTopicStatsInfo: min and max offset of each write queue of `topic`, and the store
 * time of its last message (0 when it has none). TOPIC_NOT_EXIST when this broker has no such topic.
 */
function topicStats(ctx: BrokerContext, topic: unknown): TopicStatsReply {
  if (typeof topic !== "string") throw new MQError("INVALID_PARAMETER", "GET_TOPIC_STATS_INFO needs a topic.");
  const tc = ctx.topics.get(topic);
  if (!tc)
    throw new MQError(
      "TOPIC_NOT_EXIST",
      `Topic ${topic} does not exist on broker ${ctx.config.brokerName}: create it with \`${topicCreateCommand(topic)}\`.`,
    );
  const offsetTable: QueueTopicStats[] = [];
  for (let queueId = 0; queueId < tc.writeQueueNums; queueId++) {
    const maxOffset = ctx.store.getMaxOffset(topic, queueId);
    const last = maxOffset > 0 ? ctx.store.getStoreTime(topic, queueId, maxOffset - 1) : 0;
    offsetTable.push({
      topic,
      brokerName: ctx.config.brokerName,
      queueId,
      minOffset: ctx.store.getMinOffset(topic, queueId),
      maxOffset,
      lastUpdateTimestamp: Math.max(0, last),
    });
  }
  return { offsetTable };
}
