/**
 * The one way actormq components get a pino logger. Level: the component's option, else
 * `ACTORMQ_LOG_LEVEL` (the CLI's `--log-level` sets it), else `info` for servers and `warn` for
 * clients (a library should not chatter in its user's console); `warn` under the test runner.
 * Servers log on stdout (their output is the log); clients on stderr, like `console.warn`: a
 * program's stdout is its data (`actormq consume > file`, `| jq`) and warnings must not mix in.
 */
import { type Logger, pino } from "pino";
import { monotonicNow } from "../transport/clock.ts";
import { MQError } from "../transport/protocol.ts";

export type { Logger };

/** The level a component of this `role` logs at when no option says otherwise. */
export function defaultLogLevel(role: "server" | "client" = "server"): string {
  return process.env.ACTORMQ_LOG_LEVEL ?? (process.env.NODE_TEST_CONTEXT || role === "client" ? "warn" : "info");
}

/** A pino logger named `name` writing to `fd` (1 stdout, 2 stderr); MQError ILLEGAL_ARGUMENT for an unknown level. */
export function createLogger(name: string, level: string = defaultLogLevel(), fd: 1 | 2 = 1): Logger {
  // own keys only: `in` took "toString" or "constructor" (Object.prototype) for a level, and the
  // logger made from it wrote nothing, errors included
  if (!(typeof level === "string" && Object.hasOwn(pino.levels.values, level)) && level !== "silent") {
    throw new MQError("ILLEGAL_ARGUMENT", `Unknown log level "${level}": use trace, debug, info, warn, error, fatal or silent.`);
  }
  return fd === 1 ? pino({ name, level }) : pino({ name, level }, pino.destination({ dest: fd, sync: true }));
}

/** A client-side logger created on first use, so a level set after import (CLI flags) applies. */
export function lazyClientLogger(name: string): () => Logger {
  let logger: Logger | null = null;
  return () => (logger ??= createLogger(name, defaultLogLevel("client"), 2));
}

/** Lets a log line per key through at most once per `intervalMs`, counting the ones held back. */
export class LogThrottle {
  private readonly last = new Map<string, { at: number; held: number }>();

  constructor(private readonly intervalMs: number) {}

  /** How many lines of `key` were held back since its last one, when this one may go out; else undefined. */
  pass(key: string): number | undefined {
    // monotonic: after a wall clock step back, Date.now() would hold every line back for as long
    const now = monotonicNow();
    const l = this.last.get(key);
    if (l && now - l.at < this.intervalMs) {
      l.held++;
      return undefined;
    }
    this.last.set(key, { at: now, held: 0 });
    return l?.held ?? 0;
  }
}
