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
  /** last second anything was counted */
  last: number;
}

export class RateCounter {
  private readonly windows = new Map<string, Window>();
  /** the second of the last sweep of idle keys */
  private sweptAt = Number.NEGATIVE_INFINITY;

  /** `now` is monotonic by default: the buckets are never stored, and a wall clock step would empty them or count them twice */
  constructor(private readonly now: () => number = monotonicNow) {}

  add(key: string, n: number): void {
    if (n <= 0) return;
    const sec = Math.floor(this.now() / 1000);
    // a key nobody reads (a group gone whose consume stats nobody asks for) would stay for good
    if (sec - this.sweptAt >= BUCKETS) this.sweep(sec);
    let w = this.windows.get(key);
    if (!w) {
      w = { counts: new Float64Array(BUCKETS), seconds: new Float64Array(BUCKETS).fill(-1), since: sec, last: sec };
      this.windows.set(key, w);
    }
    w.last = sec;
    const i = sec % BUCKETS;
    if (w.seconds[i] !== sec) {
      w.seconds[i] = sec;
      w.counts[i] = 0;
    }
    w.counts[i]! += n;
  }

  /** Forgets the keys idle for a minute (their rate is 0), at most once a minute. */
  private sweep(sec: number): void {
    this.sweptAt = sec;
    for (const [key, w] of this.windows) if (sec - w.last >= BUCKETS) this.windows.delete(key);
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

/**
 * One count over the last minute, for figures counted on the hot paths (the broker's putTps and
 * getTransferedTps): the same one-second buckets as {@link RateCounter}, without a key to look up,
 * and nothing allocated per addition. The rate of a window younger than a minute is over its age.
 */
export class RateWindow {
  private readonly counts = new Float64Array(BUCKETS);
  /** the second `counts[second % BUCKETS]` holds */
  private readonly seconds = new Float64Array(BUCKETS).fill(-1);
  /** the second the window was made */
  private readonly since: number;

  constructor(private readonly now: () => number = monotonicNow) {
    this.since = Math.floor(now() / 1000);
  }

  /** Counts `n` in second `sec` (of `now`; the current one unless the caller has read it already). */
  add(n: number, sec = Math.floor(this.now() / 1000)): void {
    const i = sec % BUCKETS;
    if (this.seconds[i] !== sec) {
      this.seconds[i] = sec;
      this.counts[i] = 0;
    }
    this.counts[i]! += n;
  }

  /** Events per second over the last minute (over the window's age when younger). */
  perSecond(): number {
    const sec = Math.floor(this.now() / 1000);
    let sum = 0;
    for (let i = 0; i < BUCKETS; i++) if (this.seconds[i]! > sec - BUCKETS) sum += this.counts[i]!;
    return sum / Math.min(BUCKETS, Math.max(1, sec - this.since + 1));
  }
}
