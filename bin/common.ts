/**
 * What every `actormq` command shares: option parsers, the `--namesrv`, `--log-level` and `--json`
 * flags, the one-line error convention (`error CODE: message`, exit code 1), tables, and the
 * run-until-signal loop of the servers.
 */
import os from "node:os";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { CurveLinkOptions } from "../actors/runtime/index.ts";
import { BROKER_ID_RULE, isBrokerId, MAX_PERM, MQError } from "../transport/protocol.ts";
import { addClientCurveFlags, type CurveFlags, clientCurveOf } from "./curveFlags.ts";

/** Name server a client command talks to when neither `--namesrv` nor ACTORMQ_NAMESRV says otherwise. */
export const DEFAULT_CLIENT_NAMESRV = "tcp://127.0.0.1:9876";
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

/** Exit codes of the command line. */
export const ExitCode = { OK: 0, ERROR: 1, USAGE: 2 } as const;

/**
 * A commander parser for numbers written as `syntax` (plain decimal: Number() alone would take "",
 * " ", "0x10" and "1e3") that `ok` accepts; anything else is a usage error naming `expected`.
 */
function numberArg(syntax: RegExp, ok: (n: number) => boolean, expected: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!syntax.test(v) || !ok(n)) throw new InvalidArgumentError(`expected ${expected}`);
    return n;
  };
}

const DIGITS = /^\d+$/;
const SIGNED_DIGITS = /^-?\d+$/;
const DECIMAL = /^\d+(\.\d+)?$/;

export const intArg = numberArg(DIGITS, (n) => Number.isSafeInteger(n), "a non-negative integer");
/** A count that must be at least 1 (`--count`, `--brokers`, ...): 0, negative and non-integer values are usage errors. */
export const positiveIntArg = numberArg(DIGITS, (n) => Number.isSafeInteger(n) && n >= 1, "a positive integer (1 or more)");
/** An integer from `min` to `max` (`--queues`, `--retry-max-times` from -1); anything else is a usage error saying `expected`. */
export function intRangeArg(min: number, max: number, expected: string): (v: string) => number {
  return numberArg(min < 0 ? SIGNED_DIGITS : DIGITS, (n) => Number.isSafeInteger(n) && n >= min && n <= max, expected);
}
/** `--broker-id`: said as what a broker id is, since a number past 2^53-1 is a non-negative integer too. */
export const brokerIdArg = numberArg(DIGITS, isBrokerId, `a broker id: ${BROKER_ID_RULE}`);
/** A positive number of hours (fractions allowed). */
export const hoursArg = numberArg(DECIMAL, (n) => n > 0, "a number of hours > 0");
/** A percentage in (0, 100]. */
export const percentArg = numberArg(DECIMAL, (n) => n > 0 && n <= 100, "a percentage in (0, 100]");
/** A PermName bit set, as `brokerPermission` takes it. */
export const permArg = numberArg(
  DIGITS,
  (n) => n <= MAX_PERM,
  `a PermName bit set from 0 to ${MAX_PERM} (6 read and write, 4 read only, 2 write only)`,
);

export function listArg(v: string): string[] {
  return v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Days of `month` (1-12) in `year`; 0 for a month that does not exist. */
function daysInMonth(year: number, month: number): number {
  return month >= 1 && month <= 12 ? new Date(Date.UTC(year, month, 0)).getUTCDate() : 0;
}

/** How `--time` and `--from` take a time, for their usage errors. */
export const TIME_FORMS =
  "use ISO 8601 like 2025-01-31T12:00:00Z (1970-01-01T00:00:00Z for the earliest), or epoch milliseconds of 10 digits or more";

/**
 * An ISO 8601 time or epoch milliseconds of 10 digits or more (a shorter number is more likely a
 * date without dashes, 20250131, than a time in 1970); anything else is a usage error naming the expected forms.
 */
export function timeArg(v: string): number {
  if (/^\d{10,}$/.test(v)) return Number(v);
  const ymd = /^(\d{4})-(\d{2})-(\d{2})/.exec(v);
  // Date.parse rolls a day past the month's end over (2025-02-30 is March 2nd): refuse it instead
  const t = ymd && Number(ymd[3]) <= daysInMonth(Number(ymd[1]), Number(ymd[2])) ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(t)) throw new InvalidArgumentError(`"${v}" is not a time: ${TIME_FORMS}.`);
  return t;
}

/** `--log-level`; `fallback` is the level without it or $ACTORMQ_LOG_LEVEL (actors/logger.ts: info for servers, warn for clients). */
export function logLevelOption(fallback: "info" | "warn" = "info"): Option {
  return new Option("--log-level <level>", `log level (default: $ACTORMQ_LOG_LEVEL or ${fallback})`)
    .choices(LOG_LEVELS)
    .env("ACTORMQ_LOG_LEVEL");
}

/** `--namesrv` for client commands: comma-separated endpoints, default $ACTORMQ_NAMESRV or tcp://127.0.0.1:9876. */
export function namesrvOption(): Option {
  return new Option("--namesrv <addresses>", "comma-separated name server endpoints")
    .env("ACTORMQ_NAMESRV")
    .default([DEFAULT_CLIENT_NAMESRV], DEFAULT_CLIENT_NAMESRV)
    .argParser(listArg);
}

/** Adds the client flags every client command takes: --namesrv, --log-level and the CURVE ones. */
export function clientCommand(cmd: Command): Command {
  return addClientCurveFlags(cmd.addOption(namesrvOption()).addOption(logLevelOption("warn")));
}

/** A client's start options from its flags: the name servers and its CURVE options. */
export function clientOptions(f: { namesrv: string[] } & CurveFlags): { nameservers: string[] } & CurveLinkOptions {
  return { nameservers: f.namesrv, ...clientCurveOf(f) };
}

/** The `--json` flag of a command that shows state ({@link jsonOption}). */
export interface JsonFlag {
  json?: boolean;
}

/**
 * `--json` for a command that shows state; `what` says in its --help what the JSON value holds
 * (e.g. "the topic names as an array").
 */
export function jsonOption(what: string): Option {
  return new Option("--json", `print one JSON value on one line instead of the text: ${what}`);
}

/**
 * Writes what a command shows: with --json exactly one JSON value on one line (scripts parse the
 * whole of stdout), else the text `text` makes of the same data.
 */
export function show<T>(f: JsonFlag, data: T, text: (data: T) => string): void {
  process.stdout.write(f.json ? `${JSON.stringify(data)}\n` : text(data));
}

/** One line on stderr and exit code 1: `error CODE: message` for MQErrors, `error: message` otherwise. */
export function errorLine(e: unknown): string {
  if (e instanceof MQError) return `error ${e.code}: ${e.message}`;
  return `error: ${e instanceof Error ? e.message : String(e)}`;
}

function writeErrorLine(e: unknown): void {
  process.stderr.write(`actormq: ${errorLine(e).replace(/\s*\n\s*/g, " ")}\n`);
}

export function fail(e: unknown, code: number = ExitCode.ERROR): never {
  writeErrorLine(e);
  process.exit(code);
}

/**
 * Resolves once what was written to `stream` has been handed to the OS, or the stream failed (its
 * reader went away: nothing more can be shown). Into a pipe, what a reader has not taken yet waits
 * in the process, and process.exit would drop it.
 */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableLength === 0) return Promise.resolve();
  return new Promise((resolve) => {
    // an EPIPE is also an 'error' event: one listener keeps it from being an uncaught exception
    const done = () => {
      stream.off("error", done);
      resolve();
    };
    stream.on("error", done);
    stream.write("", done);
  });
}

/** process.exit(code) once stdout and stderr are flushed. */
export async function exitFlushed(code: number): Promise<never> {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code);
}

/**
 * Runs a client command body; a failure is one line and exit 1. Resources the body registered
 * with `onExit` are released first, so nothing is left half-open. When the reader of stdout goes
 * away (`| head`: EPIPE) they are released too and the command exits 0 without a word: nothing
 * more can be shown.
 */
export async function runClient(body: (onExit: (fn: () => Promise<unknown>) => void) => Promise<void>): Promise<void> {
  const cleanups: (() => Promise<unknown>)[] = [];
  let released: Promise<void> | undefined;
  const release = () =>
    (released ??= (async () => {
      for (const c of cleanups.reverse()) await c().catch(() => {});
    })());
  let readerGone = false;
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    readerGone ||= e.code === "EPIPE";
    void release().then(() => (readerGone ? process.exit(ExitCode.OK) : fail(e)));
  });
  let failure: unknown;
  try {
    await body((fn) => cleanups.push(fn));
  } catch (e) {
    failure = e;
  }
  await release();
  // a body that failed only because its output had no reader (a closed producer) is no error
  if (failure !== undefined && !readerGone) {
    writeErrorLine(failure);
    await exitFlushed(ExitCode.ERROR);
  }
  await exitFlushed(ExitCode.OK);
}

/**
 * Signals that stop a server or a consume cleanly: Ctrl-C, a process manager's stop, and the
 * terminal or ssh session closing (SIGHUP, whose default would kill the process uncleanly).
 */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * A repeat of the first stop signal this soon after it is the same Ctrl-C delivered twice: a
 * terminal signals its whole foreground process group, so under `npm start` node gets the SIGINT
 * from the terminal and the one npm forwards.
 */
export const SIGNAL_REPEAT_GRACE_MS = 1000;

/**
 * Runs until SIGINT/SIGTERM/SIGHUP, then closes; a second signal exits at once with 128 + its
 * number (the same signal only once {@link SIGNAL_REPEAT_GRACE_MS} have passed). Call it before
 * announcing readiness (banner, ready file): a signal that arrives before the handlers kills the
 * process.
 */
export function runUntilSignal(close: () => Promise<void>, now: () => number = Date.now): void {
  let first: { sig: NodeJS.Signals; at: number } | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (first) {
      if (sig === first.sig && now() - first.at < SIGNAL_REPEAT_GRACE_MS) return;
      process.stderr.write(`actormq: ${sig} again, exiting without a clean shutdown\n`);
      process.exit(128 + os.constants.signals[sig]);
    }
    first = { sig, at: now() };
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
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);
}

/** A plain aligned text table. */
export function formatTable(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return `${cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n")}\n`;
}
