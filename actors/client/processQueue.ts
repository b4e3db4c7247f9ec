/**
 * The client's cache of pulled-but-not-yet-committed messages of one queue (RocketMQ
 * `ProcessQueue`): messages sorted by queue offset, counts and bytes for flow control, the
 * offset-to-commit rule for concurrent consumption and the take/commit/rollback cycle of orderly
 * consumption. Pure data structure: the consume workers and the pull service drive it.
 */
import { monotonicNow } from "../../transport/clock.ts";
import { MessageConst } from "../../transport/protocol.ts";

/** What the process queue needs of a message. */
export interface ProcessQueueMessage {
  queueOffset: number;
  body: Uint8Array;
  properties?: Readonly<Record<string, string>>;
}

/** Client view of an orderly lock's validity after the last successful LOCK_BATCH_MQ. */
export const REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000;
/** The lock source of a process queue whose lock no lost connection voids. */
const NEVER_LOST = (): number => Number.NEGATIVE_INFINITY;
/** A queue not pulled for this long is considered stale by the rebalancer. */
export const PULL_MAX_IDLE_TIME_MS = 120_000;
/** At most this many expired messages are sent back per cleaning round. */
export const CLEAN_EXPIRED_MAX_MESSAGES = 16;
/** @default 15 — RocketMQ's consumeTimeout, in minutes. */
export const DEFAULT_CONSUME_TIMEOUT_MINUTES = 15;

const MIB = 1024 * 1024;

/**
 * An offset-keyed ordered map tuned for the process queue's access pattern: batches arrive in
 * increasing offset order (append, O(1)), consumption removes from the front (a moving head),
 * out-of-order inserts and removals are rare and paid by binary search + splice or lazy deletion.
 */
class OffsetSortedMap<M> {
  /** sorted, unique; entries before `head` and some after it may be stale (deleted from `map`) */
  private keys: number[] = [];
  private head = 0;
  private stale = 0;
  private readonly map = new Map<number, M>();

  get size(): number {
    return this.map.size;
  }
  has(offset: number): boolean {
    return this.map.has(offset);
  }
  get(offset: number): M | undefined {
    return this.map.get(offset);
  }
  firstKey(): number | undefined {
    return this.map.size > 0 ? this.keys[this.head] : undefined;
  }
  lastKey(): number | undefined {
    return this.map.size > 0 ? this.keys[this.keys.length - 1] : undefined;
  }

  /** Inserts or replaces; returns the message previously stored at that offset. */
  set(offset: number, msg: M): M | undefined {
    const old = this.map.get(offset);
    this.map.set(offset, msg);
    if (old !== undefined) return old;
    const keys = this.keys;
    if (keys.length === 0 || offset > keys[keys.length - 1]!) {
      keys.push(offset);
      return undefined;
    }
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (keys[mid]! < offset) lo = mid + 1;
      else hi = mid;
    }
    if (keys[lo] === offset)
      this.stale--; // revive a stale slot
    else keys.splice(lo, 0, offset);
    if (lo < this.head) this.head = lo;
    return undefined;
  }

  delete(offset: number): M | undefined {
    const old = this.map.get(offset);
    if (old === undefined) return undefined;
    this.map.delete(offset);
    this.stale++;
    this.normalize();
    return old;
  }

  pollFirst(): [number, M] | undefined {
    const k = this.firstKey();
    if (k === undefined) return undefined;
    return [k, this.delete(k)!];
  }

  clear(): void {
    this.keys = [];
    this.head = 0;
    this.stale = 0;
    this.map.clear();
  }

  /** Messages in offset order. */
  *values(): IterableIterator<M> {
    for (let i = this.head; i < this.keys.length; i++) {
      const m = this.map.get(this.keys[i]!);
      if (m !== undefined) yield m;
    }
  }

  /** Keeps `keys[head]` and the last key live, and the array from growing with stale slots. */
  private normalize(): void {
    const keys = this.keys;
    if (this.map.size === 0) {
      this.clear();
      return;
    }
    while (this.head < keys.length && !this.map.has(keys[this.head]!)) this.head++;
    while (keys.length > 0 && !this.map.has(keys[keys.length - 1]!)) {
      keys.pop();
      this.stale--;
    }
    if (this.stale > 64 && this.stale > this.map.size) {
      this.keys = keys.filter((k) => this.map.has(k));
      this.head = 0;
      this.stale = 0;
    }
  }
}

export interface ProcessQueueOptions {
  /**
   * clock of the lock, pull and consume timestamps, injectable for tests @default monotonicNow (a
   * wall clock step must not expire a lock or a pull; these times are never shown or sent)
   */
  now?: () => number;
}

/** The pulled messages of one assigned queue, sorted by queue offset. */
export class ProcessQueue<M extends ProcessQueueMessage = ProcessQueueMessage> {
  private readonly msgTreeMap = new OffsetSortedMap<M>();
  /** orderly: messages handed to the listener and not yet committed */
  private readonly consumingMsgOrderlyTreeMap = new OffsetSortedMap<M>();
  private readonly now: () => number;
  /** the clock of CONSUME_START_TIME, a wall time users see in the message's properties */
  private readonly wallNow: () => number;

  /** messages held (both maps) */
  msgCount = 0;
  /** sum of body bytes held */
  msgSize = 0;
  /** offset of the most recently inserted new message */
  queueOffsetMax = 0;
  /** the rebalancer took the queue away: stop pulling and consuming */
  dropped = false;
  /** orderly: the broker lock is held */
  locked = false;
  lastLockTimestamp: number;
  /**
   * orderly: when the connection to the broker that granted the lock was last lost (monotonic ms). A
   * lock granted before then is void: that broker may have restarted with an empty lock table and
   * given the queue to another member.
   */
  lockLostAt: () => number = NEVER_LOST;
  /**
   * clustering, concurrent: when this queue's committed offset was last read from the broker
   * (monotonic ms, the time the query was sent), see {@link isOffsetStale}
   */
  offsetReadAt: number;
  /** clustering, concurrent: when the connection to the queue's broker was last lost (monotonic ms) */
  offsetLostAt: () => number = NEVER_LOST;
  /** a check found the offset stale: it stays so until read again ({@link offsetRead}), whatever the route says meanwhile */
  private offsetStaleSeen = false;
  lastPullTimestamp: number;
  lastConsumeTimestamp: number;
  /** orderly: a consume task is running or scheduled for this queue */
  consuming = false;
  /** backlog estimate from the last pull: broker max offset - last offset */
  msgAccCnt = 0;
  /** orderly: failed attempts to release the queue during rebalance */
  tryUnlockTimes = 0;

  constructor(options: ProcessQueueOptions = {}) {
    this.now = options.now ?? monotonicNow;
    // a test's clock stands in for both
    this.wallNow = options.now ?? Date.now;
    const t = this.now();
    this.lastLockTimestamp = t;
    this.offsetReadAt = t;
    this.lastPullTimestamp = t;
    this.lastConsumeTimestamp = t;
  }

  /**
   * Adds a pulled batch. Only offsets not already held count. Returns true when the queue went
   * from idle to having work, i.e. an orderly consumer must schedule a consume task.
   */
  putMessages(msgs: readonly M[]): boolean {
    let valid = 0;
    for (const msg of msgs) {
      if (this.msgTreeMap.set(msg.queueOffset, msg) === undefined) {
        valid++;
        this.queueOffsetMax = msg.queueOffset;
        this.msgSize += msg.body.length;
      }
    }
    this.msgCount += valid;
    let dispatchToConsume = false;
    if (this.msgTreeMap.size > 0 && !this.consuming) {
      dispatchToConsume = true;
      this.consuming = true;
    }
    const last = msgs[msgs.length - 1];
    const maxOffset = last?.properties?.[MessageConst.MAX_OFFSET];
    if (last && maxOffset !== undefined) {
      const acc = Number(maxOffset) - last.queueOffset;
      if (acc > 0) this.msgAccCnt = acc;
    }
    return dispatchToConsume;
  }

  /**
   * Concurrent acknowledgement: removes the consumed (or sent-back) messages and returns the
   * offset to commit — the smallest offset still in flight, or (highest inserted + 1) when none
   * is; -1 when the queue held nothing.
   */
  removeMessages(msgs: readonly M[]): number {
    this.lastConsumeTimestamp = this.now();
    if (this.msgTreeMap.size === 0) return -1;
    let result = this.queueOffsetMax + 1;
    let removed = 0;
    for (const msg of msgs) {
      const prev = this.msgTreeMap.delete(msg.queueOffset);
      if (prev !== undefined) {
        removed++;
        this.msgSize -= prev.body.length;
      }
    }
    this.msgCount -= removed;
    if (this.msgCount === 0) this.msgSize = 0;
    const first = this.msgTreeMap.firstKey();
    if (first !== undefined) result = first;
    return result;
  }

  /** Offset distance between the first and last held message (0 when empty). */
  get maxSpan(): number {
    const first = this.msgTreeMap.firstKey();
    const last = this.msgTreeMap.lastKey();
    return first === undefined || last === undefined ? 0 : last - first;
  }

  /** Whole MiB held, as compared with pullThresholdSizeForQueue. */
  get cachedMsgMiB(): number {
    return Math.floor(this.msgSize / MIB);
  }

  /** Messages waiting to be consumed (not counting orderly in-flight ones). */
  get waitingCount(): number {
    return this.msgTreeMap.size;
  }

  containsMessage(msg: Pick<M, "queueOffset">): boolean {
    return this.msgTreeMap.has(msg.queueOffset);
  }

  /** The smallest held offset, or undefined. */
  firstOffset(): number | undefined {
    return this.msgTreeMap.firstKey();
  }

  /** Messages waiting, in offset order. */
  messages(): M[] {
    return [...this.msgTreeMap.values()];
  }

  /** Orderly: moves up to `n` smallest messages to the in-flight map; none left => `consuming` off. */
  takeMessages(n: number): M[] {
    this.lastConsumeTimestamp = this.now();
    const result: M[] = [];
    for (let i = 0; i < n; i++) {
      const e = this.msgTreeMap.pollFirst();
      if (!e) break;
      result.push(e[1]);
      this.consumingMsgOrderlyTreeMap.set(e[0], e[1]);
    }
    if (result.length === 0) this.consuming = false;
    return result;
  }

  /** Orderly: the in-flight messages are done; returns last offset + 1, or -1 when none. */
  commit(): number {
    const last = this.consumingMsgOrderlyTreeMap.lastKey();
    if (last === undefined) return -1;
    this.msgCount -= this.consumingMsgOrderlyTreeMap.size;
    if (this.msgCount === 0) this.msgSize = 0;
    else for (const m of this.consumingMsgOrderlyTreeMap.values()) this.msgSize -= m.body.length;
    this.consumingMsgOrderlyTreeMap.clear();
    return last + 1;
  }

  /** Orderly: puts these in-flight messages back to be consumed again, in offset order. */
  makeMessageToConsumeAgain(msgs: readonly M[]): void {
    for (const m of msgs) {
      this.consumingMsgOrderlyTreeMap.delete(m.queueOffset);
      this.msgTreeMap.set(m.queueOffset, m);
    }
  }

  /** Orderly: puts every in-flight message back. */
  rollback(): void {
    for (const m of this.consumingMsgOrderlyTreeMap.values()) this.msgTreeMap.set(m.queueOffset, m);
    this.consumingMsgOrderlyTreeMap.clear();
  }

  /** Orderly: messages handed to the listener and not yet committed. */
  get inFlightCount(): number {
    return this.consumingMsgOrderlyTreeMap.size;
  }

  /** Empties everything. */
  clear(): void {
    this.msgTreeMap.clear();
    this.consumingMsgOrderlyTreeMap.clear();
    this.msgCount = 0;
    this.msgSize = 0;
    this.queueOffsetMax = 0;
  }

  /**
   * The lock was not renewed within `maxLiveMs` (the consumer's rebalanceLockMaxLiveTimeMs), or the
   * connection to the broker that granted it was lost since ({@link lockLostAt}).
   */
  isLockExpired(now: number = this.now(), maxLiveMs = REBALANCE_LOCK_MAX_LIVE_TIME_MS): boolean {
    return now - this.lastLockTimestamp > maxLiveMs || this.lockLostAt() >= this.lastLockTimestamp;
  }

  /** Locked, renewed within `maxLiveMs` and granted since the last loss of its broker's connection: the lock holds in the client's view. */
  isLockHeld(now: number = this.now(), maxLiveMs = REBALANCE_LOCK_MAX_LIVE_TIME_MS): boolean {
    return this.locked && !this.isLockExpired(now, maxLiveMs);
  }

  /**
   * Clustering, concurrent: the connection to the queue's broker was lost since its committed offset
   * was read ({@link offsetLostAt}). The broker may have dropped this member from the group meanwhile
   * (channelExpiredTimeoutMs) and given the queue to another member, which consumed and committed
   * it: the offset in memory may be behind the group's, and must be neither committed nor pulled
   * from until the broker's is read again. (A commit the broker acknowledged cannot make it fresh:
   * none is sent for a stale queue, so every acknowledgement predates the loss or a later read.)
   */
  isOffsetStale(): boolean {
    // sticky: the broker's master may move (a new address, or none in the route for a while), and
    // a loss seen on the old address must not be forgotten with it
    if (!this.offsetStaleSeen && this.offsetLostAt() >= this.offsetReadAt) this.offsetStaleSeen = true;
    return this.offsetStaleSeen;
  }

  /** Takes over `prev`'s view of its offset's freshness (the same queue restarted with a new process queue). */
  takeOffsetStateOf(prev: ProcessQueue<M>): void {
    this.offsetReadAt = prev.offsetReadAt;
    this.offsetLostAt = prev.offsetLostAt;
    this.offsetStaleSeen = prev.offsetStaleSeen;
  }

  /** The queue's committed offset was read from the broker at `at` (monotonic ms, the time the query was sent). */
  offsetRead(at: number): void {
    this.offsetReadAt = at;
    this.offsetStaleSeen = false;
  }

  isPullExpired(now: number = this.now()): boolean {
    return now - this.lastPullTimestamp > PULL_MAX_IDLE_TIME_MS;
  }

  /**
   * Concurrent consumption: the leading messages (at most 16) that have been in the listener
   * longer than `consumeTimeoutMinutes`, judged by their CONSUME_START_TIME property. They are
   * NOT removed: the caller sends each back (delay level 3) and, once that succeeded, acknowledges
   * it with {@link removeMessages}, as RocketMQ does, so a failed send-back loses nothing.
   */
  cleanExpiredMessages(consumeTimeoutMinutes: number = DEFAULT_CONSUME_TIMEOUT_MINUTES, now: number = this.wallNow()): M[] {
    const timeoutMs = consumeTimeoutMinutes * 60_000;
    const result: M[] = [];
    for (const m of this.msgTreeMap.values()) {
      if (result.length >= CLEAN_EXPIRED_MAX_MESSAGES) break;
      const start = m.properties?.[MessageConst.CONSUME_START_TIME];
      if (start === undefined || start === "" || !(now - Number(start) > timeoutMs)) break;
      result.push(m);
    }
    return result;
  }
}
