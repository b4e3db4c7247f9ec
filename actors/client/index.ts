/** actors/client: producers, admin, and the client instance consumers build on. */

export type {
  AdminCreateTopicOptions,
  AdminOptions,
  ConsumerConnectionInfo,
  ConsumerConnectionSummary,
  GroupListEntry,
  UpdateSubscriptionGroupOptions,
} from "./admin.ts";
export { Admin, DEFAULT_ADMIN_QUEUE_NUMS } from "./admin.ts";
export type { ClientEvent, ClientInstanceOptions, HeartbeatSource } from "./clientInstance.ts";
export {
  ClientInstance,
  clientMachine,
  DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS,
  DEFAULT_POLL_NAMESERVER_INTERVAL_MS,
} from "./clientInstance.ts";
export { LatencyFaultTolerance, QueueSelector } from "./faultTolerance.ts";
export type { Message, PreparedBatch, PreparedMessage } from "./messageBuilder.ts";
export { prepareBatch, prepareMessage } from "./messageBuilder.ts";
export type { MessageQueueSelector, ProducerOptions, SendOptions, SendResult } from "./producer.ts";
export {
  DEFAULT_COMPRESS_MSG_BODY_OVER_HOWMUCH,
  DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED,
  DEFAULT_SEND_TIMEOUT_MS,
  Producer,
} from "./producer.ts";
export type { TopicPublishInfo } from "./routeCache.ts";
export { publishQueuesOf, RouteCache, routeFromDefaultTopic, subscribeQueuesOf } from "./routeCache.ts";
