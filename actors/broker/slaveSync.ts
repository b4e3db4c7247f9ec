/**
 * What a slave copies from its master besides the commit log (RocketMQ's `SlaveSynchronize`):
 * topic configs (so pulls on the slave find their topics) and subscription-group configs.
 * Called by the slave's replication loop when it connects and every `slaveSyncIntervalMs`.
 * Consumer offsets are not copied: consumers commit to the master, and offsets committed to a
 * slave while its master is down reach the master again from the consumers themselves.
 */
import { BrokerActor, type SubscriptionGroupConfig, type TopicConfig, type TopicConfigTable } from "../../transport/protocol.ts";
import type { BrokerContext } from "./brokerContext.ts";

const SYNC_TIMEOUT_MS = 3_000;

function sameTopic(a: TopicConfig | undefined, b: TopicConfig): boolean {
  return (
    !!a && a.readQueueNums === b.readQueueNums && a.writeQueueNums === b.writeQueueNums && a.perm === b.perm && !!a.order === !!b.order
  );
}

/** Copies topic and subscription-group configs that differ from the master's; returns how many changed and the master's config version. */
export async function syncFromMaster(ctx: BrokerContext, masterAddress: string): Promise<{ changed: number; configVersion: string }> {
  const ref = ctx.node.ref(masterAddress, BrokerActor.BROKER);
  let changed = 0;
  const topics = await ref.ask<TopicConfigTable>({ type: "GET_ALL_TOPIC_CONFIG" }, { timeoutMs: SYNC_TIMEOUT_MS });
  for (const tc of Object.values(topics.fields.topicConfigTable ?? {})) {
    if (sameTopic(ctx.topics.get(tc.topicName), tc)) continue;
    await ctx.topics.createOrUpdate(tc);
    changed++;
  }
  const groups = await ref.ask<{ subscriptionGroupTable: Record<string, SubscriptionGroupConfig> }>(
    { type: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG" },
    { timeoutMs: SYNC_TIMEOUT_MS },
  );
  for (const g of Object.values(groups.fields.subscriptionGroupTable ?? {})) {
    if (JSON.stringify(ctx.groups.get(g.groupName)) === JSON.stringify(g)) continue;
    await ctx.groups.createOrUpdate(g);
    changed++;
  }
  if (changed > 0) ctx.logger.info({ changed }, "configs copied from master");
  // the same form the master's `ha` actor reports in each transfer reply
  return { changed, configVersion: `${topics.fields.dataVersion}/${(groups.fields as { dataVersion?: number }).dataVersion}` };
}
