/** `actormq topic create|list|route|status|delete`: topics as the name servers and brokers see them. */
import { type Command, Option } from "commander";
import { Admin } from "../../actors/client/index.ts";
import { MAX_QUEUE_NUMS, MQError, type TopicRouteData } from "../../transport/protocol.ts";
import {
  clientCommand,
  clientOptions,
  ExitCode,
  fail,
  formatTable,
  intRangeArg,
  type JsonFlag,
  jsonOption,
  listArg,
  runClient,
  show,
} from "../common.ts";

interface ClientFlags extends JsonFlag {
  namesrv: string[];
}

interface QueueFlags {
  queues?: number;
  readQueues?: number;
  writeQueues?: number;
}

/**
 * The parsers of `--queues` (1 and up: both counts 0 would make a topic nothing can use) and of
 * `--read-queues` / `--write-queues` (0 and up: 0 stops reads or writes): a count out of range is a
 * usage error, refused before anything connects.
 */
const queuesArg = intRangeArg(
  1,
  MAX_QUEUE_NUMS,
  `1 to ${MAX_QUEUE_NUMS} queues per broker (to stop writes or reads, use --write-queues 0 or --read-queues 0)`,
);
const readWriteQueuesArg = intRangeArg(0, MAX_QUEUE_NUMS, `0 to ${MAX_QUEUE_NUMS} queues per broker`);

/**
 * The queue counts of `topic create` (RocketMQ's readQueueNums / writeQueueNums): `--queues` sets
 * both, `--read-queues` / `--write-queues` one each; a count not given stays undefined, so the
 * broker keeps an existing topic's. Throws ILLEGAL_ARGUMENT for a mix, or more write queues than
 * read queues (each count's range is its parser's); the command exits 2 (usage) on it.
 */
export function queueCounts(f: QueueFlags): { readQueueNums?: number; writeQueueNums?: number } {
  const { queues, readQueues, writeQueues } = f;
  if (queues !== undefined) {
    if (readQueues !== undefined || writeQueues !== undefined)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        "--queues sets both the read and the write queue count: give either --queues, or --read-queues and/or --write-queues.",
      );
    return { readQueueNums: queues, writeQueueNums: queues };
  }
  if (readQueues !== undefined && writeQueues !== undefined && writeQueues > readQueues)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `--write-queues ${writeQueues} is more than --read-queues ${readQueues}: messages sent to write queues ${readQueues} and up would never be consumed. Give at least as many read queues.`,
    );
  return { readQueueNums: readQueues, writeQueueNums: writeQueues };
}

export function addTopicCommands(program: Command): void {
  const topic = program.command("topic").description("Create, list and inspect topics.");

  clientCommand(
    topic
      .command("create")
      .description(
        "Create or update a topic on every master (or the brokers named by --brokers). A queue count, --perm or --order not given keeps an existing topic's on each broker; a new topic gets 8 queues (one count given alone sets the other too), perm 6, unordered.",
      )
      .argument("<topic>", "topic name")
      .option("--queues <n>", `read and write queues per broker, 1 to ${MAX_QUEUE_NUMS} (both counts)`, queuesArg)
      .option("--read-queues <n>", `read queues per broker (readQueueNums), 0 to ${MAX_QUEUE_NUMS}`, readWriteQueuesArg)
      .option(
        "--write-queues <n>",
        `write queues per broker (writeQueueNums), 0 to ${MAX_QUEUE_NUMS}; at most the read queues`,
        readWriteQueuesArg,
      )
      .option("--brokers <names>", "comma-separated broker names (default: every master)", listArg)
      .addOption(
        new Option("--perm <perm>", "6 = read+write, 4 = read only, 2 = write only (default: kept, 6 for a new topic)").choices([
          "2",
          "4",
          "6",
        ]),
      )
      .option("--order", "mark the topic as ordered")
      .option("--no-order", "mark the topic as unordered (default: kept, unordered for a new topic)"),
  ).action((name: string, f: ClientFlags & QueueFlags & { brokers?: string[]; perm?: string; order?: boolean }) =>
    runClient(async (onExit) => {
      let counts: ReturnType<typeof queueCounts>;
      try {
        counts = queueCounts(f);
      } catch (e) {
        // flags that do not go together: a usage error, as a count out of range is
        fail(e, ExitCode.USAGE);
      }
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      const configs = await admin.createTopic({
        topic: name,
        brokers: f.brokers,
        ...counts,
        perm: f.perm === undefined ? undefined : Number(f.perm),
        order: f.order,
      });
      const shapes = [...new Set(configs.map((c) => `${c.readQueueNums} read / ${c.writeQueueNums} write queues`))];
      process.stdout.write(
        `topic ${name} created on ${configs.length} broker(s) with ${shapes.join(", ")}${shapes.length === 1 ? " each" : ""}\n`,
      );
    }),
  );

  clientCommand(
    topic.command("list").description("List the topics the name servers know.").addOption(jsonOption("the topic names as an array")),
  ).action((f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, (await admin.topicList()).sort(), (list) => (list.length > 0 ? `${list.join("\n")}\n` : ""));
    }),
  );

  clientCommand(
    topic
      .command("route")
      .description("Show which brokers and queues serve a topic.")
      .argument("<topic>", "topic name")
      .addOption(jsonOption("the route as the name servers answer it (RocketMQ's TopicRouteData: brokerDatas, queueDatas)")),
  ).action((name: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, await admin.topicRoute(name), routeTable);
    }),
  );

  clientCommand(
    topic
      .command("status")
      .description(
        "Show each write queue's min and max offset and the store time of its last message, per broker (RocketMQ's topicStatus); messages stored = MAX - MIN. Read queues past the write queue count are not listed: `topic route` shows both counts.",
      )
      .argument("<topic>", "topic name")
      .addOption(
        jsonOption("an array of the queues: brokerName, queueId, minOffset, maxOffset, lastUpdateTimestamp (epoch ms, 0 when none)"),
      ),
  ).action((name: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, await admin.examineTopicStats(name), (stats) => {
        const rows = stats.map((q) => [
          q.brokerName,
          q.queueId,
          q.minOffset,
          q.maxOffset,
          q.lastUpdateTimestamp > 0 ? new Date(q.lastUpdateTimestamp).toISOString() : "-",
        ]);
        return formatTable(["BROKER", "WRITE QUEUE", "MIN", "MAX", "LAST UPDATED"], rows);
      });
    }),
  );

  addTopicDeleteCommand(topic);
}

/** A route as `topic route` shows it: a row per broker process with its broker's queue counts. */
function routeTable(route: TopicRouteData): string {
  const rows: (string | number)[][] = [];
  for (const bd of [...route.brokerDatas].sort((a, b) => a.brokerName.localeCompare(b.brokerName))) {
    const q = route.queueDatas.find((x) => x.brokerName === bd.brokerName);
    for (const [id, addr] of Object.entries(bd.brokerAddrs).sort()) {
      rows.push([bd.brokerName, id === "0" ? "master" : `slave ${id}`, addr, q?.readQueueNums ?? 0, q?.writeQueueNums ?? 0, q?.perm ?? 0]);
    }
  }
  return formatTable(["BROKER", "ROLE", "ADDRESS", "READ QUEUES", "WRITE QUEUES", "PERM"], rows);
}

/** `actormq topic delete <topic> [--cluster C]` (RocketMQ's `mqadmin deleteTopic`). */
function addTopicDeleteCommand(topic: Command): void {
  clientCommand(
    topic
      .command("delete")
      .description(
        "Delete a topic from every master and slave that has it (of --cluster only, when given) and its route from the name servers " +
          "(RocketMQ's deleteTopic). Its messages are no longer served (they leave the disk when their commit-log files expire) and " +
          "its consumer offsets are dropped: a topic created again under the name starts empty. Stop its producers and consumers first. " +
          "TBW102, SCHEDULE_TOPIC_XXXX and retry/dead-letter topics are refused (`group delete` deletes a group's).",
      )
      .argument("<topic>", "topic name")
      .option("--cluster <name>", "delete it from this cluster's brokers only (default: every cluster)"),
  ).action((name: string, f: ClientFlags & { cluster?: string }) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      const r = await admin.deleteTopic(name, { cluster: f.cluster });
      process.stdout.write(`topic ${name} deleted from ${r.brokers.length} broker(s) and the name servers\n`);
    }),
  );
}
