/**
 * The one way actormq components get a pino logger. Level: the component's option, else
 * `ACTORMQ_LOG_LEVEL` (the CLI's `--log-level` sets it), else `info` for servers and `warn` for
 * clients (a library should not chatter in its user's console); `warn` under the test runner.
 */
import { type Logger, pino } from "pino";
import { MQError } from "../transport/protocol.ts";

export type { Logger };

/** The level a component of this `role` logs at when no option says otherwise. */
export function defaultLogLevel(role: "server" | "client" = "server"): string {
  return process.env.ACTORMQ_LOG_LEVEL ?? (process.env.NODE_TEST_CONTEXT || role === "client" ? "warn" : "info");
}

/** A pino logger named `name`; MQError ILLEGAL_ARGUMENT for an unknown level. */
export function createLogger(name: string, level: string = defaultLogLevel()): Logger {
  if (!(level in pino.levels.values) && level !== "silent") {
    throw new MQError("ILLEGAL_ARGUMENT", `Unknown log level "${level}": use trace, debug, info, warn, error, fatal or silent.`);
  }
  return pino({ name, level });
}

/** A client-side logger created on first use, so a level set after import (CLI flags) applies. */
export function lazyClientLogger(name: string): () => Logger {
  let logger: Logger | null = null;
  return () => (logger ??= createLogger(name, defaultLogLevel("client")));
}
