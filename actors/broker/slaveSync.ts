/**
 * What a slave copies from its master besides the commit log (RocketMQ's `SlaveSynchronize`):
 * topic configs (so pulls on the slave find their topics), subscription-group configs, consumer
 * offsets (so a consumer that starts while the master is down resumes where its group was) and
 * the delay levels' progress (so a slave restarted as master does not deliver them again).
 * Called by the slave's replication loop when it connects, when the master's config version
 * changes and every `slaveSyncIntervalMs`. Offsets are a put-all, as in RocketMQ: offsets committed
 * to the slave while its master was down are overwritten by the master's at the next copy after it
 * returns, by when the consumers commit to the master again. A topic the master's store deleted
 * (and a slave that missed the admin's deletion, being down, has not) is deleted here too, with its
 * offsets, at the master's commit-log offset (see MessageStore.deleteTopics). Groups and other
 * topics the master lacks are kept: a slave serving while its master is down makes its own.
 * A copy is cut short when `stop` is aborted (the broker closing): no write after that.
 */
import path from "node:path";
import { JsonFile } from "../../store/index.ts";
import { BrokerActor, type SubscriptionGroupConfig, type TopicConfig, type TopicConfigTable } from "../../transport/protocol.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { CONFIG_DIR } from "./configFile.ts";
import { type ConsumerOffsetFile, consumerOffsetsOf } from "./consumerOffsetManager.ts";
import {
  DELAY_OFFSET_FILE,
  type DelayOffsetAnswer,
  type DelayOffsetFile,
  readDelayOffsetTable,
  wellFormedDelayOffsets,
} from "./scheduler.ts";

const SYNC_TIMEOUT_MS = 3_000;

/** Slaves whose last offset copy failed (its warning given; the next is after a copy succeeds). */
const offsetCopyFailing = new WeakSet<BrokerContext>();

/** The master's delay-level progress, read when its log ended at `from`. */
interface PendingDelayOffsets {
  table: Record<string, number>;
  from: number;
}

/**
 * Per slave: the master's delay-level progress read while this slave's log did not yet reach the
 * master's end (`from`), taken once it does ({@link applyReplicatedDelayOffsets}). The oldest copy
 * not yet reached and the newest: a newer copy alone would hold all progress off while a slave
 * catches up a backlog longer than a copy interval, and a failover then would deliver it again.
 */
const pendingDelayOffsets = new WeakMap<BrokerContext, [PendingDelayOffsets] | [PendingDelayOffsets, PendingDelayOffsets]>();

function sameTopic(a: TopicConfig | undefined, b: TopicConfig): boolean {
  return (
    !!a && a.readQueueNums === b.readQueueNums && a.writeQueueNums === b.writeQueueNums && a.perm === b.perm && !!a.order === !!b.order
  );
}

/**
 * `p`, or the abort of `stop`, whichever comes first: an answer that comes after the slave stopped
 * would be written into configs and a store that are closing or closed.
 */
function unlessStopped<T>(p: Promise<T>, stop?: AbortSignal): Promise<T> {
  if (!stop) return p;
  stop.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(stop.reason);
    stop.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => stop.removeEventListener("abort", onAbort));
  });
}

/** Copies topic and subscription-group configs that differ from the master's; returns how many changed and the master's config version. */
export async function syncFromMaster(
  ctx: BrokerContext,
  masterAddress: string,
  stop?: AbortSignal,
): Promise<{ changed: number; configVersion: string }> {
  const ref = ctx.node.ref(masterAddress, BrokerActor.BROKER);
  let changed = 0;
  const topics = await unlessStopped(ref.ask<TopicConfigTable>({ type: "GET_ALL_TOPIC_CONFIG" }, { timeoutMs: SYNC_TIMEOUT_MS }), stop);
  const theirs = topics.fields.topicConfigTable ?? {};
  const offsets = consumerOffsetsOf(ctx);
  // deletions first: a topic deleted and created again on the master is created again here after
  const mine = ctx.store.deletedTopics();
  for (const [topic, at] of Object.entries(topics.fields.deletedTopics ?? {})) {
    if (!Number.isSafeInteger(at) || at < 0 || (Object.hasOwn(mine, topic) && mine[topic]! >= at)) continue;
    stop?.throwIfAborted();
    if (!Object.hasOwn(theirs, topic)) await ctx.topics.delete(topic);
    offsets.removeWhere((t) => t === topic);
    await ctx.store.deleteTopics([topic], at);
    ctx.logger.info({ topic, deletedAt: at }, "topic deleted as on master");
    changed++;
  }
  for (const tc of Object.values(theirs)) {
    if (sameTopic(ctx.topics.get(tc.topicName), tc)) continue;
    stop?.throwIfAborted();
    await ctx.topics.createOrUpdate(tc);
    changed++;
  }
  const groups = await unlessStopped(
    ref.ask<{ subscriptionGroupTable: Record<string, SubscriptionGroupConfig> }>(
      { type: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG" },
      { timeoutMs: SYNC_TIMEOUT_MS },
    ),
    stop,
  );
  for (const g of Object.values(groups.fields.subscriptionGroupTable ?? {})) {
    if (JSON.stringify(ctx.groups.get(g.groupName)) === JSON.stringify(g)) continue;
    stop?.throwIfAborted();
    await ctx.groups.createOrUpdate(g);
    changed++;
  }
  if (changed > 0) ctx.logger.info({ changed }, "configs copied from master");
  // offsets are copied again every interval: a failure here does not make the configs copy again.
  // Warned once per run of failures (each interval would repeat it), and once when it works again
  await syncOffsetsFromMaster(ctx, masterAddress, stop).then(
    () => {
      if (offsetCopyFailing.delete(ctx)) ctx.logger.info({ master: masterAddress }, "offset copy from master works again");
    },
    (e: unknown) => {
      if (stop?.aborted) return; // cut short by the broker closing: not a failure to report
      if (offsetCopyFailing.has(ctx)) ctx.logger.debug({ err: (e as Error).message }, "offset copy from master failed again");
      else ctx.logger.warn({ err: (e as Error).message }, "offset copy from master failed");
      offsetCopyFailing.add(ctx);
    },
  );
  // the same form the master's `ha` actor reports in each transfer reply
  return { changed, configVersion: `${topics.fields.dataVersion}/${(groups.fields as { dataVersion?: number }).dataVersion}` };
}

/** Copies the master's consumer offsets and delay-level progress; returns how many entries changed. */
export async function syncOffsetsFromMaster(ctx: BrokerContext, masterAddress: string, stop?: AbortSignal): Promise<number> {
  const consumer = await unlessStopped(
    ctx.node
      .ref(masterAddress, BrokerActor.OFFSETS)
      .ask<ConsumerOffsetFile>({ type: "GET_ALL_CONSUMER_OFFSET" }, { timeoutMs: SYNC_TIMEOUT_MS }),
    stop,
  );
  let changed = consumerOffsetsOf(ctx).mergeFrom(consumer.fields.offsetTable);
  const delay = await unlessStopped(
    ctx.node
      .ref(masterAddress, BrokerActor.SCHEDULER)
      .ask<Partial<DelayOffsetAnswer>>({ type: "GET_ALL_DELAY_OFFSET" }, { timeoutMs: SYNC_TIMEOUT_MS }),
    stop,
  );
  const theirs = wellFormedDelayOffsets(delay.fields.offsetTable);
  const from = delay.fields.maxPhyOffset;
  // the progress counts due messages the master re-stored (not waiting for a slave, as RocketMQ's
  // scheduler does not) below `from`: taken before this log holds them, a slave restarted as master
  // would never deliver them. An older master sends no `from`: taken at once
  if (Number.isSafeInteger(from) && ctx.store.maxPhyOffset < from!) {
    const copy = { table: theirs, from: from! };
    const oldest = pendingDelayOffsets.get(ctx)?.[0];
    // a `from` not past the oldest's (a master restarted with a shorter log) replaces both
    pendingDelayOffsets.set(ctx, oldest && oldest.from < copy.from ? [oldest, copy] : [copy]);
  } else {
    pendingDelayOffsets.delete(ctx);
    changed += writeDelayOffsets(ctx, theirs);
  }
  if (changed > 0) ctx.logger.debug({ changed }, "offsets copied from master");
  return changed;
}

/** Takes the master's delay-level progress read earlier once this slave's log holds what it counts (after each append). */
export function applyReplicatedDelayOffsets(ctx: BrokerContext): void {
  const copies = pendingDelayOffsets.get(ctx);
  if (!copies || ctx.store.maxPhyOffset < copies[0].from) return;
  const newest = copies[1];
  // the newest copy reached, if so, else the oldest (the newest then waits alone)
  const reached = newest && ctx.store.maxPhyOffset >= newest.from ? newest : copies[0];
  if (reached === copies[0] && newest) pendingDelayOffsets.set(ctx, [newest]);
  else pendingDelayOffsets.delete(ctx);
  try {
    writeDelayOffsets(ctx, reached.table);
  } catch (e) {
    ctx.logger.warn(
      { err: (e as Error).message },
      "writing the master's delay-level progress failed; it is copied again at the next offset copy",
    );
  }
}

/** Writes the master's delay-level progress into delayOffset.json; returns how many entries changed. */
function writeDelayOffsets(ctx: BrokerContext, table: Record<string, number>): number {
  const file = path.join(ctx.config.storeDir, CONFIG_DIR, DELAY_OFFSET_FILE);
  // a put-all over the whole table (RocketMQ's), levels this broker does not configure included:
  // dropping them would make a broker configured with them again deliver their queues again
  const mine = readDelayOffsetTable(file);
  const theirs = { ...mine, ...table };
  let differs = 0;
  for (const k in theirs) if (theirs[k] !== mine[k]) differs++;
  if (differs > 0) JsonFile.write(file, { offsetTable: theirs } satisfies DelayOffsetFile);
  return differs;
}
