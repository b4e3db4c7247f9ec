/**
 * Orderly consumption (RocketMQ's `ConsumeMessageOrderlyService`, reference §12.3 and §15): each
 * queue is consumed strictly one batch at a time, in queue-offset order, under a per-queue local
 * lock, and — when clustering — only while this client holds the queue's broker lock and that
 * lock has not expired in the client's view.
 *
 * Listener results: SUCCESS commits the batch (the offset moves to last + 1), and so do RocketMQ's
 * deprecated COMMIT and ROLLBACK, as RocketMQ does with autoCommit. A listener that sets
 * `ctx.autoCommit = false` for its batch commits by hand, as RocketMQ does: SUCCESS leaves the
 * batch taken but uncommitted, COMMIT commits everything taken, ROLLBACK puts everything taken
 * back and pauses the queue for the suspend time.
 * SUSPEND_CURRENT_QUEUE_A_MOMENT (or a throw, or a result that is no status, both logged at warn) puts the batch back and pauses the
 * queue for `suspendCurrentQueueTimeMillis` (1 s); the same messages come again, in the same order, with
 * reconsumeTimes + 1, and nothing later in the queue is delivered meanwhile. A message that has
 * reached `maxReconsumeTimes` goes to the group's dead-letter queue (CONSUMER_SEND_MSG_BACK with
 * delay level -1 and the local reconsumeTimes, which the stored copy does not know) and the queue
 * moves past it; broadcasting, which has no dead-letter queue, skips it with a warning.
 *
 * Queues are consumed in parallel, at most `consumeThreads` listener calls at a time across them
 * (RocketMQ's consume thread pool): each batch takes a turn first, and a queue whose batch is done
 * queues up behind those waiting for one, so busy queues take turns.
 */
import { setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { type MessageModel, type MessageQueue, mqKey } from "../../transport/protocol.ts";
import { LogThrottle } from "../logger.ts";
import {
  consumeLog,
  DEFAULT_CONSUME_THREADS,
  LISTENER_FAILURE_LOG_INTERVAL_MS,
  UNKNOWN_STATUS_LOG_INTERVAL_MS,
  warnListenerThrew,
  warnUnknownStatus,
} from "./consumeService.ts";
import type { OffsetStore } from "./offsetStore.ts";
import type { ProcessQueue } from "./processQueue.ts";
import { DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS } from "./queueLocks.ts";
import { restoreRetryTopic, type SendBackFn } from "./sendBack.ts";

/**
 * Orderly consumers retry in place forever unless configured (Java's Integer.MAX_VALUE). The
 * broker's retry policy has the same rule; the client keeps its own copy because client code
 * never imports broker code.
 */
export const ORDERLY_DEFAULT_MAX_RECONSUME_TIMES = 2_147_483_647;
/** @default 1000 — pause of a suspended queue. */
export const DEFAULT_SUSPEND_CURRENT_QUEUE_TIME_MS = 1_000;
/** Bounds of a requested suspend time. */
export const MIN_SUSPEND_TIME_MS = 10;
export const MAX_SUSPEND_TIME_MS = 30_000;
/** A queue consumed without pause for this long yields to the others (MAX_TIME_CONSUME_CONTINUOUSLY). */
export const MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000;
/** A queue found without a valid lock tries to lock after this long... */
export const TRY_LOCK_LATER_MS = 100;
/** ...and consumes again this soon when the lock was obtained, */
export const RECONSUME_AFTER_LOCK_MS = 10;
/** ...or this late when it was not. */
export const RECONSUME_AFTER_LOCK_FAILED_MS = 3_000;
/** Delay level that sends a message straight to the dead-letter queue. */
export const DLQ_DELAY_LEVEL = -1;
/** How long close waits for the batches in hand so their offsets are committed. */
export const ORDERLY_CLOSE_GRACE_MS = 3_000;
/** Messages a broadcasting orderly consumer skips are logged at most once per this long per consumer, with the count held back. */
export const ORDERLY_SKIP_LOG_INTERVAL_MS = 30_000;

/**
 * What a broadcasting orderly consumer does with a message that exhausted `maxReconsumeTimes`
 * ({@link ConsumeOrderlyDeps.onSkipped}): it has no dead-letter queue, so the queue moves past it,
 * and a warning names it (message id, queue, offset, retries). One line per interval per consumer,
 * with how many more were skipped: with a low maxReconsumeTimes a listener failing every message
 * would skip at its consume rate.
 */
export function orderlySkipLogger(group: string, intervalMs = ORDERLY_SKIP_LOG_INTERVAL_MS): (msg: MessageExt) => void {
  const throttle = new LogThrottle(intervalMs);
  return (m) => {
    const suppressed = throttle.pass("");
    if (suppressed === undefined) return;
    const q = `${m.topic}@${m.brokerName}@${m.queueId}`;
    consumeLog().warn(
      {
        group,
        msgId: m.msgId,
        topic: m.topic,
        brokerName: m.brokerName,
        queueId: m.queueId,
        queueOffset: m.queueOffset,
        reconsumeTimes: m.reconsumeTimes,
        suppressed,
      },
      `Broadcasting orderly group ${group} skipped message ${m.msgId} (${q}, offset ${m.queueOffset}) after ${m.reconsumeTimes} ` +
        "retries (maxReconsumeTimes): a broadcasting consumer has no dead-letter queue, so the message is dropped and the queue moves on. " +
        `Raise maxReconsumeTimes (-1: unlimited) to keep retrying it (logged at most once every ${intervalMs / 1000} s per consumer; ` +
        "suppressed: the messages skipped and not logged since the last line).",
    );
  };
}

/**
 * What an orderly listener returns; a throw counts as SUSPEND_CURRENT_QUEUE_A_MOMENT. RocketMQ's
 * deprecated COMMIT and ROLLBACK act as SUCCESS unless the listener set `ctx.autoCommit = false`.
 */
export type ConsumeOrderlyStatus = "SUCCESS" | "SUSPEND_CURRENT_QUEUE_A_MOMENT" | "COMMIT" | "ROLLBACK";

/** Results taken as they are: the orderly ones, and the concurrent names (CONSUME_SUCCESS as SUCCESS, RECONSUME_LATER as SUSPEND). */
const KNOWN_STATUSES: ReadonlySet<string> = new Set([
  "SUCCESS",
  "SUSPEND_CURRENT_QUEUE_A_MOMENT",
  "COMMIT",
  "ROLLBACK",
  "CONSUME_SUCCESS",
  "RECONSUME_LATER",
]);

/** Given to an orderly listener with each batch. */
export interface ConsumeOrderlyContext {
  messageQueue: MessageQueue;
  /**
   * true (each batch's default): SUCCESS commits the batch. Set false for this batch to commit by
   * hand (RocketMQ's deprecated mode): SUCCESS leaves it taken but uncommitted, COMMIT commits
   * everything taken so far, ROLLBACK puts everything taken since the last commit back and
   * redelivers it after the suspend time.
   */
  autoCommit: boolean;
  /** pause after SUSPEND_CURRENT_QUEUE_A_MOMENT for this batch; -1 (or not a finite number) = the consumer's setting */
  suspendCurrentQueueTimeMillis: number;
}

export type OrderlyListener = (msgs: MessageExt[], ctx: ConsumeOrderlyContext) => Promise<string> | string;

export interface ConsumeOrderlySettings {
  /** listener calls at a time across queues (one queue is always one at a time) @default 20 */
  consumeThreads: number;
  consumeMessageBatchMaxSize: number;
  suspendCurrentQueueTimeMillis: number;
  maxReconsumeTimes: number;
  /** the client's view of a broker lock's validity after its last renewal */
  lockMaxLiveTimeMs: number;
}

export function defaultConsumeOrderlySettings(): ConsumeOrderlySettings {
  return {
    consumeThreads: DEFAULT_CONSUME_THREADS,
    consumeMessageBatchMaxSize: 1,
    suspendCurrentQueueTimeMillis: DEFAULT_SUSPEND_CURRENT_QUEUE_TIME_MS,
    maxReconsumeTimes: ORDERLY_DEFAULT_MAX_RECONSUME_TIMES,
    lockMaxLiveTimeMs: DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS,
  };
}

/** Suspend time of a batch: -1 (or a listener's non-finite value) => the consumer's setting, clamped to 10 ms .. 30 s. */
export function orderlySuspendTime(requested: number, consumerSetting: number): number {
  // NaN would survive the clamp and the timer would fire at once: a queue retried without pause
  const t = requested === -1 || !Number.isFinite(requested) ? consumerSetting : requested;
  return Math.min(MAX_SUSPEND_TIME_MS, Math.max(MIN_SUSPEND_TIME_MS, t));
}

export interface ConsumeOrderlyDeps {
  group: string;
  model: MessageModel;
  listener: OrderlyListener;
  offsetStore: OffsetStore;
  settings: ConsumeOrderlySettings;
  /** clustering: (re)locks a queue on its broker and marks its process queue locked */
  lockQueue?(mq: MessageQueue, pq: ProcessQueue<MessageExt>): Promise<boolean>;
  /** clustering: sends messages back (delay level -1 = dead-letter queue); resolves with those not sent */
  sendBack?: SendBackFn;
  /** a process queue became empty after a commit: the pull offset may be committed */
  onDrained?(mq: MessageQueue, pq: ProcessQueue<MessageExt>): void;
  /** a message that exhausted its retries could not be parked anywhere (broadcasting) and was skipped */
  onSkipped?(msg: MessageExt): void;
}

/** Counters for tests, benchmarks and the inspector. */
export interface ConsumeOrderlyStats {
  batches: number;
  consumed: number;
  suspended: number;
  deadLettered: number;
  lockWaits: number;
}

/**
 * Turns to call the listener, `size` at a time, given in the order they were asked for: a queue
 * that asks again after its batch waits behind the queues already waiting.
 */
export class ConsumeTurns {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  private head = 0;

  constructor(readonly size: number) {
    this.free = size;
  }

  /** Turns in use now. */
  get inUse(): number {
    return this.size - this.free;
  }

  /** Takes a turn if one is free and nobody waits; false otherwise. */
  tryTake(): boolean {
    if (this.free === 0) return false;
    this.free--;
    return true;
  }

  /** Resolves when the caller has a turn. */
  take(): Promise<void> {
    if (this.tryTake()) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Gives a turn back: to the first waiting, if any. */
  give(): void {
    if (this.head < this.waiting.length) {
      const next = this.waiting[this.head]!;
      this.waiting[this.head++] = undefined as never;
      if (this.head === this.waiting.length) {
        this.waiting.length = 0;
        this.head = 0;
      }
      next();
    } else this.free++;
  }
}

/** What one turn of a queue's loop did: the batch taken and the listener's answer, for processResult. */
interface ConsumedBatch {
  taken: MessageExt[];
  msgs: MessageExt[];
  status: string;
  ctx: ConsumeOrderlyContext;
}

/** Per-process-queue state: the local lock and what is scheduled. */
interface QueueRun {
  mq: MessageQueue;
  /** mqKey(mq): the queue's process queues, old and new, share it */
  key: string;
  pq: ProcessQueue<MessageExt>;
  /** the consume loop in progress or waiting for the queue's previous one (the local lock), or null */
  running: Promise<void> | null;
  /** work arrived while the loop ran: run once more */
  again: boolean;
  timer: NodeJS.Timeout | null;
  /** set while the rebalancer gives the queue up: the batch in hand still commits */
  releasing: boolean;
  /** offsets already parked in the dead-letter queue, skipped when their batch comes again */
  deadLettered: Set<number>;
  /** the listener set autoCommit false for its last batch: a batch it never sees follows suit */
  manualCommit: boolean;
}

/** The orderly consumption of one push consumer. */
export class ConsumeOrderlyService {
  readonly stats: ConsumeOrderlyStats = { batches: 0, consumed: 0, suspended: 0, deadLettered: 0, lockWaits: 0 };
  private readonly runs = new Map<ProcessQueue<MessageExt>, QueueRun>();
  /**
   * Per queue key, the loop that runs (or waits) last: a process queue that replaced a dropped
   * one (offset reset, lock regained) must not start while the old one's batch is in the listener
   * (RocketMQ's MessageQueueLock is per message queue, not per process queue).
   */
  private readonly lastLoops = new Map<string, Promise<void>>();
  private stopped = false;
  private stopping: Promise<void> | null = null;
  private readonly listenerFailureLog = new LogThrottle(LISTENER_FAILURE_LOG_INTERVAL_MS);
  private readonly unknownStatusLog = new LogThrottle(UNKNOWN_STATUS_LOG_INTERVAL_MS);
  /** listener calls across queues: consumeThreads at a time */
  private readonly turns: ConsumeTurns;

  constructor(private readonly deps: ConsumeOrderlyDeps) {
    this.turns = new ConsumeTurns(deps.settings.consumeThreads);
  }

  /** A pulled batch was put into `pq`; when the queue went from idle to busy, start consuming it. */
  submit(mq: MessageQueue, pq: ProcessQueue<MessageExt>, dispatchToConsume: boolean): void {
    if (dispatchToConsume) this.schedule(mq, pq, 0);
  }

  /** Consume `pq` now (its lock was just renewed, or it was told to wait). */
  wake(mq: MessageQueue, pq: ProcessQueue<MessageExt>): void {
    if (pq.waitingCount > 0) this.schedule(mq, pq, 0);
  }

  /** Queues with a consume loop running now. */
  get activeCount(): number {
    let n = 0;
    for (const r of this.runs.values()) if (r.running) n++;
    return n;
  }

  /**
   * The rebalancer gives `pq` up (already marked dropped): waits for the batch in hand, which
   * still commits its offset, for at most `maxWaitMs`. Resolves true when no batch is in hand
   * any more; false when the wait gave up, and the batch, ending later, commits nothing.
   */
  async release(pq: ProcessQueue<MessageExt>, maxWaitMs: number): Promise<boolean> {
    const run = this.runs.get(pq);
    if (!run) return true;
    run.releasing = true;
    if (run.timer) clearTimeout(run.timer);
    run.timer = null;
    if (run.running) {
      let t: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        run.running.then(() => false),
        new Promise<boolean>((r) => (t = setTimeout(() => r(true), maxWaitMs))),
      ]);
      clearTimeout(t);
      if (timedOut) {
        // the queue is unlocked without it: others (or this client, from the broker's newer offset)
        // may consume past the batch, whose commit would then move the offset back (RocketMQ commits
        // nothing of a dropped process queue)
        run.releasing = false;
        return false;
      }
    }
    this.forget(run);
    return true;
  }

  /** Stops taking work; resolves when the batches in hand are done (committed) or `graceMs` passed. */
  stop(graceMs = ORDERLY_CLOSE_GRACE_MS): Promise<void> {
    if (!this.stopping) this.stopping = this.doStop(graceMs);
    return this.stopping;
  }

  private async doStop(graceMs: number): Promise<void> {
    this.stopped = true;
    const inHand: Promise<void>[] = [];
    for (const r of this.runs.values()) {
      if (r.timer) clearTimeout(r.timer);
      r.timer = null;
      if (r.running) inHand.push(r.running);
    }
    if (inHand.length === 0) return;
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(inHand), new Promise<void>((r) => (t = setTimeout(r, graceMs)))]);
    clearTimeout(t);
  }

  private runOf(mq: MessageQueue, pq: ProcessQueue<MessageExt>): QueueRun {
    let run = this.runs.get(pq);
    if (!run) {
      // dropped process queues that are idle (e.g. an empty one replaced after an offset reset) are done
      for (const r of this.runs.values()) if (r.pq.dropped && !r.running) this.forget(r);
      run = {
        mq,
        key: mqKey(mq),
        pq,
        running: null,
        again: false,
        timer: null,
        releasing: false,
        deadLettered: new Set(),
        manualCommit: false,
      };
      this.runs.set(pq, run);
    }
    return run;
  }

  /** A dropped process queue with no loop: nothing will use it again, so its cached messages go. */
  private forget(run: QueueRun): void {
    if (run.timer) clearTimeout(run.timer);
    run.timer = null;
    if (this.runs.get(run.pq) === run) this.runs.delete(run.pq);
  }

  /** Runs the queue's consume loop after `delayMs`, unless it runs or is scheduled already. */
  private schedule(mq: MessageQueue, pq: ProcessQueue<MessageExt>, delayMs: number): void {
    if (this.stopped || pq.dropped) return;
    const run = this.runOf(mq, pq);
    if (run.running) {
      if (delayMs === 0) run.again = true;
      return;
    }
    // a pending run (suspend pause, lock retry) is never brought forward
    if (run.timer) return;
    run.timer = setTimeout(() => {
      run.timer = null;
      this.start(run);
    }, delayMs);
  }

  private start(run: QueueRun): void {
    if (run.running) return;
    if (run.pq.dropped) this.forget(run);
    if (this.stopped || run.pq.dropped) return;
    run.again = false;
    const previous = this.lastLoops.get(run.key);
    let failed = false;
    const running: Promise<void> = (previous ? previous.then(() => this.consumeLoop(run)) : this.consumeLoop(run))
      .catch(() => {
        failed = true;
        // what the failed loop had taken but neither committed nor put back comes again, in order:
        // the next batch's commit would otherwise move the offset past it unconsumed
        run.pq.rollback();
      })
      .finally(() => {
        run.running = null;
        if (this.lastLoops.get(run.key) === running) this.lastLoops.delete(run.key);
        if (run.pq.dropped) this.forget(run);
        // a failure of the bookkeeping (not of the listener) retries the queue after a pause; scheduled
        // here, once the run no longer counts as running, or schedule() would take it as running still
        else if (failed) this.schedule(run.mq, run.pq, orderlySuspendTime(-1, this.deps.settings.suspendCurrentQueueTimeMillis));
        else if (run.again && !run.timer && !this.stopped) this.schedule(run.mq, run.pq, 0);
      });
    run.running = running;
    this.lastLoops.set(run.key, running);
  }

  private lockValid(pq: ProcessQueue<MessageExt>, now = monotonicNow()): boolean {
    if (this.deps.model === "BROADCASTING") return true;
    return pq.isLockHeld(now, this.deps.settings.lockMaxLiveTimeMs);
  }

  /** Without a valid lock: try to lock in a moment, then consume soon (locked) or much later (not). */
  private tryLockLater(run: QueueRun): void {
    this.stats.lockWaits++;
    const { mq, pq } = run;
    run.timer = setTimeout(() => {
      run.timer = null;
      if (pq.dropped) this.forget(run);
      if (this.stopped || pq.dropped) return;
      const lock = this.deps.lockQueue ? this.deps.lockQueue(mq, pq) : Promise.resolve(false);
      void lock.then(
        (ok) => this.schedule(mq, pq, ok ? RECONSUME_AFTER_LOCK_MS : RECONSUME_AFTER_LOCK_FAILED_MS),
        () => this.schedule(mq, pq, RECONSUME_AFTER_LOCK_FAILED_MS),
      );
    }, TRY_LOCK_LATER_MS);
  }

  /** One queue, one batch at a time, until it is empty, suspended, unlocked, dropped or yields. */
  private async consumeLoop(run: QueueRun): Promise<void> {
    const began = monotonicNow();
    for (;;) {
      if (this.stopped || run.pq.dropped) return;
      if (!this.turns.tryTake()) await this.turns.take();
      let batch: ConsumedBatch | null;
      try {
        batch = await this.consumeBatch(run, began);
      } finally {
        this.turns.give();
      }
      if (!batch || !(await this.processResult(run, batch.taken, batch.msgs, batch.status, batch.ctx))) return;
    }
  }

  /** One turn: the queue's next batch to the listener; null when the loop ends here (stopped, dropped, unlocked, yields or empty). */
  private async consumeBatch(run: QueueRun, began: number): Promise<ConsumedBatch | null> {
    const { mq, pq } = run;
    // checked again: the wait for the turn may have been long
    if (this.stopped || pq.dropped) return null;
    const now = monotonicNow();
    if (!this.lockValid(pq, now)) {
      this.tryLockLater(run);
      return null;
    }
    if (now - began > MAX_TIME_CONSUME_CONTINUOUSLY_MS) {
      run.again = true;
      return null;
    }
    const taken = pq.takeMessages(this.deps.settings.consumeMessageBatchMaxSize);
    if (taken.length === 0) return null;
    // messages already parked in the DLQ (their batch was put back for the others) are done
    const msgs = run.deadLettered.size === 0 ? taken : taken.filter((m) => !run.deadLettered.has(m.queueOffset));
    let status: string = "SUCCESS";
    const ctx: ConsumeOrderlyContext = { messageQueue: mq, autoCommit: true, suspendCurrentQueueTimeMillis: -1 };
    if (msgs.length > 0) {
      restoreRetryTopic(msgs, this.deps.group);
      let returned: unknown;
      try {
        // its own array: a listener that empties it must not change what is committed or put back
        returned = await this.deps.listener(msgs.slice(), ctx);
        status = typeof returned === "string" && KNOWN_STATUSES.has(returned) ? returned : "SUSPEND_CURRENT_QUEUE_A_MOMENT";
        if (status !== returned) this.warnUnknownStatus(mq, returned);
      } catch (err) {
        status = "SUSPEND_CURRENT_QUEUE_A_MOMENT";
        warnListenerThrew(
          this.listenerFailureLog,
          this.deps.group,
          mq,
          err,
          "orderly listener",
          "SUSPEND_CURRENT_QUEUE_A_MOMENT: nothing later in the queue is delivered until it is consumed",
        );
      }
      this.stats.batches++;
      run.manualCommit = ctx.autoCommit === false;
    } else if (run.manualCommit) {
      // only dead-lettered messages: no commit of what a manual-commit listener has not committed
      ctx.autoCommit = false;
    }
    return { taken, msgs, status, ctx };
  }

  /**
   * A result that is no consume status counts as SUSPEND_CURRENT_QUEUE_A_MOMENT, as RocketMQ's null
   * does (which it logs); said once per interval, since a typo would hold the queue back for good.
   */
  private warnUnknownStatus(mq: MessageQueue, status: unknown): void {
    warnUnknownStatus(
      this.unknownStatusLog,
      this.deps.group,
      mq,
      status,
      "orderly listener",
      "an orderly consume status: the batch counts as SUSPEND_CURRENT_QUEUE_A_MOMENT and nothing later in the queue is delivered until it is consumed",
      '"SUCCESS" or "SUSPEND_CURRENT_QUEUE_A_MOMENT"',
    );
  }

  /**
   * Commits, keeps or suspends (RocketMQ's processConsumeResult); returns true when the loop may
   * take the next batch.
   */
  private async processResult(
    run: QueueRun,
    taken: MessageExt[],
    msgs: MessageExt[],
    status: string,
    ctx: ConsumeOrderlyContext,
  ): Promise<boolean> {
    const { pq } = run;
    const autoCommit = ctx.autoCommit !== false;
    const acknowledged = status === "SUCCESS" || status === "CONSUME_SUCCESS" || status === "COMMIT" || status === "ROLLBACK";
    if (status === "ROLLBACK" && !autoCommit) {
      // everything taken since the last commit comes again, in order, after the pause (no retry counted)
      this.stats.suspended++;
      pq.rollback();
      this.suspendLater(run, ctx);
      return false;
    }
    // SUSPEND (or a throw): suspended, unless every message went to the dead-letter queue, which
    // moves the queue past them as SUCCESS does
    if (!acknowledged && (await this.suspendOrDeadLetter(run, taken, msgs, ctx))) return false;
    // SUCCESS, or RocketMQ's deprecated COMMIT / ROLLBACK, which with autoCommit acknowledge like it;
    // autoCommit false: the batch stays taken until a COMMIT (or comes back on a ROLLBACK)
    this.stats.consumed += msgs.length;
    if (autoCommit || status === "COMMIT") this.commit(run);
    return true;
  }

  /** A batch the listener did not consume: retried in place after the pause, or dead-lettered past maxReconsumeTimes; true when suspended. */
  private async suspendOrDeadLetter(run: QueueRun, taken: MessageExt[], msgs: MessageExt[], ctx: ConsumeOrderlyContext): Promise<boolean> {
    this.stats.suspended++;
    const max = this.deps.settings.maxReconsumeTimes;
    const exhausted = msgs.filter((m) => m.reconsumeTimes >= max);
    let mustSuspend = exhausted.length < msgs.length;
    if (exhausted.length > 0) {
      let unsent: MessageExt[] = [];
      if (this.deps.sendBack && this.deps.model === "CLUSTERING")
        // no `queue`: a released queue's batch in hand still ends and commits (for up to 20 s), so a
        // copy to the dead-letter queue made meanwhile is committed past, not delivered again
        unsent = await this.deps.sendBack(exhausted, DLQ_DELAY_LEVEL, { retriedInPlace: true });
      else for (const m of exhausted) this.deps.onSkipped?.(m);
      for (const m of exhausted) {
        if (unsent.includes(m)) continue;
        run.deadLettered.add(m.queueOffset);
        this.stats.deadLettered++;
      }
      if (unsent.length > 0) mustSuspend = true;
    }
    if (!mustSuspend) return false;
    for (const m of msgs) if (!run.deadLettered.has(m.queueOffset)) m.reconsumeTimes++;
    run.pq.makeMessageToConsumeAgain(taken);
    this.suspendLater(run, ctx);
    return true;
  }

  /**
   * Commits everything taken: the offset moves past it, unless the queue was dropped meanwhile or
   * its lock lapsed while the batch was in the listener.
   */
  private commit(run: QueueRun): void {
    const { mq, pq } = run;
    if (!this.lockValid(pq)) {
      // another member may have taken the queue and committed past this batch: committing it would
      // move the offset back. It is put back; the relock rebuilds the queue from the broker's offset.
      pq.rollback();
      return;
    }
    const offset = pq.commit();
    if (run.deadLettered.size > 0) for (const o of run.deadLettered) if (o < offset) run.deadLettered.delete(o);
    if (offset >= 0 && (!pq.dropped || run.releasing)) {
      this.deps.offsetStore.updateOffset(mq, offset, false);
      if (pq.msgCount === 0) this.deps.onDrained?.(mq, pq);
    }
  }

  /** Runs the queue again after the batch's suspend time. */
  private suspendLater(run: QueueRun, ctx: ConsumeOrderlyContext): void {
    if (this.stopped || run.pq.dropped) return;
    run.timer = setTimeout(
      () => {
        run.timer = null;
        this.start(run);
      },
      orderlySuspendTime(ctx.suspendCurrentQueueTimeMillis, this.deps.settings.suspendCurrentQueueTimeMillis),
    );
  }
}

/** Events of {@link consumeOrderlyServiceMachine}. */
export type ConsumeOrderlyServiceEvent = { type: "STOP" };

export interface ConsumeOrderlyServiceContext {
  service: ConsumeOrderlyService;
}

/**
 * The orderly consume actor: owns the service's life (running until STOP). Batches reach it by
 * direct call from the pull service, one call per pulled batch; each queue's loop runs inside.
 */
export const consumeOrderlyServiceMachine = setup({
  types: {
    context: {} as ConsumeOrderlyServiceContext,
    events: {} as ConsumeOrderlyServiceEvent,
    input: {} as { service: ConsumeOrderlyService },
  },
  actions: {
    stop: ({ context }) => void context.service.stop(),
  },
}).createMachine({
  id: "consumeOrderlyService",
  context: ({ input }) => ({ service: input.service }),
  initial: "running",
  states: {
    running: { on: { STOP: "stopped" } },
    stopped: { type: "final", entry: "stop" },
  },
});
