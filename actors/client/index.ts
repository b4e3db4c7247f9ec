/** actors/client: producers, admin, and the client instance consumers build on. */
export { Producer, DEFAULT_SEND_TIMEOUT_MS, DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED } from "./producer.ts";
export type { ProducerOptions, SendResult, SendOptions, MessageQueueSelector } from "./producer.ts";
export { Admin, DEFAULT_ADMIN_QUEUE_NUMS } from "./admin.ts";
export type { AdminOptions, AdminCreateTopicOptions } from "./admin.ts";
export { ClientInstance, clientMachine, DEFAULT_POLL_NAMESERVER_INTERVAL_MS, DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS } from "./clientInstance.ts";
export type { ClientInstanceOptions, HeartbeatSource, ClientEvent } from "./clientInstance.ts";
export { RouteCache, publishQueuesOf, subscribeQueuesOf, routeFromDefaultTopic } from "./routeCache.ts";
export type { TopicPublishInfo } from "./routeCache.ts";
export { LatencyFaultTolerance, QueueSelector } from "./faultTolerance.ts";
export { prepareMessage, prepareBatch } from "./messageBuilder.ts";
export type { Message, PreparedMessage, PreparedBatch } from "./messageBuilder.ts";
