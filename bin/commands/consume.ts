/**
 * `actormq consume`: a push consumer that prints every message it receives, one line each
 * (`topic broker:queue@offset msgId tags=.. keys=.. body`), until Ctrl-C or `--count` messages.
 */
import type { Command } from "commander";
import { PushConsumer } from "../../actors/client/pushConsumer.ts";
import type { SubscriptionExpression } from "../../filter/index.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";
import { clientCommand, intArg, runClient, timeArg } from "../common.ts";

interface ConsumeFlags {
  namesrv: string[];
  topic: string;
  group?: string;
  from: string;
  count?: number;
  tag?: string;
  sql?: string;
  broadcast?: boolean;
}

/** `--from` as RocketMQ's consumeFromWhere (only used when the group has no committed offset). */
export function parseFrom(from: string): { consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET" | "CONSUME_FROM_LAST_OFFSET" | "CONSUME_FROM_TIMESTAMP"; consumeTimestamp?: number } {
  if (from === "first") return { consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET" };
  if (from === "last") return { consumeFromWhere: "CONSUME_FROM_LAST_OFFSET" };
  try {
    return { consumeFromWhere: "CONSUME_FROM_TIMESTAMP", consumeTimestamp: timeArg(from) };
  } catch {
    throw new MQError("ILLEGAL_ARGUMENT", `--from "${from}" is not first, last or a time: use ISO 8601 like 2025-01-31T12:00:00Z, or epoch milliseconds.`);
  }
}

/** One printed line per message; bodies are shown as UTF-8 with newlines escaped. */
export function formatMessage(m: MessageExt): string {
  const body = m.body.toString("utf8").replace(/\n/g, "\\n");
  return `${m.topic} ${m.brokerName}:${m.queueId}@${m.queueOffset} ${m.msgId} tags=${m.tags ?? ""} keys=${m.keys ?? ""} reconsume=${m.reconsumeTimes} ${body}`;
}

export function addConsumeCommand(program: Command): void {
  clientCommand(
    program
      .command("consume")
      .description("Consume a topic and print its messages until Ctrl-C (or --count messages).")
      .requiredOption("--topic <topic>", "topic to consume")
      .option("--group <group>", "consumer group (default: a new group per run, actormq-cli-<pid>)")
      .option("--from <where>", "where a group without committed offsets starts: first, last or a time (ISO 8601 / epoch ms)", "last")
      .option("--count <n>", "exit after printing this many messages", intArg)
      .option("--tag <expr>", "tag filter, e.g. 'TagA || TagB'")
      .option("--sql <expr>", "SQL92 filter on message properties, e.g. \"a > 5 AND b = 'x'\"")
      .option("--broadcast", "broadcasting model (every consumer gets every message)"),
  ).action((f: ConsumeFlags) =>
    runClient(async (onExit) => {
      if (f.tag && f.sql) throw new MQError("ILLEGAL_ARGUMENT", "Give either --tag or --sql, not both.");
      if (f.count === 0) throw new MQError("ILLEGAL_ARGUMENT", "--count must be at least 1.");
      const from = parseFrom(f.from);
      const expr: SubscriptionExpression = f.sql ? { sql92: f.sql } : (f.tag ?? "*");
      let printed = 0;
      let done!: () => void;
      const finished = new Promise<void>((r) => (done = r));
      const consumer = await PushConsumer.start({
        group: f.group ?? `actormq-cli-${process.pid}`,
        nameservers: f.namesrv,
        subscriptions: { [f.topic]: expr },
        model: f.broadcast ? "BROADCASTING" : "CLUSTERING",
        ...from,
        consumeThreads: 1,
        listener: async (msgs) => {
          // past --count the messages go back to the group instead of being acknowledged unseen
          if (f.count !== undefined && printed >= f.count) return "RECONSUME_LATER";
          for (const m of msgs) process.stdout.write(`${formatMessage(m)}\n`);
          printed += msgs.length;
          if (f.count !== undefined && printed >= f.count) done();
          return "CONSUME_SUCCESS";
        },
      });
      onExit(() => consumer.close());
      const stop = () => done();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      await finished;
      process.stderr.write(`actormq: consumed ${printed} message(s)\n`);
    }),
  );
}
