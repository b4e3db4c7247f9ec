/**
 * Workload "peers": actormq beside RabbitMQ, NATS JetStream and Redis Streams on this machine, in
 * the same run, through the same driver (`shared/peer-bench`: W1 burst, W2 fanout-group,
 * W3 latency, W4 sync-durable). The driver is found at `../shared/peer-bench` relative to the
 * project (or `PEER_BENCH_DIR`), copied to a temp dir and given its dependencies (`npm ci`) there.
 * Peers that are not installed are left out, with the command that installs them.
 *
 * Options: `--runs N` (default 2, interleaved), `--scale S` (default 1; `--quick` = 0.1),
 * `--workloads a,b`, `--adapters a,b`.
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchOptions, BenchResult } from "./index.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const projectDir = path.resolve(here, "..");

/** The peers the driver knows and the executable each needs. */
const PEERS: Record<string, { binary: string[]; apt: string }> = {
  redis: { binary: ["redis-server"], apt: "redis-server" },
  nats: { binary: ["nats-server"], apt: "nats-server" },
  rabbitmq: { binary: ["/usr/lib/rabbitmq/bin/rabbitmq-server", "epmd"], apt: "rabbitmq-server" },
};

/** Peers whose broker acknowledges only after fsync in W4 (NATS 2.9 has no fsync-before-ack). */
const FSYNCING_PEERS = new Set(["redis", "rabbitmq"]);

const ALL_WORKLOADS = "burst,fanout-group,latency,sync-durable";

function installHint(missing: string[], driverDir: string): string {
  return [
    `Not installed: ${missing.join(", ")}. Install the peers (they are not started as services; the driver starts and stops them):`,
    `  sudo apt-get update && sudo apt-get install -y ${missing.map((m) => PEERS[m]!.apt).join(" ")}`,
    `The driver lives in shared/peer-bench (looked for at ${driverDir}; set PEER_BENCH_DIR to use another copy).`,
  ].join("\n");
}

function onPath(bin: string): boolean {
  if (bin.includes("/")) return fs.existsSync(bin);
  const dirs = (process.env.PATH ?? "").split(path.delimiter).concat(["/usr/sbin", "/sbin", "/usr/local/sbin"]);
  return dirs.some((d) => d && fs.existsSync(path.join(d, bin)));
}

function argValue(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

/** A driver copy with its dependencies installed, in a temp dir. */
function prepareDriver(driverDir: string, log: (s: string) => void): string {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "actormq-peer-bench-"));
  fs.cpSync(driverDir, tmp, { recursive: true, filter: (src) => !src.includes(`${path.sep}results${path.sep}`) });
  if (!fs.existsSync(path.join(tmp, "node_modules"))) {
    log(`installing the driver's dependencies in ${tmp} (npm ci)`);
    const r = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: tmp, stdio: ["ignore", "ignore", "inherit"] });
    if (r.status !== 0) throw new Error(`npm ci failed in ${tmp} (exit ${r.status}); run it by hand to see why.`);
  }
  return tmp;
}

interface DriverResult {
  workload: string;
  adapter: string;
  run: number;
  error?: string;
  produce?: { msgsPerSec: number };
  consume?: { msgsPerSec: number; duplicates: number; missing: number };
  exactlyOnce?: boolean;
  e2eMs?: { p50: number; p99: number };
}

function median(xs: number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export default async function run(opts: BenchOptions): Promise<BenchResult> {
  const log = (s: string) => {
    if (opts.verbose) console.log(s);
  };
  const driverDir = path.resolve(process.env.PEER_BENCH_DIR ?? path.join(projectDir, "..", "shared", "peer-bench"));
  const notes: string[] = [];
  const result: BenchResult = { workload: "peers", metrics: {}, baseline: {}, ratio: {}, notes };
  if (!fs.existsSync(path.join(driverDir, "run.mjs"))) {
    const msg = `The peer driver was not found at ${driverDir}: it lives in shared/peer-bench next to the project (set PEER_BENCH_DIR to its path). ${installHint(Object.keys(PEERS), driverDir)}`;
    console.error(msg);
    notes.push(msg);
    return result;
  }
  const wantedAdapters = (argValue(opts.args, "--adapters") ?? "actormq,redis,nats,rabbitmq").split(",").filter(Boolean);
  const missing = wantedAdapters.filter((a) => PEERS[a] && !PEERS[a]!.binary.every(onPath));
  if (missing.length > 0) {
    const hint = installHint(missing, driverDir);
    console.error(hint);
    notes.push(hint.replace(/\n\s*/g, " "));
  }
  const adapters = wantedAdapters.filter((a) => !missing.includes(a));
  const runs = Number(argValue(opts.args, "--runs") ?? 2);
  const scale = Number(argValue(opts.args, "--scale") ?? (opts.quick ? 0.1 : 1));
  const workloads = argValue(opts.args, "--workloads") ?? ALL_WORKLOADS;

  const driver = prepareDriver(driverDir, log);
  const out = path.join(driver, "results.json");
  const tsx = path.join(projectDir, "node_modules", "tsx", "dist", "loader.mjs");
  const cmd = [
    process.execPath,
    "--import",
    tsx,
    path.join(driver, "run.mjs"),
    "--adapters",
    adapters.join(","),
    "--workloads",
    workloads,
    "--runs",
    String(runs),
    "--scale",
    String(scale),
    out,
  ];
  log(`ACTORMQ_DIR=${projectDir} ${cmd.join(" ")}`);
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(cmd[0]!, cmd.slice(1), {
      cwd: driver,
      env: { ...process.env, ACTORMQ_DIR: projectDir },
      stdio: ["ignore", opts.verbose ? "inherit" : "ignore", "inherit"],
    });
    child.once("exit", (c) => resolve(c));
  });
  if (code !== 0) notes.push(`the driver exited with ${code}`);
  if (!fs.existsSync(out)) {
    notes.push(`no results file from the driver (${out})`);
    return result;
  }
  const doc = JSON.parse(fs.readFileSync(out, "utf8")) as { results: DriverResult[] };
  fs.rmSync(driver, { recursive: true, force: true });

  const ok = doc.results.filter((r) => !r.error);
  for (const r of doc.results.filter((r) => r.error)) notes.push(`${r.adapter} ${r.workload} run ${r.run}: ${r.error!.split("\n")[0]}`);
  const pick = (adapter: string, workload: string, f: (r: DriverResult) => number | undefined) =>
    median(
      ok
        .filter((r) => r.adapter === adapter && r.workload === workload)
        .map(f)
        .filter((x): x is number => typeof x === "number"),
    );
  const figures: Array<[string, string, (r: DriverResult) => number | undefined]> = [
    ["w1ProduceMsgsPerSec", "burst", (r) => r.produce?.msgsPerSec],
    ["w1ConsumeMsgsPerSec", "burst", (r) => r.consume?.msgsPerSec],
    ["w2GroupConsumeMsgsPerSec", "fanout-group", (r) => r.consume?.msgsPerSec],
    ["w2Duplicates", "fanout-group", (r) => r.consume?.duplicates],
    ["w2Missing", "fanout-group", (r) => r.consume?.missing],
    ["w3E2eP50Ms", "latency", (r) => r.e2eMs?.p50],
    ["w3E2eP99Ms", "latency", (r) => r.e2eMs?.p99],
    ["w4SyncProduceMsgsPerSec", "sync-durable", (r) => r.produce?.msgsPerSec],
  ];
  const table: Record<string, Record<string, number>> = {};
  for (const a of adapters) {
    table[a] = {};
    for (const [name, wl, f] of figures) {
      const v = pick(a, wl, f);
      if (Number.isNaN(v)) continue;
      table[a]![name] = v;
      (a === "actormq" ? result.metrics : result.baseline)[a === "actormq" ? name : `${a}.${name}`] = round(v, name.endsWith("Ms") ? 3 : 0);
    }
  }
  const peers = adapters.filter((a) => a !== "actormq");
  const best = (name: string, lowerIsBetter: boolean, among = peers) => {
    const vs = among.map((p) => table[p]?.[name]).filter((x): x is number => typeof x === "number" && !Number.isNaN(x));
    if (vs.length === 0) return Number.NaN;
    return lowerIsBetter ? Math.min(...vs) : Math.max(...vs);
  };
  const me = table.actormq ?? {};
  const ratio = (name: string, value: number) => {
    if (Number.isFinite(value)) result.ratio[name] = round(value, 3);
  };
  // throughput: actormq / best peer (target >= 1.5); latency: actormq / best peer (target <= 1)
  ratio("w1ProduceVsBestPeer", me.w1ProduceMsgsPerSec! / best("w1ProduceMsgsPerSec", false));
  ratio("w1ConsumeVsBestPeer", me.w1ConsumeMsgsPerSec! / best("w1ConsumeMsgsPerSec", false));
  ratio("w2GroupConsumeVsBestPeer", me.w2GroupConsumeMsgsPerSec! / best("w2GroupConsumeMsgsPerSec", false));
  ratio("w3P99VsBestPeer", me.w3E2eP99Ms! / best("w3E2eP99Ms", true));
  ratio("w3P50VsBestPeer", me.w3E2eP50Ms! / best("w3E2eP50Ms", true));
  ratio(
    "w4SyncProduceVsBestFsyncingPeer",
    me.w4SyncProduceMsgsPerSec! /
      best(
        "w4SyncProduceMsgsPerSec",
        false,
        peers.filter((p) => FSYNCING_PEERS.has(p)),
      ),
  );
  ratio("w4VsOwnW1Produce", me.w4SyncProduceMsgsPerSec! / me.w1ProduceMsgsPerSec!);

  if (opts.verbose) {
    const cols = figures.map(([n]) => n);
    console.log(`\nmedians of ${runs} run(s), scale ${scale}`);
    console.log(`| figure | ${adapters.join(" | ")} |`);
    console.log(`|---|${adapters.map(() => "---").join("|")}|`);
    for (const c of cols)
      console.log(
        `| ${c} | ${adapters.map((a) => (table[a]?.[c] === undefined ? "-" : String(round(table[a]![c]!, c.endsWith("Ms") ? 2 : 0)))).join(" | ")} |`,
      );
    console.log("\nratios (throughput: actormq / best peer, target >= 1.5; latency: actormq / best peer, target <= 1):");
    for (const [k, v] of Object.entries(result.ratio)) console.log(`  ${k.padEnd(36)} ${v}`);
  }
  return result;
}
