/**
 * The broker the benches measure: `actormq start` (name server + broker) in a child process on
 * ephemeral ports, with the node flags `npm start` and `actormq cluster up` give brokers, so the
 * client side runs in the bench process and the server in its own, as users run it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BROKER_NODE_FLAGS } from "../actors/broker/nodeFlags.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = path.join(root, "bin", "actormq.mjs");

/** An `actormq` command in a child process. */
export interface ActormqChild {
  child: ChildProcess;
  /** the named captures of the pattern its stdout matched */
  out: Promise<Record<string, string>>;
  exited: Promise<unknown>;
}

/**
 * Spawns `actormq <args>`; `out` resolves the named captures of `pattern` in its stdout. A
 * `start` or `broker` runs with the brokers' node flags.
 */
export function spawnActormq(args: string[], pattern: RegExp): ActormqChild {
  const nodeFlags = args[0] === "start" || args[0] === "broker" ? BROKER_NODE_FLAGS : [];
  const child = spawn(process.execPath, [...nodeFlags, bin, ...args], { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise((r) => child.once("exit", r));
  const out = new Promise<Record<string, string>>((resolve, reject) => {
    let text = "";
    child.stdout!.on("data", (d: Buffer) => {
      text += d.toString();
      const m = pattern.exec(text);
      if (m?.groups) resolve({ ...m.groups });
    });
    exited.then(() => reject(new Error(`actormq ${args[0]} exited: ${text}`)));
  });
  return { child, out, exited };
}

/** The `actormq start` arguments of a bench server: ephemeral ports, store in `dataDir`, quiet logs. */
export function startArgs(dataDir: string, flush: "sync" | "async" = "async"): string[] {
  return [
    "start",
    "--namesrv-listen",
    "tcp://127.0.0.1:*",
    "--listen",
    "tcp://127.0.0.1:*",
    "--store",
    dataDir,
    "--flush",
    flush,
    "--log-level",
    "warn",
  ];
}

export interface BenchServer extends ActormqChild {
  /** the name server's bound endpoint */
  nameserver: string;
}

/** Starts `actormq start` with its store in `dataDir`; resolves once it prints its name server. */
export async function startServer(dataDir: string, flush: "sync" | "async" = "async"): Promise<BenchServer> {
  const c = spawnActormq(startArgs(dataDir, flush), /name server\s+(?<nameserver>tcp:\/\/\S+)/);
  return { ...c, nameserver: (await c.out).nameserver! };
}

/** SIGTERM (a clean shutdown) and wait for the exit. */
export async function stopServer(s: ActormqChild): Promise<void> {
  s.child.kill("SIGTERM");
  await s.exited;
}
