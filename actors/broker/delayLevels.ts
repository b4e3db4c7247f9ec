/**
 * Delay levels of scheduled messages (RocketMQ `messageDelayLevel`,
 * `ScheduleMessageService.parseDelayLevel`): a space-separated list of durations, level 1 first.
 */
// one parser for the store and the broker; the store cannot import from actors/
export { DEFAULT_MESSAGE_DELAY_LEVEL, parseDelayLevels } from "../../store/index.ts";

/** Wait before the scheduler first looks at a level's queue. */
export const FIRST_DELAY_TIME_MS = 1_000;
/** Re-check interval when the head entry is not due yet. */
export const DELAY_FOR_A_WHILE_MS = 100;
/** Delivery delay applied to an unknown level. */
export const UNKNOWN_LEVEL_DELAY_MS = 1_000;

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
