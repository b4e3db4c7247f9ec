/**
 * actormq — the public API (see README). Everything users, examples, tests and benchmarks use is
 * exported from here.
 */
export { MQError, isMQError, RequestCode, ResponseCode, ErrorCodes, Perm, MessageConst } from "./transport/protocol.ts";
export type { ErrorCode, MessageQueue, TopicRouteData, SubscriptionData, SendStatus, MessageModel, ConsumeFromWhere } from "./transport/protocol.ts";
export { ActorNode, InspectionCollector, curveKeyPair } from "./actors/runtime/index.ts";
export type { ActorNodeOptions, SpawnOptions, Ref, Reply, Replier, Origin, WireEvent, InspectionRecord, Supervision, ActorFailure } from "./actors/runtime/index.ts";
export { MessageStore } from "./store/index.ts";
export type { MessageExt } from "./transport/messageRecord.ts";
