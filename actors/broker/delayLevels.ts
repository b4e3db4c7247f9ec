/**
 * Delay levels of scheduled messages (RocketMQ `messageDelayLevel`,
 * `ScheduleMessageService.parseDelayLevel`): a space-separated list of durations, level 1 first.
 */
import { MQError } from "../../transport/protocol.ts";

/** RocketMQ's default: 18 levels from 1 s to 2 h. */
export const DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/** Wait before the scheduler first looks at a level's queue. */
export const FIRST_DELAY_TIME_MS = 1_000;
/** Re-check interval when the head entry is not due yet. */
export const DELAY_FOR_A_WHILE_MS = 100;
/** Delivery delay applied to an unknown level. */
export const UNKNOWN_LEVEL_DELAY_MS = 1_000;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const LEVEL = /^(\d+)(ms|s|m|h|d)$/;

/**
 * Parses a delay-level string into milliseconds per level: `result[level - 1]`. Units: `s`, `m`,
 * `h`, `d`, and `ms` (handy for tests: "100ms 200ms").
 * @throws MQError ILLEGAL_ARGUMENT on an empty string or a malformed entry.
 */
export function parseDelayLevels(spec: string = DEFAULT_MESSAGE_DELAY_LEVEL): number[] {
  if (typeof spec !== "string" || spec.trim().length === 0) {
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

/** Clamps a requested delay level to the highest configured one (levels <= 0 mean "no delay"). */
export function clampDelayLevel(level: number, maxLevel: number): number {
  return Math.min(level, maxLevel);
}

/** The delay of a level in ms, or undefined for a level that is not configured. */
export function delayOfLevel(levels: readonly number[], level: number): number | undefined {
  return level >= 1 && level <= levels.length ? levels[level - 1] : undefined;
}

/** The schedule-topic queue a level's messages wait in. */
export function delayLevelToQueueId(level: number): number {
  return level - 1;
}

export function queueIdToDelayLevel(queueId: number): number {
  return queueId + 1;
}

/**
 * Delivery time stored in the consume-queue tag slot of a scheduled message
 * (`computeDeliverTimestamp`): store time + the level's delay, + 1 s for an unknown level.
 */
export function computeDeliverTimestamp(levels: readonly number[], level: number, storeTimestamp: number): number {
  return storeTimestamp + (delayOfLevel(levels, level) ?? UNKNOWN_LEVEL_DELAY_MS);
}

/**
 * Guards against clock jumps (`correctDeliverTimestamp`): a delivery time further away than
 * now + the level's delay is due now.
 */
export function correctDeliverTimestamp(levels: readonly number[], level: number, now: number, deliverTimestamp: number): number {
  const max = now + (delayOfLevel(levels, level) ?? UNKNOWN_LEVEL_DELAY_MS);
  return deliverTimestamp > max ? now : deliverTimestamp;
}
