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
import type { ZmqNode } from "../transport/zmqNode.ts";

export type { Logger };

/** The level a component of this `role` logs at when no option says otherwise. */
export function defaultLogLevel(role: "server" | "client" = "server"): string {
  return process.env.ACTORMQ_LOG_LEVEL ?? (process.env.NODE_TEST_CONTEXT || role === "client" ? "warn" : "info");
}

const LEVEL_NAMES = "trace, debug, info, warn, error, fatal or silent";
/** What a client logs at when ACTORMQ_LOG_LEVEL names no level (its default, see defaultLogLevel). */
const CLIENT_FALLBACK_LEVEL = "warn";

function isLogLevel(level: unknown): level is string {
  // own keys only: `in` took "toString" or "constructor" (Object.prototype) for a level, and the
  // logger made from it wrote nothing, errors included
  return typeof level === "string" && (Object.hasOwn(pino.levels.values, level) || level === "silent");
}

/** A pino logger named `name` writing to `fd` (1 stdout, 2 stderr); MQError ILLEGAL_ARGUMENT for an unknown level. */
export function createLogger(name: string, level: string = defaultLogLevel(), fd: 1 | 2 = 1): Logger {
  if (!isLogLevel(level)) throw new MQError("ILLEGAL_ARGUMENT", `Unknown log level "${level}": use ${LEVEL_NAMES}.`);
  return fd === 1 ? pino({ name, level }) : pino({ name, level }, pino.destination({ dest: fd, sync: true }));
}

/**
 * MQError ILLEGAL_ARGUMENT when `ACTORMQ_LOG_LEVEL` names no level: clients check it at start, as
 * servers check theirs, since their loggers are made only when a first line is due.
 */
export function checkClientLogLevel(): void {
  const level = defaultLogLevel("client");
  if (!isLogLevel(level))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `Unknown log level "${level}" in ACTORMQ_LOG_LEVEL: use ${LEVEL_NAMES}, or unset it (clients log at ${CLIENT_FALLBACK_LEVEL}).`,
    );
}

/** The unknown ACTORMQ_LOG_LEVEL value a note was written for, so there is one per process. */
let unknownLevelNoted: string | undefined;

/**
 * A client-side logger created on first use, so a level set after import (CLI flags) applies. It
 * never throws: an unknown level (set after the clients' start checks, or logged under without a
 * client) is the default, with one note on stderr, since the first line is often a warning from a
 * failure path (a failed pull) where a throw would crash the process or hide the warning.
 */
export function lazyClientLogger(name: string): () => Logger {
  let logger: Logger | null = null;
  return () => (logger ??= clientLogger(name));
}

function clientLogger(name: string): Logger {
  const level = defaultLogLevel("client");
  if (isLogLevel(level)) return createLogger(name, level, 2);
  const logger = createLogger(name, CLIENT_FALLBACK_LEVEL, 2);
  if (unknownLevelNoted !== level) {
    unknownLevelNoted = level;
    logger.warn(`ACTORMQ_LOG_LEVEL "${level}" is not a log level: client logs go out at ${CLIENT_FALLBACK_LEVEL}. Use ${LEVEL_NAMES}.`);
  }
  return logger;
}

/** Keys a {@link LogThrottle} keeps before it forgets those whose interval is over. */
export const LOG_THROTTLE_MAX_KEYS = 1024;

/** Lets a log line per key through at most once per `intervalMs`, counting the ones held back. */
export class LogThrottle {
  private readonly last = new Map<string, { at: number; held: number }>();
  private prunedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly intervalMs: number) {}

  /** Keys kept (for tests). */
  get size(): number {
    return this.last.size;
  }

  /** How many lines of `key` were held back since its last one, when this one may go out; else undefined. */
  pass(key: string): number | undefined {
    // monotonic: after a wall clock step back, Date.now() would hold every line back for as long
    const now = monotonicNow();
    const l = this.last.get(key);
    if (l && now - l.at < this.intervalMs) {
      l.held++;
      return undefined;
    }
    // keys can come from what peers send (a queue id, a group): past a bound, those whose interval
    // is over are forgotten (their held counts, never logged, with them), at most once an interval
    // so that a flood of new keys does not scan the map at each one
    if (!l && this.last.size >= LOG_THROTTLE_MAX_KEYS && now - this.prunedAt >= this.intervalMs) {
      this.prunedAt = now;
      for (const [k, v] of this.last) if (now - v.at >= this.intervalMs) this.last.delete(k);
    }
    this.last.set(key, { at: now, held: 0 });
    return l?.held ?? 0;
  }
}

/** A listening node logs each kind of dropped request at most once per this many ms, with the count since its last line. */
export const TRANSPORT_DROP_LOG_INTERVAL_MS = 30_000;

/**
 * Wires a listening node's drops to `logger`, each kind throttled on its own: requests dropped
 * unserved because they waited past their asker's timeout (the node is overloaded; `dropped`),
 * malformed frames (`malformed`; RocketMQ's NettyDecoder logs each decode failure with the remote
 * address), and connections refused at accept or handshake (`refused`), counted since the kind's
 * previous line, this one included. `what` names the server.
 */
export function logTransportDrops(transport: ZmqNode, logger: Logger, what: string): void {
  const throttle = new LogThrottle(TRANSPORT_DROP_LOG_INTERVAL_MS);
  transport.onRequestExpired((link, type, waitedMs, timeoutMs) => {
    const held = throttle.pass("expired");
    if (held === undefined) return;
    logger.warn(
      { dropped: held + 1, event: type, waitedMs: Math.round(waitedMs), timeoutMs, peer: link.peerNodeId || link.description },
      `${what} is overloaded: requests are dropped unserved, each having waited longer than its sender's timeout (the sender has failed it with TIMEOUT and may send it again); reduce the load or add capacity`,
    );
  });
  transport.onMalformedFrame((link, why) => {
    const held = throttle.pass("malformed");
    if (held === undefined) return;
    logger.warn(
      { malformed: held + 1, reason: why, peer: link === null ? "unknown" : link.peerNodeId || link.description },
      `${what} received malformed frames (dropped, or answered MALFORMED / REQUEST_CODE_NOT_SUPPORTED where a reply could go back): check what connects to this port, and that its actormq version matches`,
    );
  });
  transport.onConnectionRefused((kind, address, why, client) => {
    if (kind === "clientKey") {
      // one line per 30 s for all refused keys (a client picks its key, so one per key could be
      // made to flood), naming the last one: what the operator adds to the allow-list or looks for
      const held = throttle.pass("clientKey");
      if (held === undefined) return;
      logger.warn(
        { refused: held + 1, listener: address, clientAddress: client?.address, clientKey: client?.key },
        `${what} refused a CURVE client whose public key is not in its allowed client keys (curve.allowedClientKeys, --curve-allow): add the key if the client is to connect`,
      );
      return;
    }
    const held = throttle.pass(kind);
    if (held === undefined) return;
    if (kind === "accept")
      logger.error(
        { refused: held + 1, reason: why, peer: address },
        `${what} could not accept connections (clients cannot connect): if the reason is too many open files, raise the open-file limit (ulimit -n, LimitNOFILE) and restart`,
      );
    else
      logger.warn(
        { refused: held + 1, reason: why, peer: address, listener: address },
        `${what} refused connections whose handshake failed: check the clients' CURVE keys (their curveServerKey must be this server's public key) and that its clients use CURVE, or none when this server does not`,
      );
  });
}
