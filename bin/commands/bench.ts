/** `actormq bench <workload>`: runs bench/<workload>.ts with a progress bar and prints its results as a table. */
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import cliProgress from "cli-progress";
import type { Command } from "commander";
import type { BenchOptions, BenchResult } from "../../bench/index.ts";
import { MQError } from "../../transport/protocol.ts";
import { ExitCode, exitFlushed, fail, formatTable, show } from "../common.ts";

const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../bench");

/** The workloads: bench/*.ts except the runner and helpers. */
export function benchWorkloads(): string[] {
  return readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith(".ts") && f !== "index.ts" && !f.startsWith("_"))
    .map((f) => f.slice(0, -3))
    .sort();
}

function fmt(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(3);
}

/** A result as text: the workload, a table of its metrics beside the baseline and the ratio, then its notes. */
function resultText(result: BenchResult): string {
  const keys = [...new Set([...Object.keys(result.metrics), ...Object.keys(result.baseline), ...Object.keys(result.ratio)])];
  const rows = keys.map((k) => [
    k,
    k in result.metrics ? fmt(result.metrics[k]!) : "-",
    k in result.baseline ? fmt(result.baseline[k]!) : "-",
    k in result.ratio ? fmt(result.ratio[k]!) : "-",
  ]);
  const notes = (result.notes ?? []).map((n) => `note: ${n}\n`).join("");
  return `${result.workload}\n${formatTable(["METRIC", "VALUE", "BASELINE", "RATIO"], rows)}${notes}`;
}

export function addBenchCommand(program: Command): void {
  program
    .command("bench")
    .description(`Run a benchmark workload and print its results (workloads: ${benchWorkloads().join(", ")}).`)
    .argument("<workload>", "workload name")
    .argument("[args...]", "arguments passed to the workload")
    .option("--quick", "smaller counts, for a smoke run")
    .option("--json", "print the result as one JSON line")
    .action(async (name: string, args: string[], f: { quick?: boolean; json?: boolean }) => {
      const workloads = benchWorkloads();
      if (!workloads.includes(name))
        fail(new MQError("ILLEGAL_ARGUMENT", `Unknown workload "${name}": choose one of ${workloads.join(", ")}.`), ExitCode.USAGE);
      let result: BenchResult;
      // workloads report no progress of their own, so the bar shows elapsed time while one runs
      const bar = f.json
        ? null
        : new cliProgress.SingleBar(
            { format: `bench ${name} {bar} {duration_formatted}`, stream: process.stderr },
            cliProgress.Presets.shades_classic,
          );
      bar?.start(100, 0);
      const t0 = Date.now();
      const tick = setInterval(() => bar?.update(Math.min(99, Math.round((Date.now() - t0) / 1000)) % 100), 1000);
      try {
        const mod = (await import(pathToFileURL(path.join(BENCH_DIR, `${name}.ts`)).href)) as {
          default: (o: BenchOptions) => Promise<BenchResult>;
        };
        result = await mod.default({ quick: !!f.quick, verbose: false, args });
      } catch (e) {
        clearInterval(tick);
        bar?.stop();
        fail(e);
      }
      clearInterval(tick);
      bar?.update(100);
      bar?.stop();
      show(f, result, resultText);
      await exitFlushed(0);
    });
}
