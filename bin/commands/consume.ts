/**
 * `actormq consume`: a push consumer that prints every message it receives, one line each
 * (`topic broker:queue@offset msgId tags=.. keys=.. body`, or with `--json` one JSON object: NDJSON),
 * until Ctrl-C or `--count` messages.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { Admin } from "../../actors/client/index.ts";
import { PushConsumer } from "../../actors/client/pushConsumer.ts";
import { parseSubscription, type SubscriptionExpression } from "../../filter/index.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { checkTopic, MQError } from "../../transport/protocol.ts";
import { clientCommand, clientOptions, type JsonFlag, positiveIntArg, runClient, STOP_SIGNALS, TIME_FORMS, timeArg } from "../common.ts";
import { formatMessage, messageJson } from "../messageOutput.ts";

interface ConsumeFlags extends JsonFlag {
  namesrv: string[];
  topic: string;
  group?: string;
  from: ConsumeFrom;
  count?: number;
  tag?: string;
  sql?: string;
  broadcast?: boolean;
}

/** Where a group without committed offsets starts, as RocketMQ's consumeFromWhere. */
export interface ConsumeFrom {
  consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET" | "CONSUME_FROM_LAST_OFFSET" | "CONSUME_FROM_TIMESTAMP";
  consumeTimestamp?: number;
}

/**
 * `--from` as RocketMQ's consumeFromWhere (only used when the group has no committed offset).
 * A malformed value is a usage error (exit code 2), like a malformed `--time`.
 */
export function parseFrom(from: string): ConsumeFrom {
  if (from === "first") return { consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET" };
  if (from === "last") return { consumeFromWhere: "CONSUME_FROM_LAST_OFFSET" };
  try {
    return { consumeFromWhere: "CONSUME_FROM_TIMESTAMP", consumeTimestamp: timeArg(from) };
  } catch {
    throw new InvalidArgumentError(`"${from}" is not first, last or a time: ${TIME_FORMS}.`);
  }
}

/**
 * `--from <time>`: the time before which the messages the consumer receives are skipped (consumed
 * without being printed), when the group starts where `--from` says. As in RocketMQ, the broker
 * starts a new group at 0 on a young queue (its first message still in memory) whatever
 * consumeFromWhere says; skipping what was stored earlier makes the time mean "from then on"
 * there too. Undefined for first/last and for a `--group` that already consumed the topic (it
 * goes on from its committed offsets: `reset-offset` moves them).
 */
export async function skipStoredBefore(
  admin: Admin,
  f: Pick<ConsumeFlags, "group" | "topic" | "from" | "broadcast">,
  warn: (line: string) => void = (line) => process.stderr.write(`actormq: ${line}\n`),
): Promise<number | undefined> {
  const { consumeFromWhere, consumeTimestamp } = f.from;
  if (consumeFromWhere !== "CONSUME_FROM_TIMESTAMP") return undefined;
  // a group made for this run, or broadcasting (offsets kept per host and process): nothing committed
  if (f.group === undefined || f.broadcast) return consumeTimestamp;
  let progress: Awaited<ReturnType<Admin["consumerProgress"]>>;
  try {
    progress = await admin.consumerProgress(f.group);
  } catch (e) {
    if (e instanceof MQError && e.code === "SUBSCRIPTION_GROUP_NOT_EXIST") return consumeTimestamp;
    // last run broadcasting: the brokers show no progress of it, and offsets it committed as a
    // clustering group before may still be there, so nothing is skipped
    if (e instanceof MQError && e.code === "NO_PERMISSION") {
      warn(
        `group ${f.group} was last run in broadcasting mode, so the brokers show no progress of it; printing every message it receives (--from applies to queues without a committed offset)`,
      );
      return undefined;
    }
    // no broker up yet, or one that does not answer: the consumer waits for them as with first or
    // last; nothing is skipped (skipping a group that did consume would commit unprinted messages)
    warn(`cannot tell whether group ${f.group} consumed ${f.topic} before (${(e as Error).message}); printing every message it receives`);
    return undefined;
  }
  return progress.some((q) => q.topic === f.topic && q.consumerOffset > 0) ? undefined : consumeTimestamp;
}

export function addConsumeCommand(program: Command): void {
  clientCommand(
    program
      .command("consume")
      .description("Consume a topic and print its messages until Ctrl-C (or --count messages).")
      .requiredOption("--topic <topic>", "topic to consume")
      .option("--group <group>", "consumer group (default: a new group per run, actormq-cli-<pid>)")
      .addOption(
        new Option(
          "--from <where>",
          "where a group without committed offsets starts: first, last or a time (ISO 8601 / epoch ms); as in RocketMQ, last still reads a young topic (first message in memory) from its start, while a time prints only what was stored from then on (the older messages of a young topic are consumed unprinted); a --group that already consumed the topic goes on from its offsets (move them with reset-offset)",
        )
          .default(parseFrom("last"), "last")
          .argParser(parseFrom),
      )
      .option("--count <n>", "exit after printing this many messages", positiveIntArg)
      .option("--tag <expr>", "tag filter, e.g. 'TagA || TagB'")
      .option("--sql <expr>", "SQL92 filter on message properties, e.g. \"a > 5 AND b = 'x'\"")
      .option("--broadcast", "broadcasting model (every consumer gets every message)")
      .option(
        "--json",
        "print each message as one JSON object on its own line (NDJSON) instead of the text, as message --json shows one: " +
          'MessageExt\'s fields, body UTF-8 text or base64 when bodyEncoding is "base64"; everything else goes to stderr',
      ),
  ).action((f: ConsumeFlags) =>
    runClient(async (onExit) => {
      // `--sql ""` is an empty selector (refused below), not a missing flag that means "all"
      if (f.tag !== undefined && f.sql !== undefined) throw new MQError("ILLEGAL_ARGUMENT", "Give either --tag or --sql, not both.");
      // as the consumer would refuse them, before a route lookup that says it does not exist yet
      checkTopic(f.topic, "subscribe");
      const expr: SubscriptionExpression = f.sql !== undefined ? { sql92: f.sql } : (f.tag ?? "*");
      parseSubscription(f.topic, expr);
      // a consumer starts without a reachable name server (RocketMQ's clients keep retrying): ask for
      // the route first so a wrong --namesrv is one error line, not a silent wait
      const admin = await Admin.start(clientOptions(f));
      let skipBefore: number | undefined;
      try {
        try {
          await admin.topicRoute(f.topic);
        } catch (e) {
          if (!(e instanceof MQError && e.code === "TOPIC_NOT_EXIST")) throw e;
          process.stderr.write(`actormq: topic ${f.topic} does not exist yet; waiting for its first message\n`);
        }
        skipBefore = await skipStoredBefore(admin, f);
      } finally {
        await admin.close();
      }
      const line = f.json ? (m: MessageExt) => JSON.stringify(messageJson(m)) : formatMessage;
      let printed = 0;
      let stdoutFailed = false;
      let done!: () => void;
      const finished = new Promise<void>((r) => (done = r));
      let releaseHeld!: () => void;
      const closing = new Promise<void>((r) => (releaseHeld = r));
      // before the start: messages are printed as soon as the first rebalance assigns queues,
      // and a signal without a handler kills the process with nothing committed
      for (const sig of STOP_SIGNALS) process.once(sig, () => done());
      const started = PushConsumer.start({
        group: f.group ?? `actormq-cli-${process.pid}`,
        ...clientOptions(f),
        subscriptions: { [f.topic]: expr },
        model: f.broadcast ? "BROADCASTING" : "CLUSTERING",
        ...f.from,
        consumeThreads: 1,
        listener: async (msgs) => {
          // Past --count, or once stdout failed (its reader went away: `| head`), a message is held
          // until close has stopped the consume service: a batch that fails then is neither
          // acknowledged nor sent to %RETRY%<group>, so the group's next run starts at it.
          if ((f.count !== undefined && printed >= f.count) || stdoutFailed) {
            await closing;
            return "RECONSUME_LATER";
          }
          const shown = skipBefore === undefined ? msgs : msgs.filter((m) => m.storeTimestamp >= skipBefore);
          if (shown.length === 0) return "CONSUME_SUCCESS";
          const unprinted = await new Promise<Error | null | undefined>((r) =>
            process.stdout.write(shown.map((m) => `${line(m)}\n`).join(""), r),
          );
          if (unprinted) {
            stdoutFailed = true;
            done();
            await closing;
            return "RECONSUME_LATER";
          }
          printed += shown.length;
          if (f.count !== undefined && printed >= f.count) done();
          return "CONSUME_SUCCESS";
        },
      });
      // registered before the start resolves: the reader of stdout can go away (`| head`, EPIPE)
      // while it is still starting, and its exit must still close the consumer (commit what was
      // printed, leave the group) rather than leave a member that holds queues until it expires
      onExit(async () => {
        const consumer = await started.catch(() => undefined);
        if (!consumer) return;
        const closed = consumer.close();
        releaseHeld();
        await closed;
      });
      await started;
      await finished;
      process.stderr.write(`actormq: consumed ${printed} message(s)\n`);
    }),
  );
}
