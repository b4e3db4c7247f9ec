/**
 * A broker's runtime figures (RocketMQ's `BrokerStats` and the runtime info of
 * `AdminBrokerProcessor.prepareRuntimeInfo`, shown by `mqadmin brokerStatus`): messages stored by
 * sends and served to pulls since the start and per second over the last minute, counted once per
 * request on the send and pull paths; the rest (store offsets and disk, held pulls, groups and
 * connections online, replication, damage) is read when GET_BROKER_RUNTIME_INFO asks.
 */
import { readFileSync } from "node:fs";
import { monotonicNow } from "../../transport/clock.ts";
import { BrokerActor, type BrokerRuntimeInfo, type HaSlaveRuntimeInfo } from "../../transport/protocol.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { consumerTableOf } from "./consumerManager.ts";
import { haClientOf } from "./haClient.ts";
import { haServiceOf } from "./haService.ts";
import { RateWindow } from "./rateCounter.ts";

/** A producer group that has not sent for this long is no longer online (RocketMQ's channelExpiredTimeout). */
export const PRODUCER_EXPIRY_S = 120;
/** Producer groups remembered; past this the ones silent longest are forgotten (the group name comes off the wire). */
const MAX_PRODUCER_GROUPS = 4096;

const VERSION = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown };
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
})();

/** The counters the send and pull paths feed: one call per request, nothing allocated. */
export class BrokerStats {
  /** wall time of the start, shown as bootTimestamp */
  readonly bootTimestamp = Date.now();
  private readonly bootMs: number;
  /** messages stored by sends since the start */
  putTotal = 0;
  /** messages served to pulls since the start */
  getTotal = 0;
  private readonly puts: RateWindow;
  private readonly gets: RateWindow;
  /** producer group -> the second (of `now`) it last sent */
  private readonly producers = new Map<string, number>();

  constructor(private readonly now: () => number = monotonicNow) {
    this.bootMs = now();
    this.puts = new RateWindow(now);
    this.gets = new RateWindow(now);
  }

  /** A send request stored `count` messages for `producerGroup`. */
  notePut(producerGroup: unknown, count: number): void {
    this.putTotal += count;
    // one clock read for the rate and the producer table
    const sec = Math.floor(this.now() / 1000);
    this.puts.add(count, sec);
    if (typeof producerGroup !== "string") return;
    const seen = this.producers.get(producerGroup);
    if (seen === sec) return;
    if (seen === undefined && this.producers.size >= MAX_PRODUCER_GROUPS) this.forgetProducers(sec);
    this.producers.set(producerGroup, sec);
  }

  /** A pull was served `count` messages. */
  noteGet(count: number): void {
    this.getTotal += count;
    this.gets.add(count);
  }

  /** Messages stored by sends per second over the last minute. */
  putTps(): number {
    return this.puts.perSecond();
  }

  /** Messages served to pulls per second over the last minute. */
  getTps(): number {
    return this.gets.perSecond();
  }

  /** Milliseconds since the start. */
  uptimeMs(): number {
    return Math.max(0, this.now() - this.bootMs);
  }

  /** Producer groups that sent in the last {@link PRODUCER_EXPIRY_S} seconds. */
  producerGroupsOnline(): number {
    this.forgetProducers(Math.floor(this.now() / 1000));
    return this.producers.size;
  }

  /** Forgets producer groups silent past the expiry; when none is and the table is full, the longest silent. */
  private forgetProducers(sec: number): void {
    let oldest: string | undefined;
    let oldestSec = Number.POSITIVE_INFINITY;
    for (const [group, at] of this.producers) {
      if (sec - at >= PRODUCER_EXPIRY_S) this.producers.delete(group);
      else if (at < oldestSec) {
        oldest = group;
        oldestSec = at;
      }
    }
    if (this.producers.size >= MAX_PRODUCER_GROUPS && oldest !== undefined) this.producers.delete(oldest);
  }
}

const stats = new WeakMap<BrokerContext, BrokerStats>();

/** The broker's stats (created on first use, at the latest when its actors start). */
export function brokerStatsOf(ctx: BrokerContext): BrokerStats {
  let s = stats.get(ctx);
  if (!s) stats.set(ctx, (s = new BrokerStats()));
  return s;
}

/** RocketMQ's runtime string: "[ d days, h hours, m minutes, s seconds ]". */
export function runtimeString(ms: number): string {
  const s = Math.floor(ms / 1000);
  return `[ ${Math.floor(s / 86_400)} days, ${Math.floor((s % 86_400) / 3600)} hours, ${Math.floor((s % 3600) / 60)} minutes, ${s % 60} seconds ]`;
}

/** Pulls the `hold` actor holds now (its table's size). */
export function heldPulls(ctx: BrokerContext): number {
  const snap = ctx.node.actorOf(BrokerActor.HOLD)?.getSnapshot() as { context?: { table?: { size?: number } } } | undefined;
  return snap?.context?.table?.size ?? 0;
}

/** The GET_BROKER_RUNTIME_INFO reply. */
export function brokerRuntimeInfo(ctx: BrokerContext): BrokerRuntimeInfo {
  const { config, store } = ctx;
  const s = brokerStatsOf(ctx);
  const consumers = consumerTableOf(ctx);
  let consumersOnline = 0;
  const groupNames = consumers.groupNames();
  for (const g of groupNames) consumersOnline += consumers.group(g)?.clients.size ?? 0;
  // the store's own reading (the one its disk-full and forced-clean checks use)
  const diskPercent = store.options.diskUsedPercent(store.options.dir);
  const uptimeMs = s.uptimeMs();
  const min = store.minPhyOffset;
  const max = store.maxPhyOffset;
  const info: BrokerRuntimeInfo = {
    brokerName: config.brokerName,
    brokerId: config.brokerId,
    clusterName: config.clusterName,
    brokerAddr: ctx.brokerAddr,
    brokerVersionDesc: `actormq ${VERSION}`,
    brokerVersion: VERSION,
    role: config.role,
    flush: config.flush,
    flushDiskType: config.flush === "sync" ? "SYNC_FLUSH" : "ASYNC_FLUSH",
    brokerPermission: config.brokerPermission,
    bootTimestamp: s.bootTimestamp,
    runtime: runtimeString(uptimeMs),
    uptimeMs,
    msgPutTotalTodayNow: s.putTotal,
    msgGetTotalTodayNow: s.getTotal,
    putTps: s.putTps(),
    getTransferedTps: s.getTps(),
    commitLogMinOffset: min,
    commitLogMaxOffset: max,
    commitLogDiskRatio: Number.isFinite(diskPercent) ? diskPercent / 100 : -1,
    earliestMessageTimeStamp: store.earliestMessageTime(),
    dispatchBehindBytes: store.dispatchBehindBytes,
    pullRequestsHeld: heldPulls(ctx),
    consumerGroupsOnline: groupNames.length,
    consumersOnline,
    producerGroupsOnline: s.producerGroupsOnline(),
    clientConnections: ctx.node.stats().connectionsOpen,
    topicCount: Object.keys(ctx.topics.all()).length,
    damagedRecordsSkipped: store.damage.damagedRecordsSkipped,
    entriesRepaired: store.damage.entriesRepaired,
    replicationBytesSkipped: store.damage.replicationBytesSkipped,
    flushErrors: store.flushErrors,
    haSlaves: [],
    minPhyOffset: min,
    maxPhyOffset: max,
  };
  if (config.role === "SLAVE") {
    const st = haClientOf(ctx).status;
    info.masterAddr = st.masterAddress;
    info.haConnected = st.connected;
    info.masterCommitLogMaxOffset = st.masterMaxOffset;
    info.slaveFallBehindBytes = st.masterMaxOffset >= 0 ? Math.max(0, st.masterMaxOffset - max) : 0;
  } else {
    const ha = haServiceOf(ctx);
    info.haSlaves = ha
      .liveSlaves()
      .map(
        (sl): HaSlaveRuntimeInfo => ({
          slaveId: sl.slaveId,
          addr: sl.slaveAddr,
          slaveAckOffset: sl.ackedOffset,
          diff: Math.max(0, max - sl.ackedOffset),
          inSync: max - sl.ackedOffset < ha.tuning.haMaxGapNotInSync,
        }),
      )
      .sort((a, b) => a.slaveId - b.slaveId || (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0));
  }
  return info;
}
