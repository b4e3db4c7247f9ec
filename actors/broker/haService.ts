/**
 * The master side of replication (RocketMQ's `HAService` + `GroupTransferService`): the `ha`
 * actor of a master answers each slave's HA_TRANSFER ("I hold up to offset X") with the stored
 * commit-log bytes from X, in batches, or holds the request until new data arrives or the hold
 * time passes (long polling, which doubles as the slave's heartbeat). Each request acknowledges
 * X, so the master knows every slave's progress; SYNC_MASTER sends wait on it
 * ({@link HAService.waitForSlave}).
 */
import { fromCallback, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import {
  BROKER_ID_RULE,
  type HaLeaveRequest,
  type HaTransferReply,
  type HaTransferRequest,
  isBrokerId,
  MQError,
  type SendStatus,
  shownValue,
} from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { type HaTuning, haTransferMarginMs, haTuningOf } from "./haTuning.ts";

/** Refused slaves remembered (each is logged once while remembered); the oldest is forgotten past this. */
const MAX_REFUSED_SLAVES = 1024;
/** Least time between two refusal warnings; those in between are counted in the next one. */
const REFUSAL_WARN_INTERVAL_MS = 5_000;

/** What the master knows of one slave. */
export interface SlaveConnection {
  slaveId: number;
  slaveAddr: string;
  /** the commit-log offset the slave last acknowledged */
  ackedOffset: number;
  /** when its last request came (this master's monotonicNow, like every time here) */
  lastSeenMs: number;
  /** when the master last answered it (its next request is due soon after) */
  lastAnsweredMs: number;
}

interface HeldTransfer {
  key: string;
  slave: SlaveConnection;
  offset: number;
  reply: Replier;
  deadline: number;
}

interface SyncWaiter {
  end: number;
  resolve: (s: SendStatus) => void;
  timer: NodeJS.Timeout;
}

/** Master-side replication state of one broker, shared by the `ha` actor and the send path. */
export class HAService {
  readonly tuning: Required<HaTuning>;
  private readonly slaves = new Map<string, SlaveConnection>();
  /**
   * slaves refused since they were last served, with the time of their last refusal (oldest first):
   * each is logged once, not at every retry; forgotten after `haSlaveExpireMs` without a retry, or
   * when more than {@link MAX_REFUSED_SLAVES} peers were refused since
   */
  private readonly refused = new Map<string, number>();
  private lastRefusalWarnMs = Number.NEGATIVE_INFINITY;
  private refusalsNotLogged = 0;
  private held: HeldTransfer[] = [];
  /** missing commit-log ranges (by start) a slave was refused at, each logged once */
  private readonly gapsLogged = new Set<number>();

  /** No slave connected or refused and no transfer held: wakes and ticks have nothing to do. */
  get idle(): boolean {
    return this.slaves.size === 0 && this.held.length === 0 && this.waiters.length === 0 && this.refused.size === 0;
  }
  /** SYNC_MASTER sends waiting for a slave, in commit-log order */
  private waiters: SyncWaiter[] = [];
  private closed = false;

  /** see {@link haTransferMarginMs} */
  private readonly marginMs: number;

  constructor(private readonly ctx: BrokerContext) {
    this.tuning = haTuningOf(ctx.config);
    this.marginMs = haTransferMarginMs(this.tuning);
  }

  /** The slaves counted as connected (see {@link HAService.isLive}). */
  liveSlaves(now = monotonicNow()): SlaveConnection[] {
    return [...this.slaves.values()].filter((s) => this.isLive(s, now));
  }

  /**
   * A connected slave always has a transfer request here: held (at most `haHoldMs`), or on its way
   * once answered. RocketMQ's HAConnection ends with the slave's socket; a ROUTER cannot tell which
   * peer left, so a slave with no request held and none within the margin after the hold's end
   * (or the last answer, if later: a busy master) counts as gone, long before `haSlaveExpireMs`
   * forgets it. A held request keeps it connected however late this master is in answering.
   */
  private isLive(s: SlaveConnection, now: number): boolean {
    if (now - Math.max(s.lastSeenMs + this.tuning.haHoldMs, s.lastAnsweredMs) <= this.marginMs) return true;
    for (const h of this.held) if (h.slave === s) return true;
    return false;
  }

  /** The highest offset any live slave acknowledged; -1 without one (`push2SlaveMaxOffset`). */
  slaveAckedOffset(now = monotonicNow()): number {
    let max = -1;
    for (const s of this.slaves.values()) if (s.ackedOffset > max && this.isLive(s, now)) max = s.ackedOffset;
    return max;
  }

  /** RocketMQ's `isSlaveOK`: a slave is connected and at most `haMaxGapNotInSync` behind `masterPutWhere`. */
  isSlaveOk(masterPutWhere: number, now = monotonicNow()): boolean {
    const acked = this.slaveAckedOffset(now);
    return acked >= 0 && masterPutWhere - acked < this.tuning.haMaxGapNotInSync;
  }

  /**
   * SYNC_MASTER: resolves SEND_OK once a slave acknowledged `end` (the message's end offset),
   * FLUSH_SLAVE_TIMEOUT after `haSyncTimeoutMs` or at `deadline` (monotonic ms) if sooner,
   * SLAVE_NOT_AVAILABLE at once when no slave is connected or the nearest is too far behind.
   */
  waitForSlave(end: number, deadline = Number.POSITIVE_INFINITY): Promise<SendStatus> {
    if (this.closed || !this.isSlaveOk(end)) return Promise.resolve("SLAVE_NOT_AVAILABLE");
    if (this.slaveAckedOffset() >= end) return Promise.resolve("SEND_OK");
    const waitMs = Math.max(0, Math.min(this.tuning.haSyncTimeoutMs, deadline - monotonicNow()));
    return new Promise((resolve) => {
      const w: SyncWaiter = {
        end,
        resolve,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve("FLUSH_SLAVE_TIMEOUT");
        }, waitMs),
      };
      this.waiters.push(w);
    });
  }

  /** A slave's HA_TRANSFER: record its acknowledgement, then answer with bytes or hold it. */
  onTransfer(req: Partial<HaTransferRequest>, reply: Replier | undefined, now = monotonicNow()): void {
    if (!reply) return;
    if (this.closed) {
      reply.fail(new MQError("SERVICE_NOT_AVAILABLE", "The master is shutting down; the slave retries when it is back."));
      return;
    }
    const { slaveId, slaveAddr, offset, tailAt, tailCrc } = req;
    // the key a slave is known by: a fraction or a number past 2^53 would be another slave's, or none
    if (!isBrokerId(slaveId)) {
      reply.fail(slaveIdRefused("HA_TRANSFER", slaveId));
      return;
    }
    if (
      typeof offset !== "number" ||
      !Number.isInteger(offset) ||
      offset < 0 ||
      typeof slaveId !== "number" ||
      typeof slaveAddr !== "string" ||
      (tailAt !== undefined && (typeof tailAt !== "number" || typeof tailCrc !== "number"))
    ) {
      reply.fail(
        new MQError("INVALID_PARAMETER", "HA_TRANSFER needs slaveId, slaveAddr, a commit-log offset >= 0, and tailCrc with tailAt."),
      );
      return;
    }
    const store = this.ctx.store;
    const key = `${slaveId}@${slaveAddr}`;
    const { brokerName } = this.ctx.config;
    if (req.brokerName !== undefined && req.brokerName !== brokerName) {
      this.refuse(
        key,
        reply,
        "slave of another broker name",
        `This master is broker ${brokerName} but the slave is configured as broker ${String(req.brokerName)}: a slave replicates the master of its own brokerName; fix the slave's brokerName or masterAddress.`,
      );
      return;
    }
    const segmentBytes = store.commitLog.segmentBytes;
    if (req.segmentBytes !== undefined && req.segmentBytes !== segmentBytes) {
      this.refuse(
        key,
        reply,
        "slave's segment size differs from the master's",
        `The master's commit-log segments are ${segmentBytes} bytes, the slave's ${String(req.segmentBytes)}: the slave would place the master's records at other offsets. Start the slave with segmentBytes ${segmentBytes} on an empty store directory.`,
      );
      return;
    }
    if (offset > store.maxPhyOffset) {
      this.refuse(
        key,
        reply,
        "slave is ahead of the master's commit log",
        `The slave holds the commit log up to ${offset} but the master only up to ${store.maxPhyOffset}: the master lost data; rebuild one of them from the other.`,
      );
      return;
    }
    // RocketMQ starts a new slave at the master's last segment; we copy all the master still holds
    // from its oldest segment, or from past its last missing segment file, which no slave copies past
    const begin = store.replicaBegin();
    if (req.empty === true && offset < begin && offset < store.maxPhyOffset) {
      this.ctx.logger.info(
        { slaveId, slaveAddr, startAt: begin },
        begin === store.minPhyOffset
          ? "empty slave begins at the master's oldest segment"
          : "empty slave begins after the master's last missing segment file",
      );
      reply.ok({ offset, masterMaxOffset: store.maxPhyOffset, startAt: begin } satisfies HaTransferReply);
      return;
    }
    if (offset < store.minPhyOffset && offset < store.maxPhyOffset) {
      this.refuse(
        key,
        reply,
        "slave is behind the master's oldest segment",
        `The slave holds the commit log up to ${offset}, older than the master's oldest offset (${store.minPhyOffset}); the bytes between are gone: empty the slave's store directory and it replicates from the master's oldest segment.`,
      );
      return;
    }
    // the slave's log must be the master's up to `offset`, and `offset` where an entry begins here
    if (tailAt === undefined ? !store.isEntryStart(offset) : !store.matchesReplicaTail(offset, tailAt, tailCrc as number)) {
      this.refuse(
        key,
        reply,
        "slave's commit log differs from the master's",
        `The slave's commit log up to ${offset} is not the master's: its last entry${tailAt === undefined ? "" : ` (at ${tailAt})`} differs from the master's bytes there, or ${offset} is not where an entry of the master's log begins. The master lost data the slave holds, or the slave copied another master. Rebuild the slave from the master: stop it, empty its store directory and start it again.`,
      );
      return;
    }
    // the slave reached bytes whose segment file is gone here: without a refusal it would wait at
    // the gap for good, as if caught up (RocketMQ's transfer finds no mapped file there either)
    const gap = store.missingLogAt(offset);
    if (gap) {
      this.refuseAtGap(key, reply, gap);
      return;
    }
    this.refused.delete(key);
    const prev = this.slaves.get(key);
    if (!prev) this.ctx.logger.info({ slaveId, slaveAddr, offset }, "slave connected");
    const slave: SlaveConnection = prev ?? { slaveId, slaveAddr, ackedOffset: offset, lastSeenMs: now, lastAnsweredMs: now };
    slave.ackedOffset = offset;
    slave.lastSeenMs = now;
    if (!prev) this.slaves.set(key, slave);
    // a slave has one request outstanding at a time: a new one replaces what it left held
    this.held = this.held.filter((h) => h.key !== key);
    this.releaseWaiters(offset);
    const h: HeldTransfer = { key, slave, offset, reply, deadline: now + this.tuning.haHoldMs };
    if (!this.serve(h)) this.held.push(h);
  }

  /**
   * A slave's HA_LEAVE (it is stopping): forget it now rather than after its hold and margin, as
   * RocketMQ drops an HAConnection whose socket closed, and answer the sends that only it could
   * have confirmed SLAVE_NOT_AVAILABLE.
   */
  onLeave(req: Partial<HaLeaveRequest>, reply: Replier | undefined): void {
    const { slaveId, slaveAddr } = req;
    if (!isBrokerId(slaveId)) {
      reply?.fail(slaveIdRefused("HA_LEAVE", slaveId));
      return;
    }
    if (typeof slaveAddr !== "string") {
      reply?.fail(new MQError("INVALID_PARAMETER", "HA_LEAVE needs the slave's slaveId and slaveAddr."));
      return;
    }
    const key = `${slaveId}@${slaveAddr}`;
    // its request left held is answered (empty) so the stopping slave's ask ends
    for (const h of this.held) if (h.key === key) this.answer(h, Buffer.alloc(0));
    this.held = this.held.filter((h) => h.key !== key);
    if (this.slaves.delete(key)) this.ctx.logger.info({ slaveId, slaveAddr }, "slave left");
    const now = monotonicNow();
    this.settleWaiters((w) => (this.isSlaveOk(w.end, now) ? undefined : "SLAVE_NOT_AVAILABLE"));
    reply?.ok({});
  }

  /**
   * Fails a slave's transfer with ILLEGAL_ARGUMENT; logs it the first time since the slave was last
   * served, at most once per {@link REFUSAL_WARN_INTERVAL_MS} (a flood of peers costs no log flood).
   */
  private refuse(key: string, reply: Replier, what: string, message: string): void {
    const now = monotonicNow();
    const known = this.refused.delete(key);
    this.refused.set(key, now);
    if (this.refused.size > MAX_REFUSED_SLAVES) this.refused.delete(this.refused.keys().next().value as string);
    if (!known) {
      if (now - this.lastRefusalWarnMs < REFUSAL_WARN_INTERVAL_MS) this.refusalsNotLogged++;
      else {
        this.lastRefusalWarnMs = now;
        const notLogged = this.refusalsNotLogged;
        this.refusalsNotLogged = 0;
        this.ctx.logger.warn(
          {
            slave: key,
            masterMinOffset: this.ctx.store.minPhyOffset,
            masterMaxOffset: this.ctx.store.maxPhyOffset,
            ...(notLogged > 0 ? { refusalsNotLogged: notLogged } : {}),
            detail: message,
          },
          what,
        );
      }
    }
    reply.fail(new MQError("ILLEGAL_ARGUMENT", message));
  }

  /**
   * Fails a slave's transfer at a missing range of the commit log with ILLEGAL_ARGUMENT; logs the
   * range as an error once (a lost file needs an operator; the slave retries every `haReconnectMs`).
   */
  private refuseAtGap(key: string, reply: Replier, gap: { from: number; to: number; file: string }): void {
    const message =
      `The master's commit log is missing the bytes from ${gap.from} to ${gap.to} (segment file ${gap.file} was deleted or lost): ` +
      `their messages are gone and the slave, which holds the log up to ${gap.from}, cannot copy past them. Put the file back on the ` +
      "master and restart it; or, giving up the master's records before the gap on this slave, stop the slave, empty its store " +
      "directory and start it again: an empty slave begins after the master's last missing segment file.";
    if (!this.gapsLogged.has(gap.from)) {
      this.gapsLogged.add(gap.from);
      this.ctx.logger.error({ slave: key, ...gap, detail: message }, "a slave cannot be served: the commit log is missing a segment file");
    }
    reply.fail(new MQError("ILLEGAL_ARGUMENT", message));
  }

  /** New data (or a tick): answers held transfers that now have bytes, and those whose hold ran out. */
  wake(now = monotonicNow()): void {
    if (this.held.length === 0) return;
    const keep: HeldTransfer[] = [];
    for (const h of this.held) {
      if (this.serve(h)) continue;
      if (now >= h.deadline) this.answer(h, Buffer.alloc(0));
      else keep.push(h);
    }
    this.held = keep;
  }

  /** Forgets slaves (and refused peers) not heard from for `haSlaveExpireMs` (RocketMQ's housekeeping). */
  expireSlaves(now = monotonicNow()): void {
    for (const [key, at] of this.refused) {
      if (now - at <= this.tuning.haSlaveExpireMs) break; // oldest first
      this.refused.delete(key);
    }
    for (const [key, s] of this.slaves) {
      if (now - s.lastSeenMs > this.tuning.haSlaveExpireMs) {
        this.slaves.delete(key);
        this.ctx.logger.warn({ slaveId: s.slaveId, slaveAddr: s.slaveAddr }, "slave expired");
      }
    }
  }

  /** Answers held transfers (empty) and waiting sends (SLAVE_NOT_AVAILABLE); later transfers are refused. */
  close(): void {
    this.closed = true;
    for (const h of this.held) this.answer(h, Buffer.alloc(0));
    this.held = [];
    this.settleWaiters(() => "SLAVE_NOT_AVAILABLE");
  }

  private releaseWaiters(acked: number): void {
    this.settleWaiters((w) => (w.end <= acked ? "SEND_OK" : undefined));
  }

  /** Answers the waiting sends `statusOf` gives a status; the others keep waiting. */
  private settleWaiters(statusOf: (w: SyncWaiter) => SendStatus | undefined): void {
    if (this.waiters.length === 0) return;
    const keep: SyncWaiter[] = [];
    for (const w of this.waiters) {
      const status = statusOf(w);
      if (status === undefined) keep.push(w);
      else {
        clearTimeout(w.timer);
        w.resolve(status);
      }
    }
    this.waiters = keep;
  }

  /** Replies with the bytes from the held offset when there are any. */
  private serve(h: HeldTransfer): boolean {
    let bytes: Buffer;
    try {
      bytes = this.ctx.store.readCommitLog(h.offset, this.tuning.haTransferBatchBytes);
    } catch (e) {
      h.reply.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `Reading the commit log for a slave failed: ${String(e)}`));
      return true;
    }
    if (bytes.length === 0) return false;
    this.answer(h, bytes);
    return true;
  }

  private answer(h: HeldTransfer, bytes: Buffer): void {
    h.slave.lastAnsweredMs = monotonicNow();
    const fields: HaTransferReply = {
      offset: h.offset,
      masterMaxOffset: this.ctx.store.maxPhyOffset,
      configVersion: `${this.ctx.topics.dataVersion}/${this.ctx.groups.dataVersion}`,
    };
    if (bytes.length > 0) h.reply.ok(fields, bytes);
    else h.reply.ok(fields);
  }
}

/** INVALID_PARAMETER for a request whose slaveId is not a broker id. */
function slaveIdRefused(type: string, slaveId: unknown): MQError {
  return new MQError("INVALID_PARAMETER", `${type}'s slaveId must be ${BROKER_ID_RULE}, got ${shownValue(slaveId)}.`);
}

const services = new WeakMap<BrokerContext, HAService>();

/** The broker's HA service (created on first use; shared by the `ha` actor and the send path). */
export function haServiceOf(ctx: BrokerContext): HAService {
  let s = services.get(ctx);
  if (!s) {
    s = new HAService(ctx);
    services.set(ctx, s);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The master's `ha` actor

export type HaEvent =
  | ({ type: "HA_TRANSFER"; reply?: Replier } & Partial<HaTransferRequest>)
  | ({ type: "HA_LEAVE"; reply?: Replier } & Partial<HaLeaveRequest>)
  | { type: "HA_WAKE"; reply?: Replier }
  | { type: "HA_TICK"; reply?: Replier }
  | { type: "SHUTDOWN"; reply?: Replier }
  | { type: string; reply?: Replier };

export interface HaContext {
  ctx: BrokerContext;
  service: HAService;
}

export interface HaInput {
  ctx: BrokerContext;
}

/** How often held transfers are checked for their deadline and slaves for expiry. */
const HA_TICK_MS = 250;

export const haMachine = setup({
  types: {
    context: {} as HaContext,
    events: {} as HaEvent,
    input: {} as HaInput,
  },
  actors: {
    // one wake per tick of arrivals, not one per dispatched batch
    // a master without slaves sends itself nothing: no event per put, no tick in the timeline
    arrivals: fromCallback<HaEvent, { ctx: BrokerContext }>(({ sendBack, input }) => {
      const service = haServiceOf(input.ctx);
      let pending = false;
      const off = input.ctx.onArrival(() => {
        if (pending || service.idle) return;
        pending = true;
        setImmediate(() => {
          pending = false;
          sendBack({ type: "HA_WAKE" });
        });
      });
      const t = setInterval(() => {
        if (!service.idle) sendBack({ type: "HA_TICK" });
      }, HA_TICK_MS);
      t.unref();
      return () => {
        off();
        clearInterval(t);
      };
    }),
  },
  actions: {
    transfer: ({ context, event }) => {
      context.service.onTransfer(event as Partial<HaTransferRequest>, event.reply);
    },
    leave: ({ context, event }) => {
      context.service.onLeave(event as Partial<HaLeaveRequest>, event.reply);
    },
    wake: ({ context }) => context.service.wake(),
    tick: ({ context }) => {
      context.service.wake();
      context.service.expireSlaves();
    },
    shutdown: ({ context, event }) => {
      context.service.close();
      event.reply?.ok({});
    },
    unsupported: ({ context, event }) => {
      event.reply?.fail(
        new MQError("REQUEST_CODE_NOT_SUPPORTED", `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "ha".`),
      );
    },
  },
}).createMachine({
  id: "ha",
  context: ({ input }) => ({ ctx: input.ctx, service: haServiceOf(input.ctx) }),
  initial: "serving",
  states: {
    serving: {
      invoke: { src: "arrivals", input: ({ context }) => ({ ctx: context.ctx }) },
      on: {
        HA_TRANSFER: { actions: "transfer" },
        HA_LEAVE: { actions: "leave" },
        HA_WAKE: { actions: "wake" },
        HA_TICK: { actions: "tick" },
        SHUTDOWN: { target: "closed", actions: "shutdown" },
        "*": { actions: "unsupported" },
      },
    },
    closed: {
      on: {
        HA_TRANSFER: { actions: "transfer" },
        HA_LEAVE: { actions: "leave" },
        SHUTDOWN: { actions: ({ event }) => event.reply?.ok({}) },
        "*": { actions: "unsupported" },
      },
    },
  },
});
