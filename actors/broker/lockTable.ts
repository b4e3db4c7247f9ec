/**
 * The broker's orderly-consumption lock table (RocketMQ `RebalanceLockManager`): per consumer
 * group, which client holds which queue, expiring after 60 s without renewal. Pure; the `locks`
 * actor answers LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with it.
 */
import { monotonicNow } from "../../transport/clock.ts";
import { type MessageQueue, mqKey } from "../../transport/protocol.ts";

/** `rocketmq.broker.rebalance.lockMaxLiveTime`. */
export const DEFAULT_LOCK_MAX_LIVE_TIME_MS = 60_000;

export interface LockTableOptions {
  /** a lock not renewed for longer than this is free @default 60_000 */
  lockMaxLiveTimeMs?: number;
  /** clock, injectable for tests @default monotonicNow (a wall clock step must not free a live lock) */
  now?: () => number;
}

export function defaultLockTableOptions(): Required<LockTableOptions> {
  return { lockMaxLiveTimeMs: DEFAULT_LOCK_MAX_LIVE_TIME_MS, now: monotonicNow };
}

interface LockEntry {
  clientId: string;
  lastUpdateTimestamp: number;
}

/** Queue locks by consumer group. */
export class LockTable {
  private readonly groups = new Map<string, Map<string, LockEntry>>();
  private readonly maxLive: number;
  private readonly now: () => number;

  constructor(options: LockTableOptions = {}) {
    const o = { ...defaultLockTableOptions(), ...options };
    this.maxLive = o.lockMaxLiveTimeMs;
    this.now = o.now;
  }

  private expired(e: LockEntry, now: number): boolean {
    return now - e.lastUpdateTimestamp > this.maxLive;
  }

  /** True when `clientId` holds a live lock on `mq`; renews it. */
  isLocked(group: string, mq: MessageQueue, clientId: string): boolean {
    const e = this.groups.get(group)?.get(mqKey(mq));
    if (!e) return false;
    const now = this.now();
    if (e.clientId !== clientId || this.expired(e, now)) return false;
    e.lastUpdateTimestamp = now;
    return true;
  }

  /** Locks (or renews) one queue for `clientId`; false when another client holds it live. */
  tryLock(group: string, mq: MessageQueue, clientId: string): boolean {
    if (this.isLocked(group, mq, clientId)) return true;
    let table = this.groups.get(group);
    if (!table) {
      table = new Map();
      this.groups.set(group, table);
    }
    const key = mqKey(mq);
    const now = this.now();
    const e = table.get(key);
    if (!e) {
      table.set(key, { clientId, lastUpdateTimestamp: now });
      return true;
    }
    if (e.clientId === clientId || this.expired(e, now)) {
      e.clientId = clientId;
      e.lastUpdateTimestamp = now;
      return true;
    }
    return false;
  }

  /** Locks what it can of `mqs` for `clientId`; returns the queues it now holds. */
  tryLockBatch(group: string, mqs: readonly MessageQueue[], clientId: string): MessageQueue[] {
    return mqs.filter((mq) => this.tryLock(group, mq, clientId));
  }

  /** Releases the queues of `mqs` that `clientId` holds; others' locks are left alone. */
  unlockBatch(group: string, mqs: readonly MessageQueue[], clientId: string): void {
    const table = this.groups.get(group);
    if (!table) return;
    for (const mq of mqs) {
      const key = mqKey(mq);
      if (table.get(key)?.clientId === clientId) table.delete(key);
    }
    if (table.size === 0) this.groups.delete(group);
  }

  /** True when the group holds no live lock (also for an unknown group). */
  isLockAllExpired(group: string): boolean {
    const table = this.groups.get(group);
    if (!table) return true;
    const now = this.now();
    for (const e of table.values()) if (!this.expired(e, now)) return false;
    return true;
  }

  /** The client holding a live lock on `mq`, if any. */
  lockOwner(group: string, mq: MessageQueue): string | undefined {
    const e = this.groups.get(group)?.get(mqKey(mq));
    return e && !this.expired(e, this.now()) ? e.clientId : undefined;
  }

  /**
   * Drops expired entries, and groups left with none. An expired entry is free to any client, as
   * no entry is, so nothing a live lock holds changes; without it, locks asked once (a member gone,
   * made-up queues or groups) would stay in memory for good. Returns how many were dropped.
   */
  purgeExpired(): number {
    const now = this.now();
    let dropped = 0;
    for (const [group, table] of this.groups) {
      for (const [key, e] of table)
        if (this.expired(e, now)) {
          table.delete(key);
          dropped++;
        }
      if (table.size === 0) this.groups.delete(group);
    }
    return dropped;
  }

  /** Number of lock entries in a group, live or expired. */
  entryCount(group: string): number {
    return this.groups.get(group)?.size ?? 0;
  }

  /** Number of groups with lock entries (tests, tools). */
  groupCount(): number {
    return this.groups.size;
  }
}
