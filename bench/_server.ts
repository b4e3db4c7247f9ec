/**
 * The broker the benches measure: `actormq start` (name server + broker) in a child process on
 * ephemeral ports, so the client side runs in the bench process and the server in its own.
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface BenchServer {
  child: ChildProcess;
  /** the name server's bound endpoint */
  nameserver: string;
  exited: Promise<unknown>;
}

/** Starts `actormq start` with its store in `dataDir`; resolves once it prints its name server. */
export async function startServer(dataDir: string, flush: "sync" | "async" = "async"): Promise<BenchServer> {
  const args = ["start", "--namesrv-listen", "tcp://127.0.0.1:*", "--listen", "tcp://127.0.0.1:*", "--store", dataDir];
  const child = spawn(process.execPath, [path.join(root, "bin", "actormq.mjs"), ...args, "--flush", flush, "--log-level", "warn"], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((r) => child.once("exit", r));
  const nameserver = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /name server\s+(tcp:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    exited.then(() => reject(new Error(`actormq start exited: ${out}`)));
  });
  return { child, nameserver, exited };
}

/** SIGTERM (a clean shutdown) and wait for the exit. */
export async function stopServer(s: BenchServer): Promise<void> {
  s.child.kill("SIGTERM");
  await s.exited;
}
