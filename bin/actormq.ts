/**
 * The `actormq` command line: `start` (name server + broker in one process), `nameserver`,
 * `broker`. Servers run until Ctrl-C or SIGTERM and then shut down cleanly; a start failure
 * (port in use, store locked, bad option) prints one line and exits non-zero.
 */
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { Broker } from "../actors/broker/broker.ts";
import { DEFAULT_BROKER_LISTEN, DEFAULT_QUEUE_NUMS } from "../actors/broker/brokerConfig.ts";
import { DEFAULT_NAMESRV_LISTEN, NameServer } from "../actors/nameserver/index.ts";
import { MQError } from "../transport/protocol.ts";

/** Default store root of `actormq start`. */
export const DEFAULT_DATA_DIR = "./actormq-data";
export const DEFAULT_BROKER_NAME = "broker-a";

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

function intArg(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a non-negative integer");
  return n;
}

function listArg(v: string): string[] {
  return v.split(",").map((s) => s.trim()).filter(Boolean);
}

function logLevelOption(): Option {
  return new Option("--log-level <level>", "log level (default: $ACTORMQ_LOG_LEVEL or info)").choices(LOG_LEVELS);
}

function fail(e: unknown): never {
  const msg = e instanceof MQError ? e.message : e instanceof Error ? e.message : String(e);
  process.stderr.write(`actormq: ${msg}\n`);
  process.exit(1);
}

/** Runs until SIGINT/SIGTERM, then closes; a second signal exits at once. */
function runUntilSignal(close: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`actormq: ${sig} again, exiting without a clean shutdown\n`);
      process.exit(130);
    }
    stopping = true;
    process.stdout.write(`\nactormq: ${sig} received, shutting down...\n`);
    close().then(
      () => {
        process.stdout.write("actormq: stopped\n");
        process.exit(0);
      },
      (e) => {
        process.stderr.write(`actormq: shutdown failed: ${(e as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

interface BrokerFlags {
  name: string;
  namesrv?: string[];
  store: string;
  listen: string;
  flush: "sync" | "async";
  cluster?: string;
  brokerId: number;
  autoCreateTopic: boolean;
  defaultQueueNums: number;
  logLevel?: string;
}

function brokerOptions(f: BrokerFlags, nameservers: string[], storeDir: string) {
  return {
    brokerName: f.name,
    brokerId: f.brokerId,
    clusterName: f.cluster,
    listen: f.listen,
    nameservers,
    storeDir,
    flush: f.flush,
    autoCreateTopic: f.autoCreateTopic,
    defaultQueueNums: f.defaultQueueNums,
    logLevel: f.logLevel,
  };
}

function addBrokerFlags(cmd: Command, storeDefault: string, storeHelp: string): Command {
  return cmd
    .option("--name <brokerName>", "broker name", DEFAULT_BROKER_NAME)
    .option("--store <dir>", storeHelp, storeDefault)
    .option("--listen <endpoint>", "broker endpoint", DEFAULT_BROKER_LISTEN)
    .addOption(new Option("--flush <mode>", "sync: acknowledge after fdatasync (group commit); async: RocketMQ's ASYNC_FLUSH").choices(["sync", "async"]).default("sync"))
    .option("--cluster <name>", "cluster name", "DefaultCluster")
    .option("--broker-id <id>", "0 = master, > 0 = slave", intArg, 0)
    .option("--no-auto-create-topic", "refuse sends to topics not created beforehand")
    .option("--default-queue-nums <n>", "queues of an auto-created topic", intArg, DEFAULT_QUEUE_NUMS)
    .addOption(logLevelOption());
}

export function buildProgram(): Command {
  const program = new Command("actormq")
    .description("A RocketMQ-style message queue for Node.js: name servers, brokers and clients built from xstate actors over ZeroMQ.")
    .showHelpAfterError("(run with --help for usage)");

  addBrokerFlags(
    program
      .command("start")
      .description("Run a name server and a broker in one process (store in ./actormq-data) until Ctrl-C.")
      .option("--namesrv-listen <endpoint>", "name server endpoint", DEFAULT_NAMESRV_LISTEN),
    DEFAULT_DATA_DIR,
    "data directory; the broker's store is <dir>/<brokerName>",
  ).action(async (f: BrokerFlags & { namesrvListen: string }) => {
    let ns: NameServer | undefined;
    try {
      ns = await NameServer.start({ listen: f.namesrvListen, logLevel: f.logLevel });
      const storeDir = path.resolve(f.store, f.name);
      const broker = await Broker.start(brokerOptions(f, [ns.address], storeDir));
      process.stdout.write(
        `actormq started\n  name server  ${ns.address}\n  broker       ${broker.brokerName} ${broker.address} (store ${storeDir}, flush ${f.flush})\n` +
          `Connect clients with nameservers: ["${ns.address}"]. Press Ctrl-C to stop.\n`,
      );
      const nsRef = ns;
      runUntilSignal(async () => {
        await broker.close();
        await nsRef.close();
      });
    } catch (e) {
      await ns?.close().catch(() => {});
      fail(e);
    }
  });

  program
    .command("nameserver")
    .description("Run a name server until Ctrl-C.")
    .option("--listen <endpoint>", "name server endpoint", DEFAULT_NAMESRV_LISTEN)
    .addOption(logLevelOption())
    .action(async (f: { listen: string; logLevel?: string }) => {
      try {
        const ns = await NameServer.start({ listen: f.listen, logLevel: f.logLevel });
        process.stdout.write(`actormq name server listening on ${ns.address}. Press Ctrl-C to stop.\n`);
        runUntilSignal(() => ns.close());
      } catch (e) {
        fail(e);
      }
    });

  addBrokerFlags(
    program
      .command("broker")
      .description("Run a broker until Ctrl-C.")
      .requiredOption("--namesrv <addresses>", "comma-separated name server endpoints, e.g. tcp://127.0.0.1:9876", listArg),
    path.join(DEFAULT_DATA_DIR, DEFAULT_BROKER_NAME),
    "store directory of this broker",
  ).action(async (f: BrokerFlags) => {
    try {
      const broker = await Broker.start(brokerOptions(f, f.namesrv ?? [], path.resolve(f.store)));
      process.stdout.write(`actormq broker ${broker.brokerName} listening on ${broker.address} (store ${path.resolve(f.store)}, flush ${f.flush}). Press Ctrl-C to stop.\n`);
      runUntilSignal(() => broker.close());
    } catch (e) {
      fail(e);
    }
  });

  return program;
}

await buildProgram().parseAsync(process.argv);
