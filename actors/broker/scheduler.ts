/**
 * The `scheduler` actor: delay levels (RocketMQ's `ScheduleMessageService`, reference §13).
 * Messages with a delay level wait in `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, in store order,
 * which is also due order (one delay per level). One timer per level is set to the head message's
 * delivery time; when it fires, every message due by then is re-stored under its REAL_TOPIC /
 * REAL_QID without DELAY, and the level's progress (the next schedule-queue offset) is kept in
 * `<storeDir>/config/delayOffset.json`.
 *
 * Persistence cadence, and what a crash costs: progress is written shortly after each delivery
 * batch (debounced by {@link DELIVERED_PERSIST_DEBOUNCE_MS}), every
 * {@link DEFAULT_DELAY_OFFSET_PERSIST_INTERVAL_MS} and at close. Progress never runs ahead of a
 * delivery: it advances only after the batch's puts answered PUT_OK. So after `kill -9` nothing is
 * lost and nothing is delivered early (a restart re-reads from the saved offset and checks each
 * delivery time again); a message re-stored in the last debounce window before the crash, whose
 * progress had not reached the file yet, is delivered a second time (at-least-once).
 */

import path from "node:path";
import type { Logger } from "pino";
import { setup } from "xstate";
import { type GetMessageResult, JsonFile, type PutBatch, type PutResult } from "../../store/index.ts";
import { decodeRecords, encodeMessageBatch, encodeProperties, type MessageExt } from "../../transport/messageRecord.ts";
import { MessageConst, MQError, SCHEDULE_TOPIC, shownValue } from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { backupTableOf, CONFIG_DIR, type ConfigLogger, readBrokerJson, type SkippedEntry, tableOf, warnSkipped } from "./configFile.ts";
import {
  computeDeliverTimestamp,
  correctDeliverTimestamp,
  DELAY_FOR_A_WHILE_MS,
  delayLevelToQueueId,
  queueIdToDelayLevel,
} from "./delayLevels.ts";
import { brokerDelayLevels } from "./delayRouting.ts";
import { timerDelay } from "./timerDelay.ts";

/** File under `<storeDir>/config/` with the next schedule-queue offset of each level. */
export const DELAY_OFFSET_FILE = "delayOffset.json";
/** Periodic progress write (RocketMQ's flushDelayOffsetInterval). */
export const DEFAULT_DELAY_OFFSET_PERSIST_INTERVAL_MS = 10_000;
/** After a delivery batch, progress is written this much later, so a burst of batches costs one write. */
export const DELIVERED_PERSIST_DEBOUNCE_MS = 50;
/** Schedule-queue entries read per store call. */
export const SCHEDULE_SCAN_BATCH = 32;
/** A failed re-store is retried after this long. */
export const PUT_RETRY_DELAY_MS = DELAY_FOR_A_WHILE_MS;

/** Broker options this part reads (passed through `Broker.start` options). */
export interface SchedulerTuning {
  /** @default 10000 */
  delayOffsetPersistIntervalMs?: number;
}

/** delayOffset.json: level (as a string) to the next schedule-queue offset to look at. */
export interface DelayOffsetFile {
  offsetTable: Record<string, number>;
}

/** GET_ALL_DELAY_OFFSET's answer: the offsetTable, and the commit-log end when it was read. */
export interface DelayOffsetAnswer extends DelayOffsetFile {
  /** every due message the progress counts was re-stored below this offset (a slave takes the table once it holds that much) */
  maxPhyOffset: number;
}

/** What the delivery service needs from the broker. */
export interface DelayDeliveryDeps {
  store: {
    getMessage(group: string, topic: string, queueId: number, offset: number, maxMsgNums: number): GetMessageResult;
    getMinOffset(topic: string, queueId: number): number;
    getMaxOffset(topic: string, queueId: number): number;
    topicQueues(): Array<{ topic: string; queueId: number; maxOffset: number }>;
  };
  put(batch: PutBatch): Promise<PutResult>;
  /** delay of each level in ms, index level - 1 */
  levels: number[];
  brokerName: string;
  /** path of delayOffset.json */
  offsetFile: string;
  persistIntervalMs: number;
  logger: Pick<Logger, "warn" | "error">;
  /** how a due timer reaches the actor (one event per level and batch) */
  wake(level: number): void;
  /** hears dispatched arrivals (the store's notices); returns the unsubscribe function */
  subscribeArrivals?(listener: (a: { topic: string; queueId: number }) => void): () => void;
  now?: () => number;
}

/** Counters for tests, benchmarks and the inspector. */
export interface DelayDeliveryStats {
  delivered: number;
  batches: number;
  putFailures: number;
  persists: number;
}

/** A re-stored message: the schedule record rebuilt for its real topic (`messageTimeUp`). */
interface Delivery {
  batch: PutBatch;
  queueOffset: number;
}

/** The schedule record rebuilt for its real topic and queue, DELAY removed; null when it has no real topic. */
export function timeUpBatch(m: MessageExt): PutBatch | null {
  const realTopic = m.properties[MessageConst.REAL_TOPIC];
  const realQid = Number.parseInt(m.properties[MessageConst.REAL_QUEUE_ID] ?? "", 10);
  if (!realTopic || !(realQid >= 0)) return null;
  const properties: Record<string, string> = {};
  for (const k in m.properties) if (k !== MessageConst.DELAY) properties[k] = m.properties[k]!;
  return {
    topic: realTopic,
    queueId: realQid,
    bornTimestamp: m.bornTimestamp,
    bornHost: m.bornHost,
    sysFlag: m.sysFlag,
    reconsumeTimes: m.reconsumeTimes,
    body: encodeMessageBatch([{ body: m.body, flag: m.flag, properties: encodeProperties(properties) }]),
  };
}

/** Reads delayOffset.json; levels missing or damaged start at 0. */
export function readDelayOffsets(file: string, levelCount: number): number[] {
  const stored = readDelayOffsetTable(file);
  return Array.from({ length: levelCount }, (_, i) => stored[String(i + 1)] ?? 0);
}

/** A delay level's key in the offset table: 1, 2, ... */
const LEVEL_KEY = /^[1-9]\d*$/;

/**
 * Every well-formed entry of delayOffset.json, configured levels or not. A level whose offset is not
 * valid takes its `.bak`'s where that one is (as consumerOffset.json does): dropped, the level would
 * deliver again from the oldest message of its queue, and the next write would replace the `.bak`.
 */
export function readDelayOffsetTable(file: string): Record<string, number> {
  const table = JsonFile.read<Partial<DelayOffsetFile>>(file)?.offsetTable;
  const out = wellFormedDelayOffsets(table);
  const bad = table && typeof table === "object" ? Object.keys(table).filter((k) => LEVEL_KEY.test(k) && !(k in out)) : [];
  if (bad.length > 0) {
    const bak = wellFormedDelayOffsets(backupTableOf(file, "offsetTable"));
    for (const k of bad) if (k in bak) out[k] = bak[k]!;
  }
  return out;
}

/**
 * Reads delayOffset.json at the broker's start, so that a file the delivery service could not use
 * refuses the start or is reported: not JSON without a readable `.bak`, or without an `offsetTable`
 * object, is MALFORMED (every level would start again at 0, delivering again what it delivered);
 * each invalid entry is warned about and the file copied aside (see {@link readBrokerJson}).
 */
export function checkDelayOffsetFile(file: string, logger?: ConfigLogger): void {
  const skipped: SkippedEntry[] = [];
  wellFormedDelayOffsets(tableOf(file, readBrokerJson(file, logger), "offsetTable"), (s) => skipped.push(s));
  warnSkipped(
    file,
    skipped,
    "such a level takes its offset from the .bak where that one is valid, else starts again at the oldest message of its queue (delivering again what it delivered)",
    logger,
  );
}

/**
 * The entries of an offsetTable in its stored form whose key is a level (1, 2, ...) and whose offset
 * is an integer >= 0; `skip` (when given) hears each other one.
 */
export function wellFormedDelayOffsets(table: unknown, skip?: (s: SkippedEntry) => void): Record<string, number> {
  const out: Record<string, number> = {};
  if (!table || typeof table !== "object") return out;
  for (const [k, v] of Object.entries(table as Record<string, unknown>)) {
    if (!LEVEL_KEY.test(k)) skip?.({ entry: `level "${k}"`, error: "The key must be a delay level (1, 2, ...)." });
    else if (!Number.isSafeInteger(v) || (v as number) < 0)
      skip?.({ entry: `offset of level ${k}`, error: `It must be an integer >= 0, not ${shownValue(v)}.` });
    else out[k] = v as number;
  }
  return out;
}

/** The stored form of each level's offset (index level - 1). */
export function delayOffsetTable(offsets: readonly number[]): Record<string, number> {
  const offsetTable: Record<string, number> = {};
  for (let level = 1; level <= offsets.length; level++) offsetTable[String(level)] = offsets[level - 1]!;
  return offsetTable;
}

/** The timers, reads and re-stores of the delay levels. Plain TypeScript; the actor drives it. */
export class DelayDeliveryService {
  readonly stats: DelayDeliveryStats = { delivered: 0, batches: 0, putFailures: 0, persists: 0 };
  private readonly offsets: number[];
  /**
   * The stored progress as loaded: written back under the configured levels' current offsets, so
   * levels above the configured ones (from a run with more levels) are kept, as RocketMQ keeps its
   * whole offsetTable: configured again, they resume there instead of delivering their queues again.
   */
  private stored: Record<string, number> = {};
  private readonly timers: Array<NodeJS.Timeout | null>;
  private readonly running: Array<Promise<void> | null>;
  private readonly rerun: boolean[];
  private persistTimer: NodeJS.Timeout | null = null;
  private intervalTimer: NodeJS.Timeout | null = null;
  private dirty = false;
  private stopped = false;
  private unsubscribe: (() => void) | null = null;
  private readonly now: () => number;

  constructor(private readonly deps: DelayDeliveryDeps) {
    const n = deps.levels.length;
    this.offsets = new Array<number>(n).fill(0);
    this.timers = new Array<NodeJS.Timeout | null>(n).fill(null);
    this.running = new Array<Promise<void> | null>(n).fill(null);
    this.rerun = new Array<boolean>(n).fill(false);
    this.now = deps.now ?? Date.now;
  }

  /** Loads progress (corrected into each queue's bounds) and looks at every level that has work. */
  start(): void {
    this.stored = readDelayOffsetTable(this.deps.offsetFile);
    for (let level = 1; level <= this.deps.levels.length; level++) {
      const q = delayLevelToQueueId(level);
      const min = this.deps.store.getMinOffset(SCHEDULE_TOPIC, q);
      const max = this.deps.store.getMaxOffset(SCHEDULE_TOPIC, q);
      this.offsets[level - 1] = Math.min(Math.max(this.stored[String(level)] ?? 0, min), max);
      if (this.offsets[level - 1]! < max) this.deps.wake(level);
    }
    this.warnUnconfiguredLevels();
    this.intervalTimer = setInterval(() => this.persistIfDirty(), this.deps.persistIntervalMs);
    this.intervalTimer.unref();
    // called directly (not as an actor event): most arrivals find the level busy or waiting and cost nothing
    this.unsubscribe =
      this.deps.subscribeArrivals?.((a) => {
        if (a.topic === SCHEDULE_TOPIC) this.onArrival(a.queueId);
      }) ?? null;
  }

  /**
   * Warns about schedule queues of levels not configured now (a restart with fewer
   * messageDelayLevel levels) that hold undelivered messages: as in RocketMQ they wait, neither
   * lost nor delivered, until a restart configures their level again; nothing else would tell.
   */
  private warnUnconfiguredLevels(): void {
    const configured = this.deps.levels.length;
    for (const { topic, queueId, maxOffset } of this.deps.store.topicQueues()) {
      if (topic !== SCHEDULE_TOPIC || queueId < configured) continue;
      const level = queueIdToDelayLevel(queueId);
      const from = Math.max(this.stored[String(level)] ?? 0, this.deps.store.getMinOffset(SCHEDULE_TOPIC, queueId));
      if (maxOffset <= from) continue;
      const waiting = maxOffset - from;
      this.deps.logger.warn(
        // not `level`: pino's own field
        { delayLevel: level, waiting, configuredLevels: configured },
        `${waiting} delayed message${waiting === 1 ? "" : "s"} wait${waiting === 1 ? "s" : ""} at delay level ${level}, which messageDelayLevel (${configured} levels) does not configure: not delivered until the broker is restarted with at least ${level} levels`,
      );
    }
  }

  /** The next schedule-queue offset of each level (index level - 1). */
  progress(): number[] {
    return [...this.offsets];
  }

  /** The whole offsetTable in its stored form: the configured levels' progress and the kept progress of the others. */
  offsetTable(): Record<string, number> {
    return { ...this.stored, ...delayOffsetTable(this.offsets) };
  }

  /** A schedule queue got messages: an idle level looks at them (a waiting timer already covers older heads). */
  onArrival(queueId: number): void {
    const level = queueIdToDelayLevel(queueId);
    if (this.stopped || level < 1 || level > this.deps.levels.length) return;
    if (this.running[level - 1]) this.rerun[level - 1] = true;
    else if (!this.timers[level - 1]) this.deps.wake(level);
  }

  /** Delivers what is due on `level`, then sets the level's timer to its next head. */
  tick(level: number): void {
    if (this.stopped || level < 1 || level > this.deps.levels.length) return;
    const i = level - 1;
    if (this.running[i]) {
      this.rerun[i] = true;
      return;
    }
    if (this.timers[i]) {
      clearTimeout(this.timers[i]!);
      this.timers[i] = null;
    }
    const run = this.deliverDue(level)
      .catch((e: unknown) => {
        this.deps.logger.error({ err: e, delayLevel: level }, "delay level delivery failed");
        this.setTimer(level, PUT_RETRY_DELAY_MS);
      })
      .finally(() => {
        this.running[i] = null;
        if (this.rerun[i] && !this.stopped) {
          this.rerun[i] = false;
          this.deps.wake(level);
        }
      });
    this.running[i] = run;
  }

  private setTimer(level: number, inMs: number): void {
    if (this.stopped) return;
    const i = level - 1;
    if (this.timers[i]) clearTimeout(this.timers[i]!);
    const t = setTimeout(
      () => {
        this.timers[i] = null;
        this.deps.wake(level);
      },
      timerDelay(inMs), // a later head (levels may be days long) is looked at again when it fires
    );
    this.timers[i] = t;
  }

  private async deliverDue(level: number): Promise<void> {
    const i = level - 1;
    const queueId = delayLevelToQueueId(level);
    const { levels, brokerName } = this.deps;
    for (;;) {
      if (this.stopped) return;
      const offset = this.offsets[i]!;
      const res = this.deps.store.getMessage("", SCHEDULE_TOPIC, queueId, offset, SCHEDULE_SCAN_BATCH);
      if (res.status === "NO_MESSAGE_IN_QUEUE" || res.status === "OFFSET_OVERFLOW_ONE" || res.status === "NO_MATCHED_LOGIC_QUEUE") return;
      if (res.status !== "FOUND") {
        // moved, removed or damaged entries: skip to where the store says reading resumes
        if (res.nextBeginOffset === offset) return;
        this.advance(i, res.nextBeginOffset);
        continue;
      }
      const now = this.now();
      const due: Delivery[] = [];
      let nextDueAt = -1;
      let stopAt = res.nextBeginOffset;
      for (const buf of res.buffers) {
        let m: MessageExt;
        try {
          // the body as stored: it is put again with its sysFlag, so a compressed one stays marked
          m = decodeRecords(buf, brokerName, false)[0]!;
        } catch {
          continue; // the store checked it; a record that still fails to decode is skipped, not delivered
        }
        const deliverAt = correctDeliverTimestamp(levels, level, now, computeDeliverTimestamp(levels, level, m.storeTimestamp));
        if (deliverAt > now) {
          nextDueAt = deliverAt;
          stopAt = m.queueOffset;
          break;
        }
        const batch = timeUpBatch(m);
        if (!batch) {
          this.deps.logger.warn({ delayLevel: level, queueOffset: m.queueOffset }, "scheduled message without REAL_TOPIC/REAL_QID skipped");
          continue;
        }
        due.push({ batch, queueOffset: m.queueOffset });
      }
      if (due.length > 0) {
        const failedAt = await this.restore(due);
        if (failedAt >= 0) {
          this.advance(i, failedAt);
          this.setTimer(level, PUT_RETRY_DELAY_MS);
          return;
        }
      }
      this.advance(i, stopAt);
      if (nextDueAt >= 0) {
        this.setTimer(level, nextDueAt - this.now());
        return;
      }
    }
  }

  /**
   * Re-stores a run of due messages: all puts go out at once (the store actor appends them in
   * order and they share one flush); returns the queue offset of the first failed one, or -1.
   */
  private async restore(due: Delivery[]): Promise<number> {
    const results = await Promise.allSettled(due.map((d) => this.deps.put(d.batch)));
    this.stats.batches++;
    let late = 0;
    for (let k = 0; k < results.length; k++) {
      const r = results[k]!;
      // FLUSH_DISK_TIMEOUT: stored, its flush late. Putting it again would store it twice at every
      // try while the disk is slow; RocketMQ's scheduler does not even wait for the flush
      if (r.status === "fulfilled" && r.value.status === "FLUSH_DISK_TIMEOUT") late++;
      else if (r.status === "rejected" || r.value.status !== "PUT_OK") {
        this.stats.putFailures++;
        this.stats.delivered += k;
        const reason = r.status === "rejected" ? (r.reason as Error).message : r.value.status;
        this.deps.logger.warn({ queueOffset: due[k]!.queueOffset, reason }, "re-storing a due delayed message failed; retrying");
        return due[k]!.queueOffset;
      }
    }
    if (late > 0) this.deps.logger.warn({ count: late }, "due delayed messages re-stored, their flush to disk late (FLUSH_DISK_TIMEOUT)");
    this.stats.delivered += due.length;
    return -1;
  }

  private advance(i: number, offset: number): void {
    if (offset === this.offsets[i]) return;
    this.offsets[i] = offset;
    this.dirty = true;
    if (!this.persistTimer && !this.stopped) {
      this.persistTimer = setTimeout(() => {
        this.persistTimer = null;
        this.persistIfDirty();
      }, DELIVERED_PERSIST_DEBOUNCE_MS);
    }
  }

  private persistIfDirty(): void {
    if (!this.dirty) return;
    this.persist();
  }

  /** Writes delayOffset.json now. */
  persist(): void {
    this.dirty = false;
    try {
      JsonFile.write(this.deps.offsetFile, { offsetTable: this.offsetTable() } satisfies DelayOffsetFile);
      this.stats.persists++;
    } catch (e) {
      this.dirty = true;
      this.deps.logger.error({ err: e }, "writing delayOffset.json failed; retrying at the next batch or period");
    }
  }

  /** Stops the timers, lets deliveries in flight finish, and writes the progress. */
  async close(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = null;
    for (let i = 0; i < this.timers.length; i++) {
      if (this.timers[i]) clearTimeout(this.timers[i]!);
      this.timers[i] = null;
    }
    if (this.persistTimer) clearTimeout(this.persistTimer);
    this.persistTimer = null;
    if (this.intervalTimer) clearInterval(this.intervalTimer);
    this.intervalTimer = null;
    await Promise.all(this.running.filter((r): r is Promise<void> => r !== null));
    this.persist();
  }
}

type Asked = { reply?: Replier };

/** Events of {@link schedulerMachine}. */
export type SchedulerEvent =
  | { type: "TICK"; level: number }
  | ({ type: "GET_ALL_DELAY_OFFSET" } & Asked)
  | ({ type: "SHUTDOWN" } & Asked)
  | ({ type: string } & Asked);

export interface SchedulerContext {
  ctx: BrokerContext;
  service: DelayDeliveryService;
}

export interface SchedulerInput {
  ctx: BrokerContext;
}

/** The `scheduler` actor: one TICK per level and delivery batch. */
export const schedulerMachine = setup({
  types: {
    context: {} as SchedulerContext,
    events: {} as SchedulerEvent,
    input: {} as SchedulerInput,
  },
  actions: {
    start: ({ context }) => context.service.start(),
    tick: ({ context, event }) => {
      if (event.type === "TICK") context.service.tick((event as { level: number }).level);
    },
    answerOffsets: ({ context, event }) => {
      const answer: DelayOffsetAnswer = { offsetTable: context.service.offsetTable(), maxPhyOffset: context.ctx.store.maxPhyOffset };
      (event as Asked).reply?.ok(answer);
    },
    shutdown: ({ context, event }) => {
      const reply = (event as Asked).reply;
      context.service.close().then(
        () => reply?.ok({}),
        (e: unknown) => reply?.fail(new MQError("SYSTEM_ERROR", `The scheduler could not stop cleanly: ${String(e)}`)),
      );
    },
    unsupported: ({ context, event }) => {
      (event as Asked).reply?.fail(
        new MQError(
          "REQUEST_CODE_NOT_SUPPORTED",
          `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "scheduler".`,
        ),
      );
    },
    answerStopped: ({ event }) => (event as Asked).reply?.ok({}),
  },
}).createMachine({
  id: "scheduler",
  context: ({ input, self }) => {
    const ctx = input.ctx;
    const tuning = ctx.config as SchedulerTuning;
    const service = new DelayDeliveryService({
      store: ctx.store,
      put: (b) => ctx.put(b),
      levels: brokerDelayLevels(ctx.config.messageDelayLevel),
      brokerName: ctx.config.brokerName,
      offsetFile: path.join(ctx.config.storeDir, CONFIG_DIR, DELAY_OFFSET_FILE),
      persistIntervalMs: tuning.delayOffsetPersistIntervalMs ?? DEFAULT_DELAY_OFFSET_PERSIST_INTERVAL_MS,
      logger: ctx.logger,
      wake: (level) => self.send({ type: "TICK", level }),
      subscribeArrivals: (l) => ctx.onArrival(l),
    });
    return { ctx, service };
  },
  initial: "running",
  states: {
    running: {
      entry: "start",
      on: {
        TICK: { actions: "tick" },
        GET_ALL_DELAY_OFFSET: { actions: "answerOffsets" },
        SHUTDOWN: { target: "stopped", actions: "shutdown" },
        "*": { actions: "unsupported" },
      },
    },
    stopped: {
      on: {
        GET_ALL_DELAY_OFFSET: { actions: "answerOffsets" },
        SHUTDOWN: { actions: "answerStopped" },
        TICK: {},
        "*": { actions: "unsupported" },
      },
    },
  },
});
