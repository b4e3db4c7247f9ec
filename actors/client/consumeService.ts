/**
 * Concurrent consumption (RocketMQ's `ConsumeMessageConcurrentlyService`, reference §12.1): a
 * pool of `consumeThreads` listener calls at a time, each given a batch of at most
 * `consumeMessageBatchMaxSize` messages. CONSUME_SUCCESS (or SUCCESS) removes the batch from its
 * process queue and moves the queue's offset to what the process queue says may be committed.
 * RECONSUME_LATER (or a listener that throws, or returns an unknown status: logged at warn) leaves
 * the messages uncommitted and hands them to the listener again after a delay, until the
 * broker's retry topic takes this over. Broadcasting commits regardless: its failed messages are
 * dropped, with a warning (RocketMQ: "BROADCASTING, the message consume failed, drop it").
 * Messages in the listener longer than `consumeTimeoutMinutes` are sent back (delay level 3) and
 * removed from their process queue once that succeeded, so a listener that hangs on one cannot
 * hold its queue's offset (RocketMQ's `cleanExpiredMsg`, reference §5).
 */
import { setup } from "xstate";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { MessageConst, type MessageModel, type MessageQueue, shownWireValue } from "../../transport/protocol.ts";
import { LogThrottle, lazyClientLogger } from "../logger.ts";
import { InFlight } from "./inFlight.ts";
import type { OffsetStore } from "./offsetStore.ts";
import type { ProcessQueue } from "./processQueue.ts";
import { restoreRetryTopic, type SendBackFn } from "./sendBack.ts";

/** @default 20 concurrent listener calls */
export const DEFAULT_CONSUME_THREADS = 20;
/** @default 1 message per listener call */
export const DEFAULT_CONSUME_MESSAGE_BATCH_MAX_SIZE = 1;
/** @default 15 minutes */
export const DEFAULT_CONSUME_TIMEOUT_MINUTES = 15;
/** Delay level a message past consumeTimeoutMinutes is sent back with (RocketMQ's cleanExpiredMsg). */
export const CONSUME_TIMEOUT_SEND_BACK_DELAY_LEVEL = 3;
/** Delay before a RECONSUME_LATER batch is handed to the listener again (RocketMQ's local re-submit). */
export const RECONSUME_LATER_DELAY_MS = 5_000;
/** A listener's unknown result is logged at most once per this long per consumer. */
export const UNKNOWN_STATUS_LOG_INTERVAL_MS = 30_000;
/** A listener's throw is logged at most once per this long per consumer, with the count held back. */
export const LISTENER_FAILURE_LOG_INTERVAL_MS = 30_000;
/** Failed messages a broadcasting consumer drops are logged at most once per this long per consumer, with the count held back. */
export const BROADCAST_DROP_LOG_INTERVAL_MS = 30_000;

/**
 * Logs a listener's throw at warn: RocketMQ logs "consumeMessage exception" for each one, but a
 * listener that throws for every message would flood at its consume (or retry) rate, so one line per
 * interval per consumer (`throttle`) says how many more. `counts`: what the batch counts as.
 */
export function warnListenerThrew(
  throttle: LogThrottle,
  group: string,
  mq: MessageQueue,
  err: unknown,
  listener: string,
  counts: string,
): void {
  const suppressed = throttle.pass("");
  if (suppressed === undefined) return;
  consumeLog().warn(
    { err, group, topic: mq.topic, brokerName: mq.brokerName, queueId: mq.queueId, suppressed },
    `The ${listener} of group ${group} threw consuming ${mq.topic}@${mq.brokerName}@${mq.queueId}: the batch counts as ` +
      `${counts}. Fix the listener: see err (logged at most once every ${LISTENER_FAILURE_LOG_INTERVAL_MS / 1000} s per ` +
      "consumer; suppressed: the throws not logged since the last line).",
  );
}
/**
 * A listener result that is no consume status, at warn, once per interval (it may be a typo that
 * holds back or dead-letters every message). `listener` names it ("listener", "orderly listener"),
 * `counts` says what the batch counts as and `expected` what to return.
 */
export function warnUnknownStatus(
  throttle: LogThrottle,
  group: string,
  mq: MessageQueue,
  status: unknown,
  listener: string,
  counts: string,
  expected: string,
): void {
  const suppressed = throttle.pass("");
  if (suppressed === undefined) return;
  const shown = shownWireValue(status);
  consumeLog().warn(
    { group, topic: mq.topic, brokerName: mq.brokerName, queueId: mq.queueId, status: shown, suppressed },
    `The ${listener} of group ${group} returned ${shown} for ${mq.topic}@${mq.brokerName}@${mq.queueId}, which is not ${counts}. ` +
      `Return ${expected} (logged at most once every ${UNKNOWN_STATUS_LOG_INTERVAL_MS / 1000} s per consumer).`,
  );
}

/** Listener throws and results the consume services do not know, at warn (ACTORMQ_LOG_LEVEL). */
export const consumeLog = lazyClientLogger("client:consume");
/** How long close waits for listener calls in flight so their offsets are committed. */
export const CLOSE_GRACE_MS = 3_000;

/** What a concurrent listener returns. */
export type ConsumeConcurrentlyStatus = "CONSUME_SUCCESS" | "RECONSUME_LATER";

/** Given to the listener with each batch. */
export interface ConsumeConcurrentlyContext {
  messageQueue: MessageQueue;
  /**
   * on CONSUME_SUCCESS, messages after this index count as RECONSUME_LATER @default last index;
   * an int as in RocketMQ: a fraction is truncated toward zero, NaN fails the whole batch
   */
  ackIndex: number;
  /**
   * delay level of the next delivery through the retry topic (0 = broker decides, < 0 = the
   * dead-letter queue); an int as in RocketMQ: a fraction is truncated toward zero, NaN is 0
   */
  delayLevelWhenNextConsume: number;
}

/**
 * The listener's delayLevelWhenNextConsume as the Java `int` RocketMQ's field is: a fraction is
 * truncated toward zero (1.5 -> 1, as Java's `(int)` cast does), NaN or a non-number is 0 (the
 * broker decides), and the result stays in int range. The broker refuses a non-integer level, and
 * a refused send-back would loop the message locally, never retried nor dead-lettered.
 */
function delayLevelWhenNextConsumeOf(v: unknown): number {
  if (typeof v !== "number" || Number.isNaN(v)) return 0;
  return Math.max(-0x80000000, Math.min(0x7fffffff, Math.trunc(v))) || 0;
}

/**
 * The listener's ackIndex as the Java `int` RocketMQ's field is: a fraction is truncated toward
 * zero (Java's `(int)` cast); the caller clamps it to [-1, last index]. NaN or a non-number is no
 * index (RocketMQ's int cannot be one): undefined, and the batch is not acknowledged. Counted as
 * all consumed, a typo would skip every message of the batch past the first.
 */
function ackIndexOf(v: unknown): number | undefined {
  if (typeof v !== "number" || Number.isNaN(v)) return undefined;
  return Math.trunc(v);
}

export type ConcurrentListener = (msgs: MessageExt[], ctx: ConsumeConcurrentlyContext) => Promise<string> | string;

export interface ConsumeSettings {
  consumeThreads: number;
  consumeMessageBatchMaxSize: number;
  consumeTimeoutMinutes: number;
  reconsumeLaterDelayMs: number;
}

export function defaultConsumeSettings(): ConsumeSettings {
  return {
    consumeThreads: DEFAULT_CONSUME_THREADS,
    consumeMessageBatchMaxSize: DEFAULT_CONSUME_MESSAGE_BATCH_MAX_SIZE,
    consumeTimeoutMinutes: DEFAULT_CONSUME_TIMEOUT_MINUTES,
    reconsumeLaterDelayMs: RECONSUME_LATER_DELAY_MS,
  };
}

export interface ConsumeServiceDeps {
  group: string;
  model: MessageModel;
  listener: ConcurrentListener;
  offsetStore: OffsetStore;
  settings: ConsumeSettings;
  /** the process queues held now (for the consume-timeout scan) */
  processQueues(): Iterable<{ mq: MessageQueue; pq: ProcessQueue<MessageExt> }>;
  /** clustering: failed messages go back to their broker (retry topic); without it they are consumed again locally */
  sendBack?: SendBackFn;
  /** a process queue became empty: every pulled message is consumed (the pull offset may be committed) */
  onDrained?(mq: MessageQueue, pq: ProcessQueue<MessageExt>): void;
}

/** Listener batches running per process queue (or sending their failed messages back), for a hand-over to wait on. */
const listenersByQueue = new WeakMap<ProcessQueue<MessageExt>, InFlight>();

/**
 * Resolves once no listener batch of `pq` is running nor sending its failed messages back (true),
 * or after `maxWaitMs` (false). A queue lost in a rebalance is dropped first, so no new batch of
 * it starts; when this resolves, what the process queue still holds is what was not consumed, and
 * its first offset is the one to commit.
 */
export function waitForQueueListeners(pq: ProcessQueue<MessageExt>, maxWaitMs: number): Promise<boolean> {
  return listenersByQueue.get(pq)?.idle(maxWaitMs) ?? Promise.resolve(true);
}

interface ConsumeRequest {
  mq: MessageQueue;
  pq: ProcessQueue<MessageExt>;
  msgs: MessageExt[];
}

/** Counters for tests, benchmarks and the inspector. */
export interface ConsumeServiceStats {
  batches: number;
  consumed: number;
  reconsumeLater: number;
  timedOut: number;
}

/** The pool of listener calls of one push consumer. */
export class ConsumeService {
  readonly stats: ConsumeServiceStats = { batches: 0, consumed: 0, reconsumeLater: 0, timedOut: 0 };
  private readonly queue: ConsumeRequest[] = [];
  private head = 0;
  /** listener calls running now */
  private readonly active = new InFlight();
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private cleanTimer: NodeJS.Timeout | null = null;
  private stopping: Promise<void> | null = null;
  /** expired messages whose send-back is in flight (not sent again by the next cleaning round) */
  private readonly sendingBackExpired = new Set<MessageExt>();
  private readonly unknownStatusThrottle = new LogThrottle(UNKNOWN_STATUS_LOG_INTERVAL_MS);
  private readonly badAckIndexThrottle = new LogThrottle(UNKNOWN_STATUS_LOG_INTERVAL_MS);
  private readonly listenerFailureLog = new LogThrottle(LISTENER_FAILURE_LOG_INTERVAL_MS);
  private readonly droppedLog = new LogThrottle(BROADCAST_DROP_LOG_INTERVAL_MS);
  /** broadcasting: failed messages dropped since the last line of {@link droppedLog} */
  private droppedUnlogged = 0;

  constructor(private readonly deps: ConsumeServiceDeps) {}

  start(): void {
    const every = Math.max(1_000, Math.min(this.deps.settings.consumeTimeoutMinutes * 60_000, 60_000));
    this.cleanTimer = setInterval(() => this.cleanExpired(), every);
    this.cleanTimer.unref();
  }

  /** A pulled batch: split into listener batches and queued. */
  submit(mq: MessageQueue, pq: ProcessQueue<MessageExt>, msgs: MessageExt[]): void {
    if (this.stopped) return;
    const n = this.deps.settings.consumeMessageBatchMaxSize;
    if (msgs.length <= n) this.queue.push({ mq, pq, msgs });
    else for (let i = 0; i < msgs.length; i += n) this.queue.push({ mq, pq, msgs: msgs.slice(i, i + n) });
    this.pump();
  }

  /** Listener calls running now. */
  get activeCount(): number {
    return this.active.count;
  }

  /** Batches waiting for a free slot. */
  get queuedCount(): number {
    return this.queue.length - this.head;
  }

  /** Stops taking work; resolves when the calls in flight finished or `graceMs` passed. */
  stop(graceMs = CLOSE_GRACE_MS): Promise<void> {
    if (!this.stopping) this.stopping = this.doStop(graceMs);
    return this.stopping;
  }

  private async doStop(graceMs: number): Promise<void> {
    this.stopped = true;
    if (this.cleanTimer) clearInterval(this.cleanTimer);
    this.cleanTimer = null;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.queue.length = 0;
    this.head = 0;
    await this.active.idle(graceMs);
  }

  private pump(): void {
    const max = this.deps.settings.consumeThreads;
    while (this.active.count < max && this.head < this.queue.length) {
      const req = this.queue[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      if (req.pq.dropped) continue;
      this.active.begin();
      void this.run(req);
    }
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
  }

  private async run(req: ConsumeRequest): Promise<void> {
    const { mq, msgs, pq } = req;
    let l = listenersByQueue.get(pq);
    if (!l) {
      l = new InFlight();
      listenersByQueue.set(pq, l);
    }
    l.begin();
    restoreRetryTopic(msgs, this.deps.group);
    const start = String(Date.now());
    for (const m of msgs) m.properties[MessageConst.CONSUME_START_TIME] = start;
    const ctx: ConsumeConcurrentlyContext = { messageQueue: mq, ackIndex: Number.MAX_SAFE_INTEGER, delayLevelWhenNextConsume: 0 };
    let status: string;
    try {
      // the listener gets its own array (RocketMQ hands an unmodifiable list): one that empties or
      // reorders it must not change what is acknowledged
      status = await this.deps.listener(msgs.slice(), ctx);
    } catch (err) {
      status = "RECONSUME_LATER";
      const counts = this.skipsFailed(pq)
        ? "RECONSUME_LATER, and broadcasting does not retry: its messages are dropped"
        : "RECONSUME_LATER and is delivered again later";
      warnListenerThrew(this.listenerFailureLog, this.deps.group, mq, err, "listener", counts);
    }
    this.stats.batches++;
    let sendingBack: Promise<void> | undefined;
    try {
      sendingBack = this.processResult(req, status, ctx);
    } finally {
      // a hand-over waits for the batch's send-back too (bounded by the release wait): until it
      // ends, the failed messages are still in the process queue, and releasing then commits
      // below them; a send-back failing once the queue was dropped makes no retry copy of them
      if (sendingBack) {
        const queue = l;
        const ended = (): void => queue.end();
        void sendingBack.then(ended, ended);
      } else l.end();
      this.active.end();
      if (!this.stopped) this.pump();
    }
  }

  /**
   * Whether a batch's failed messages are skipped: broadcasting has no retry topic (RocketMQ skips
   * and logs each one), but a batch given back at close (the consumer stopping, its queue dropped)
   * keeps its offset before it.
   */
  private skipsFailed(pq: ProcessQueue<MessageExt>): boolean {
    return this.deps.model === "BROADCASTING" && !pq.dropped && !this.stopped;
  }

  /** Acknowledges a batch's result; returns the send-back of its failed messages while one runs. */
  private processResult(req: ConsumeRequest, status: string, ctx: ConsumeConcurrentlyContext): Promise<void> | undefined {
    const { mq, pq, msgs } = req;
    let sendingBack: Promise<void> | undefined;
    // "SUCCESS" is the orderly name for it; the orderly service takes CONSUME_SUCCESS the same way
    const success = status === "CONSUME_SUCCESS" || status === "SUCCESS";
    if (!success && status !== "RECONSUME_LATER") this.warnUnknownStatus(mq, status);
    const given = success ? ackIndexOf(ctx.ackIndex) : -1;
    if (given === undefined) this.warnBadAckIndex(mq, ctx.ackIndex);
    let ackIndex = given === undefined ? -1 : Math.min(Math.max(given, -1), msgs.length - 1);
    if (this.skipsFailed(pq)) {
      if (ackIndex < msgs.length - 1) this.warnDropped(mq, msgs, ackIndex + 1);
      ackIndex = msgs.length - 1;
    }
    let done = msgs;
    if (ackIndex < msgs.length - 1) {
      const failed = msgs.slice(ackIndex + 1);
      done = msgs.slice(0, ackIndex + 1);
      this.stats.reconsumeLater += failed.length;
      if (this.deps.sendBack && this.deps.model === "CLUSTERING" && !pq.dropped && !this.stopped) {
        sendingBack = this.sendBackFailed(mq, pq, failed, delayLevelWhenNextConsumeOf(ctx.delayLevelWhenNextConsume));
      } else if (!pq.dropped && !this.stopped) {
        for (const m of failed) m.reconsumeTimes++;
        const t = setTimeout(() => {
          this.timers.delete(t);
          const still = failed.filter((m) => pq.containsMessage(m));
          if (still.length > 0) this.submit(mq, pq, still);
        }, this.deps.settings.reconsumeLaterDelayMs);
        this.timers.add(t);
      }
    }
    this.stats.consumed += done.length;
    if (done.length === 0) return sendingBack;
    const offset = pq.removeMessages(done);
    if (offset >= 0 && !pq.dropped) {
      this.deps.offsetStore.updateOffset(mq, offset, true);
      if (pq.msgCount === 0) this.deps.onDrained?.(mq, pq);
    }
    return sendingBack;
  }

  /**
   * A listener result that is neither success nor RECONSUME_LATER counts as RECONSUME_LATER, as a
   * null or unknown status does in RocketMQ; said once per interval, since it may be a typo that
   * sends every message to the dead-letter queue.
   */
  private warnUnknownStatus(mq: MessageQueue, status: unknown): void {
    warnUnknownStatus(
      this.unknownStatusThrottle,
      this.deps.group,
      mq,
      status,
      "listener",
      "a concurrent consume status: the batch counts as RECONSUME_LATER",
      '"CONSUME_SUCCESS" or "RECONSUME_LATER"',
    );
  }

  /** An ackIndex that is no index: the batch counts as RECONSUME_LATER; said once per interval, as an unknown status is. */
  private warnBadAckIndex(mq: MessageQueue, ackIndex: unknown): void {
    const suppressed = this.badAckIndexThrottle.pass("");
    if (suppressed === undefined) return;
    const { group } = this.deps;
    const shown = shownWireValue(ackIndex);
    consumeLog().warn(
      { group, topic: mq.topic, brokerName: mq.brokerName, queueId: mq.queueId, ackIndex: shown, suppressed },
      `The listener of group ${group} set ackIndex to ${shown} for ${mq.topic}@${mq.brokerName}@${mq.queueId}, which is not a number: ` +
        "the batch counts as RECONSUME_LATER. Set it to the index of the last message consumed (-1: none), or leave it as given " +
        `(logged at most once every ${UNKNOWN_STATUS_LOG_INTERVAL_MS / 1000} s per consumer).`,
    );
  }

  /**
   * Broadcasting's failed messages, dropped: RocketMQ logs each ("BROADCASTING, the message consume
   * failed, drop it"); a listener failing every message would flood at its consume rate, so one line
   * per interval per consumer, with how many were dropped and not logged since the last. `msgs` from
   * index `from` are dropped.
   */
  private warnDropped(mq: MessageQueue, msgs: MessageExt[], from: number, why = "failed to consume"): void {
    if (this.droppedLog.pass("") === undefined) {
      this.droppedUnlogged += msgs.length - from;
      return;
    }
    const dropped = msgs.slice(from);
    const suppressed = this.droppedUnlogged;
    this.droppedUnlogged = 0;
    const { group } = this.deps;
    const offsets = dropped.map((m) => m.queueOffset);
    consumeLog().warn(
      { group, topic: mq.topic, brokerName: mq.brokerName, queueId: mq.queueId, offsets, msgIds: dropped.map((m) => m.msgId), suppressed },
      `Broadcasting group ${group} ${why} ${dropped.length} message(s) of ${mq.topic}@${mq.brokerName}@${mq.queueId} ` +
        `(queue offsets ${offsets.join(", ")}): broadcasting does not retry, so they are dropped and the queue's offset moves past them. ` +
        "A message that must not be lost has to be retried inside the listener " +
        `(logged at most once every ${BROADCAST_DROP_LOG_INTERVAL_MS / 1000} s per consumer; suppressed: the messages dropped and not logged since the last line).`,
    );
  }

  /**
   * Failed messages still in the process queue go back to the broker; those sent back count as
   * consumed (the retry topic redelivers them), the others are consumed again locally after
   * `reconsumeLaterDelayMs` with reconsumeTimes + 1.
   */
  private async sendBackFailed(mq: MessageQueue, pq: ProcessQueue<MessageExt>, failed: MessageExt[], delayLevel: number): Promise<void> {
    const inQueue = failed.filter((m) => pq.containsMessage(m));
    // a queue dropped meanwhile gets no retry copy: its offset stays before the messages (see sendBack.ts)
    const unsent = inQueue.length > 0 ? await this.deps.sendBack!(inQueue, delayLevel, { queue: pq }) : [];
    const sent = unsent.length === 0 ? inQueue : inQueue.filter((m) => !unsent.includes(m));
    if (sent.length > 0) {
      const offset = pq.removeMessages(sent);
      if (offset >= 0 && !pq.dropped) {
        this.deps.offsetStore.updateOffset(mq, offset, true);
        if (pq.msgCount === 0) this.deps.onDrained?.(mq, pq);
      }
    }
    if (unsent.length === 0 || pq.dropped || this.stopped) return;
    for (const m of unsent) m.reconsumeTimes++;
    const t = setTimeout(() => {
      this.timers.delete(t);
      const still = unsent.filter((m) => pq.containsMessage(m));
      if (still.length > 0) this.submit(mq, pq, still);
    }, this.deps.settings.reconsumeLaterDelayMs);
    this.timers.add(t);
  }

  /**
   * Messages in the listener past consumeTimeoutMinutes (the leading ones of each queue, at most
   * 16): clustering sends each back with delay level 3 and removes it from its process queue once
   * that succeeded (a failed send-back keeps it: the next round tries again); broadcasting, which
   * has no retry topic, skips it as it skips a failed batch. Without a send-back (tests) they are
   * handed back to the pool. Returns how many were found.
   */
  cleanExpired(now = Date.now()): number {
    let n = 0;
    for (const { mq, pq } of this.deps.processQueues()) {
      if (pq.dropped) continue;
      const expired = pq.cleanExpiredMessages(this.deps.settings.consumeTimeoutMinutes, now).filter((m) => !this.sendingBackExpired.has(m));
      if (expired.length === 0) continue;
      n += expired.length;
      if (this.deps.model === "BROADCASTING") {
        this.warnDropped(mq, expired, 0, `gave up (consumeTimeoutMinutes ${this.deps.settings.consumeTimeoutMinutes}) on`);
        this.ackExpired(mq, pq, expired);
      } else if (this.deps.sendBack) void this.sendBackExpired(mq, pq, expired);
      else {
        for (const m of expired) m.properties[MessageConst.CONSUME_START_TIME] = String(now);
        this.submit(mq, pq, expired);
      }
    }
    this.stats.timedOut += n;
    return n;
  }

  private async sendBackExpired(mq: MessageQueue, pq: ProcessQueue<MessageExt>, expired: MessageExt[]): Promise<void> {
    for (const m of expired) this.sendingBackExpired.add(m);
    try {
      const unsent = await this.deps.sendBack!(expired, CONSUME_TIMEOUT_SEND_BACK_DELAY_LEVEL, { queue: pq });
      this.ackExpired(mq, pq, unsent.length === 0 ? expired : expired.filter((m) => !unsent.includes(m)));
    } finally {
      for (const m of expired) this.sendingBackExpired.delete(m);
    }
  }

  /** Removes expired messages still held (the listener may have finished meanwhile) and moves the offset. */
  private ackExpired(mq: MessageQueue, pq: ProcessQueue<MessageExt>, msgs: MessageExt[]): void {
    const held = msgs.filter((m) => pq.containsMessage(m));
    if (held.length === 0 || pq.dropped) return;
    const offset = pq.removeMessages(held);
    if (offset >= 0) {
      this.deps.offsetStore.updateOffset(mq, offset, true);
      if (pq.msgCount === 0) this.deps.onDrained?.(mq, pq);
    }
  }
}

/** Events of {@link consumeServiceMachine}. */
export type ConsumeServiceEvent = { type: "STOP" };

export interface ConsumeServiceContext {
  service: ConsumeService;
}

/**
 * The consume service actor: owns the pool's life (started on creation, stopped on STOP). Batches
 * reach the pool by direct call from the pull service, one call per pulled batch.
 */
export const consumeServiceMachine = setup({
  types: {
    context: {} as ConsumeServiceContext,
    events: {} as ConsumeServiceEvent,
    input: {} as { service: ConsumeService },
  },
  actions: {
    start: ({ context }) => context.service.start(),
    stop: ({ context }) => void context.service.stop(),
  },
}).createMachine({
  id: "consumeService",
  context: ({ input }) => ({ service: input.service }),
  initial: "running",
  states: {
    running: { entry: "start", on: { STOP: "stopped" } },
    stopped: { type: "final", entry: "stop" },
  },
});
