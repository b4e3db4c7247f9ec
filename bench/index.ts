/**
 * `npm run bench -- <workload> [--json] [--quick]`: runs one benchmark workload.
 * Each workload lives in `bench/<workload>.ts` and default-exports `run(opts) => BenchResult`.
 * With `--json` the last line printed is the result as one JSON object.
 */
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export interface BenchOptions {
  /** smaller counts, for a smoke run */
  quick: boolean;
  /** print progress/tables (false with --json) */
  verbose: boolean;
  /** the remaining command-line words after the workload name */
  args: string[];
}

export interface BenchResult {
  workload: string;
  metrics: Record<string, number>;
  baseline: Record<string, number>;
  ratio: Record<string, number>;
  notes?: string[];
}

const here = path.dirname(fileURLToPath(import.meta.url));
const workloads = readdirSync(here)
  .filter((f) => f.endsWith(".ts") && f !== "index.ts" && !f.startsWith("_"))
  .map((f) => f.slice(0, -3))
  .sort();

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const json = argv.includes("--json");
  const quick = argv.includes("--quick");
  const rest = argv.filter((a) => a !== "--json" && a !== "--quick");
  const name = rest[0];
  if (!name || name === "--help" || name === "-h") {
    console.log(`usage: npm run bench -- <workload> [--json] [--quick]\nworkloads: ${workloads.join(", ")}`);
    process.exit(name ? 0 : 1);
  }
  if (!workloads.includes(name)) {
    console.error(`unknown workload "${name}"; choose one of: ${workloads.join(", ")}`);
    process.exit(2);
  }
  const mod = (await import(pathToFileURL(path.join(here, `${name}.ts`)).href)) as {
    default: (o: BenchOptions) => Promise<BenchResult>;
  };
  const result = await mod.default({ quick, verbose: !json, args: rest.slice(1) });
  if (json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(`\n${result.workload}`);
    for (const [group, rec] of [
      ["metrics", result.metrics],
      ["baseline", result.baseline],
      ["ratio", result.ratio],
    ] as const) {
      for (const [k, v] of Object.entries(rec))
        console.log(`  ${group.padEnd(8)} ${k.padEnd(32)} ${Number.isInteger(v) ? v : v.toFixed(3)}`);
    }
    for (const n of result.notes ?? []) console.log(`  note: ${n}`);
  }
  process.exit(0);
}

await main();
