/** `actormq progress --group G` and `actormq reset-offset`: a group's lag per queue, and moving its offsets. */
import type { Command } from "commander";
import { Admin } from "../../actors/client/index.ts";
import { clientCommand, clientOptions, formatTable, type JsonFlag, jsonOption, runClient, show, timeArg } from "../common.ts";

export function addProgressCommands(program: Command): void {
  clientCommand(
    program
      .command("progress")
      .description("Show a consumer group's progress: broker offset, committed offset and lag per queue.")
      .requiredOption("--group <group>", "consumer group")
      .addOption(
        jsonOption(
          "an object with offsetTable (per queue: topic, brokerName, queueId, brokerOffset, consumerOffset, lag), totalLag and consumeTps",
        ),
      ),
  ).action((f: { namesrv: string[]; group: string } & JsonFlag) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      const { offsetTable, consumeTps } = await admin.examineConsumeStats(f.group);
      const totalLag = offsetTable.reduce((n, r) => n + r.lag, 0);
      show(f, { offsetTable, totalLag, consumeTps }, () => {
        const rows = offsetTable.map((r) => [r.topic, r.brokerName, r.queueId, r.brokerOffset, r.consumerOffset, r.lag]);
        return (
          formatTable(["TOPIC", "BROKER", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG"], rows) +
          `total lag ${totalLag}, consume TPS ${consumeTps.toFixed(1)} (messages pulled per second over the last minute)\n`
        );
      });
    }),
  );

  clientCommand(
    program
      .command("reset-offset")
      .description("Move a group's offsets of a topic to the first message stored at or after --time.")
      .requiredOption("--group <group>", "consumer group")
      .requiredOption("--topic <topic>", "topic")
      .requiredOption("--time <time>", "ISO 8601 time (2025-01-31T12:00:00Z) or epoch milliseconds (10 digits or more)", timeArg),
  ).action((f: { namesrv: string[]; group: string; topic: string; time: number }) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      const rows = await admin.resetOffsetByTimestamp(f.group, f.topic, f.time);
      process.stdout.write(
        formatTable(
          ["TOPIC", "BROKER", "QUEUE", "NEW_OFFSET"],
          rows.map((r) => [r.topic, r.brokerName, r.queueId, r.offset]),
        ),
      );
    }),
  );
}
