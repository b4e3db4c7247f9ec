/**
 * `actormq group list|members|update|delete`: consumer groups as the brokers know them (RocketMQ's
 * `mqadmin consumerConnection`, `updateSubGroup` and `deleteSubGroup`). One function per subcommand.
 */
import { type Command, InvalidArgumentError } from "commander";
import {
  Admin,
  type ConsumerConnectionSummary,
  type GroupListEntry,
  type UpdateSubscriptionGroupOptions,
} from "../../actors/client/index.ts";
import { MQError, SUBSCRIPTION_GROUP_INT_RANGES } from "../../transport/protocol.ts";
import {
  clientCommand,
  clientOptions,
  formatTable,
  intArg,
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

const [, RETRY_MAX_MIN, RETRY_MAX_MAX] = SUBSCRIPTION_GROUP_INT_RANGES.find(([k]) => k === "retryMaxTimes")!;
/** `--retry-max-times`: the range the brokers and Admin.updateSubscriptionGroup take, -1 included. */
const retryMaxTimesArg = intRangeArg(RETRY_MAX_MIN, RETRY_MAX_MAX, `an integer from ${RETRY_MAX_MIN} to ${RETRY_MAX_MAX}`);

/** `true` or `false`; anything else is a usage error. */
function boolArg(v: string): boolean {
  if (v === "true") return true;
  if (v === "false") return false;
  throw new InvalidArgumentError("expected true or false");
}

/** The `group` command; its subcommands are added by the functions below. */
export function groupCommand(program: Command): Command {
  return (
    program.commands.find((c) => c.name() === "group") ??
    program.command("group").description("List consumer groups, show their members, change their settings or delete them.")
  );
}

export function addGroupCommands(program: Command): void {
  const group = groupCommand(program);
  addGroupListCommand(group);
  addGroupMembersCommand(group);
  addGroupUpdateCommand(group);
  addGroupDeleteCommand(group);
}

/** `group list`'s table; a setting that differs between brokers is shown per broker. */
function groupListTable(groups: GroupListEntry[]): string {
  const rows = groups.map(({ group: name, configs }) => {
    const brokers = Object.keys(configs).sort();
    const all = Object.values(configs);
    const same = <T>(pick: (c: (typeof all)[number]) => T): string => {
      const values = [...new Set(all.map((c) => String(pick(c) ?? "-")))];
      return values.length === 1 ? values[0]! : brokers.map((b) => `${b}=${String(pick(configs[b]!) ?? "-")}`).join(",");
    };
    return [name, brokers.join(","), same((c) => c.consumeEnable), same((c) => c.messageModel), same((c) => c.retryMaxTimes)];
  });
  return formatTable(["GROUP", "BROKERS", "CONSUME_ENABLE", "MODEL", "RETRY_MAX_TIMES"], rows);
}

/** `group list`: every group the brokers know, with its main settings. */
export function addGroupListCommand(group: Command): void {
  clientCommand(
    group
      .command("list")
      .description(
        "List the consumer groups the brokers know (created by a consumer's heartbeat or by group update), with the brokers that have each and its settings there.",
      )
      .addOption(
        jsonOption(
          "an array of { group, configs }, configs mapping each broker name to the group's whole config there (RocketMQ's SubscriptionGroupConfig)",
        ),
      ),
  ).action((f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, await admin.groupList(), groupListTable);
    }),
  );
}

/** `group members <group>`: the group's live members (mqadmin consumerConnection). */
export function addGroupMembersCommand(group: Command): void {
  clientCommand(
    group
      .command("members")
      .description(
        "Show a group's live members (client id, address, language, version, last heartbeat, brokers), how it consumes and what it subscribes to (RocketMQ's consumerConnection).",
      )
      .argument("<group>", "consumer group")
      .addOption(
        jsonOption(
          "an object with group, connections, consumeType, messageModel, consumeFromWhere and subscriptions (topic to its SubscriptionData)",
        ),
      ),
  ).action((name: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, await admin.examineConsumerConnectionInfo(name), membersText);
    }),
  );
}

/** `group members`' text: the members, how the group consumes, then its subscriptions. */
function membersText(info: ConsumerConnectionSummary): string {
  const members = formatTable(
    ["CLIENT_ID", "ADDRESS", "LANGUAGE", "VERSION", "LAST_HEARTBEAT", "BROKERS"],
    info.connections.map((c) => [
      c.clientId,
      c.clientAddr || "-",
      c.language || "-",
      c.version || "-",
      new Date(c.lastUpdateTimestamp).toISOString(),
      c.brokers.join(","),
    ]),
  );
  const subs = Object.entries(info.subscriptions).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const subscriptions = formatTable(
    ["TOPIC", "EXPRESSION"],
    subs.map(([topic, sd]) => [topic, sd.expressionType === "SQL92" ? `SQL92 ${sd.subString}` : sd.subString]),
  );
  return `${members}\n${info.messageModel} ${info.consumeType} ${info.consumeFromWhere}\n${subscriptions}`;
}

/** `group update <group> --flags`: RocketMQ's updateSubGroup, the fields given only. */
export function addGroupUpdateCommand(group: Command): void {
  clientCommand(
    group
      .command("update")
      .description(
        "Create or update a consumer group's settings on every master (or --brokers); settings not given keep their value. " +
          "--consume-enable false stops the group's consumption (its pulls are refused with NO_PERMISSION and retried every 3 s) until set true again.",
      )
      .argument("<group>", "consumer group")
      .option("--consume-enable <bool>", "true: the group may consume; false: its pulls are refused", boolArg)
      .option("--broadcast <bool>", "whether the group may consume in broadcasting mode (consumeBroadcastEnable)", boolArg)
      .option("--consume-from-min <bool>", "consumeFromMinEnable", boolArg)
      .option("--orderly <bool>", "consumeMessageOrderly", boolArg)
      .option("--notify-ids-changed <bool>", "tell members when the group's membership changes (notifyConsumerIdsChangedEnable)", boolArg)
      .option(
        "--retry-max-times <n>",
        `deliveries before a message goes to the group's %DLQ% topic (retryMaxTimes, default 16; ${RETRY_MAX_MIN} to ${RETRY_MAX_MAX})`,
        retryMaxTimesArg,
      )
      .option("--retry-queues <n>", "queues of the group's %RETRY% topic (retryQueueNums, default 1)", intArg)
      .option("--consume-timeout-minutes <n>", "consumeTimeoutMinute (default 15)", intArg)
      .option("--brokers <names>", "comma-separated broker names (default: every master)", listArg),
  ).action(
    (
      name: string,
      f: ClientFlags & {
        consumeEnable?: boolean;
        broadcast?: boolean;
        consumeFromMin?: boolean;
        orderly?: boolean;
        notifyIdsChanged?: boolean;
        retryMaxTimes?: number;
        retryQueues?: number;
        consumeTimeoutMinutes?: number;
        brokers?: string[];
      },
    ) =>
      runClient(async (onExit) => {
        const update: UpdateSubscriptionGroupOptions = {
          groupName: name,
          consumeEnable: f.consumeEnable,
          consumeBroadcastEnable: f.broadcast,
          consumeFromMinEnable: f.consumeFromMin,
          consumeMessageOrderly: f.orderly,
          notifyConsumerIdsChangedEnable: f.notifyIdsChanged,
          retryMaxTimes: f.retryMaxTimes,
          retryQueueNums: f.retryQueues,
          consumeTimeoutMinute: f.consumeTimeoutMinutes,
          brokers: f.brokers,
        };
        if (Object.entries(update).every(([k, v]) => k === "groupName" || k === "brokers" || v === undefined))
          throw new MQError(
            "ILLEGAL_ARGUMENT",
            "Nothing to update: give at least one setting, e.g. --consume-enable false (see actormq group update --help).",
          );
        const admin = await Admin.start(clientOptions(f));
        onExit(() => admin.close());
        const rows = (await admin.updateSubscriptionGroup(update)).map(({ brokerName, config: c }) => [
          brokerName,
          String(c.consumeEnable),
          String(c.consumeBroadcastEnable),
          c.retryMaxTimes,
          c.retryQueueNums,
          c.consumeTimeoutMinute,
        ]);
        process.stdout.write(`group ${name} updated on ${rows.length} broker(s)\n`);
        process.stdout.write(
          formatTable(["BROKER", "CONSUME_ENABLE", "BROADCAST_ENABLE", "RETRY_MAX_TIMES", "RETRY_QUEUES", "CONSUME_TIMEOUT_MIN"], rows),
        );
      }),
  );
}

/** `actormq group delete <group> [--cluster C | --broker B] [--clean-offset]` (RocketMQ's `mqadmin deleteSubGroup`). */
function addGroupDeleteCommand(group: Command): void {
  clientCommand(
    group
      .command("delete")
      .description(
        "Delete a consumer group's config from every master and slave (of --cluster or --broker only, when given), with " +
          "--clean-offset its consumer offsets too, then its retry and dead-letter topics (%RETRY%<group>, %DLQ%<group>; not with --broker), " +
          "as RocketMQ's deleteSubGroup does. Stop the group's consumers first: a running member makes the group again with its next heartbeat.",
      )
      .argument("<group>", "consumer group name")
      .option("--cluster <name>", "delete it from this cluster's brokers only (default: every broker)")
      .option("--broker <name>", "delete it from this broker name (master and slaves) only")
      .option("--clean-offset", "also forget the group's consumer offsets (it then starts where its consumeFromWhere says)"),
  ).action((name: string, f: ClientFlags & { cluster?: string; broker?: string; cleanOffset?: boolean }) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      const r = await admin.deleteSubscriptionGroup(name, { cluster: f.cluster, broker: f.broker, cleanOffset: !!f.cleanOffset });
      const extra = [
        f.cleanOffset ? `${r.offsetsRemoved} offset entr${r.offsetsRemoved === 1 ? "y" : "ies"} forgotten` : "",
        r.topicsDeleted.length > 0 ? `topics ${r.topicsDeleted.join(", ")} deleted` : "",
      ].filter((x) => x);
      process.stdout.write(`group ${name} deleted from ${r.brokers.length} broker(s)${extra.length > 0 ? `; ${extra.join("; ")}` : ""}\n`);
    }),
  );
}
