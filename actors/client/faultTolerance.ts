/**
 * Latency fault tolerance and queue choice for producers (RocketMQ's `MQFaultStrategy`,
 * `LatencyFaultToleranceImpl`, `TopicPublishInfo`; reference §17): after each send the broker's
 * latency decides how long it is avoided; a failed send isolates it as if it took 30 s.
 */
import { monotonicNow } from "../../transport/clock.ts";
import { type MessageQueue, MQError } from "../../transport/protocol.ts";

/** Latency thresholds in ms (`latencyMax`). */
export const DEFAULT_LATENCY_MAX = [50, 100, 550, 1800, 3000, 5000, 15000] as const;
/** How long a broker is avoided for each threshold, in ms (`notAvailableDuration`). */
export const DEFAULT_NOT_AVAILABLE_DURATION = [0, 0, 2000, 5000, 6000, 10000, 30000] as const;
/** A failed send counts as this latency. */
export const ISOLATION_LATENCY_MS = 30_000;

export interface FaultToleranceOptions {
  latencyMax?: readonly number[];
  notAvailableDuration?: readonly number[];
  /** clock, injectable for tests @default monotonicNow (a wall clock step must not end or stretch an isolation) */
  now?: () => number;
}

interface FaultItem {
  latencyMs: number;
  availableAtMs: number;
}

/**
 * The fault strategy's tables (defaults for the one not given): non-empty arrays of non-negative
 * milliseconds, one duration per threshold; throws MQError ILLEGAL_ARGUMENT.
 */
export function checkFaultTables(latencyMax: unknown, notAvailableDuration: unknown): void {
  const tables = [
    ["latencyMax", latencyMax, DEFAULT_LATENCY_MAX],
    ["notAvailableDuration", notAvailableDuration, DEFAULT_NOT_AVAILABLE_DURATION],
  ] as const;
  for (const [name, v, dflt] of tables) {
    if (v !== undefined && (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "number" && Number.isFinite(x) && x >= 0)))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `${name} must be a non-empty array of non-negative numbers of milliseconds, such as [${dflt.join(", ")}].`,
      );
  }
  const thresholds = (latencyMax ?? DEFAULT_LATENCY_MAX) as readonly number[];
  const durations = (notAvailableDuration ?? DEFAULT_NOT_AVAILABLE_DURATION) as readonly number[];
  if (thresholds.length !== durations.length) {
    const given = (v: unknown) => (v === undefined ? " (the default)" : "");
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `latencyMax has ${thresholds.length} thresholds${given(latencyMax)} but notAvailableDuration ${durations.length} durations${given(notAvailableDuration)}: give one duration per threshold, setting both options together.`,
    );
  }
}

/** Per broker name: last latency and the time from which it may be chosen again. */
export class LatencyFaultTolerance {
  private readonly items = new Map<string, FaultItem>();
  private readonly latencyMax: readonly number[];
  private readonly notAvailable: readonly number[];
  private readonly now: () => number;

  constructor(opts: FaultToleranceOptions = {}) {
    checkFaultTables(opts.latencyMax, opts.notAvailableDuration);
    this.latencyMax = opts.latencyMax ?? DEFAULT_LATENCY_MAX;
    this.notAvailable = opts.notAvailableDuration ?? DEFAULT_NOT_AVAILABLE_DURATION;
    this.now = opts.now ?? monotonicNow;
  }

  /** How long a broker with this latency is avoided. */
  notAvailableDurationFor(latencyMs: number): number {
    for (let i = this.latencyMax.length - 1; i >= 0; i--) {
      if (latencyMs >= this.latencyMax[i]!) return this.notAvailable[i]!;
    }
    return 0;
  }

  /**
   * Records the outcome of a send to `brokerName`; `isolation` = it failed. Only brokers avoided for
   * a while are kept, and those whose time is up go as another is added: one entry per broker name
   * ever sent to would grow for good as brokers come and go.
   */
  update(brokerName: string, latencyMs: number, isolation: boolean): void {
    const latency = isolation ? ISOLATION_LATENCY_MS : latencyMs;
    const duration = this.notAvailableDurationFor(latency);
    if (duration <= 0) {
      if (this.items.size > 0) this.items.delete(brokerName);
      return;
    }
    const now = this.now();
    for (const [name, it] of this.items) if (now >= it.availableAtMs) this.items.delete(name);
    this.items.set(brokerName, { latencyMs: latency, availableAtMs: now + duration });
  }

  isAvailable(brokerName: string): boolean {
    const it = this.items.get(brokerName);
    return !it || this.now() >= it.availableAtMs;
  }

  /** Forgets a broker (it left the route). */
  remove(brokerName: string): void {
    this.items.delete(brokerName);
  }
}

/**
 * Round-robin queue choice over a topic's writable queues (RocketMQ's `selectOneMessageQueue`):
 * prefer a queue whose broker is available and is not the one that just failed, then any
 * available broker, then any broker but the failed one, then anything.
 */
export class QueueSelector {
  /**
   * One counter per topic, from a random start (RocketMQ's `TopicPublishInfo.sendWhichQueue`): a
   * counter shared by all topics lets sends alternating between topics use only some of each one's queues.
   */
  private readonly counters = new Map<string, number>();

  constructor(private readonly faults: LatencyFaultTolerance | null) {}

  /** `queues` are one topic's writable queues. */
  select(queues: readonly MessageQueue[], lastFailedBroker?: string): MessageQueue | undefined {
    const n = queues.length;
    if (n === 0) return undefined;
    const topic = queues[0]!.topic;
    const start = this.counters.get(topic) ?? Math.floor(Math.random() * 0x7fffffff);
    this.counters.set(topic, (start + 1) & 0x7fffffff);
    if (n === 1) return queues[0];
    for (let pass = 0; pass < 3; pass++) {
      for (let i = 0; i < n; i++) {
        const q = queues[(start + i) % n]!;
        const avail = !this.faults || this.faults.isAvailable(q.brokerName);
        const other = q.brokerName !== lastFailedBroker;
        if ((pass === 0 && avail && other) || (pass === 1 && avail) || (pass === 2 && other)) {
          if (i > 0) this.counters.set(topic, (start + i + 1) & 0x7fffffff);
          return q;
        }
      }
    }
    return queues[start % n];
  }
}
