/**
 * A once-per-process warning when V8 runs full mark-compacts many times a second in a broker
 * process that lacks the brokers' node flags: the pattern of a small heap under load that those
 * flags remove (README, Operate: node flags). Passive: a GC observer, disconnected after warning.
 */
import { constants, PerformanceObserver } from "node:perf_hooks";
import { missingBrokerNodeFlags } from "./nodeFlags.ts";

/** Full GCs within FULL_GC_WINDOW_MS that make the warning: a storm runs ~20 a second, a healthy broker a few a minute. */
export const FULL_GC_WARN_COUNT = 20;
export const FULL_GC_WINDOW_MS = 5_000;

/** Counts events in a sliding window; `add` is true once `count` of them fall within `windowMs`. */
export class EventRate {
  private readonly times: number[] = [];
  constructor(
    private readonly count: number,
    private readonly windowMs: number,
  ) {}

  add(at: number): boolean {
    const t = this.times;
    t.push(at);
    while (at - t[0]! > this.windowMs) t.shift();
    return t.length >= this.count;
  }
}

let watching = false;

/** Starts the watch once per process; nothing when the process has the flags. */
export function watchFullGcs(warn: (fields: object, msg: string) => void, missing = missingBrokerNodeFlags()): void {
  if (watching || missing.length === 0) return;
  watching = true;
  const rate = new EventRate(FULL_GC_WARN_COUNT, FULL_GC_WINDOW_MS);
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as { detail?: { kind?: number } }).detail?.kind;
      if (kind !== constants.NODE_PERFORMANCE_GC_MAJOR || !rate.add(e.startTime)) continue;
      observer.disconnect();
      warn(
        { fullGcs: FULL_GC_WARN_COUNT, withinMs: FULL_GC_WINDOW_MS, missingNodeFlags: missing },
        `V8 ran ${FULL_GC_WARN_COUNT} full GCs within ${FULL_GC_WINDOW_MS / 1000} s: start this process with node ${missing.join(" ")} (README, Operate: node flags)`,
      );
      return;
    }
  });
  observer.observe({ entryTypes: ["gc"] });
}
