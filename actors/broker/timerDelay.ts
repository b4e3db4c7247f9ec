/**
 * Delays for timers armed at a computed time (a held pull's deadline, a delay level's next head).
 * Node fires a `setTimeout` longer than 2^31-1 ms (24.8 days) after 1 ms, so an uncapped far
 * deadline becomes a timer that fires, finds nothing due, re-arms and fires again, forever.
 */

/**
 * Longest delay a computed timer is armed for; a later deadline is re-checked when it fires.
 * An hour (well under Node's limit) also bounds how late a wall-clock jump is noticed.
 */
export const MAX_TIMER_DELAY_MS = 3_600_000;

/** `ms` as a timer delay: at least 0, at most {@link MAX_TIMER_DELAY_MS}. */
export function timerDelay(ms: number): number {
  return Math.min(Math.max(ms, 0), MAX_TIMER_DELAY_MS);
}
