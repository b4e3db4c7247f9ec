/**
 * The rebalancer (RocketMQ's `RebalanceImpl` / `RebalancePushImpl` / `RebalanceService`,
 * reference §4): for every subscribed topic it computes the queues this client should hold —
 * all of them when broadcasting, its share by the allocation strategy when clustering — drops the
 * process queues of queues it lost (persisting, then forgetting their offsets) and starts a
 * PullRequest for each queue it gained at the offset computePullFromWhere gives.
 *
 * Clustering hand-over (beyond RocketMQ, internals §6.5): a lost queue is dropped, its listener
 * batches in flight are awaited (bounded), and its final offset is committed with a release; a
 * gained queue's committed offset is read by a take-over query the broker answers once the
 * previous holder released it (or left, or a bounded timeout), so a graceful move re-delivers nothing.
 *
 * {@link Rebalancer.doRebalance} is one round; {@link rebalancerMachine} is the actor that runs a
 * round at start, every 20 s and on demand (NOTIFY_CONSUMER_IDS_CHANGED), never two at once.
 */

import { assign, fromPromise, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import {
  type ConsumeFromWhere,
  ConsumptionActorFor,
  compareMessageQueue,
  type GetConsumerListReply,
  isMQError,
  MASTER_ID,
  type MessageModel,
  type MessageQueue,
  mqKey,
  topicCreateCommand,
} from "../../transport/protocol.ts";
import { LogThrottle, lazyClientLogger } from "../logger.ts";
import { type ActorNode, askUnlessConnectionLost } from "../runtime/index.ts";
import type { AllocateOptions, AllocateStrategy } from "./allocateStrategies.ts";
import { waitForQueueListeners } from "./consumeService.ts";
import type { OffsetStore } from "./offsetStore.ts";
import { OFFSET_QUERY_FAILED } from "./offsetTable.ts";
import { ProcessQueue } from "./processQueue.ts";
import { computePullFromWhere, isRetryTopic, type PullFromWhereLookups } from "./pullFromWhere.ts";
import { askMasterOffset, type ConsumerHost, type PullRequest } from "./pullRequest.ts";
import { brokerReachable, findBrokerAddressInSubscribe, PULL_FAILURE_LOG_INTERVAL_MS } from "./pullService.ts";
import type { SubscriptionTable } from "./subscriptions.ts";

/** @default 20000 — RebalanceService's period. */
export const DEFAULT_REBALANCE_INTERVAL_MS = 20_000;
/** Timeout of the look-ups a rebalance makes. */
export const REBALANCE_REQUEST_TIMEOUT_MS = 3_000;
/**
 * How long a lost queue's listener batches in flight are waited for before its offset is
 * committed and the queue released (kept below the broker's hand-over timeout, 5 s).
 *
 * Not stretched to a send-back's full budget (5 s, 8 s with the retry copy) while one of the queue's
 * batches is sending back: the broker answers the new holder's take-over after its hand-over timeout
 * anyway and then refuses this member's late release, so waiting longer would only hold the commit
 * without keeping the new holder off the message. Instead, a send-back of a dropped queue makes no
 * retry copy (sendBack.ts): its message stays in the process queue, the release commits before it,
 * and the new holder consumes it once. Only a send-back the broker stores after this wait gave up
 * delivers a message twice (never loses it). See docs/decisions.md.
 * @default 3000
 */
export const DEFAULT_QUEUE_RELEASE_WAIT_MS = 3_000;

/** One held queue. */
export interface HeldQueue {
  mq: MessageQueue;
  pq: ProcessQueue<MessageExt>;
  request: PullRequest;
}

export interface RebalancerDeps {
  host: Pick<
    ConsumerHost,
    "node" | "clientId" | "brokerAddress" | "isBrokerUnreachable" | "fetchSubscribeQueues" | "sendHeartbeatToAllBrokers"
  > &
    Partial<Pick<ConsumerHost, "brokerLostAt">>;
  group: string;
  model: MessageModel;
  strategy: AllocateStrategy;
  allocateOptions?: AllocateOptions;
  subscriptions: SubscriptionTable;
  offsetStore: OffsetStore;
  consumeFromWhere: ConsumeFromWhere;
  consumeTimestamp: number;
  /** the queues held, by mqKey; the rebalancer adds and removes entries */
  held: Map<string, HeldQueue>;
  /** a new PullRequest to start */
  startPull(request: PullRequest): void;
  /** push consumers drop queues not pulled for 120 s; pull consumers do not */
  dropPullExpired?: boolean;
  /**
   * orderly: locks a new queue on its broker before it is pulled, marking `pq` (its process queue
   * once held) with the grant; false = not held this round
   */
  lockQueue?(mq: MessageQueue, pq: ProcessQueue<MessageExt>): Promise<boolean>;
  /** orderly: gives up a lost queue (already dropped and removed) — finish the batch in hand, commit, persist, unlock */
  releaseQueue?(h: HeldQueue): Promise<void>;
  /** orderly: unlocks a queue locked for a gain that did not happen (stopped, or its offset could not be read) */
  unlockQueue?(mq: MessageQueue): Promise<void>;
  /** clustering hand-over: longest wait for a lost queue's listener batches @default 3000 */
  releaseWaitMs?: number;
  /**
   * false: a lost queue is released at the offset the application last committed, not at what
   * was consumed (a pull consumer without autoCommit). @default true
   */
  autoCommit?: boolean;
  /** broadcasting: a lost queue's offset could not be written to the local file (logged; the round goes on) */
  onPersistFailed?(error: unknown): void;
}

/**
 * Rebalance results, one line per change, and subscribed topics that do not exist, topics whose
 * members no broker listed and queues whose start offset could not be read, at warn
 * (ACTORMQ_LOG_LEVEL; quiet under the test runner).
 */
export const rebalanceLog = lazyClientLogger("client:rebalance");

/**
 * The held queues whose offsets are persisted, and those kept in memory but not sent: their
 * connection to the broker was lost since their offset was read (ProcessQueue.isOffsetStale), so
 * another member may have consumed and committed them meanwhile. One check per queue per persist.
 */
export function offsetsToPersist(held: Iterable<HeldQueue>): { synced: MessageQueue[]; unsynced: MessageQueue[] } {
  const synced: MessageQueue[] = [];
  const unsynced: MessageQueue[] = [];
  for (const h of held) (h.pq.isOffsetStale() ? unsynced : synced).push(h.mq);
  return { synced, unsynced };
}

/** One client's queue assignment logic. */
export class Rebalancer {
  private stopped = false;
  rounds = 0;
  /** this round already heartbeated because the broker did not list this client */
  private reregistered = false;
  /** orderly: queues locked on their broker by a gain still in progress (not in `held` yet) */
  private readonly gaining = new Map<string, MessageQueue>();
  /**
   * orderly: queues dropped outside a round with their broker lock still held (rebuilt after a
   * regained lock or PULL_OFFSET_MOVED): the next round of their topic holds them again or unlocks
   * them, or no member could lock them until the broker's lock expiry (60 s)
   */
  private readonly lockedUnheld = new Map<string, MessageQueue>();
  /** queues lost and not yet let go (their final offset not yet committed) */
  private readonly releasing = new Set<HeldQueue>();
  /**
   * Failures retried every round, logged at most once per 30 s per key: a topic that does not exist
   * or whose members no broker listed (by topic), a gained queue whose start offset could not be read (by mqKey)
   */
  private readonly failureLog = new LogThrottle(PULL_FAILURE_LOG_INTERVAL_MS);
  /** per broker name, the process queues' view of when its master's connection was last lost */
  private readonly lostAt = new Map<string, () => number>();
  /** ends each take-over in flight (see {@link unlessStopped}) */
  private readonly takeOversInFlight = new Set<() => void>();

  constructor(private readonly deps: RebalancerDeps) {}

  /** the round running now, if any */
  private round: Promise<boolean> | null = null;

  /** True once {@link stop} was called. */
  get isStopped(): boolean {
    return this.stopped;
  }

  /**
   * Stops: later rounds do nothing. Resolves when the round running now ended (its requests have
   * their own timeouts): an orderly round may be waiting for a lock it then gives back, which must
   * happen before the consumer unregisters. Its take-overs end at once: each may be held by the
   * broker until another member releases the queue (up to the hand-over timeout, 5 s), for a queue
   * the stopping consumer will not pull; its unregister then ends the wait on the broker.
   */
  stop(): Promise<void> {
    this.stopped = true;
    for (const end of this.takeOversInFlight) end();
    this.takeOversInFlight.clear();
    return this.round
      ? this.round.then(
          () => {},
          () => {},
        )
      : Promise.resolve();
  }

  /**
   * Names of the brokers this consumer holds queues on, or is letting queues go on: the client
   * keeps their addresses while a route poll no longer names them, so the release reaches them.
   */
  brokersInUse(): Set<string> {
    const names = new Set<string>();
    for (const h of this.deps.held.values()) names.add(h.mq.brokerName);
    for (const h of this.releasing) names.add(h.mq.brokerName);
    for (const mq of this.gaining.values()) names.add(mq.brokerName);
    for (const mq of this.lockedUnheld.values()) names.add(mq.brokerName);
    return names;
  }

  /**
   * Orderly: queues locked on their broker but not in `held`: by a gain in progress, or dropped
   * outside a round (a closing consumer unlocks them too).
   */
  lockedForGain(): MessageQueue[] {
    return [...this.gaining.values(), ...this.lockedUnheld.values()];
  }

  /** Orderly: `mq` was dropped from `held` outside a round with its broker lock held (see {@link lockedUnheld}). */
  droppedLocked(mq: MessageQueue): void {
    this.lockedUnheld.set(mqKey(mq), mq);
  }

  /** One round over every subscribed topic; returns true when the assignment changed. */
  async doRebalance(): Promise<boolean> {
    if (this.stopped) return false;
    const round = this.runRound();
    this.round = round;
    try {
      return await round;
    } finally {
      if (this.round === round) this.round = null;
    }
  }

  private async runRound(): Promise<boolean> {
    this.rounds++;
    this.reregistered = false;
    let changed = false;
    // one order for every member: a topic's gains wait for the releases other members make when
    // they reach that topic, so members going through them in another order (subscriptions listed
    // otherwise) would each wait for the other until the broker's hand-over timeout
    const topics = this.deps.subscriptions.topics().sort();
    for (const topic of topics) {
      if (this.stopped) break;
      try {
        if (await this.rebalanceByTopic(topic)) changed = true;
      } catch (e) {
        // retried next round; said, as RocketMQ's "allocate message queue exception" is: a
        // machineRoomOf that throws for a broker would otherwise leave the topic unconsumed silently
        if (!this.stopped && this.failureLog.pass(`allocate ${topic}`) !== undefined) {
          const error = e instanceof Error ? e.message : String(e);
          rebalanceLog().warn(
            { group: this.deps.group, clientId: this.deps.host.clientId, topic, err: e },
            `Rebalancing topic ${topic} for group ${this.deps.group} failed: its assignment stays as it was this round ` +
              `(retried every rebalance, logged at most once every ${PULL_FAILURE_LOG_INTERVAL_MS / 1000} s per topic): ${error}`,
          );
        }
      }
    }
    // queues of topics no longer subscribed
    const subscribed = new Set(topics);
    for (const [k, h] of this.deps.held) {
      if (!subscribed.has(h.mq.topic)) {
        h.pq.dropped = true;
        this.deps.held.delete(k);
        changed = true;
      }
    }
    if (changed && !this.stopped) await this.deps.host.sendHeartbeatToAllBrokers().catch(() => {});
    return changed;
  }

  /** The sorted queues this client should hold for `topic`, or null when it cannot tell now. */
  async targetQueues(topic: string): Promise<MessageQueue[] | null> {
    let mqAll: MessageQueue[];
    try {
      mqAll = await this.deps.host.fetchSubscribeQueues(topic);
    } catch (e) {
      // RocketMQ's "doRebalance, but the topic[...] not exist.": a consumer of a mistyped topic would
      // otherwise pull nothing and say nothing (a retry topic is created by the broker when needed)
      if (isMQError(e, "TOPIC_NOT_EXIST") && !isRetryTopic(topic) && !this.stopped && this.failureLog.pass(topic) !== undefined) {
        rebalanceLog().warn(
          { group: this.deps.group, clientId: this.deps.host.clientId, topic },
          `Group ${this.deps.group} subscribes topic ${topic}, which does not exist: nothing is pulled from it until it is created ` +
            `with \`${topicCreateCommand(topic)}\` ` +
            `(then taken within a second by a push consumer, at its next rebalance by a pull consumer; ` +
            `logged at most once every ${PULL_FAILURE_LOG_INTERVAL_MS / 1000} s per topic)`,
        );
      }
      return null;
    }
    mqAll = [...mqAll].sort(compareMessageQueue);
    if (this.deps.model === "BROADCASTING") return mqAll;
    if (mqAll.length === 0) return [];
    let cidAll = await this.findConsumerIdList(mqAll);
    if (!cidAll?.includes(this.deps.host.clientId) && !this.stopped && !this.reregistered) {
      // the broker does not list this client, or answers that the group has no member (an unregister
      // that reached it late, say of an earlier consumer of the group with the same client id, or a
      // restarted broker): RocketMQ would hold nothing until the next heartbeat (30 s); register
      // again now (once a round: the heartbeat covers every topic) and ask once more
      this.reregistered = true;
      await this.deps.host.sendHeartbeatToAllBrokers().catch(() => {});
      if (this.stopped) return null;
      cidAll = await this.findConsumerIdList(mqAll);
    }
    if (!cidAll || cidAll.length === 0) return null;
    cidAll.sort();
    return this.deps.strategy(this.deps.group, this.deps.host.clientId, mqAll, cidAll, this.deps.allocateOptions);
  }

  private async rebalanceByTopic(topic: string): Promise<boolean> {
    const target = await this.targetQueues(topic);
    if (target === null || this.stopped) return false;
    return this.updateProcessQueueTable(topic, target);
  }

  /**
   * The group's members: the union of the GET_CONSUMER_LIST_BY_GROUP answers of every broker hosting
   * the topic, asked together — each at its master, else a slave (RocketMQ's selectBrokerAddr), so a
   * consumer that starts or rebalances while the master is down still gets its queues. RocketMQ asks
   * one broker; but a broker that just joined the topic lists a member only after that member's first
   * heartbeat to it, and the member that heard of the broker first would count itself alone there and
   * take every queue. A broker that does not answer is left out; one whose connection is lost is not
   * asked while another broker can be.
   */
  private async findConsumerIdList(mqAll: MessageQueue[]): Promise<string[] | null> {
    const failures: string[] = [];
    const targets: { name: string; addr: string }[] = [];
    for (const name of new Set(mqAll.map((q) => q.brokerName))) {
      const addr = findBrokerAddressInSubscribe(this.deps.host, name, MASTER_ID)?.addr;
      if (addr) targets.push({ name, addr });
      else failures.push(`${name}: no address`);
    }
    const reachable = targets.filter((b) => !this.deps.host.isBrokerUnreachable?.(b.addr));
    const asked = reachable.length > 0 ? reachable : targets;
    for (const b of targets) if (!asked.includes(b)) failures.push(`${b.name} (${b.addr}): connection lost, not asked`);
    const lists = await Promise.all(
      asked.map(async ({ name, addr }): Promise<readonly string[] | null> => {
        try {
          // a broker whose connection is lost is waited on only until its next reconnect fails (at
          // most a second away): a closing consumer waits for the round in flight
          const r = await askUnlessConnectionLost<GetConsumerListReply>(
            this.deps.host.node,
            addr,
            ConsumptionActorFor.GET_CONSUMER_LIST_BY_GROUP,
            { type: "GET_CONSUMER_LIST_BY_GROUP", consumerGroup: this.deps.group },
            { timeoutMs: REBALANCE_REQUEST_TIMEOUT_MS },
            monotonicNow(),
          );
          if (Array.isArray(r.fields.consumerIdList)) return r.fields.consumerIdList;
          failures.push(`${name} (${addr}): no member list in the answer`);
        } catch (e) {
          failures.push(`${name} (${addr}): ${e instanceof Error ? e.message : String(e)}`);
        }
        return null;
      }),
    );
    const answered = lists.filter((l) => l !== null);
    if (answered.length > 0) return [...new Set(answered.flat())];
    // RocketMQ's "doRebalance, get consumer id list failed": a consumer whose brokers are all down
    // would otherwise hold nothing and say nothing
    const topic = mqAll[0]?.topic ?? "";
    if (!this.stopped && this.failureLog.pass(topic) !== undefined) {
      rebalanceLog().warn(
        { group: this.deps.group, clientId: this.deps.host.clientId, topic, errors: failures },
        `No broker of topic ${topic} listed the members of group ${this.deps.group}, so none of its queues is pulled ` +
          `(retried every rebalance, logged at most once every ${PULL_FAILURE_LOG_INTERVAL_MS / 1000} s per topic): ${failures.join("; ")}`,
      );
    }
    return null;
  }

  private async updateProcessQueueTable(topic: string, target: MessageQueue[]): Promise<boolean> {
    const { held, offsetStore } = this.deps;
    const want = new Map(target.map((q) => [mqKey(q), q]));
    let changed = false;
    const gained: string[] = [];
    const lostQueues: string[] = [];
    const letGo: HeldQueue[] = [];
    for (const [k, h] of held) {
      if (h.mq.topic !== topic) continue;
      const lost = !want.has(k);
      const expired = !lost && this.deps.dropPullExpired === true && h.pq.isPullExpired();
      if (!lost && !expired) continue;
      h.pq.dropped = true;
      held.delete(k);
      lostQueues.push(`${h.mq.brokerName}:${h.mq.queueId}`);
      letGo.push(h);
      changed = true;
    }
    // all at once: the members taking these queues over wait for each release
    for (const h of letGo) this.releasing.add(h);
    await Promise.all(letGo.map((h) => this.release(h).finally(() => this.releasing.delete(h))));
    const take = async (k: string, mq: MessageQueue, pq = new ProcessQueue<MessageExt>()): Promise<void> => {
      offsetStore.removeOffset(mq);
      const readAt = monotonicNow();
      let offset: number;
      try {
        offset = await computePullFromWhere(
          this.deps.consumeFromWhere,
          this.deps.consumeTimestamp,
          mq,
          this.deps.lockQueue ? this.lookups : this.takeOverLookups,
        );
      } catch (e) {
        // RocketMQ's "doRebalance, add new mq failed": without it a consumer whose broker is down says nothing at all
        if (!this.stopped && this.failureLog.pass(k) !== undefined) {
          const error = e instanceof Error ? e.message : String(e);
          rebalanceLog().warn(
            {
              group: this.deps.group,
              clientId: this.deps.host.clientId,
              topic: mq.topic,
              brokerName: mq.brokerName,
              queueId: mq.queueId,
              code: isMQError(e) ? e.code : undefined,
              error,
            },
            `Not pulling ${k} for group ${this.deps.group} yet: its start offset could not be computed ` +
              `(logged at most once every ${PULL_FAILURE_LOG_INTERVAL_MS / 1000} s per queue): ${error}`,
          );
        }
        return;
      }
      if (held.has(k) || this.stopped) return;
      if (this.deps.lockQueue) pq.locked = true;
      this.hold(k, mq, pq, offset, readAt);
      gained.push(`${mq.brokerName}:${mq.queueId}`);
      changed = true;
    };
    const gain = async (k: string, mq: MessageQueue): Promise<void> => {
      if (held.has(k) || this.stopped) return;
      if (!this.deps.lockQueue) return take(k, mq);
      // orderly: a queue that cannot be locked is not pulled; its offset is read after locking
      const pq = new ProcessQueue<MessageExt>();
      if (!(await this.deps.lockQueue(mq, pq))) return;
      this.gaining.set(k, mq);
      try {
        if (!this.stopped) await take(k, mq, pq);
      } finally {
        this.gaining.delete(k);
      }
      // a lock taken for nothing would keep the queue from every member until the broker expires it
      if (!held.has(k)) await this.deps.unlockQueue?.(mq);
    };
    if (this.deps.lockQueue) {
      // orderly: one lock request at a time, as RocketMQ's rebalance does
      for (const [k, mq] of want) await gain(k, mq);
      // dropped outside a round: held again above, else its lock goes
      for (const [k, mq] of this.lockedUnheld) {
        if (mq.topic !== topic) continue;
        this.lockedUnheld.delete(k);
        if (!held.has(k)) await this.deps.unlockQueue?.(mq);
      }
    } else {
      // kept queues whose broker connection was lost since their offset was read: read it again
      // (only where the broker can be reached: a query to one that cannot would hold this round, and
      // every later topic's, for the take-over's 15 s)
      const stale = [...held].filter(
        ([k, h]) => h.mq.topic === topic && want.has(k) && h.pq.isOffsetStale() && brokerReachable(this.deps.host, h.mq.brokerName),
      );
      // take-overs may each wait for another member's release: ask for all of them together
      await Promise.all([...[...want].map(([k, mq]) => gain(k, mq)), ...stale.map(([k, h]) => this.resync(k, h))]);
    }
    if (changed) this.deps.subscriptions.touch(topic);
    if (gained.length > 0 || lostQueues.length > 0) {
      rebalanceLog().info(
        {
          group: this.deps.group,
          clientId: this.deps.host.clientId,
          topic,
          gained,
          lost: lostQueues,
          held: [...held.values()].filter((h) => h.mq.topic === topic).length,
        },
        "rebalance changed the assignment",
      );
    }
    return changed;
  }

  /**
   * Holds a queue from `offset` and starts pulling it. A concurrent clustering queue notes when its
   * offset was read (`readAt`) and where its broker's connection losses are told (see
   * ProcessQueue.isOffsetStale).
   */
  private hold(k: string, mq: MessageQueue, pq: ProcessQueue<MessageExt>, offset: number, readAt: number): void {
    if (!this.deps.lockQueue && this.deps.model === "CLUSTERING" && this.deps.offsetStore.resync) {
      pq.offsetRead(readAt);
      pq.offsetLostAt = this.lostAtOf(mq);
    }
    const request: PullRequest = { consumerGroup: this.deps.group, mq, pq, nextOffset: offset, brokerId: MASTER_ID };
    this.deps.held.set(k, { mq, pq, request });
    this.deps.startPull(request);
  }

  /**
   * When the connection to the master of `mq`'s broker was last lost, as a process queue reads it
   * (one function per broker name): the master's address is looked up at each read, since it may
   * move (a new address, or none in the route while only a slave is listed).
   */
  private lostAtOf(mq: MessageQueue): () => number {
    const host = this.deps.host;
    const lostAt = host.brokerLostAt;
    if (!lostAt) return () => Number.NEGATIVE_INFINITY;
    const name = mq.brokerName;
    let f = this.lostAt.get(name);
    if (!f) {
      f = () => {
        const addr = host.brokerAddress(name, MASTER_ID);
        return addr ? lostAt(addr) : Number.NEGATIVE_INFINITY;
      };
      this.lostAt.set(name, f);
    }
    return f;
  }

  /**
   * A kept concurrent queue whose broker connection was lost since its offset was read (this
   * client cut off from the broker: it kept its queues, its rebalances getting no member list,
   * while the broker may have dropped it from the group and given them to another member): its
   * committed offset is read again, as a take-over, so the member that had the queue meanwhile
   * releases it first. Further than this client got (the first offset its process queue holds, else
   * the next pull offset), another member consumed it meanwhile: the queue restarts there, its
   * cache discarded, as after an offset reset. Otherwise nobody else did (a mere loss of the
   * connection): it goes on as it was. Not read, it stays stale (not pulled, its offset not
   * committed) until a later round reads it.
   */
  private async resync(k: string, h: HeldQueue): Promise<void> {
    const { offsetStore, held } = this.deps;
    const readAt = monotonicNow();
    const committed = await this.unlessStopped(offsetStore.resync!(h.mq, this.deps.host.clientId));
    if (held.get(k) !== h || this.stopped) return;
    if (committed === OFFSET_QUERY_FAILED) {
      if (this.failureLog.pass(k) !== undefined)
        rebalanceLog().warn(
          {
            group: this.deps.group,
            clientId: this.deps.host.clientId,
            topic: h.mq.topic,
            brokerName: h.mq.brokerName,
            queueId: h.mq.queueId,
          },
          `Not pulling ${k} for group ${this.deps.group}: its broker's connection was lost since its offset was read, and reading it ` +
            `again failed (retried every rebalance, logged at most once every ${PULL_FAILURE_LOG_INTERVAL_MS / 1000} s per queue)`,
        );
      return;
    }
    const at = h.pq.firstOffset() ?? h.request.nextOffset;
    if (committed <= at) {
      h.pq.offsetRead(readAt);
      return;
    }
    h.pq.dropped = true;
    held.delete(k);
    offsetStore.removeOffset(h.mq);
    offsetStore.updateOffset(h.mq, committed, false);
    rebalanceLog().info(
      {
        group: this.deps.group,
        clientId: this.deps.host.clientId,
        topic: h.mq.topic,
        brokerName: h.mq.brokerName,
        queueId: h.mq.queueId,
        from: at,
        to: committed,
      },
      `${k} was consumed by another member while this client was cut off from its broker: resumed at the group's offset ${committed}`,
    );
    this.hold(k, h.mq, new ProcessQueue<MessageExt>(), committed, readAt);
  }

  /**
   * Lets a lost queue go (already dropped and removed from `held`). Orderly: the consumer's
   * releaseQueue. Clustering: once its listener batches in flight ended (bounded wait), the first
   * offset the process queue still holds (else the next pull offset) is committed with a release,
   * which answers the member taking the queue over. Broadcasting: the offset is persisted.
   */
  private async release(h: HeldQueue): Promise<void> {
    const { offsetStore } = this.deps;
    if (this.deps.releaseQueue) {
      await this.deps.releaseQueue(h);
      return;
    }
    if (this.deps.model === "CLUSTERING" && offsetStore.release) {
      await waitForQueueListeners(h.pq, this.deps.releaseWaitMs ?? DEFAULT_QUEUE_RELEASE_WAIT_MS);
      // a stale offset (ProcessQueue.isOffsetStale) is not sent with the release: it may be behind the group's
      if (h.pq.isOffsetStale()) offsetStore.removeOffset(h.mq);
      else if (this.deps.autoCommit !== false) offsetStore.updateOffset(h.mq, h.pq.firstOffset() ?? h.request.nextOffset, true);
      await offsetStore.release(h.mq, this.deps.host.clientId);
    } else {
      const persisted = offsetStore.persist(h.mq);
      await (this.deps.onPersistFailed ? persisted.catch(this.deps.onPersistFailed) : persisted);
    }
    offsetStore.removeOffset(h.mq);
  }

  /** The broker look-ups of computePullFromWhere. */
  readonly lookups: PullFromWhereLookups = {
    readOffset: (mq) => this.deps.offsetStore.readOffset(mq, "READ_FROM_STORE"),
    maxOffset: async (mq) => (await askMasterOffset(this.deps.host, mq, "GET_MAX_OFFSET", REBALANCE_REQUEST_TIMEOUT_MS)) ?? -1,
    searchOffset: async (mq, timestamp) =>
      (await askMasterOffset(this.deps.host, mq, "SEARCH_OFFSET_BY_TIMESTAMP", REBALANCE_REQUEST_TIMEOUT_MS, timestamp)) ?? -1,
  };

  /** The look-ups of a gained queue: the committed offset is read by a take-over (clustering). */
  private readonly takeOverLookups: PullFromWhereLookups = {
    ...this.lookups,
    readOffset: (mq) => {
      const store = this.deps.offsetStore;
      return this.deps.model === "CLUSTERING" && store.takeOver
        ? this.unlessStopped(store.takeOver(mq, this.deps.host.clientId))
        : store.readOffset(mq, "READ_FROM_STORE");
    },
  };

  /** A take-over's offset, or OFFSET_QUERY_FAILED (not read: the queue is not held) once {@link stop} is called. */
  private unlessStopped(takeOver: Promise<number>): Promise<number> {
    if (this.stopped) return Promise.resolve(OFFSET_QUERY_FAILED);
    return new Promise<number>((resolve, reject) => {
      const end = (): void => resolve(OFFSET_QUERY_FAILED);
      this.takeOversInFlight.add(end);
      void takeOver.then(resolve, reject).finally(() => this.takeOversInFlight.delete(end));
    });
  }
}

/** True for `%RETRY%` topics (re-exported for callers deciding on missing routes). */
export { isRetryTopic };

/** Events of {@link rebalancerMachine}. */
export type RebalancerEvent = { type: "REBALANCE" } | { type: "STOP" };

export interface RebalancerContext {
  rebalancer: Rebalancer;
  intervalMs: number;
  /** a REBALANCE arrived during a round: run another right after */
  again: boolean;
}

/**
 * The rebalance actor: waits `intervalMs` (20 s) or a REBALANCE event, runs one round at a time,
 * and runs one more when asked during a round. Starts idle: the consumer runs the first round
 * itself before its start resolves.
 */
export const rebalancerMachine = setup({
  types: {
    context: {} as RebalancerContext,
    events: {} as RebalancerEvent,
    input: {} as { rebalancer: Rebalancer; intervalMs?: number },
  },
  actors: {
    round: fromPromise<boolean, { rebalancer: Rebalancer }>(({ input }) => input.rebalancer.doRebalance()),
  },
  delays: {
    interval: ({ context }) => context.intervalMs,
  },
  guards: {
    again: ({ context }) => context.again,
  },
}).createMachine({
  id: "rebalancer",
  context: ({ input }) => ({ rebalancer: input.rebalancer, intervalMs: input.intervalMs ?? DEFAULT_REBALANCE_INTERVAL_MS, again: false }),
  initial: "idle",
  states: {
    idle: {
      after: { interval: "balancing" },
      on: { REBALANCE: "balancing", STOP: "stopped" },
    },
    balancing: {
      entry: assign({ again: false }),
      invoke: {
        src: "round",
        input: ({ context }) => ({ rebalancer: context.rebalancer }),
        onDone: [{ guard: "again", target: "balancing", reenter: true }, { target: "idle" }],
        onError: [{ guard: "again", target: "balancing", reenter: true }, { target: "idle" }],
      },
      on: { REBALANCE: { actions: assign({ again: true }) }, STOP: "stopped" },
    },
    stopped: { type: "final", entry: ({ context }) => context.rebalancer.stop() },
  },
});

/**
 * Asks a consumer's rebalancer actor for a round. A request made before the actor is spawned
 * (during the consumer's own first round: a member joined, a pull answered PULL_OFFSET_MOVED) runs
 * once it is, not at its first interval.
 */
export class RebalanceTrigger {
  private pending = false;

  constructor(
    private readonly node: ActorNode,
    readonly actorName: string,
  ) {}

  request(): void {
    const actor = this.node.actorOf(this.actorName);
    if (actor) actor.send({ type: "REBALANCE" });
    else this.pending = true;
  }

  /**
   * Spawns the rebalancer actor (unless it runs) and runs a request that came before it. A stopped
   * rebalancer (its consumer is closing) gets none; an actor left by another consumer of the group
   * on this client is replaced, since requests sent to it would rebalance nothing.
   */
  spawn(rebalancer: Rebalancer, intervalMs: number): void {
    if (rebalancer.isStopped) return;
    const running = this.node.actorOf(this.actorName);
    if (running && (running.getSnapshot().context as RebalancerContext).rebalancer === rebalancer) return;
    if (running) this.node.stopActor(this.actorName);
    this.node.spawn(this.actorName, rebalancerMachine, {
      input: { rebalancer, intervalMs },
      supervision: { strategy: "stop" },
      localOnly: "all",
    });
    if (this.pending) {
      this.pending = false;
      this.request();
    }
  }
}
