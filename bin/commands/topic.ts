/** `actormq topic create|list|route|status`: topics as the name servers and brokers see them. */
import { type Command, Option } from "commander";
import { Admin } from "../../actors/client/index.ts";
import { clientCommand, formatTable, intArg, listArg, runClient } from "../common.ts";

interface ClientFlags {
  namesrv: string[];
}

export function addTopicCommands(program: Command): void {
  const topic = program.command("topic").description("Create, list and inspect topics.");

  clientCommand(
    topic
      .command("create")
      .description("Create or update a topic on every master (or the brokers named by --brokers).")
      .argument("<topic>", "topic name")
      .option("--queues <n>", "read and write queues per broker", intArg, 8)
      .option("--brokers <names>", "comma-separated broker names (default: every master)", listArg)
      .addOption(new Option("--perm <perm>", "6 = read+write, 4 = read only, 2 = write only").choices(["2", "4", "6"]).default("6"))
      .option("--order", "mark the topic as ordered"),
  ).action((name: string, f: ClientFlags & { queues: number; brokers?: string[]; perm: string; order?: boolean }) =>
    runClient(async (onExit) => {
      const admin = await Admin.start({ nameservers: f.namesrv });
      onExit(() => admin.close());
      const configs = await admin.createTopic({
        topic: name,
        brokers: f.brokers,
        readQueueNums: f.queues,
        writeQueueNums: f.queues,
        perm: Number(f.perm),
        order: !!f.order,
      });
      process.stdout.write(`topic ${name} created on ${configs.length} broker(s) with ${f.queues} queue(s) each\n`);
    }),
  );

  clientCommand(topic.command("list").description("List the topics the name servers know.")).action((f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start({ nameservers: f.namesrv });
      onExit(() => admin.close());
      const list = (await admin.topicList()).sort();
      if (list.length > 0) process.stdout.write(`${list.join("\n")}\n`);
    }),
  );

  clientCommand(
    topic.command("route").description("Show which brokers and queues serve a topic.").argument("<topic>", "topic name"),
  ).action((name: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start({ nameservers: f.namesrv });
      onExit(() => admin.close());
      const route = await admin.topicRoute(name);
      const rows: (string | number)[][] = [];
      for (const bd of [...route.brokerDatas].sort((a, b) => a.brokerName.localeCompare(b.brokerName))) {
        const q = route.queueDatas.find((x) => x.brokerName === bd.brokerName);
        for (const [id, addr] of Object.entries(bd.brokerAddrs).sort()) {
          rows.push([
            bd.brokerName,
            id === "0" ? "master" : `slave ${id}`,
            addr,
            q?.readQueueNums ?? 0,
            q?.writeQueueNums ?? 0,
            q?.perm ?? 0,
          ]);
        }
      }
      process.stdout.write(formatTable(["BROKER", "ROLE", "ADDRESS", "READ", "WRITE", "PERM"], rows));
    }),
  );

  clientCommand(
    topic
      .command("status")
      .description(
        "Show each queue's min and max offset and the store time of its last message (RocketMQ's topicStatus); messages stored = MAX - MIN.",
      )
      .argument("<topic>", "topic name"),
  ).action((name: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start({ nameservers: f.namesrv });
      onExit(() => admin.close());
      const rows = (await admin.examineTopicStats(name)).map((q) => [
        q.brokerName,
        q.queueId,
        q.minOffset,
        q.maxOffset,
        q.lastUpdateTimestamp > 0 ? new Date(q.lastUpdateTimestamp).toISOString() : "-",
      ]);
      process.stdout.write(formatTable(["BROKER", "QUEUE", "MIN", "MAX", "LAST UPDATED"], rows));
    }),
  );
}
