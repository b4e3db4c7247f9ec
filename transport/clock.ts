/**
 * The clock for in-memory deadlines, expiries, intervals and rates. Date.now() follows the wall
 * clock, which NTP, a VM resume or a user can step by minutes or hours: a deadline computed from it
 * then fires at once (step forward) or hours late (step back). This one only moves forward at the
 * rate of real time. It starts at the process's start time in epoch ms, so its values look like
 * Date.now()'s (0 still reads "long ago"), but they are never stored, and the one sent to another
 * process (a request header's deadline) is only compared with other stamps of the same process:
 * timestamps that are stored or compared across processes (store and born times, delay due times,
 * consumeTimestamp) stay Date.now().
 */
const ORIGIN = performance.timeOrigin;

/** Monotonic milliseconds: anchored at the process's start time, unaffected by wall clock steps. */
export function monotonicNow(): number {
  return ORIGIN + performance.now();
}
