/**
 * What the consumer's actors share: the PullRequest that circulates through the pull service
 * (RocketMQ's `PullRequest`) and the narrow view of the client instance they use
 * ({@link ConsumerHost}), so each can be tested with a fake host.
 */
import type { MessageExt } from "../../transport/messageRecord.ts";
import {
  type ConsumerData,
  ConsumptionActorFor,
  MASTER_ID,
  type MessageQueue,
  type QueueOffsetRequest,
  type SearchOffsetRequest,
} from "../../transport/protocol.ts";
import type { ActorNode } from "../runtime/index.ts";
import type { ProcessQueue } from "./processQueue.ts";

/** One assigned queue's pull state: re-enqueued after every pull. */
export interface PullRequest {
  consumerGroup: string;
  mq: MessageQueue;
  pq: ProcessQueue<MessageExt>;
  nextOffset: number;
  /** the broker id to pull from next (the broker's suggestion, master by default) */
  brokerId: number;
  /** ask the broker to CRC-check every record it serves (set after a record failed its check on decode) */
  verifyRecords?: boolean;
  /** PULL_RETRY_IMMEDIATELY answers in a row that did not move the offset (a redirect the route cannot follow) */
  idleRedirects?: number;
}

/** A consumer as the client instance sees it: heartbeat data and the rebalance trigger. */
export interface ConsumerRegistration {
  group: string;
  /** this consumer's part of every heartbeat */
  consumerData(): ConsumerData;
  /** rebalance now (NOTIFY_CONSUMER_IDS_CHANGED, route change) */
  rebalanceNow(): void;
  /** names of the brokers this consumer holds or is letting go of queues on: their addresses are kept */
  brokersInUse?(): Iterable<string>;
}

/** The services of the client instance a consumer needs. */
export interface ConsumerHost {
  readonly node: ActorNode;
  readonly clientId: string;
  /** address of a broker by name and id (master for 0); undefined when no route names it */
  brokerAddress(brokerName: string, brokerId?: number): string | undefined;
  /**
   * true while the connection to this broker address is lost (closed, or cannot be made) and not
   * made again: a killed master, which the name servers list until its registration expires
   */
  isBrokerUnreachable?(addr: string): boolean;
  /**
   * when the connection to this broker address was last lost (monotonic ms, 0 if never):
   * what it granted before (an orderly lock) it may have forgotten in a restart
   */
  brokerLostAt?(addr: string): number;
  /** the readable queues of a topic, from a fresh route (throws NO_ROUTE / TOPIC_NOT_EXIST) */
  fetchSubscribeQueues(topic: string): Promise<MessageQueue[]>;
  /** the writable queues of a topic, from the cached route unless `refresh` (a failed send-back's retry copy) */
  publishQueues?(topic: string, refresh?: boolean): Promise<MessageQueue[]>;
  /** `ask` to a broker address, or TIMEOUT as soon as its connection reads refused or lost */
  unlessBrokerLost?<R>(addr: string, ask: Promise<R>): Promise<R>;
  /** a topic's read queue count on a broker in the cached route; undefined when it lists no such broker */
  readQueueNums?(topic: string, brokerName: string): number | undefined;
  registerConsumer(c: ConsumerRegistration): void;
  unregisterConsumer(group: string): Promise<void>;
  /** sends a heartbeat to every master now */
  sendHeartbeatToAllBrokers(): Promise<void>;
  /** releases this consumer's share of the instance */
  release(): Promise<void>;
}

/**
 * A queue offset asked of the queue's master (GET_MIN_OFFSET / GET_MAX_OFFSET /
 * SEARCH_OFFSET_BY_TIMESTAMP, RocketMQ's MQAdminImpl asks the master too); undefined when no
 * master address is known.
 */
export async function askMasterOffset(
  host: Pick<ConsumerHost, "node" | "brokerAddress">,
  mq: MessageQueue,
  type: "GET_MIN_OFFSET" | "GET_MAX_OFFSET" | "SEARCH_OFFSET_BY_TIMESTAMP",
  timeoutMs: number,
  timestamp?: number,
): Promise<number | undefined> {
  const addr = host.brokerAddress(mq.brokerName, MASTER_ID);
  if (!addr) return undefined;
  const fields: QueueOffsetRequest | SearchOffsetRequest =
    timestamp === undefined ? { topic: mq.topic, queueId: mq.queueId } : { topic: mq.topic, queueId: mq.queueId, timestamp };
  const r = await host.node.ref(addr, ConsumptionActorFor[type]).ask<{ offset: number }>({ type, ...fields }, { timeoutMs });
  return Number(r.fields.offset);
}
