/**
 * Broker-side queue locks of an orderly clustering consumer (RocketMQ's `RebalanceImpl#lock`,
 * `lockAll`, `unlock` and the lock task of `ConsumeMessageOrderlyService`, reference §15):
 * a queue is locked on its broker (LOCK_BATCH_MQ) before it is pulled, every held queue's lock
 * is renewed every 20 s (first after 1 s; more often when that leaves under a third of the client's
 * lock life as margin), and a queue
 * given up is unlocked (UNLOCK_BATCH_MQ) once the batch in hand is committed (its lock renewed
 * meanwhile). The broker lets one client of a group hold a queue at a time and forgets a lock not
 * renewed for 60 s; the client considers its own lock expired after 30 s without renewal, so it
 * stops consuming before the broker could hand the queue to another, and takes a lock granted
 * again after that for a regained one (its cache and offset rebuilt). The broker's table is in memory
 * only (as RocketMQ's): a lock granted before the client's connection to that broker was lost is
 * expired too, since the broker may have restarted without it and given the queue to another member.
 *
 * {@link QueueLocks} does the requests; {@link queueLocksMachine} is the actor that renews.
 */
import { fromPromise, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { BrokerActor, type LockBatchReply, type LockBatchRequest, MASTER_ID, type MessageQueue, mqKey } from "../../transport/protocol.ts";
import { askUnlessConnectionLost } from "../runtime/index.ts";
import { type ProcessQueue, REBALANCE_LOCK_MAX_LIVE_TIME_MS } from "./processQueue.ts";
import type { ConsumerHost } from "./pullRequest.ts";

/** @default 20000 — lockAll period (REBALANCE_LOCK_INTERVAL). */
export const DEFAULT_REBALANCE_LOCK_INTERVAL_MS = 20_000;
/** First lockAll after start. */
export const REBALANCE_LOCK_FIRST_DELAY_MS = 1_000;
/** @default 30000 — the client's view of a lock's validity after the last renewal (REBALANCE_LOCK_MAX_LIVE_TIME). */
export const DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS = REBALANCE_LOCK_MAX_LIVE_TIME_MS;
/** Timeout of one LOCK_BATCH_MQ at rebalance (RocketMQ: 1 s). */
export const LOCK_REQUEST_TIMEOUT_MS = 1_000;
/** Timeout of lockAll's and unlock's requests. */
export const LOCK_ALL_REQUEST_TIMEOUT_MS = 3_000;
/** A rebalance that could not lock a new queue runs again after this long. */
export const LOCK_FAILED_REBALANCE_DELAY_MS = 500;

/**
 * How often held locks are renewed: every `intervalMs` (RocketMQ's 20 s against a 30 s lock life)
 * while that leaves at least a third of the lock's life as margin; else twice per lock life, so a
 * lock never lapses while the client runs normally (a lapsed lock rolls its batch back).
 */
export function lockRenewIntervalMs(intervalMs: number, lockMaxLiveTimeMs: number): number {
  return intervalMs <= (lockMaxLiveTimeMs * 2) / 3 ? intervalMs : Math.max(1, Math.floor(lockMaxLiveTimeMs / 2));
}

/** A held queue as the lock renewal sees it. */
export interface LockedQueue {
  mq: MessageQueue;
  pq: ProcessQueue<MessageExt>;
}

export interface QueueLocksDeps {
  host: Pick<ConsumerHost, "node" | "clientId" | "brokerAddress" | "brokerLostAt">;
  group: string;
  /** the client's view of a lock's validity after its last renewal (default 30 s) */
  lockMaxLiveTimeMs?: number;
  /** the queues held now */
  held(): Iterable<LockedQueue>;
  /**
   * queues given up (dropped) whose release has not ended: their locks are renewed while it
   * lasts, so the batch in hand commits and its offset is stored (RocketMQ's lockAll renews a
   * dropped process queue until it leaves the table)
   */
  releasing?(): Iterable<LockedQueue>;
  /** a held queue's lock was confirmed (consumption may go on) */
  onLocked?(q: LockedQueue): void;
  /**
   * a held queue whose lock had been lost (refused, or not renewed within lockMaxLiveTimeMs) is
   * locked again: another member may have consumed and committed it meanwhile, so its cache and
   * offset are stale
   */
  onRegained?(q: LockedQueue): void;
  /** a new queue could not be locked: run a rebalance again soon */
  rebalanceNow?(): void;
}

/** Counters for tests and tools. */
export interface QueueLocksStats {
  lockRequests: number;
  lockFailures: number;
  unlocks: number;
  lockAllRounds: number;
}

/** Lock requests of one orderly consumer. */
export class QueueLocks {
  readonly stats: QueueLocksStats = { lockRequests: 0, lockFailures: 0, unlocks: 0, lockAllRounds: 0 };
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** per broker address, the process queues' view of when its connection was last lost */
  private readonly lostAt = new Map<string, () => number>();

  constructor(private readonly deps: QueueLocksDeps) {}

  /**
   * Whether `pq`'s lock holds in the client's view: granted and renewed within lockMaxLiveTimeMs,
   * and since the connection to the broker that granted it was last lost. Once it does not, the
   * broker may have given the queue to another member (a client frozen or cut off gets no "not
   * locked" answer; a restarted broker forgot the lock), so a new grant is a regain, not a renewal.
   */
  isLockHeld(pq: ProcessQueue<MessageExt>, now = monotonicNow()): boolean {
    return pq.isLockHeld(now, this.deps.lockMaxLiveTimeMs);
  }

  /** Marks a held queue locked by the broker at `addr` as of `now`; one whose lock had lapsed is reported regained. */
  private granted(q: LockedQueue, now: number, addr: string): void {
    const regained = !this.isLockHeld(q.pq, now);
    q.pq.locked = true;
    q.pq.lastLockTimestamp = now;
    q.pq.lockLostAt = this.lostAtOf(addr);
    if (regained) this.deps.onRegained?.(q);
    else this.deps.onLocked?.(q);
  }

  /** When the connection to `addr` was last lost, as a process queue reads it (one function per address). */
  private lostAtOf(addr: string): () => number {
    let f = this.lostAt.get(addr);
    if (!f) {
      const host = this.deps.host;
      f = host.brokerLostAt ? () => host.brokerLostAt!(addr) : () => Number.NEGATIVE_INFINITY;
      this.lostAt.set(addr, f);
    }
    return f;
  }

  /**
   * LOCK_BATCH_MQ for the given queues of one broker; resolves with the broker's address and the
   * keys locked, or null on failure.
   */
  private async lockOnBroker(
    brokerName: string,
    mqs: MessageQueue[],
    timeoutMs: number,
  ): Promise<{ addr: string; locked: Set<string> } | null> {
    const addr = this.deps.host.brokerAddress(brokerName, MASTER_ID);
    if (!addr) return null;
    this.stats.lockRequests++;
    const req: LockBatchRequest = { consumerGroup: this.deps.group, clientId: this.deps.host.clientId, mqSet: mqs };
    const sentAt = monotonicNow();
    let ok: MessageQueue[];
    try {
      const r = await this.deps.host.node
        .ref(addr, BrokerActor.LOCKS)
        .ask<LockBatchReply>({ type: "LOCK_BATCH_MQ", ...req }, { timeoutMs });
      ok = Array.isArray(r.fields.lockOKMQSet) ? r.fields.lockOKMQSet : [];
    } catch {
      this.stats.lockFailures++;
      return null;
    }
    // the connection was lost meanwhile: the answer may be the old broker's, read after the loss
    if ((this.deps.host.brokerLostAt?.(addr) ?? 0) >= sentAt) {
      this.stats.lockFailures++;
      return null;
    }
    return { addr, locked: new Set(ok.map(mqKey)) };
  }

  /**
   * Locks one queue (at rebalance, before it is pulled, and when consumption finds its lock
   * expired). Marks `pq` locked when given (at rebalance, the new queue's, not held yet), and
   * reports it regained when its lock had lapsed. A failure asks for another rebalance in 500 ms
   * when `retryRebalance` is set.
   */
  async lock(mq: MessageQueue, pq?: ProcessQueue<MessageExt>, retryRebalance = false): Promise<boolean> {
    if (this.stopped) return false;
    const answer = await this.lockOnBroker(mq.brokerName, [mq], LOCK_REQUEST_TIMEOUT_MS);
    const ok = answer?.locked.has(mqKey(mq)) === true;
    if (pq && ok) this.granted({ mq, pq }, monotonicNow(), answer!.addr);
    if (!ok && retryRebalance) this.rebalanceLater();
    return ok;
  }

  /**
   * Renews the lock of every held queue, and of every queue in release whose lock still holds,
   * one request per broker; marks each queue locked or not.
   */
  async lockAll(): Promise<void> {
    if (this.stopped) return;
    this.stats.lockAllRounds++;
    const byBroker = new Map<string, LockedQueue[]>();
    const add = (q: LockedQueue): void => {
      const list = byBroker.get(q.mq.brokerName);
      if (list) list.push(q);
      else byBroker.set(q.mq.brokerName, [q]);
    };
    for (const q of this.deps.held()) if (!q.pq.dropped) add(q);
    // a lapsed one stays lapsed: its batch may have been consumed by another member meanwhile
    for (const q of this.deps.releasing?.() ?? []) if (this.isLockHeld(q.pq)) add(q);
    await Promise.all(
      [...byBroker].map(async ([brokerName, qs]) => {
        const answer = await this.lockOnBroker(
          brokerName,
          qs.map((q) => q.mq),
          LOCK_ALL_REQUEST_TIMEOUT_MS,
        );
        // no answer: keep what we believe; the lock's own expiry stops consumption if it lasts
        if (answer === null || this.stopped) return;
        const { addr, locked } = answer;
        const now = monotonicNow();
        for (const q of qs) {
          if (!locked.has(mqKey(q.mq))) q.pq.locked = false;
          else if (!q.pq.dropped) this.granted(q, now, addr);
          // in release: renewed only if it had not lapsed meanwhile, never regained
          else if (this.isLockHeld(q.pq, now)) q.pq.lastLockTimestamp = now;
        }
      }),
    );
  }

  /** UNLOCK_BATCH_MQ for queues given up (after their batch in hand was committed and persisted). */
  async unlock(mqs: MessageQueue[]): Promise<void> {
    const byBroker = new Map<string, MessageQueue[]>();
    for (const mq of mqs) {
      const list = byBroker.get(mq.brokerName);
      if (list) list.push(mq);
      else byBroker.set(mq.brokerName, [mq]);
    }
    await Promise.all(
      [...byBroker].map(async ([brokerName, list]) => {
        const addr = this.deps.host.brokerAddress(brokerName, MASTER_ID);
        if (!addr) return;
        const req: LockBatchRequest = { consumerGroup: this.deps.group, clientId: this.deps.host.clientId, mqSet: list };
        this.stats.unlocks += list.length;
        // a lost unlock only delays the next owner until the broker's lock expiry; a broker whose
        // connection is lost is not waited on: locks granted before the loss no longer count here, and
        // a broker restarted meanwhile has forgotten them
        await askUnlessConnectionLost(
          this.deps.host.node,
          addr,
          BrokerActor.LOCKS,
          { type: "UNLOCK_BATCH_MQ", ...req },
          { timeoutMs: LOCK_ALL_REQUEST_TIMEOUT_MS },
        ).catch(() => undefined);
      }),
    );
  }

  /** Runs a rebalance again after {@link LOCK_FAILED_REBALANCE_DELAY_MS} (one pending at a time). */
  private rebalanceLater(): void {
    if (this.stopped || this.timers.size > 0 || !this.deps.rebalanceNow) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.stopped) this.deps.rebalanceNow?.();
    }, LOCK_FAILED_REBALANCE_DELAY_MS);
    this.timers.add(t);
  }

  /** Stops: no more requests but unlocks, timers cleared. */
  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

/** Events of {@link queueLocksMachine}. */
export type QueueLocksEvent = { type: "LOCK_ALL" } | { type: "STOP" };

export interface QueueLocksContext {
  locks: QueueLocks;
  intervalMs: number;
  firstDelayMs: number;
}

/**
 * The lock renewal actor: lockAll after `firstDelayMs` (1 s), then every `intervalMs` (20 s), or
 * at once on LOCK_ALL; one round at a time.
 */
export const queueLocksMachine = setup({
  types: {
    context: {} as QueueLocksContext,
    events: {} as QueueLocksEvent,
    input: {} as { locks: QueueLocks; intervalMs?: number; firstDelayMs?: number },
  },
  actors: {
    lockAll: fromPromise<void, { locks: QueueLocks }>(({ input }) => input.locks.lockAll()),
  },
  delays: {
    first: ({ context }) => context.firstDelayMs,
    interval: ({ context }) => context.intervalMs,
  },
}).createMachine({
  id: "queueLocks",
  context: ({ input }) => ({
    locks: input.locks,
    intervalMs: input.intervalMs ?? DEFAULT_REBALANCE_LOCK_INTERVAL_MS,
    firstDelayMs: input.firstDelayMs ?? REBALANCE_LOCK_FIRST_DELAY_MS,
  }),
  initial: "starting",
  states: {
    starting: {
      after: { first: "locking" },
      on: { LOCK_ALL: "locking", STOP: "stopped" },
    },
    waiting: {
      after: { interval: "locking" },
      on: { LOCK_ALL: "locking", STOP: "stopped" },
    },
    locking: {
      invoke: {
        src: "lockAll",
        input: ({ context }) => ({ locks: context.locks }),
        onDone: "waiting",
        onError: "waiting",
      },
      on: { STOP: "stopped" },
    },
    stopped: { type: "final", entry: ({ context }) => context.locks.stop() },
  },
});
