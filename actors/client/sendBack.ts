/**
 * The client's half of retries (RocketMQ's `ConsumeMessageConcurrentlyService` and
 * `DefaultMQPushConsumerImpl#sendMessageBack`, reference §12.1): messages a concurrent listener
 * failed go back to the broker that stored them (CONSUMER_SEND_MSG_BACK), which re-delivers them
 * through the group's retry topic; and a message pulled from the retry topic shows the listener
 * its original topic again.
 */
import type { MessageExt } from "../../transport/messageRecord.ts";
import {
  BrokerActor,
  type ConsumerSendMsgBackRequest,
  isMQError,
  MessageConst,
  MQError,
  RETRY_GROUP_TOPIC_PREFIX,
} from "../../transport/protocol.ts";
import { LogThrottle, lazyClientLogger } from "../logger.ts";
import type { ActorNode } from "../runtime/index.ts";

/** How long a send-back may take before the message is retried locally instead (RocketMQ: 5 s). */
export const SEND_BACK_TIMEOUT_MS = 5_000;
/** A consumer logs failed send-backs of one error code at most once per this long. */
export const SEND_BACK_FAILURE_LOG_INTERVAL_MS = 30_000;
/** Failed send-backs, at warn (ACTORMQ_LOG_LEVEL). */
export const sendBackLog = lazyClientLogger("client:sendback");
/** Send-backs of one failed batch in flight at once. */
const SEND_BACK_PARALLELISM = 16;

/** What sending back needs from the client instance. */
export interface SendBackHost {
  readonly node: ActorNode;
  /** address of a broker by name and id (master for 0) */
  brokerAddress(brokerName: string, brokerId?: number): string | undefined;
}

/** How a send-back counts the message's retries. */
export interface SendBackOptions {
  /**
   * The messages were retried in place (orderly): their reconsumeTimes counts deliveries the
   * stored copy knows nothing of, so it travels with the request (RocketMQ's orderly consumer
   * writes it as RECONSUME_TIME, reference §12.3). Otherwise the broker counts from the stored copy.
   */
  retriedInPlace?: boolean;
}

/**
 * Sends failed messages back; resolves with those that could not be sent back (the caller
 * consumes them again locally). `delayLevel` 0 lets the broker choose (3 + reconsumeTimes).
 */
export type SendBackFn = (msgs: readonly MessageExt[], delayLevel: number, opts?: SendBackOptions) => Promise<MessageExt[]>;

/** The CONSUMER_SEND_MSG_BACK fields for one message. */
export function sendBackRequest(
  msg: MessageExt,
  group: string,
  delayLevel: number,
  maxReconsumeTimes: number,
  opts?: SendBackOptions,
): ConsumerSendMsgBackRequest {
  const req: ConsumerSendMsgBackRequest = {
    group,
    offset: msg.commitLogOffset,
    delayLevel,
    originMsgId: msg.properties[MessageConst.ORIGIN_MESSAGE_ID] ?? msg.msgId,
    originTopic: msg.topic,
    maxReconsumeTimes,
  };
  if (opts?.retriedInPlace) req.reconsumeTimes = msg.reconsumeTimes;
  return req;
}

/** A {@link SendBackFn} that asks the `sendback` actor of each message's broker (its master). */
export function createSendBack(
  host: SendBackHost,
  group: string,
  maxReconsumeTimes: number,
  timeoutMs: number = SEND_BACK_TIMEOUT_MS,
): SendBackFn {
  // a failed send-back leaves the message to be consumed again locally, past maxReconsumeTimes if
  // it keeps failing: say so (RocketMQ logs each one), once per error code per interval
  const throttle = new LogThrottle(SEND_BACK_FAILURE_LOG_INTERVAL_MS);
  const logFailure = (m: MessageExt, delayLevel: number, addr: string | undefined, e: unknown): void => {
    const code = isMQError(e) ? e.code : "UNKNOWN";
    const suppressed = throttle.pass(code);
    if (suppressed === undefined) return;
    const error = e instanceof Error ? e.message : String(e);
    sendBackLog().warn(
      { group, topic: m.topic, msgId: m.msgId, broker: addr, delayLevel, code, error, suppressed },
      `Sending message ${m.msgId} of ${m.topic} back for group ${group} failed with ${code}: ${error} ` +
        `The consumer keeps the message and retries it locally; failures with this code are logged at most once every ${SEND_BACK_FAILURE_LOG_INTERVAL_MS / 1000} s.`,
    );
  };
  const one = async (m: MessageExt, delayLevel: number, opts: SendBackOptions | undefined): Promise<boolean> => {
    const addr = host.brokerAddress(m.brokerName, 0);
    if (!addr) {
      logFailure(m, delayLevel, addr, new MQError("NO_ROUTE", `No address for the master of broker ${m.brokerName} (not in the route).`));
      return false;
    }
    try {
      await host.node
        .ref(addr, BrokerActor.SENDBACK)
        .ask({ type: "CONSUMER_SEND_MSG_BACK", ...sendBackRequest(m, group, delayLevel, maxReconsumeTimes, opts) }, { timeoutMs });
      return true;
    } catch (e) {
      logFailure(m, delayLevel, addr, e);
      return false;
    }
  };
  return async (msgs, delayLevel, opts) => {
    const failed: MessageExt[] = [];
    for (let i = 0; i < msgs.length; i += SEND_BACK_PARALLELISM) {
      const part = msgs.slice(i, i + SEND_BACK_PARALLELISM);
      const ok = await Promise.all(part.map((m) => one(m, delayLevel, opts)));
      for (let k = 0; k < part.length; k++) if (!ok[k]) failed.push(part[k]!);
    }
    return failed;
  };
}

/**
 * Messages pulled from `%RETRY%<group>` get their original topic back (RETRY_TOPIC) before the
 * listener sees them (RocketMQ's `resetRetryAndNamespace`). Changes the messages in place.
 */
export function restoreRetryTopic(msgs: readonly MessageExt[], group: string): void {
  const retryTopic = RETRY_GROUP_TOPIC_PREFIX + group;
  for (const m of msgs) {
    const original = m.properties[MessageConst.RETRY_TOPIC];
    if (original && m.topic === retryTopic) m.topic = original;
  }
}
