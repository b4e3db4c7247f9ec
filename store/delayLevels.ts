/**
 * The `messageDelayLevel` parser (RocketMQ's `ScheduleMessageService.parseDelayLevel`): the store
 * needs it to write delivery times, the broker to route and deliver delayed messages, so it lives
 * here, below both.
 */
import { MQError } from "../transport/protocol.ts";

/** RocketMQ's default: 18 levels from 1 s to 2 h. */
export const DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const LEVEL = /^(\d+)(ms|s|m|h|d)$/;

/**
 * Parses a space-separated list of durations into milliseconds per level: `result[level - 1]`.
 * Units: `s`, `m`, `h`, `d`, and `ms` (handy for tests: "100ms 200ms").
 * @throws MQError ILLEGAL_ARGUMENT on a non-string, an empty or blank string, or a malformed entry.
 */
export function parseDelayLevels(spec: string = DEFAULT_MESSAGE_DELAY_LEVEL): number[] {
  if (typeof spec !== "string") {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `messageDelayLevel must be a string of durations separated by spaces, e.g. "${DEFAULT_MESSAGE_DELAY_LEVEL}", not ${typeof spec} ${String(spec)}.`,
    );
  }
  // an empty list would leave no level to schedule or retry through
  if (spec.trim().length === 0) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `messageDelayLevel is empty: give durations separated by spaces, e.g. "${DEFAULT_MESSAGE_DELAY_LEVEL}".`,
    );
  }
  return spec
    .trim()
    .split(/\s+/)
    .map((part, i) => {
      const m = LEVEL.exec(part);
      if (!m) {
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `messageDelayLevel entry ${i + 1} "${part}" is not a duration: write a whole number followed by ms, s, m, h or d (e.g. "5s", "2m").`,
        );
      }
      return Number(m[1]) * UNIT_MS[m[2]!]!;
    });
}
