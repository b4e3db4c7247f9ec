/** `actormq cluster up|status|down|kill|restart`: a multi-process cluster on this machine (actors/cluster). */

import { chmodSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import cliProgress from "cli-progress";
import { type Command, Option } from "commander";
import type { ClusterFile, ClusterProcess } from "../../actors/cluster/index.ts";
import {
  CLUSTER_UP_DEFAULTS,
  clusterDown,
  clusterKill,
  clusterRestart,
  clusterStatus,
  clusterUp,
  DEFAULT_CLUSTER_DIR,
  dirArg,
  prepareClusterDir,
  resolveUpFlags,
  shellArg,
} from "../../actors/cluster/index.ts";
import { mkdirs } from "../../store/mkdirs.ts";
import { exitFlushed, fail, formatTable, intArg, type JsonFlag, jsonOption, logLevelOption, positiveIntArg, show } from "../common.ts";
import { addServerCurveFlags, type CurveFlags, curveSecretOf, serverCurveOf } from "../curveFlags.ts";

const START_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

function memberRow(p: ClusterProcess & { state?: string }): string[] {
  const role = p.role === "nameserver" ? "nameserver" : `${p.role} ${p.brokerName}/${p.brokerId}`;
  return [p.name, role, p.address, p.metrics ? `http://${p.metrics}/metrics` : "-", String(p.pid), ...(p.state ? [p.state] : []), p.dir];
}

/**
 * The `cluster up` that makes the cluster of `file` again (same layout, data dirs and, when it was
 * given one, base port), with the flags that differ from up's defaults. A file of an older version
 * keeps no flags: its process counts are used.
 */
export function upAgainCommand(dir: string, file: ClusterFile): string {
  const count = (role: ClusterProcess["role"]) => file.processes.filter((p) => p.role === role).length;
  const brokers = count("master");
  const u = file.up ?? resolveUpFlags({ nameservers: count("nameserver"), brokers, slaves: brokers > 0 ? count("slave") / brokers : 0 });
  const d = CLUSTER_UP_DEFAULTS;
  const flags = [
    u.nameservers !== d.nameservers && `--nameservers ${u.nameservers}`,
    u.brokers !== d.brokers && `--brokers ${u.brokers}`,
    u.slaves !== d.slaves && `--slaves ${u.slaves}`,
    u.basePort !== undefined && `--base-port ${u.basePort}`,
    u.bindHost !== d.bindHost && `--bind-host ${shellArg(u.bindHost)}`,
    u.advertiseHost !== undefined && `--advertise-host ${shellArg(u.advertiseHost)}`,
    u.flush !== d.flush && `--flush ${u.flush}`,
    u.logLevel !== undefined && `--log-level ${shellArg(u.logLevel)}`,
    u.curveSecretFile !== undefined && `--curve-secret ${shellArg(u.curveSecretFile)}`,
    u.curveAllowFile !== undefined && `--curve-allow ${shellArg(u.curveAllowFile)}`,
  ].filter((f): f is string => typeof f === "string");
  return ["actormq cluster up --dir", shellArg(dir), ...flags].join(" ");
}

/**
 * Ctrl-C (or SIGTERM, SIGHUP) while `up` or `restart` starts processes: they are detached and
 * would outlive us, so the start is aborted to stop them first, and the command exits 128 + signal number.
 */
async function withInterrupt<T>(start: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const interrupt = new AbortController();
  let signalled: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    signalled ??= sig;
    interrupt.abort();
  };
  for (const sig of START_SIGNALS) process.on(sig, onSignal);
  try {
    return await start(interrupt.signal);
  } catch (e) {
    if (signalled) fail(e, 128 + os.constants.signals[signalled]);
    throw e;
  } finally {
    for (const sig of START_SIGNALS) process.off(sig, onSignal);
  }
}

async function run(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (e) {
    fail(e);
  }
  // into a pipe, what the reader has not taken yet (past 64 KiB) waits in the process
  await exitFlushed(0);
}

/**
 * The key file the processes of `cluster up` are given for --curve-secret: the file named, or
 * <dir>/curve.key (mode 0600) holding a key given as such, so that no key is in their argv (shown
 * by ps, kept in cluster.json).
 */
function curveSecretFileOf(f: CurveFlags & { dir: string }): string | undefined {
  const secret = curveSecretOf(f);
  if (!secret) return undefined;
  if (secret.file) return secret.file;
  const dir = path.resolve(f.dir);
  mkdirs(dir);
  const file = path.join(dir, "curve.key");
  // made anew: an existing file keeps its mode through writeFileSync, so the key would be written
  // readable by others before a chmod
  rmSync(file, { force: true });
  writeFileSync(file, `# actormq CURVE secret key (public key ${secret.publicKey}), from cluster up\n${secret.secretKey}\n`, {
    mode: 0o600,
    flag: "wx",
  });
  chmodSync(file, 0o600);
  return file;
}

export function addClusterCommands(program: Command): void {
  const cluster = program.command("cluster").description("Run a cluster of name servers, masters and slaves as processes on this machine.");
  const dirOption = () => new Option("--dir <dir>", "cluster directory (data, logs, cluster.json)").default(DEFAULT_CLUSTER_DIR);

  addServerCurveFlags(
    cluster
      .command("up")
      .description(
        "Start N name servers, M masters and S slaves per master as child processes; print them and write <dir>/cluster.json. " +
          "With --curve-secret every process uses CURVE with that key pair (a key given as such is written to <dir>/curve.key).",
      ),
    false,
  )
    .option("--nameservers <n>", "name servers", positiveIntArg, 1)
    .option("--brokers <n>", "masters (broker-a, broker-b, ...)", positiveIntArg, 1)
    .option("--slaves <n>", "slaves per master", intArg, 0)
    .addOption(dirOption())
    .option("--base-port <port>", "first port; processes take consecutive ports (default: any free ports)", intArg)
    .option("--bind-host <host>", "address every process binds", "127.0.0.1")
    .option("--advertise-host <host>", "address others use, when it differs from --bind-host (needs --base-port)")
    .addOption(new Option("--flush <mode>", "brokers' flush mode").choices(["sync", "async"]).default("sync"))
    .addOption(logLevelOption())
    .action(
      (
        f: {
          nameservers: number;
          brokers: number;
          slaves: number;
          dir: string;
          basePort?: number;
          bindHost: string;
          advertiseHost?: string;
          flush: "sync" | "async";
          logLevel?: string;
        } & CurveFlags,
      ) =>
        run(async () => {
          serverCurveOf(f); // one error line before anything starts
          prepareClusterDir(f.dir); // a key file is written there before clusterUp checks it
          const { curveSecret, curveAllow, ...flags } = f;
          const curveAllowFile = curveAllow?.file;
          const curveSecretFile = curveSecretFileOf(f);
          const upOpts = { ...flags, ...(curveSecretFile ? { curveSecretFile } : {}), ...(curveAllowFile ? { curveAllowFile } : {}) };
          const total = f.nameservers + f.brokers * (1 + f.slaves);
          const bar = new cliProgress.SingleBar(
            { format: "starting {bar} {value}/{total} {name}", stream: process.stderr, noTTYOutput: false },
            cliProgress.Presets.shades_classic,
          );
          bar.start(total, 0, { name: "" });
          // the bar stops before an interrupted start exits
          const cf = await withInterrupt((signal) =>
            clusterUp({ ...upOpts, signal, onProgress: (n, _t, p) => bar.update(n, { name: p.name }) }).finally(() => bar.stop()),
          );
          process.stdout.write(
            formatTable(
              ["NAME", "ROLE", "ADDRESS", "METRICS", "PID", "DIR"],
              cf.processes.map((p) => memberRow(p)),
            ),
          );
          const curve = curveSecretOf(f);
          process.stdout.write(
            `cluster file ${f.dir}/cluster.json; clients use --namesrv ${cf.nameservers.join(",")}` +
              (curve ? ` --curve-server ${shellArg(curve.publicKey)}` : "") +
              "\n",
          );
        }),
    );

  cluster
    .command("status")
    .description("Show every process of the cluster and whether it runs.")
    .addOption(dirOption())
    .addOption(
      jsonOption(
        "an object with nameservers, starting (cluster up did not finish) and processes (cluster.json's entries, each with its state: " +
          "running, dead or remote); processes not running still exit 3 with the hint on stderr",
      ),
    )
    .action((f: { dir: string } & JsonFlag) =>
      run(async () => {
        const { file, members } = clusterStatus(f.dir);
        show(f, { nameservers: file.nameservers, starting: file.starting === true, processes: members }, () =>
          formatTable(["NAME", "ROLE", "ADDRESS", "METRICS", "PID", "STATE", "DIR"], members.map(memberRow)),
        );
        if (file.starting) {
          process.stderr.write(
            `actormq: cluster up did not finish (still starting, or stopped before it was done): these are the processes it spawned; \`actormq cluster down --dir ${shellArg(f.dir)}\` stops them\n`,
          );
          await exitFlushed(3);
        }
        const dead = members.filter((m) => m.state === "dead");
        if (dead.length > 0) {
          // after `cluster down` every process is dead: starting them one by one is not the way back
          const hint =
            dead.length === members.length
              ? `\`${upAgainCommand(f.dir, file)}\` starts the cluster again with its data` +
                (file.up?.basePort === undefined ? " (on new ports: clients then use the --namesrv it prints)" : "")
              : `\`actormq cluster restart <name>${dirArg(f.dir)}\` starts one again`;
          process.stderr.write(`actormq: ${dead.length} process(es) not running: ${dead.map((d) => d.name).join(", ")}; ${hint}\n`);
          await exitFlushed(3);
        }
      }),
    );

  cluster
    .command("down")
    .description("Stop exactly the processes the cluster file names (SIGTERM, then SIGKILL after 15 s).")
    .addOption(dirOption())
    .action((f: { dir: string }) =>
      run(async () => {
        const { stopped, notRunning } = await clusterDown(f.dir);
        process.stdout.write(
          `stopped ${stopped.length} process(es)${stopped.length ? `: ${stopped.map((p) => p.name).join(", ")}` : ""}\n`,
        );
        if (notRunning.length > 0) process.stdout.write(`already not running: ${notRunning.map((p) => p.name).join(", ")}\n`);
      }),
    );

  cluster
    .command("kill")
    .description("kill -9 one process of the cluster (a fault drill).")
    .argument("<name>", "process name, e.g. broker-a or broker-a-s1")
    .addOption(dirOption())
    .action((name: string, f: { dir: string }) =>
      run(async () => {
        const p = await clusterKill(f.dir, name);
        process.stdout.write(`killed ${p.name} (pid ${p.pid})\n`);
      }),
    );

  cluster
    .command("restart")
    .description("Restart one process of the cluster with its arguments and ports.")
    .argument("<name>", "process name, e.g. broker-a")
    .addOption(dirOption())
    .action((name: string, f: { dir: string }) =>
      run(async () => {
        const p = await withInterrupt((signal) => clusterRestart(f.dir, name, undefined, signal));
        process.stdout.write(`restarted ${p.name} (pid ${p.pid}) at ${p.address}\n`);
      }),
    );
}
