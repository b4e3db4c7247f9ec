/**
 * `actormq start` (name server + broker in one process), `actormq nameserver`, `actormq broker`.
 * Servers run until Ctrl-C or SIGTERM and then shut down cleanly; a start failure (port in use,
 * store locked, bad option) prints one line and exits non-zero. `--ready-file` writes
 * `{ pid, address, metrics }` once serving (how `cluster up` learns a child is ready).
 */
import { renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { type Command, Option } from "commander";
import { Broker } from "../../actors/broker/broker.ts";
import { BROKER_ROLES, type BrokerRole, DEFAULT_BROKER_LISTEN, DEFAULT_QUEUE_NUMS } from "../../actors/broker/brokerConfig.ts";
import { DEFAULT_HEAP_RESERVE_MB } from "../../actors/broker/heapReserve.ts";
import { BROKER_NODE_FLAGS, missingBrokerNodeFlags, OLD_SPACE_FLAG } from "../../actors/broker/nodeFlags.ts";
import { brokerDirName } from "../../actors/cluster/index.ts";
import { Inspector } from "../../actors/inspector/index.ts";
import { DEFAULT_INSPECTOR_LISTEN } from "../../actors/inspector/inspectorOptions.ts";
import { DEFAULT_NAMESRV_LISTEN, NameServer } from "../../actors/nameserver/index.ts";
import { DEFAULT_FILE_RESERVED_TIME_HOURS } from "../../store/index.ts";
import { Perm } from "../../transport/protocol.ts";
import {
  brokerIdArg,
  fail,
  hoursArg,
  intArg,
  listArg,
  logLevelOption,
  percentArg,
  permArg,
  positiveIntArg,
  runUntilSignal,
} from "../common.ts";
import { addServerCurveFlags, brokerLinkCurveOf, type CurveFlags, curveSecretOf, ownLinkCurveOf, serverCurveOf } from "../curveFlags.ts";
import { inspectorClientEnv } from "./inspect.ts";

/** Run a broker with these node flags (README, Operate: node flags); said in `--help`. */
const NODE_FLAGS_HELP = `Run node with ${BROKER_NODE_FLAGS.join(" ")} (npm start and \`cluster up\` do; README, Operate: node flags).`;

/** A banner line when this broker process lacks the brokers' node flags, or "": what stands in for them, if anything. */
function nodeFlagsNote(broker: Broker): string {
  const missing = missingBrokerNodeFlags();
  if (missing.length === 0) return "";
  const instead =
    broker.heapReserveMb > 0
      ? `a ${broker.heapReserveMb} MiB heap reserve stands in for ${OLD_SPACE_FLAG}`
      : "expect frequent full GCs under load";
  return `  node flags   without ${missing.join(" ")}: ${instead} (README, Operate: node flags)\n`;
}

/**
 * A banner line when the broker takes no writes (brokerPermission without WRITE), or "": the value
 * may come from its config/broker.json, kept there by an earlier `broker-config set`.
 */
function readOnlyNote(broker: Broker): string {
  const perm = broker.ctx.config.brokerPermission;
  if ((perm & Perm.WRITE) !== 0) return "";
  return (
    `  read only: brokerPermission ${perm} (a start flag, or kept in its config/broker.json): producers send elsewhere; ` +
    `\`actormq broker-config set ${broker.brokerName} brokerPermission 6\` takes writes again\n`
  );
}

/** A banner line with the CURVE public key clients need, or "". */
function curveNote(f: CurveFlags): string {
  const secret = curveSecretOf(f);
  if (!secret) return "";
  const allow = f.curveAllow ? `, clients allowed: the ${f.curveAllow.keys.length} key(s) of ${f.curveAllow.file}` : ", any client";
  return `  curve        public key ${secret.publicKey}${allow} (clients: --curve-server ${secret.publicKey})\n`;
}

/** Default store root of `actormq start`. */
export const DEFAULT_DATA_DIR = "./actormq-data";
export const DEFAULT_BROKER_NAME = "broker-a";

/** What a server writes to `--ready-file` once it serves. */
export interface ReadyInfo {
  pid: number;
  address: string;
  metrics?: string;
}

function writeReady(file: string | undefined, info: ReadyInfo): void {
  if (!file) return;
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, JSON.stringify(info));
  renameSync(tmp, file);
}

interface BrokerFlags extends CurveFlags {
  name: string;
  namesrv?: string[];
  /** `start`: the data directory (defaulted); `broker`: its store, undefined without --store */
  store?: string;
  listen: string;
  advertise?: string;
  flush: "sync" | "async";
  cluster?: string;
  brokerId?: number;
  role?: BrokerRole;
  masterAddress?: string;
  autoCreateTopic: boolean;
  defaultQueueNums: number;
  fileReservedTime: number;
  diskCleanForcibly?: number;
  diskFull?: number;
  metricsListen?: string;
  heapReserve: number;
  brokerPermission?: number;
  readyFile?: string;
  logLevel?: string;
}

/** --broker-id, where a SLAVE named without one is the first slave of its master (a second one needs --broker-id 2). */
function brokerIdOf(f: BrokerFlags): number | undefined {
  return f.brokerId ?? (f.role === "SLAVE" ? 1 : undefined);
}

function brokerOptions(f: BrokerFlags, nameservers: string[], storeDir: string) {
  return {
    brokerName: f.name,
    brokerId: brokerIdOf(f),
    clusterName: f.cluster,
    listen: f.listen,
    advertise: f.advertise,
    nameservers,
    storeDir,
    flush: f.flush,
    role: f.role,
    masterAddress: f.masterAddress,
    autoCreateTopic: f.autoCreateTopic,
    defaultQueueNums: f.defaultQueueNums,
    fileReservedTimeHours: f.fileReservedTime,
    diskCleanForciblyPercent: f.diskCleanForcibly,
    diskFullPercent: f.diskFull,
    metricsListen: f.metricsListen,
    heapReserveMb: f.heapReserve,
    brokerPermission: f.brokerPermission,
    logLevel: f.logLevel,
    curve: serverCurveOf(f),
    ...brokerLinkCurveOf(f),
  };
}

function addBrokerFlags(cmd: Command, storeDefault: string | undefined, storeHelp: string): Command {
  return cmd
    .option("--name <brokerName>", "broker name", DEFAULT_BROKER_NAME)
    .option("--store <dir>", storeHelp, storeDefault)
    .option("--listen <endpoint>", "endpoint to bind (port * = any free port)", DEFAULT_BROKER_LISTEN)
    .option("--advertise <endpoint>", "endpoint name servers and clients should use, when it differs from --listen (NAT, 0.0.0.0)")
    .addOption(
      new Option("--flush <mode>", "sync: acknowledge after fdatasync (group commit); async: RocketMQ's ASYNC_FLUSH")
        .choices(["sync", "async"])
        .default("sync"),
    )
    .option("--cluster <name>", "cluster name", "DefaultCluster")
    .option("--broker-id <id>", "0 = master, > 0 = slave, one id per slave (default 0; 1 with --role SLAVE)", brokerIdArg)
    .addOption(new Option("--role <role>", "broker role (default ASYNC_MASTER, SLAVE when --broker-id > 0)").choices(BROKER_ROLES))
    .option("--master-address <endpoint>", "a slave's master endpoint")
    .option("--no-auto-create-topic", "refuse sends to topics not created beforehand")
    .option("--default-queue-nums <n>", "queues of an auto-created topic", positiveIntArg, DEFAULT_QUEUE_NUMS)
    .option(
      "--file-reserved-time <hours>",
      "hours a commit-log segment is kept after its last write (RocketMQ's fileReservedTime)",
      hoursArg,
      DEFAULT_FILE_RESERVED_TIME_HOURS,
    )
    .option(
      "--disk-clean-forcibly <percent>",
      "disk use from which the oldest segments are deleted before they expire (RocketMQ: 85; default off)",
      percentArg,
    )
    .option("--disk-full <percent>", "disk use from which sends are refused with DISK_FULL (RocketMQ: 90; default off)", percentArg)
    .option("--metrics-listen <host:port>", "serve Prometheus text at http://<host:port>/metrics (port 0 = any free port)")
    .option(
      "--heap-reserve <MiB>",
      `V8 heap held in reserve when node runs without ${OLD_SPACE_FLAG} (0 = none; README, Operate: node flags)`,
      intArg,
      DEFAULT_HEAP_RESERVE_MB,
    )
    .option(
      "--broker-permission <perm>",
      "6 = read and write (default), 4 = read only: every topic is routed read only, so producers go to other brokers while consumers drain it; 2 = write only (RocketMQ's brokerPermission). Given, it wins over the value `broker-config set` kept in <store>/config/broker.json (README, Operate: drain a broker)",
      permArg,
    )
    .addOption(new Option("--ready-file <file>", "write {pid,address,metrics} as JSON once serving").hideHelp())
    .addOption(logLevelOption());
}

/** Adds `start`, `nameserver` and `broker` to the program. */
export function addServerCommands(program: Command): void {
  addBrokerFlags(
    addServerCurveFlags(
      program
        .command("start")
        .description(`Run a name server and a broker in one process (store in ./actormq-data) until Ctrl-C. ${NODE_FLAGS_HELP}`)
        .option("--namesrv-listen <endpoint>", "name server endpoint", DEFAULT_NAMESRV_LISTEN)
        .option(
          "--inspector-listen <host:port>",
          "address of the visual debugger's page (port 0 = any free port)",
          DEFAULT_INSPECTOR_LISTEN,
        )
        .option("--inspector-allow-remote", "serve the visual debugger on a non-loopback --inspector-listen address", false)
        .option("--no-inspector", "do not serve the visual debugger"),
      false,
    ),
    DEFAULT_DATA_DIR,
    "data directory; the broker's store is <dir>/<brokerName>",
  ).action(
    async (f: BrokerFlags & { namesrvListen: string; inspector: boolean; inspectorListen: string; inspectorAllowRemote: boolean }) => {
      let ns: NameServer | undefined;
      let broker: Broker | undefined;
      try {
        ns = await NameServer.start({ listen: f.namesrvListen, logLevel: f.logLevel, curve: serverCurveOf(f) });
        const storeDir = path.resolve(f.store ?? DEFAULT_DATA_DIR, f.name);
        broker = await Broker.start(brokerOptions(f, [ns.address], storeDir));
        // collects only once the page is opened: an unwatched inspector costs the broker nothing
        const insp = f.inspector
          ? await Inspector.start({
              listen: f.inspectorListen,
              allowRemote: f.inspectorAllowRemote,
              nodes: [ns.node, broker.ctx.node],
              collectOnFirstView: true,
              // the cluster view asks the name server over the network, with this process's key
              // pair: the name server admits it whatever --curve-allow lists
              ...ownLinkCurveOf(f),
            })
          : undefined;
        const nsRef = ns;
        const brokerRef = broker;
        // handlers first: whoever reads the banner or the ready file may signal at once
        runUntilSignal(async () => {
          await insp?.close();
          await brokerRef.close();
          await nsRef.close();
        });
        process.stdout.write(
          `actormq started\n  name server  ${ns.address}\n  broker       ${broker.brokerName} ${broker.address} (store ${storeDir}, flush ${f.flush})\n` +
            (broker.metrics ? `  metrics      ${broker.metrics.url}\n` : "") +
            (insp ? `  inspector    ${insp.url} (clients publish with ${inspectorClientEnv(insp)})\n` : "") +
            readOnlyNote(broker) +
            nodeFlagsNote(broker) +
            curveNote(f) +
            `Connect clients with nameservers: ["${ns.address}"]. Press Ctrl-C to stop.\n`,
        );
        writeReady(f.readyFile, { pid: process.pid, address: broker.address, metrics: broker.metrics?.address });
      } catch (e) {
        await broker?.close().catch(() => {});
        await ns?.close().catch(() => {});
        fail(e);
      }
    },
  );

  addServerCurveFlags(program.command("nameserver").description("Run a name server until Ctrl-C."), false)
    .option("--listen <endpoint>", "endpoint to bind (port * = any free port)", DEFAULT_NAMESRV_LISTEN)
    .option("--advertise <endpoint>", "endpoint brokers and clients should use, when it differs from --listen")
    .addOption(new Option("--ready-file <file>", "write {pid,address} as JSON once serving").hideHelp())
    .addOption(logLevelOption())
    .action(async (f: { listen: string; advertise?: string; readyFile?: string; logLevel?: string } & CurveFlags) => {
      try {
        const ns = await NameServer.start({ listen: f.listen, advertise: f.advertise, logLevel: f.logLevel, curve: serverCurveOf(f) });
        runUntilSignal(() => ns.close());
        process.stdout.write(`actormq name server listening on ${ns.address}. Press Ctrl-C to stop.\n${curveNote(f)}`);
        writeReady(f.readyFile, { pid: process.pid, address: ns.address });
      } catch (e) {
        fail(e);
      }
    });

  addBrokerFlags(
    addServerCurveFlags(
      program
        .command("broker")
        .description(`Run a broker until Ctrl-C. ${NODE_FLAGS_HELP}`)
        .requiredOption("--namesrv <addresses>", "comma-separated name server endpoints, e.g. tcp://127.0.0.1:9876", listArg),
      true,
    ),
    // per name, as `start` keeps <dir>/<brokerName>: one default for every name would let a second
    // broker open the first one's store and serve its messages under another name
    undefined,
    `store directory of this broker (default: ${DEFAULT_DATA_DIR}/<brokerName>, after --name; a slave's <brokerName>-s<brokerId>)`,
  ).action(async (f: BrokerFlags) => {
    try {
      // a slave of the same name gets <name>-s<id>, as `cluster up` names them: its master's store is locked
      const store = path.resolve(f.store ?? path.join(DEFAULT_DATA_DIR, brokerDirName(f.name, brokerIdOf(f) ?? 0)));
      const broker = await Broker.start(brokerOptions(f, f.namesrv ?? [], store));
      runUntilSignal(() => broker.close());
      process.stdout.write(
        `actormq broker ${broker.brokerName} listening on ${broker.address} (store ${store}, flush ${f.flush})` +
          (broker.metrics ? `, metrics ${broker.metrics.url}` : "") +
          ". Press Ctrl-C to stop.\n" +
          readOnlyNote(broker) +
          nodeFlagsNote(broker) +
          curveNote(f),
      );
      writeReady(f.readyFile, { pid: process.pid, address: broker.address, metrics: broker.metrics?.address });
    } catch (e) {
      fail(e);
    }
  });
}
