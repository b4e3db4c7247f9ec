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
import { DELAY_OFFSET_FILE, type DelayOffsetFile, readDelayOffsetTable, wellFormedDelayOffsets } from "./scheduler.ts";

const SYNC_TIMEOUT_MS = 3_000;

/** Slaves whose last offset copy failed (its warning given; the next is after a copy succeeds). */
const offsetCopyFailing = new WeakSet<BrokerContext>();

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
      .ask<DelayOffsetFile>({ type: "GET_ALL_DELAY_OFFSET" }, { timeoutMs: SYNC_TIMEOUT_MS }),
    stop,
  );
  const file = path.join(ctx.config.storeDir, CONFIG_DIR, DELAY_OFFSET_FILE);
  // a put-all over the whole table (RocketMQ's), levels this broker does not configure included:
  // dropping them would make a broker configured with them again deliver their queues again
  const mine = readDelayOffsetTable(file);
  const theirs = { ...mine, ...wellFormedDelayOffsets(delay.fields.offsetTable) };
  let differs = 0;
  for (const k in theirs) if (theirs[k] !== mine[k]) differs++;
  if (differs > 0) JsonFile.write(file, { offsetTable: theirs } satisfies DelayOffsetFile);
  changed += differs;
  if (changed > 0) ctx.logger.debug({ changed }, "offsets copied from master");
  return changed;
}
