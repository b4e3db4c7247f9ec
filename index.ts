/**
 * actormq — the public API (see README). Everything users, examples, tests and benchmarks use is
 * exported from here.
 */
export { MQError, isMQError, RequestCode, ResponseCode, ErrorCodes, Perm, MessageConst } from "./transport/protocol.ts";
export type { ErrorCode, MessageQueue, TopicRouteData, SubscriptionData, SendStatus, MessageModel, ConsumeFromWhere } from "./transport/protocol.ts";
