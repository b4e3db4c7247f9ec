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
export { NameServer } from "./actors/nameserver/index.ts";
export type { NameServerOptions } from "./actors/nameserver/index.ts";
export { Broker } from "./actors/broker/broker.ts";
export type { CreateTopicOptions } from "./actors/broker/broker.ts";
export type { BrokerOptions } from "./actors/broker/brokerConfig.ts";
export { Producer, Admin } from "./actors/client/index.ts";
export type { ProducerOptions, SendResult, SendOptions, MessageQueueSelector, AdminOptions, AdminCreateTopicOptions, Message } from "./actors/client/index.ts";
export { startLocalCluster } from "./actors/localCluster.ts";
export type { LocalClusterOptions, LocalCluster } from "./actors/localCluster.ts";
export { parseSubscription, compileSql92, tagsHashCode } from "./filter/index.ts";
export type { SubscriptionExpression, Sql92Predicate } from "./filter/index.ts";
export {
  allocateStrategies, getAllocateStrategy, allocateAveragely, allocateAveragelyByCircle, allocateConsistentHash,
  createConsistentHashStrategy, allocateByConfig, allocateByMachineRoom,
} from "./actors/client/allocateStrategies.ts";
export type { AllocateStrategy, AllocateStrategyName, AllocateOptions } from "./actors/client/allocateStrategies.ts";
export { selectByHash, selectRandom } from "./actors/client/selectors.ts";
export { Inspector } from "./actors/inspector/index.ts";
export type { InspectorOptions, InspectorStats, ClusterView } from "./actors/inspector/index.ts";
export { PushConsumer, defaultPushConsumerOptions } from "./actors/client/pushConsumer.ts";
export type { PushConsumerOptions, ConsumeContext, ConsumeStatus } from "./actors/client/pushConsumer.ts";
export { PullConsumer } from "./actors/client/pullConsumer.ts";
export type { PullConsumerOptions } from "./actors/client/pullConsumer.ts";
export type { ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus } from "./actors/client/consumeService.ts";
export type { ConsumeOrderlyContext, ConsumeOrderlyStatus } from "./actors/client/consumeOrderlyService.ts";
export type { ConsumerProgressEntry } from "./actors/client/admin.ts";
export type { QueryMessageByKeyOptions } from "./actors/client/admin.ts";
