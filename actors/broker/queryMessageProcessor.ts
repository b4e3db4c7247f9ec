/**
 * The `query` actor: message lookup over the store's index and commit log (RocketMQ's
 * `QueryMessageProcessor`). QUERY_MESSAGE finds the records of a topic whose KEYS hold a key, or
 * the record with a UNIQ_KEY; VIEW_MESSAGE_BY_ID reads the record at a commit-log offset (the one
 * an offset msg id carries). Replies carry the stored record bytes as the body, decoded by the
 * client with `decodeRecords`, exactly like a pull.
 *
 * Lookups are synchronous reads of the store (index slots and a few records), so each request is
 * answered in the action that receives it; no put goes through here.
 */
import { setup } from "xstate";
import {
  checkTopic,
  DEFAULT_QUERY_MAX_NUM,
  DLQ_GROUP_TOPIC_PREFIX,
  MAX_QUERY_MAX_NUM,
  MQError,
  type QueryMessageReply,
  type QueryMessageRequest,
  RETRY_GROUP_TOPIC_PREFIX,
  SCHEDULE_TOPIC,
  type ViewMessageReply,
  type ViewMessageRequest,
} from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";

type Fields<T> = Partial<Record<keyof T, unknown>>;

/** What a lookup answers: reply fields and the stored records for the body. */
export interface LookupResult<F> {
  fields: F;
  records: Buffer[];
}

function invalid(message: string): MQError {
  return new MQError("INVALID_PARAMETER", message);
}

function optionalInt(v: unknown, what: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw invalid(`${what} must be a non-negative integer.`);
  return v;
}

/**
 * User topics first, then the system copies (retry, DLQ, schedule): a UNIQ_KEY lookup without a
 * topic finds the original message rather than one of its retry copies.
 */
function topicsToSearch(ctx: BrokerContext): string[] {
  const system = (t: string) => t.startsWith(RETRY_GROUP_TOPIC_PREFIX) || t.startsWith(DLQ_GROUP_TOPIC_PREFIX) || t === SCHEDULE_TOPIC;
  const all = Object.keys(ctx.topics.all()).sort();
  return [...all.filter((t) => !system(t)), ...all.filter(system)];
}

/**
 * QUERY_MESSAGE: records of `topic` whose KEYS contain `key` (newest first, at most `maxNum`), or
 * with `uniqKey` the record with that UNIQ_KEY. Rejects with INVALID_PARAMETER on bad fields and
 * QUERY_NOT_FOUND when nothing matches.
 */
export function processQueryMessage(ctx: BrokerContext, ev: Fields<QueryMessageRequest>): LookupResult<QueryMessageReply> {
  if (typeof ev.key !== "string" || ev.key.length === 0)
    throw invalid("QUERY_MESSAGE needs a key (a message key, or a UNIQ_KEY with uniqKey: true).");
  const key = ev.key;
  const uniq = ev.uniqKey === true;
  if (ev.topic !== undefined || !uniq) checkTopic(ev.topic, "QUERY_MESSAGE");
  const topic = ev.topic as string | undefined;
  const maxNum = Math.min(optionalInt(ev.maxNum, "maxNum") ?? DEFAULT_QUERY_MAX_NUM, MAX_QUERY_MAX_NUM);
  const begin = optionalInt(ev.beginTimestamp, "beginTimestamp") ?? 0;
  const end = optionalInt(ev.endTimestamp, "endTimestamp") ?? Number.MAX_SAFE_INTEGER;
  let records: Buffer[];
  if (uniq) {
    records = [];
    for (const t of topic ? [topic] : topicsToSearch(ctx)) {
      const rec = ctx.store.queryMessageByUniqKey(t, key);
      if (rec) {
        records.push(rec);
        break;
      }
    }
  } else {
    records = maxNum === 0 ? [] : ctx.store.queryMessageByKey(topic!, key, maxNum, begin, end);
  }
  if (records.length === 0) {
    const where = topic ? `topic ${topic}` : "any topic";
    throw new MQError(
      "QUERY_NOT_FOUND",
      `No message with ${uniq ? "UNIQ_KEY" : "key"} "${key}" in ${where} on broker ${ctx.config.brokerName}: check the ${uniq ? "id" : "key"} and topic, or the message expired.`,
    );
  }
  return { fields: { count: records.length }, records };
}

/** VIEW_MESSAGE_BY_ID: the checked record at a commit-log offset; QUERY_NOT_FOUND when none starts there. */
export function processViewMessage(ctx: BrokerContext, ev: Fields<ViewMessageRequest>): LookupResult<ViewMessageReply> {
  const offset = optionalInt(ev.offset, "offset");
  if (offset === undefined)
    throw invalid("VIEW_MESSAGE_BY_ID needs the commit-log offset of the message (decode it from the offset msg id).");
  const rec = ctx.store.viewMessage(offset);
  if (!rec) {
    throw new MQError(
      "QUERY_NOT_FOUND",
      `No message starts at commit-log offset ${offset} on broker ${ctx.config.brokerName}: the id belongs to another broker, or the message expired.`,
    );
  }
  return { fields: { offset }, records: [rec] };
}

type Asked = { reply?: Replier };

/** Events of {@link queryMessageMachine}. */
export type QueryMessageEvent =
  | ({ type: "QUERY_MESSAGE" } & Fields<QueryMessageRequest> & Asked)
  | ({ type: "VIEW_MESSAGE_BY_ID" } & Fields<ViewMessageRequest> & Asked)
  | ({ type: string } & Asked);

export interface QueryMessageContext {
  ctx: BrokerContext;
}

export interface QueryMessageInput {
  ctx: BrokerContext;
}

function answer<F extends object>(ctx: BrokerContext, reply: Replier | undefined, run: () => LookupResult<F>): void {
  try {
    const r = run();
    reply?.ok(r.fields, r.records);
  } catch (e) {
    if (!(e instanceof MQError)) ctx.logger.error({ err: e }, "message lookup failed");
    reply?.fail(
      e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to look the message up: ${String(e)}. Try again.`),
    );
  }
}

/** The `query` actor: each lookup is answered on its own, in the action that receives it. */
export const queryMessageMachine = setup({
  types: {
    context: {} as QueryMessageContext,
    events: {} as QueryMessageEvent,
    input: {} as QueryMessageInput,
  },
  actions: {
    query: ({ context, event }) =>
      answer(context.ctx, event.reply, () => processQueryMessage(context.ctx, event as Fields<QueryMessageRequest>)),
    view: ({ context, event }) =>
      answer(context.ctx, event.reply, () => processViewMessage(context.ctx, event as Fields<ViewMessageRequest>)),
    unsupported: ({ context, event }) => {
      event.reply?.fail(
        new MQError(
          "REQUEST_CODE_NOT_SUPPORTED",
          `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "query".`,
        ),
      );
    },
  },
}).createMachine({
  id: "query",
  context: ({ input }) => ({ ctx: input.ctx }),
  initial: "serving",
  states: {
    serving: {
      on: {
        QUERY_MESSAGE: { actions: "query" },
        VIEW_MESSAGE_BY_ID: { actions: "view" },
        "*": { actions: "unsupported" },
      },
    },
  },
});
