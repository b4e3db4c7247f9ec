/**
 * The `broker` actor: the broker's front door for producers and administrators. Sends go to the
 * send processor (one store put per request), admin requests to the admin processor; anything
 * else is answered REQUEST_CODE_NOT_SUPPORTED, so a sender never waits for a timeout.
 */
import { setup } from "xstate";
import { MQError } from "../../transport/protocol.ts";
import { LogThrottle } from "../logger.ts";
import type { DirectHandlers, Replier } from "../runtime/index.ts";
import { ADMIN_REQUESTS, type AdminRequestType, processAdmin } from "./adminProcessor.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { type BrokerStats, brokerStatsOf } from "./brokerStats.ts";
import { OpenQueueChooser, processSend, type SendEventFields } from "./sendProcessor.ts";

type Asked = { reply?: Replier; body?: Buffer };

export type BrokerEvent =
  | ({ type: "SEND_MESSAGE" } & SendEventFields & Asked)
  | ({ type: "SEND_BATCH_MESSAGE" } & SendEventFields & Asked)
  | ({ type: AdminRequestType } & Record<string, unknown> & Asked)
  | ({ type: string } & Record<string, unknown> & Asked);

export interface BrokerActorContext {
  ctx: BrokerContext;
  chooser: OpenQueueChooser;
  /** "send failed" lines per cause (see failureCause) */
  sendFailureLog: LogThrottle;
  /** msgPutTotalTodayNow, putTps, producer groups online (one call per stored send) */
  stats: BrokerStats;
}

export interface BrokerActorInput {
  ctx: BrokerContext;
}

function toMQError(e: unknown): MQError {
  return e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to handle the request: ${String(e)}`);
}

const adminTypes = new Set<string>(ADMIN_REQUESTS);

/** A refused put is logged at most once per this long per cause, with the count of those not logged. */
export const SEND_FAILURE_LOG_INTERVAL_MS = 30_000;

/**
 * What "send failed" lines are throttled by: the code and the fs error under it, else the
 * message's first words with numbers blanked (the rest names the queue, file or counts, which
 * differ per put; a client's queue id can open a message: "Queue 1000 of topic …").
 */
function failureCause(err: MQError): string {
  let cause: unknown = err.cause;
  for (let depth = 0; cause && depth < 3; depth++, cause = (cause as Error).cause) {
    const errno = (cause as NodeJS.ErrnoException).code;
    if (typeof errno === "string" && !(cause instanceof MQError)) return `${err.code}:${errno}`;
  }
  return `${err.code}:${err.message.split(" ", 3).join(" ").replace(/\d+/g, "#")}`;
}

/** SEND_MESSAGE / SEND_BATCH_MESSAGE: one put through the send processor, answered when it settles. */
function handleSend(context: BrokerActorContext, event: BrokerEvent): void {
  const reply = event.reply;
  processSend(context.ctx, event as SendEventFields, event.type === "SEND_BATCH_MESSAGE", context.chooser).then(
    (fields) => {
      context.stats.notePut(event.producerGroup, fields.count);
      reply?.ok(fields);
    },
    (e: unknown) => {
      const err = toMQError(e);
      // a store refusing every put fails each one (thousands a second): one line per cause per interval
      const logged = err.code === "SYSTEM_ERROR" || err.code === "DISK_FULL";
      const held = logged ? context.sendFailureLog.pass(failureCause(err)) : undefined;
      if (held !== undefined)
        context.ctx.logger.error(
          { err: e, code: err.code, ...(held > 0 ? { failuresNotLogged: held } : {}) },
          `send failed (one line per cause per ${SEND_FAILURE_LOG_INTERVAL_MS / 1000} s; failuresNotLogged: those since the last)`,
        );
      reply?.fail(err);
    },
  );
}

export const brokerMachine = setup({
  types: {
    context: {} as BrokerActorContext,
    events: {} as BrokerEvent,
    input: {} as BrokerActorInput,
  },
  actions: {
    send: ({ context, event }) => handleSend(context, event),
    admin: ({ context, event }) => {
      const reply = event.reply;
      if (!adminTypes.has(event.type)) {
        reply?.fail(
          new MQError(
            "REQUEST_CODE_NOT_SUPPORTED",
            `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "broker".`,
          ),
        );
        return;
      }
      processAdmin(context.ctx, event.type as AdminRequestType, event).then(
        (fields) => reply?.ok(fields),
        (e: unknown) => reply?.fail(toMQError(e)),
      );
    },
  },
}).createMachine({
  id: "broker",
  context: ({ input }) => ({
    ctx: input.ctx,
    chooser: new OpenQueueChooser(),
    sendFailureLog: new LogThrottle(SEND_FAILURE_LOG_INTERVAL_MS),
    stats: brokerStatsOf(input.ctx),
  }),
  initial: "serving",
  states: {
    serving: {
      on: {
        SEND_MESSAGE: { actions: "send" },
        SEND_BATCH_MESSAGE: { actions: "send" },
        "*": { actions: "admin" },
      },
    },
  },
});

/** The sends the node may hand to {@link handleSend} without a macrostep (state `serving` only runs it). */
export const brokerDirect: DirectHandlers = {
  state: "serving",
  handlers: { SEND_MESSAGE: handleSend, SEND_BATCH_MESSAGE: handleSend },
};
