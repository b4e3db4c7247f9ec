/** Runs `bin/actormq.mjs` as a child process and collects its output (test helper). */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const bin = path.join(root, "bin", "actormq.mjs");

export interface CliResult {
  code: number | null;
  out: string;
  err: string;
}

/** Runs the command to completion; `input` is written to stdin. */
export function cli(
  args: string[],
  opts: { env?: Record<string, string>; input?: string; cwd?: string } = {},
  command?: string,
): Promise<CliResult> {
  // with `command` the args are its own (e.g. `ip netns exec ... node bin ...`)
  const child = spawn(command ?? process.execPath, command ? args : [bin, ...args], {
    cwd: opts.cwd ?? root,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn", ...opts.env },
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  child.stdin.end(opts.input ?? "");
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out, err })));
}

/** Exactly one line on stderr: that line. */
export function oneLine(err: string): string {
  const lines = err.trim().split("\n");
  assert.equal(lines.length, 1, `expected one line, got: ${err}`);
  return lines[0]!;
}
