/**
 * The `actormq` command line. Servers: `start`, `nameserver`, `broker`; clients: `topic`,
 * `send`, `consume`, `progress`, `reset-offset`, `group`, `broker-config`, `message`, `broker-status`; `bench`; `keygen`; and `cluster` for
 * multi-process clusters. One file per command under bin/commands/. Every failure is one line
 * on stderr (`error CODE: message`) and a non-zero exit code.
 */
import { Command } from "commander";
import { MQError } from "../transport/protocol.ts";
import { addBenchCommand } from "./commands/bench.ts";
import { addBrokerConfigCommands } from "./commands/brokerConfig.ts";
import { addBrokerStatusCommand } from "./commands/brokerStatus.ts";
import { addClusterCommands } from "./commands/cluster.ts";
import { addConsumeCommand } from "./commands/consume.ts";
import { addGroupCommands } from "./commands/group.ts";
import { addInspectCommand } from "./commands/inspect.ts";
import { addKeygenCommand } from "./commands/keygen.ts";
import { addMessageCommand } from "./commands/message.ts";
import { addProgressCommands } from "./commands/progress.ts";
import { addSendCommand } from "./commands/send.ts";
import { addServerCommands } from "./commands/servers.ts";
import { addTopicCommands } from "./commands/topic.ts";
import { ExitCode, fail } from "./common.ts";

export { DEFAULT_BROKER_NAME, DEFAULT_DATA_DIR } from "./commands/servers.ts";

/**
 * Usage errors (unknown flag, bad value) as one line and exit code 2, in every subcommand. Help
 * asked for (`--help`, `help`) exits 0; help printed because a command is missing (`actormq`,
 * `actormq topic`) goes to stderr and is a usage error too.
 */
function oneLineErrors(cmd: Command): void {
  cmd.exitOverride((err) => {
    process.exit(err.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE);
  });
  cmd.configureOutput({ outputError: (str, write) => write(`actormq: ${str.trim().replace(/\s*\n\s*/g, " ")} (see --help)\n`) });
  for (const c of cmd.commands) oneLineErrors(c);
}

export function buildProgram(): Command {
  const program = new Command("actormq").description(
    "A RocketMQ-style message queue for Node.js: name servers, brokers and clients built from xstate actors over ZeroMQ.\n" +
      "Client commands take --namesrv (default $ACTORMQ_NAMESRV or tcp://127.0.0.1:9876) and --log-level (or $ACTORMQ_LOG_LEVEL).",
  );
  addServerCommands(program);
  addTopicCommands(program);
  addSendCommand(program);
  addConsumeCommand(program);
  addProgressCommands(program);
  addGroupCommands(program);
  addBrokerConfigCommands(program);
  addBrokerStatusCommand(program);
  addMessageCommand(program);
  addBenchCommand(program);
  addClusterCommands(program);
  addInspectCommand(program);
  addKeygenCommand(program);
  // --log-level reaches every logger of the process, the client-side ones included
  program.hook("preAction", (_top, action) => {
    const level = action.opts().logLevel;
    if (typeof level === "string") process.env.ACTORMQ_LOG_LEVEL = level;
  });
  oneLineErrors(program);
  return program;
}

// an option parser that refuses a value with an MQError (not a usage error): one line, exit code 1,
// as the actions' errors
await buildProgram()
  .parseAsync(process.argv)
  .catch((e: unknown) => {
    if (e instanceof MQError) fail(e);
    throw e;
  });
