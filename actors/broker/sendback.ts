/**
 * The `sendback` actor: CONSUMER_SEND_MSG_BACK (RocketMQ's
 * `AbstractSendMessageProcessor#consumerSendMsgBack`, reference §12.2). A consumer that failed a
 * message hands it back by commit-log offset; the broker stores a copy for the group's retry topic
 * `%RETRY%<group>` through the delay levels (3 + reconsumeTimes unless the request names one), or,
 * once the retries are used up, in `%DLQ%<group>` (one queue, readable and writable as in
 * RocketMQ 5), where it is not retried.
 */
import { setup } from "xstate";
import { decodeRecords, encodeMessageBatch, encodeProperties, ORIGIN_MESSAGE_ID_MAX_LENGTH } from "../../transport/messageRecord.ts";
import {
  type ConsumerSendMsgBackRequest,
  checkRetryTopicFits,
  isInt32,
  MessageConst,
  MQError,
  PERM_READ_WRITE,
  Perm,
  shownWireValue,
} from "../../transport/protocol.ts";
import { LogThrottle } from "../logger.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { brokerDelayLevels, scheduleTarget } from "./delayRouting.ts";
import { haServiceOf } from "./haService.ts";
import { DLQ_NUMS_PER_GROUP, decideSendBack, dlqTopic, retryTopic } from "./retryPolicy.ts";
import { syncWaitDeadline } from "./sendProcessor.ts";

/** What CONSUMER_SEND_MSG_BACK answers besides success: where the copy went. */
export interface SendBackReply {
  /** `%RETRY%<group>` or `%DLQ%<group>`; empty when the group has retries disabled */
  topic: string;
  toDLQ: boolean;
  /** delay level the retry waits at (0 for the DLQ) */
  delayLevel: number;
  reconsumeTimes: number;
}

/** Dead-lettered messages are logged at warn at most once per this long per group, with the count not logged. */
export const DLQ_LOG_INTERVAL_MS = 30_000;

type SendBackFields = Partial<Record<keyof ConsumerSendMsgBackRequest, unknown>>;

function badRequest(message: string): MQError {
  return new MQError("INVALID_PARAMETER", message);
}

/** An origin message id within the room sends leave for it (ASCII, at most 32 characters). */
function originIdFits(id: string): boolean {
  return id.length <= ORIGIN_MESSAGE_ID_MAX_LENGTH && Buffer.byteLength(id) === id.length;
}

/**
 * Handles one send-back. Resolves with where the copy went, or rejects with a coded MQError:
 * NO_PERMISSION (slave, broker or retry topic not writable), SUBSCRIPTION_GROUP_NOT_EXIST,
 * INVALID_PARAMETER (bad fields), ILLEGAL_ARGUMENT (group too long for its retry topic), SYSTEM_ERROR (message not found, put not PUT_OK,
 * a SYNC_MASTER's slave did not confirm the copy). `answerBy` (monotonic ms): when the sync flush and slave waits must end for the consumer to hear them.
 */
export async function processSendBack(ctx: BrokerContext, ev: SendBackFields, answerBy?: number): Promise<SendBackReply> {
  const { config, topics, groups, store } = ctx;
  const forGroup = typeof ev.group === "string" && ev.group.length > 0 ? ` of group ${ev.group}` : "";
  if (config.role === "SLAVE")
    throw new MQError(
      "NO_PERMISSION",
      `Broker ${config.brokerName} is a slave (brokerId ${config.brokerId}) and stores no retry copies: send the message${forGroup} back to the master of ${config.brokerName} ` +
        "(brokerId 0); while the master is down, send the copy to the group's retry topic on another broker.",
    );
  if ((config.brokerPermission & Perm.WRITE) === 0) {
    throw new MQError(
      "NO_PERMISSION",
      `Broker ${config.brokerName} is not writable (brokerPermission ${config.brokerPermission}: writes are off, as while it is drained), so the message${forGroup} cannot be ` +
        `sent back to it: send the copy to the group's retry topic on another broker, or make this one writable again (\`actormq broker-config set ${config.brokerName} brokerPermission 6\`).`,
    );
  }
  if (typeof ev.group !== "string" || ev.group.length === 0)
    throw badRequest(
      `CONSUMER_SEND_MSG_BACK carries no consumer group (field group is ${shownWireValue(ev.group)}): the client must name the group whose retry topic takes the message.`,
    );
  const offset = ev.offset;
  if (typeof offset !== "number" || !Number.isInteger(offset) || offset < 0)
    throw badRequest(
      `CONSUMER_SEND_MSG_BACK's offset is ${shownWireValue(offset)}: send the commit-log offset of the message as it was pulled (MessageExt.commitLogOffset, an integer >= 0).`,
    );
  const requestedLevel = ev.delayLevel === undefined ? 0 : ev.delayLevel;
  if (typeof requestedLevel !== "number" || !Number.isInteger(requestedLevel))
    throw badRequest(
      `CONSUMER_SEND_MSG_BACK's delayLevel is ${shownWireValue(requestedLevel)}, not an integer: send 0 (the broker waits at level 3 + reconsumeTimes), a level from 1, or -1 (the dead-letter queue).`,
    );
  const clientTimes = ev.reconsumeTimes ?? undefined;
  if (clientTimes !== undefined && !(isInt32(clientTimes) && clientTimes >= 0))
    throw badRequest(
      `CONSUMER_SEND_MSG_BACK's reconsumeTimes is ${shownWireValue(clientTimes)}: when given it must be an integer from 0 (the client's count of the message's retries); leave it out to count from the stored message.`,
    );
  const group = ev.group;
  checkRetryTopicFits(group);
  const groupConfig = groups.findOrAutoCreateOrThrow(group, config.brokerName, ", so the message cannot be sent back for it");
  if (groupConfig.retryQueueNums <= 0) return { topic: "", toDLQ: false, delayLevel: 0, reconsumeTimes: 0 };

  const retry = topics.createIfAbsent(retryTopic(group), groupConfig.retryQueueNums, PERM_READ_WRITE);
  if ((retry.perm & Perm.WRITE) === 0 || retry.writeQueueNums <= 0) {
    throw new MQError(
      "NO_PERMISSION",
      `The retry topic ${retry.topicName} is not writable on broker ${config.brokerName} (perm ${retry.perm}${retry.writeQueueNums <= 0 ? ", 0 write queues" : ""}), ` +
        `so the message cannot be sent back for group ${group}: give it write permission and write queues again (admin.createTopic({ topic: "${retry.topicName}", perm: 6, ... })), ` +
        "or send the copy to the retry topic on another broker.",
    );
  }

  const rec = store.viewMessage(offset);
  if (!rec)
    throw new MQError(
      "SYSTEM_ERROR",
      `No message at commit-log offset ${offset} on broker ${config.brokerName}: its commit-log file was deleted (fileReservedTime) or the offset does not ` +
        `point at a message, so it cannot be sent back for group ${group}. The message is gone from this broker; the consumer still holds it and may retry it itself.`,
    );
  // the copy keeps the stored body and sysFlag: a compressed body stays compressed and marked
  const msg = decodeRecords(rec, config.brokerName, false)[0]!;

  const properties: Record<string, string> = { ...msg.properties };
  if (!properties[MessageConst.RETRY_TOPIC]) properties[MessageConst.RETRY_TOPIC] = msg.topic;
  if (!properties[MessageConst.ORIGIN_MESSAGE_ID]) {
    // the room a send left for the properties added here holds a 32-character id: a longer one (a
    // foreign client's UNIQ_KEY or request) gives way to the record's offset message id
    const requested = typeof ev.originMsgId === "string" && ev.originMsgId.length > 0 ? ev.originMsgId : msg.msgId;
    properties[MessageConst.ORIGIN_MESSAGE_ID] = originIdFits(requested) ? requested : msg.offsetMsgId;
  }
  delete properties[MessageConst.DELAY];

  const requestedMax = ev.maxReconsumeTimes;
  const maxReconsumeTimes =
    typeof requestedMax === "number" && Number.isInteger(requestedMax) && requestedMax >= 0 ? requestedMax : groupConfig.retryMaxTimes;
  const levels = brokerDelayLevels(config.messageDelayLevel);
  const decision = decideSendBack({
    // an orderly consumer retried the message in place: the stored copy does not know how often
    reconsumeTimes: clientTimes === undefined ? msg.reconsumeTimes : Math.max(msg.reconsumeTimes, clientTimes),
    maxReconsumeTimes,
    delayLevel: requestedLevel,
    maxDelayLevel: levels.length,
  });

  let topic: string;
  let queueId: number;
  let putProperties = properties;
  let replyTopic: string;
  if (decision.toDLQ) {
    const dlq = topics.createIfAbsent(dlqTopic(group), DLQ_NUMS_PER_GROUP, PERM_READ_WRITE);
    topic = dlq.topicName;
    replyTopic = topic;
    queueId = 0;
  } else {
    replyTopic = retry.topicName;
    const retryQueue = Math.floor(Math.random() * retry.writeQueueNums);
    properties[MessageConst.DELAY] = String(decision.delayLevel);
    const target = scheduleTarget(retry.topicName, retryQueue, properties, levels.length);
    if (target) {
      topic = target.topic;
      queueId = target.queueId;
      putProperties = target.properties;
    } else {
      topic = retry.topicName;
      queueId = retryQueue;
    }
  }

  const r = await ctx.put({
    topic,
    queueId,
    bornTimestamp: msg.bornTimestamp,
    bornHost: msg.bornHost,
    sysFlag: msg.sysFlag,
    reconsumeTimes: decision.reconsumeTimes,
    body: encodeMessageBatch([{ body: msg.body, flag: msg.flag, properties: encodeProperties(putProperties) }]),
    // a sync flush is waited for only while the consumer still waits for the answer, as a send's:
    // its whole syncFlushTimeoutMs would be the consumer's timeout too, and it would hear TIMEOUT
    flushDeadline: answerBy,
  });
  if (r.status !== "PUT_OK")
    throw new MQError(
      "SYSTEM_ERROR",
      `Storing the copy for ${replyTopic} on broker ${config.brokerName} failed with ${r.status}, so the message was not sent back for group ${group}: ` +
        "the consumer keeps it and retries it itself; check the broker's disk (space, flush latency) if this repeats.",
    );
  // SYNC_MASTER: the copy is as durable as a send (RocketMQ's putMessage with handleHA); not held by a
  // slave in time, the send-back fails and the consumer sends its own copy (a duplicate, not a loss)
  if (config.role === "SYNC_MASTER") {
    const replica = await haServiceOf(ctx).waitForSlave(r.commitLogOffset + r.wroteBytes, answerBy);
    if (replica !== "SEND_OK")
      throw new MQError(
        "SYSTEM_ERROR",
        `The copy for ${replyTopic} is stored on broker ${config.brokerName}, a SYNC_MASTER, but no slave confirmed it (${replica}), so the message was not sent back for group ${group}: ` +
          `the consumer sends its own copy; ${replica === "SLAVE_NOT_AVAILABLE" ? "start the broker's slave (or let it catch up)" : "check the slave and its link to the master"} if this repeats.`,
      );
  }
  if (decision.toDLQ) logDeadLettered(ctx, group, replyTopic, msg.msgId, properties[MessageConst.RETRY_TOPIC], decision.reconsumeTimes);
  return { topic: replyTopic, toDLQ: decision.toDLQ, delayLevel: decision.delayLevel, reconsumeTimes: decision.reconsumeTimes };
}

/** Per broker: dead-letter lines per group. */
const dlqLogs = new WeakMap<BrokerContext, LogThrottle>();

/**
 * A listener failing every message dead-letters each (thousands a second): a warn line per group
 * per interval with a sample and the count not logged; every message at debug.
 */
export function logDeadLettered(
  ctx: BrokerContext,
  group: string,
  dlq: string,
  msgId: string,
  originTopic: string | undefined,
  reconsumeTimes: number,
): void {
  const { logger } = ctx;
  if (logger.isLevelEnabled("debug"))
    logger.debug({ group, dlq, msgId, originTopic, reconsumeTimes }, "message sent to the dead-letter queue");
  let throttle = dlqLogs.get(ctx);
  if (!throttle) dlqLogs.set(ctx, (throttle = new LogThrottle(DLQ_LOG_INTERVAL_MS)));
  const held = throttle.pass(group);
  if (held === undefined) return;
  logger.warn(
    { group, dlq, msgId, originTopic, reconsumeTimes, ...(held > 0 ? { messagesNotLogged: held } : {}) },
    `messages sent to the dead-letter queue (retries used up, or retry copies of a group consuming orderly): consume ${dlq} to see them (one line per group per ` +
      `${DLQ_LOG_INTERVAL_MS / 1000} s with a sample msgId; messagesNotLogged: those since the last line; each one at debug)`,
  );
}

type Asked = { reply?: Replier };

/** Events of {@link sendbackMachine}. */
export type SendbackEvent = ({ type: "CONSUMER_SEND_MSG_BACK" } & SendBackFields & Asked) | ({ type: string } & Asked);

export interface SendbackContext {
  ctx: BrokerContext;
}

export interface SendbackInput {
  ctx: BrokerContext;
}

/** The `sendback` actor: each request is handled on its own; the store actor orders the puts. */
export const sendbackMachine = setup({
  types: {
    context: {} as SendbackContext,
    events: {} as SendbackEvent,
    input: {} as SendbackInput,
  },
  actions: {
    sendBack: ({ context, event }) => {
      const reply = event.reply;
      // a SYNC_MASTER's slave wait ends while the consumer still waits for the answer, as a send's does
      const givesUpAt = reply?.answerBy;
      processSendBack(context.ctx, event as SendBackFields, givesUpAt === undefined ? undefined : syncWaitDeadline(givesUpAt)).then(
        (out) => reply?.ok(out),
        (e: unknown) =>
          reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to take the message back: ${String(e)}`)),
      );
    },
    unsupported: ({ context, event }) => {
      event.reply?.fail(
        new MQError(
          "REQUEST_CODE_NOT_SUPPORTED",
          `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "sendback".`,
        ),
      );
    },
  },
}).createMachine({
  id: "sendback",
  context: ({ input }) => ({ ctx: input.ctx }),
  initial: "serving",
  states: {
    serving: {
      on: {
        CONSUMER_SEND_MSG_BACK: { actions: "sendBack" },
        "*": { actions: "unsupported" },
      },
    },
  },
});
