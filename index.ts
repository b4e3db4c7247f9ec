/**
 * actormq — the public API (see README). Everything users, examples, tests and benchmarks use is
 * exported from here.
 */

export type { CreateTopicOptions } from "./actors/broker/broker.ts";
export { Broker } from "./actors/broker/broker.ts";
export type { BrokerOptions } from "./actors/broker/brokerConfig.ts";
export type {
  AdminDeleteGroupOptions,
  AdminDeleteTopicOptions,
  BrokerStatus,
  ConsumerConnectionInfo,
  ConsumerConnectionSummary,
  ConsumerProgressEntry,
  DeleteGroupResult,
  DeleteTopicResult,
  GroupListEntry,
  QueryMessageByKeyOptions,
  TopicStatsEntry,
  UpdateSubscriptionGroupOptions,
} from "./actors/client/admin.ts";
export type { AllocateOptions, AllocateStrategy, AllocateStrategyName } from "./actors/client/allocateStrategies.ts";
export {
  allocateAveragely,
  allocateAveragelyByCircle,
  allocateByConfig,
  allocateByMachineRoom,
  allocateConsistentHash,
  allocateStrategies,
  createConsistentHashStrategy,
  getAllocateStrategy,
} from "./actors/client/allocateStrategies.ts";
export type { ConsumeOrderlyContext, ConsumeOrderlyStatus } from "./actors/client/consumeOrderlyService.ts";
export type { ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus } from "./actors/client/consumeService.ts";
export type {
  AdminCreateTopicOptions,
  AdminOptions,
  Message,
  MessageQueueSelector,
  ProducerOptions,
  SendOptions,
  SendResult,
} from "./actors/client/index.ts";
export { Admin, Producer } from "./actors/client/index.ts";
export type { PullConsumerOptions } from "./actors/client/pullConsumer.ts";
export { PullConsumer } from "./actors/client/pullConsumer.ts";
export type { ConsumeContext, ConsumeStatus, PushConsumerOptions } from "./actors/client/pushConsumer.ts";
export { defaultPushConsumerOptions, PushConsumer } from "./actors/client/pushConsumer.ts";
export { selectByHash, selectRandom } from "./actors/client/selectors.ts";
export type { ClusterView, InspectorOptions, InspectorStats } from "./actors/inspector/index.ts";
export { Inspector } from "./actors/inspector/index.ts";
export type { LocalCluster, LocalClusterOptions } from "./actors/localCluster.ts";
export { startLocalCluster } from "./actors/localCluster.ts";
export type { NameServerOptions } from "./actors/nameserver/index.ts";
export { NameServer } from "./actors/nameserver/index.ts";
export type {
  ActorFailure,
  ActorNodeOptions,
  CurveClientKeys,
  CurveLinkOptions,
  CurveServerKey,
  CurveServerKeys,
  InspectionCollectorOptions,
  InspectionRecord,
  Origin,
  Ref,
  Replier,
  Reply,
  SpawnOptions,
  Supervision,
  WireEvent,
} from "./actors/runtime/index.ts";
export { ActorNode, curveKeyPair, InspectionCollector } from "./actors/runtime/index.ts";
export type { Sql92Predicate, SubscriptionExpression } from "./filter/index.ts";
export { compileSql92, parseSubscription, tagsHashCode } from "./filter/index.ts";
export { MessageStore } from "./store/index.ts";
export type { MessageExt } from "./transport/messageRecord.ts";
export type {
  ConsumeFromWhere,
  ErrorCode,
  MessageModel,
  MessageQueue,
  SendStatus,
  SubscriptionData,
  TopicRouteData,
} from "./transport/protocol.ts";
export { ErrorCodes, isMQError, MessageConst, MQError, Perm, RequestCode, ResponseCode } from "./transport/protocol.ts";
