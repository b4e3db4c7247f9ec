/**
 * Per-key counts over the last minute, as RocketMQ's BrokerStatsManager keeps GROUP_GET_NUMS
 * (`topic@group` -> messages pulled) for the consumeTps of GET_CONSUME_STATS: one bucket per second,
 * 60 buckets per key, the rate being the sum of the last minute's buckets over the seconds they span.
 */
import { monotonicNow } from "../../transport/clock.ts";

const BUCKETS = 60;

interface Window {
  counts: Float64Array;
  /** the second `counts[second % BUCKETS]` holds */
  seconds: Float64Array;
  /** first second anything was counted: a young key's rate is over its own age, not a full minute */
  since: number;
}

export class RateCounter {
  private readonly windows = new Map<string, Window>();

  /** `now` is monotonic by default: the buckets are never stored, and a wall clock step would empty them or count them twice */
  constructor(private readonly now: () => number = monotonicNow) {}

  add(key: string, n: number): void {
    if (n <= 0) return;
    const sec = Math.floor(this.now() / 1000);
    let w = this.windows.get(key);
    if (!w) {
      w = { counts: new Float64Array(BUCKETS), seconds: new Float64Array(BUCKETS).fill(-1), since: sec };
      this.windows.set(key, w);
    }
    const i = sec % BUCKETS;
    if (w.seconds[i] !== sec) {
      w.seconds[i] = sec;
      w.counts[i] = 0;
    }
    w.counts[i]! += n;
  }

  /** Events per second over the last minute (over the key's age when younger); 0 for an unknown key. */
  perSecond(key: string): number {
    const w = this.windows.get(key);
    if (!w) return 0;
    const sec = Math.floor(this.now() / 1000);
    let sum = 0;
    for (let i = 0; i < BUCKETS; i++) if (w.seconds[i]! > sec - BUCKETS) sum += w.counts[i]!;
    const span = Math.min(BUCKETS, Math.max(1, sec - w.since + 1));
    if (sum === 0 && sec - w.since >= BUCKETS) this.windows.delete(key); // idle for a minute: forget it
    return sum / span;
  }
}
