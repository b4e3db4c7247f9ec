/**
 * The slave side of replication (RocketMQ's `HAClient`): the `ha` actor of a slave asks its
 * master's `ha` actor for the commit log from its own max offset, appends what comes back to its
 * store at the same offsets (the store dispatches its own consume queues and index), and asks
 * again at once; an empty answer after the master's hold time is the heartbeat. A failed request
 * (master down, restarted, unreachable) is retried after `haReconnectMs`, against the address
 * given as `masterAddress` or, without one, the master the name servers list for this broker name.
 */
import { fromCallback, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import {
  BrokerActor,
  type ClusterInfo,
  type HaLeaveRequest,
  type HaTransferReply,
  type HaTransferRequest,
  MASTER_ID,
  MQError,
  NAMESRV_ACTOR,
} from "../../transport/protocol.ts";
import { type Replier, unlessConnectionLost } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { type HaTuning, haTransferMarginMs, haTuningOf } from "./haTuning.ts";
import { applyReplicatedDelayOffsets, syncFromMaster } from "./slaveSync.ts";

const NAMESRV_TIMEOUT_MS = 3_000;
/** How long a stopping slave waits for its master to take its HA_LEAVE (the master answers at once). */
const LEAVE_TIMEOUT_MS = 1_000;

/** What a slave's replication loop reports (runtime info, tests). */
export interface HaClientStatus {
  masterAddress: string | null;
  connected: boolean;
  /** the slave's commit-log max offset */
  offset: number;
  /** the master's max offset at its last answer */
  masterMaxOffset: number;
  transfers: number;
  bytes: number;
  failures: number;
  /** why the master refuses this slave (its log differs, another segment size, ...); null once served */
  refused: string | null;
}

/** The replication loop of one slave: one request outstanding at a time. */
export class HAClient {
  readonly tuning: Required<HaTuning>;
  readonly status: HaClientStatus;
  private stopped = false;
  private stopping: Promise<void> | null = null;
  /** the master a transfer request is outstanding with (it counts this slave as connected) */
  private asking: string | null = null;
  private loop: Promise<void> | null = null;
  private wakeSleep: (() => void) | null = null;
  private lastSync = 0;
  /** the master's config version last copied; a different one in a transfer reply triggers a copy */
  private syncedVersion: string | undefined;
  /** the master's config version in the last transfer reply: only a change of it triggers a copy, so a failed copy waits out its backoff */
  private seenVersion: string | undefined;
  private wantSync = true;
  /** the config copy in progress (one at a time, beside the transfers) */
  private syncing: Promise<void> | null = null;
  /** aborted by stop: cuts the config copy short, so it writes nothing once the broker closes */
  private readonly stopCopy = new AbortController();
  /** the last config copy failed (warned once until one succeeds) */
  private syncFailing = false;
  /**
   * When a failed config copy is tried again: after a backoff from haReconnectMs doubling up to
   * slaveSyncIntervalMs, not at the next transfer (on a busy master that would read its whole
   * config back to back); a reconnect tries it at once.
   */
  private syncRetryAt = Number.POSITIVE_INFINITY;
  private syncBackoffMs = 0;
  /** the last transfer failed (its warning given; the next is after a transfer succeeds) */
  private failing = false;
  /** the append in progress; stop waits for it, never for a request held by the master */
  private appending: Promise<number> | null = null;

  constructor(private readonly ctx: BrokerContext) {
    this.tuning = haTuningOf(ctx.config);
    this.status = {
      masterAddress: ctx.config.masterAddress ?? null,
      connected: false,
      offset: ctx.store.maxPhyOffset,
      masterMaxOffset: -1,
      transfers: 0,
      bytes: 0,
      failures: 0,
      refused: null,
    };
  }

  start(): void {
    if (!this.loop) this.loop = this.run();
  }

  /**
   * Stops after the append in progress (if any), the store left consistent, and the config copy in
   * progress (cut short at its next step, a write under way finished), and tells the master this
   * slave leaves.
   */
  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopped = true;
      this.wakeSleep?.();
      this.stopCopy.abort();
      this.stopping = (async () => {
        await this.appending?.catch(() => 0);
        await this.syncing;
        await this.leave();
      })();
    }
    return this.stopping;
  }

  /**
   * HA_LEAVE to the master this slave was replicating from: without it a SYNC_MASTER counts the
   * slave as connected until its held request and the margin after it ran out (10 s by default),
   * and its sends wait for a slave that is gone.
   */
  private async leave(): Promise<void> {
    const master = this.asking ?? (this.status.connected ? this.status.masterAddress : null);
    this.status.connected = false;
    if (!master) return;
    const req: HaLeaveRequest = { slaveId: this.ctx.config.brokerId, slaveAddr: this.ctx.brokerAddr };
    // an older master refuses the type at once; an unreachable one finds the slave gone by itself
    await this.ctx.node
      .ref(master, BrokerActor.HA)
      .ask({ type: "HA_LEAVE", ...req }, { timeoutMs: LEAVE_TIMEOUT_MS })
      .catch(() => undefined);
  }

  private async run(): Promise<void> {
    const { ctx } = this;
    while (!this.stopped) {
      try {
        const master = await this.masterAddress();
        if (!master)
          throw new MQError("NO_ROUTE", `No master is known for broker ${ctx.config.brokerName}: set masterAddress or start the master.`);
        this.syncConfigsIfDue(master);
        await this.transferOnce(master);
      } catch (e) {
        if (this.stopped) break;
        this.status.failures++;
        // NO_PERMISSION: the address is another slave's (the master will not serve it either, it is a
        // configuration to fix)
        if (e instanceof MQError && (e.code === "ILLEGAL_ARGUMENT" || e.code === "NO_PERMISSION")) {
          // the master will not serve this store as it is: nothing is appended until that is fixed
          if (this.status.refused === null)
            ctx.logger.error({ master: this.status.masterAddress, err: e.message }, "the master refuses to replicate to this slave");
          this.status.refused = e.message;
        } else if (!this.failing)
          // once per outage: a master that never answered (a wrong masterAddress) is said too
          ctx.logger.warn(
            { master: this.status.masterAddress, err: (e as Error).message },
            this.status.connected ? "replication from master interrupted" : "replication from master failed",
          );
        this.failing = true;
        this.status.connected = false;
        if (!this.ctx.config.masterAddress) this.status.masterAddress = null;
        await this.sleep(this.tuning.haReconnectMs);
      }
    }
  }

  /**
   * Starts a copy of the master's configs and offsets when one is due and none is running. Not
   * waited for: the next transfer request is what acknowledges the bytes just appended, and a
   * SYNC_MASTER's sends wait on it (RocketMQ's SlaveSynchronize runs apart from its HAClient).
   */
  private syncConfigsIfDue(master: string): void {
    // monotonic: after a wall clock step back, Date.now() would hold the next sync off for as long
    const now = monotonicNow();
    if (this.syncing || !(this.wantSync || now >= this.syncRetryAt || now - this.lastSync >= this.tuning.slaveSyncIntervalMs)) return;
    const { ctx } = this;
    this.lastSync = now;
    this.wantSync = false;
    this.syncRetryAt = Number.POSITIVE_INFINITY;
    this.syncing = syncFromMaster(ctx, master, this.stopCopy.signal)
      .then(
        (v) => {
          this.syncedVersion = v.configVersion;
          if (this.syncFailing) ctx.logger.info({ master }, "config sync from master works again");
          this.syncFailing = false;
          this.syncBackoffMs = 0;
        },
        (e: unknown) => {
          if (this.stopped) return; // cut short by the broker closing: not a failure to report
          const { haReconnectMs, slaveSyncIntervalMs } = this.tuning;
          this.syncBackoffMs = Math.min(slaveSyncIntervalMs, Math.max(haReconnectMs, this.syncBackoffMs * 2));
          this.syncRetryAt = monotonicNow() + this.syncBackoffMs;
          // retried while the master is down: warned once, not each time
          if (!this.syncFailing) ctx.logger.warn({ err: (e as Error).message }, "config sync from master failed");
          else ctx.logger.debug({ err: (e as Error).message }, "config sync from master failed again");
          this.syncFailing = true;
        },
      )
      .finally(() => {
        this.syncing = null;
      });
  }

  /** One HA_TRANSFER round trip: report the offset, append what comes back. */
  private async transferOnce(master: string): Promise<void> {
    if (this.stopped) return; // stopped meanwhile: no request after the HA_LEAVE
    const { ctx } = this;
    const offset = ctx.store.maxPhyOffset;
    const empty = ctx.store.isEmpty();
    const req: HaTransferRequest = {
      slaveId: ctx.config.brokerId,
      slaveAddr: ctx.brokerAddr,
      offset,
      empty,
      brokerName: ctx.config.brokerName,
      segmentBytes: ctx.store.commitLog.segmentBytes,
    };
    // lets the master check that this log is its own up to `offset`
    const tail = ctx.store.replicaTail();
    if (tail) {
      req.tailAt = tail.at;
      req.tailCrc = tail.crc;
    }
    this.asking = master;
    const r = await ctx.node
      .ref(master, BrokerActor.HA)
      .ask<HaTransferReply>({ type: "HA_TRANSFER", ...req }, { timeoutMs: this.tuning.haHoldMs + haTransferMarginMs(this.tuning) })
      .finally(() => {
        this.asking = null;
      });
    if (this.stopped) return;
    if (!this.status.connected) {
      ctx.logger.info({ master, offset }, "replicating from master");
      // a copy that failed while the master was away is tried again now, not after its backoff
      if (this.syncFailing) this.wantSync = true;
    }
    this.status.connected = true;
    this.status.refused = null;
    this.failing = false;
    this.status.masterMaxOffset = Number(r.fields.masterMaxOffset);
    const version = r.fields.configVersion;
    if (version !== undefined && version !== this.syncedVersion && version !== this.seenVersion) this.wantSync = true;
    this.seenVersion = version;
    const startAt = r.fields.startAt;
    if (startAt !== undefined) {
      // the master no longer holds our offset; an empty store begins where the master's log does
      // (only an empty store asks this way; startReplicaAt refuses any other)
      ctx.store.startReplicaAt(Number(startAt));
      ctx.logger.info({ master, startAt }, "empty store begins at the master's oldest offset");
      this.status.offset = ctx.store.maxPhyOffset;
      return;
    }
    const body = r.body;
    if (body && body.length > 0) {
      if (Number(r.fields.offset) !== ctx.store.maxPhyOffset) return; // an answer to an older request: ask again
      this.appending = ctx.store.appendReplica(body);
      try {
        await this.appending;
      } catch (e) {
        ctx.logger.error({ err: (e as Error).message, offset }, "appending replicated bytes failed");
        throw e;
      } finally {
        this.appending = null;
      }
      this.status.transfers++;
      this.status.bytes += body.length;
      // the master's delay-level progress copied before this log held the messages it re-stored
      applyReplicatedDelayOffsets(ctx);
    }
    this.status.offset = ctx.store.maxPhyOffset;
  }

  private async masterAddress(): Promise<string | null> {
    if (this.ctx.config.masterAddress) return this.ctx.config.masterAddress;
    if (this.status.masterAddress) return this.status.masterAddress;
    const { node } = this.ctx;
    const { nameservers } = this.ctx.config;
    // those whose connection is refused or lost last; one refused or lost while asked is left at
    // once for the next (the last one asked gets its whole timeout), as the clients' lookups do
    const order = [...nameservers.filter((a) => !node.peerUnreachable(a)), ...nameservers.filter((a) => node.peerUnreachable(a))];
    for (let i = 0; i < order.length; i++) {
      const ns = order[i]!;
      try {
        const ask = node.ref(ns, NAMESRV_ACTOR).ask<ClusterInfo>({ type: "GET_BROKER_CLUSTER_INFO" }, { timeoutMs: NAMESRV_TIMEOUT_MS });
        const r = await (i < order.length - 1 ? unlessConnectionLost(node, ns, ask) : ask);
        const addr = r.fields.brokerAddrTable?.[this.ctx.config.brokerName]?.brokerAddrs[String(MASTER_ID)];
        if (addr) {
          this.status.masterAddress = addr;
          return addr;
        }
      } catch {
        // next name server
      }
    }
    return null;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wakeSleep = done;
    });
  }
}

const clients = new WeakMap<BrokerContext, HAClient>();

/** The slave's replication loop (created on first use). */
export function haClientOf(ctx: BrokerContext): HAClient {
  let c = clients.get(ctx);
  if (!c) {
    c = new HAClient(ctx);
    clients.set(ctx, c);
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// The slave's `ha` actor

export type HaClientEvent =
  | { type: "SHUTDOWN"; reply?: Replier }
  | { type: "HA_STATUS"; reply?: Replier }
  | { type: string; reply?: Replier };

export interface HaClientContext {
  ctx: BrokerContext;
  client: HAClient;
}

export interface HaClientInput {
  ctx: BrokerContext;
}

export const haClientMachine = setup({
  types: {
    context: {} as HaClientContext,
    events: {} as HaClientEvent,
    input: {} as HaClientInput,
  },
  actors: {
    replication: fromCallback<HaClientEvent, { client: HAClient }>(({ input }) => {
      input.client.start();
      return () => void input.client.stop();
    }),
  },
  actions: {
    status: ({ context, event }) => event.reply?.ok({ ...context.client.status }),
    shutdown: ({ context, event }) => {
      const reply = event.reply;
      context.client.stop().then(
        () => reply?.ok({}),
        () => reply?.ok({}),
      );
    },
    refuse: ({ context, event }) => {
      event.reply?.fail(
        event.type === "HA_TRANSFER"
          ? new MQError(
              "NO_PERMISSION",
              `Broker ${context.ctx.config.brokerName}/${context.ctx.config.brokerId} is a slave; replicate from its master.`,
            )
          : new MQError(
              "REQUEST_CODE_NOT_SUPPORTED",
              `Broker ${context.ctx.config.brokerName} does not handle ${event.type} on actor "ha".`,
            ),
      );
    },
  },
}).createMachine({
  id: "haClient",
  context: ({ input }) => ({ ctx: input.ctx, client: haClientOf(input.ctx) }),
  initial: "replicating",
  states: {
    replicating: {
      invoke: { src: "replication", input: ({ context }) => ({ client: context.client }) },
      on: {
        HA_STATUS: { actions: "status" },
        SHUTDOWN: { target: "stopped", actions: "shutdown" },
        "*": { actions: "refuse" },
      },
    },
    stopped: {
      on: {
        HA_STATUS: { actions: "status" },
        SHUTDOWN: { actions: "shutdown" },
        "*": { actions: "refuse" },
      },
    },
  },
});
