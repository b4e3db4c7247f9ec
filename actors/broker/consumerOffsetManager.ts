/**
 * Consumer offsets on the broker (RocketMQ's `ConsumerOffsetManager` and `ConsumerManageProcessor`):
 * the table `topic@group` -> queueId -> next offset to consume, pending server-side resets, and the
 * `offsets` actor that answers the offset requests and persists the table every 5 s and at close
 * to `<storeDir>/config/consumerOffset.json`, atomically.
 */

import path from "node:path";
import { fromCallback, setup } from "xstate";
import { JsonFile } from "../../store/index.ts";
import {
  type ConsumeStatsReply,
  type GetConsumeStatsRequest,
  isGroupName,
  MQError,
  type QueryConsumerOffsetRequest,
  type QueueConsumeStats,
  type QueueOffsetRequest,
  RETRY_GROUP_TOPIC_PREFIX,
  type ResetOffsetRequest,
  type SearchOffsetRequest,
  shownValue,
  topicCreateCommand,
  type UpdateConsumerOffsetRequest,
} from "../../transport/protocol.ts";
import type { Replier } from "../runtime/index.ts";
import type { BrokerContext } from "./brokerContext.ts";
import {
  backupTableOf,
  CONFIG_DIR,
  type ConfigLogger,
  readBrokerJson,
  type SkippedEntry,
  tableOf,
  warnLoadedFromBackup,
  warnSkipped,
} from "./configFile.ts";
import { consumerTableOf, isBroadcastingGroup } from "./consumerManager.ts";
import { checkInDiskByCommitOffset, haTuningOf } from "./haTuning.ts";
import { RateCounter } from "./rateCounter.ts";

/** File under `<storeDir>/config/` that holds the committed offsets. */
export const CONSUMER_OFFSET_FILE = "consumerOffset.json";
/** How often the table is written (`flushConsumerOffsetInterval`). */
export const DEFAULT_FLUSH_CONSUMER_OFFSET_INTERVAL_MS = 5_000;
/** Separator of the table key `topic@group` (`TOPIC_GROUP_SEPARATOR`). */
export const TOPIC_GROUP_SEPARATOR = "@";

/**
 * How long a take-over (QUERY_CONSUMER_OFFSET with `waitRelease`) waits for the queue's previous
 * holder to release it before it is answered anyway (a holder that crashed or never heard of the
 * rebalance; internals §6.5).
 */
export const DEFAULT_QUEUE_HANDOVER_TIMEOUT_MS = 5_000;

/** Broker options this part reads (passed through `Broker.start` options). */
export interface OffsetTuning {
  /** @default 5000 */
  flushConsumerOffsetIntervalMs?: number;
  /** longest wait of a take-over for the previous holder's release, ms @default 5000 */
  queueHandOverTimeoutMs?: number;
}

/**
 * Most `topic@group` holder tables kept for groups whose last member left (about 420 B each with 4
 * queues: 4 MiB), the oldest gone forgotten first. They are not dropped with the last member: the
 * member that let a queue go last is what refuses the late release of a member the expiry scan
 * dropped (a client that could not reach the broker, back later), which would move the group's
 * offset back. @default 10000
 */
export const MAX_MEMBERLESS_HOLDER_GROUPS = 10_000;

/** A take-over waiting for the queue's holder to let go. */
interface TakeOverWait {
  group: string;
  clientId: string;
  answer: () => void;
  timer: NodeJS.Timeout;
}

/** Who holds one queue of a group (hand-over between members, internals §6.5). */
interface QueueHolder {
  /** the member that holds the queue now: it took the queue over, or pulled it last */
  owner: string | undefined;
  /** the member that last let the queue go: pulls of it still on their way are not a new hold */
  releasedBy: string | undefined;
  /**
   * `releasedBy` did not release the queue but was dropped from the group (heartbeat expiry): if it
   * comes back as a member before anyone takes the queue over, it still holds it
   */
  releasedByLeaving: boolean;
  /** in arrival order: a release answers the first, the others wait for that member's release */
  waits: TakeOverWait[] | undefined;
}

/** The stored form (RocketMQ's consumerOffset.json). */
export interface ConsumerOffsetFile {
  offsetTable: Record<string, Record<string, number>>;
}

/**
 * Calls `fn` for each well-formed entry of an offsetTable in its stored form (`topic@group` -> queue
 * id -> offset), and `skip` (when given) for each other one.
 */
function forEachStoredOffset(
  table: unknown,
  fn: (key: string, queueId: number, offset: number) => void,
  skip?: (s: SkippedEntry & { key?: string; queueId?: number }) => void,
): void {
  if (!table || typeof table !== "object") return;
  for (const [key, queues] of Object.entries(table)) {
    if (!key.includes(TOPIC_GROUP_SEPARATOR)) {
      skip?.({ entry: `offsets of "${key}"`, error: `The key must be topic${TOPIC_GROUP_SEPARATOR}group.` });
      continue;
    }
    if (!queues || typeof queues !== "object" || Array.isArray(queues)) {
      skip?.({ entry: `offsets of "${key}"`, error: `They must be an object of queue id -> offset, not ${shownValue(queues)}.`, key });
      continue;
    }
    for (const [qid, off] of Object.entries(queues as Record<string, unknown>)) {
      const q = Number(qid);
      // a fractional offset would be answered to the group's pulls, each refused as INVALID_PARAMETER
      if (!(Number.isInteger(q) && q >= 0))
        skip?.({ entry: `offset of "${key}" queue ${qid}`, error: "The queue id must be an integer >= 0." });
      else if (!(Number.isSafeInteger(off) && (off as number) >= 0))
        skip?.({
          entry: `offset of "${key}" queue ${qid}`,
          error: `The offset must be an integer >= 0, not ${shownValue(off)}.`,
          key,
          queueId: q,
        });
      else fn(key, q, off as number);
    }
  }
}

/** The table of committed offsets and pending resets of one broker. */
export class ConsumerOffsetManager {
  private readonly table = new Map<string, Map<number, number>>();
  private readonly resets = new Map<string, Map<number, number>>();
  /** `topic@group` -> queueId -> holder; in memory only (a restarted broker knows no holder, nothing waits) */
  private readonly holders = new Map<string, Map<number, QueueHolder>>();
  /** `topic@group` -> group of the holder tables whose group had no member left, oldest first */
  private readonly memberless = new Map<string, string>();
  private dirty = false;
  /** the periodic write in flight (see {@link persistInBackground}) */
  private writing: Promise<void> | undefined;
  /** messages served to pulls per `topic@group` over the last minute (RocketMQ's GROUP_GET_NUMS) */
  private readonly pulled = new RateCounter();
  /** whether a client is a member of a group now (the broker's consumer table, see {@link consumerOffsetsOf}) */
  isMember: (group: string, clientId: string) => boolean = () => false;
  /** whether a group has any member now (the broker's consumer table) */
  hasMembers: (group: string) => boolean = () => false;

  constructor(readonly file: string) {}

  /**
   * Loads the file (or its `.bak`, with a warning); damaged entries are skipped with a warning and
   * the file copied aside, a missing file is an empty table, a file that is not JSON and has no
   * backup, or has no `offsetTable` object, is MALFORMED (see {@link readBrokerJson}).
   */
  static load(file: string, logger?: ConfigLogger): ConsumerOffsetManager {
    const m = new ConsumerOffsetManager(file);
    const skipped: (SkippedEntry & { key?: string; queueId?: number })[] = [];
    const set = (key: string, queueId: number, offset: number) => {
      let q = m.table.get(key);
      if (!q) m.table.set(key, (q = new Map()));
      q.set(queueId, offset);
    };
    forEachStoredOffset(tableOf(file, readBrokerJson(file, logger), "offsetTable"), set, (s) => skipped.push(s));
    // an offset that is not valid takes the .bak's, where that one is (RocketMQ reads the .bak when
    // the file does not decode): skipped, the group would consume the queue again from
    // consumeFromWhere, and the next write would replace the .bak with the damaged file
    const bak = skipped.length > 0 ? backupTableOf(file, "offsetTable") : undefined;
    const fromBak: (SkippedEntry & { offset: number })[] = [];
    const restored = new Set<SkippedEntry>();
    if (bak)
      forEachStoredOffset(bak, (key, queueId, offset) => {
        if (m.table.get(key)?.has(queueId)) return;
        const s = skipped.find((e) => e.key === key && (e.queueId === undefined || e.queueId === queueId));
        if (!s) return;
        set(key, queueId, offset);
        restored.add(s);
        fromBak.push({ ...s, entry: s.queueId === undefined ? `${s.entry} (queue ${queueId})` : s.entry, offset });
      });
    if (fromBak.length > 0) m.dirty = true; // the next write puts them in the file
    warnLoadedFromBackup(
      file,
      fromBak.map((s) => ({ ...s, value: s.offset })),
      logger,
    );
    warnSkipped(
      file,
      skipped.filter((s) => !restored.has(s)),
      "the group starts such a queue where its consumeFromWhere says",
      logger,
    );
    return m;
  }

  /** Counts messages a pull of the group took from the topic (for {@link consumeTps}). */
  notePulled(group: string, topic: string, count: number): void {
    this.pulled.add(topic + TOPIC_GROUP_SEPARATOR + group, count);
  }

  /** Messages per second the group's pulls took from the topic over the last minute. */
  consumeTps(group: string, topic: string): number {
    return this.pulled.perSecond(topic + TOPIC_GROUP_SEPARATOR + group);
  }

  /** Stores `offset` as the group's next offset for the queue; a smaller value overwrites too (RocketMQ). */
  commitOffset(group: string, topic: string, queueId: number, offset: number): void {
    this.setOffset(topic + TOPIC_GROUP_SEPARATOR + group, queueId, offset);
  }

  /** Sets an offset of `topic@group`; true when it changed. */
  private setOffset(key: string, queueId: number, offset: number): boolean {
    let m = this.table.get(key);
    if (!m) this.table.set(key, (m = new Map()));
    if (m.get(queueId) === offset) return false;
    m.set(queueId, offset);
    this.dirty = true;
    return true;
  }

  /** A pending reset first, else the committed offset, else -1. */
  queryOffset(group: string, topic: string, queueId: number): number {
    const key = topic + TOPIC_GROUP_SEPARATOR + group;
    const r = this.resets.get(key)?.get(queueId);
    if (r !== undefined) return r;
    return this.table.get(key)?.get(queueId) ?? -1;
  }

  /** True while a server-side reset waits to be answered to the queue's next pull. */
  hasPendingReset(group: string, topic: string, queueId: number): boolean {
    return this.resets.size > 0 && this.resets.get(topic + TOPIC_GROUP_SEPARATOR + group)?.has(queueId) === true;
  }

  /** The pending reset offset of the queue, removed (it is answered once); undefined when none. */
  takeReset(group: string, topic: string, queueId: number): number | undefined {
    if (this.resets.size === 0) return undefined;
    const key = topic + TOPIC_GROUP_SEPARATOR + group;
    const m = this.resets.get(key);
    const r = m?.get(queueId);
    if (r === undefined) return undefined;
    m!.delete(queueId);
    if (m!.size === 0) this.resets.delete(key);
    return r;
  }

  /** Records a server-side reset: committed at once and answered to the next pull as OFFSET_MOVED. */
  assignResetOffset(group: string, topic: string, queueId: number, offset: number): void {
    const key = topic + TOPIC_GROUP_SEPARATOR + group;
    let m = this.resets.get(key);
    if (!m) this.resets.set(key, (m = new Map()));
    m.set(queueId, offset);
    this.commitOffset(group, topic, queueId, offset);
  }

  // --- hand-over ------------------------------------------------------------------------------

  private holderOf(group: string, topic: string, queueId: number): QueueHolder {
    const key = topic + TOPIC_GROUP_SEPARATOR + group;
    let m = this.holders.get(key);
    if (!m) {
      m = new Map();
      this.holders.set(key, m);
    }
    let h = m.get(queueId);
    if (!h) {
      h = { owner: undefined, releasedBy: undefined, releasedByLeaving: false, waits: undefined };
      m.set(queueId, h);
    }
    return h;
  }

  /**
   * A pull of `clientId` arrived (one map look-up on the pull path). It becomes the queue's holder
   * unless it is the member that let the queue go: such a pull was on its way before the release,
   * so it is not recorded and the offset it carries must not be committed (returns false). A member
   * that was only dropped by the expiry scan and registered again, with nobody having taken the
   * queue over since, never let it go: its pulls make it the holder again.
   */
  notePuller(group: string, topic: string, queueId: number, clientId: string): boolean {
    const h = this.holders.get(topic + TOPIC_GROUP_SEPARATOR + group)?.get(queueId);
    if (h?.owner === clientId) return true;
    if (h?.releasedBy === clientId) {
      if (!h.releasedByLeaving || h.owner !== undefined || !this.isMember(group, clientId)) return false;
      h.releasedBy = undefined;
      h.releasedByLeaving = false;
    }
    this.holderOf(group, topic, queueId).owner = clientId;
    return true;
  }

  /**
   * `clientId` takes the queue over: `answer` is called at once when nobody else holds it (or its
   * holder is no longer a member), else when the holder releases it or leaves and no earlier
   * take-over waits (that one becomes the holder, and this one waits for its release), or after
   * `timeoutMs` from now. From then on `clientId` is the holder.
   */
  takeOver(group: string, topic: string, queueId: number, clientId: string, timeoutMs: number, answer: () => void): void {
    const h = this.holderOf(group, topic, queueId);
    if (h.owner === undefined || h.owner === clientId || !this.isMember(group, h.owner)) {
      h.owner = clientId;
      answer();
      return;
    }
    const w: TakeOverWait = { group, clientId, answer, timer: setTimeout(() => this.endWait(h, w), timeoutMs) };
    w.timer.unref?.();
    if (h.waits) h.waits.push(w);
    else h.waits = [w];
  }

  /**
   * `clientId` let the queue go with `offset` as its final offset (< 0: none). Committed unless
   * another member already holds the queue (it took over after the timeout and commits its own)
   * or, nobody holding it, another member let it go last: this release is then older than that
   * member's hold (one the client kept while it could not reach the broker), and its offset older
   * than the one that member committed. The first take-over waiting for it is answered. Returns
   * true when the offset was committed.
   */
  release(group: string, topic: string, queueId: number, clientId: string, offset: number): boolean {
    const h = this.holders.get(topic + TOPIC_GROUP_SEPARATOR + group)?.get(queueId);
    // another member holds the queue, or nobody does and another member let it go last
    if (h && (h.owner ?? h.releasedBy ?? clientId) !== clientId) return false;
    let committed = false;
    if (offset >= 0 && !this.hasPendingReset(group, topic, queueId)) {
      this.commitOffset(group, topic, queueId, offset);
      committed = true;
    }
    if (h) this.letGo(h, clientId, false);
    return committed;
  }

  /**
   * A member left the group: the queues it held are free, each handed to its first waiting
   * take-over; take-overs it was waiting for itself are answered and forgotten.
   */
  memberLeft(group: string, clientId: string): void {
    const suffix = TOPIC_GROUP_SEPARATOR + group;
    const last = !this.hasMembers(group);
    for (const [key, m] of this.holders) {
      if (!key.endsWith(suffix)) continue;
      for (const h of m.values()) {
        if (h.owner === clientId) this.letGo(h, clientId, true);
        if (h.waits) for (const w of h.waits.filter((x) => x.clientId === clientId)) this.endWait(h, w, false);
      }
      if (last) {
        this.memberless.delete(key);
        this.memberless.set(key, group);
      }
    }
    // the oldest gone groups' holders go once too many are kept (see MAX_MEMBERLESS_HOLDER_GROUPS)
    for (const [key, g] of this.memberless) {
      if (this.memberless.size <= MAX_MEMBERLESS_HOLDER_GROUPS) break;
      this.memberless.delete(key);
      const m = this.holders.get(key);
      // a group with members again keeps them (listed again when its last member leaves)
      if (m && !this.hasMembers(g) && [...m.values()].every((h) => h.owner === undefined && h.waits === undefined))
        this.holders.delete(key);
    }
  }

  /** Take-overs waiting now (tests, tools). */
  get waitingTakeOvers(): number {
    let n = 0;
    for (const m of this.holders.values()) for (const h of m.values()) n += h.waits?.length ?? 0;
    return n;
  }

  /** Answers every waiting take-over (broker shutdown). */
  endAllWaits(): void {
    for (const m of this.holders.values()) for (const h of m.values()) while (h.waits && h.waits.length > 0) this.endWait(h, h.waits[0]!);
  }

  /**
   * The holder let the queue go (`leaving`: it was dropped from the group). One take-over gets the
   * queue: answering every waiting one with the same offset would let each consume from it. A
   * waiting member that is gone does not hold the queue up.
   */
  private letGo(h: QueueHolder, clientId: string, leaving: boolean): void {
    h.owner = undefined;
    h.releasedBy = clientId;
    h.releasedByLeaving = leaving;
    while (h.waits && h.waits.length > 0) {
      const w = h.waits[0]!;
      this.endWait(h, w);
      if (this.isMember(w.group, w.clientId)) return;
    }
  }

  /** Answers a take-over, which makes its member the holder (unless `holds` is false). */
  private endWait(h: QueueHolder, w: TakeOverWait, holds = true): void {
    const i = h.waits?.indexOf(w) ?? -1;
    if (i < 0) return;
    h.waits!.splice(i, 1);
    if (h.waits!.length === 0) h.waits = undefined;
    clearTimeout(w.timer);
    if (holds) h.owner = w.clientId;
    w.answer();
  }

  /** The committed offsets of one `topic@group`. */
  offsetsOf(group: string, topic: string): ReadonlyMap<number, number> | undefined {
    return this.table.get(topic + TOPIC_GROUP_SEPARATOR + group);
  }

  /**
   * Forgets every offset and pending reset whose `topic@group` key `drop` takes (RocketMQ's
   * `cleanOffsetByTopic` and `removeOffset`); the table is written at the next persist. Returns
   * how many keys were dropped.
   */
  removeWhere(drop: (topic: string, group: string) => boolean): number {
    let n = 0;
    for (const t of [this.table, this.resets, this.holders] as Array<Map<string, unknown>>) {
      for (const key of [...t.keys()]) {
        const at = key.indexOf(TOPIC_GROUP_SEPARATOR);
        if (!drop(key.slice(0, at), key.slice(at + 1))) continue;
        t.delete(key);
        if (t === this.table) n++;
      }
    }
    if (n > 0) this.dirty = true;
    return n;
  }

  /** Topics the group has committed offsets for. */
  topicsOf(group: string): string[] {
    const out: string[] = [];
    const suffix = TOPIC_GROUP_SEPARATOR + group;
    for (const key of this.table.keys()) if (key.endsWith(suffix)) out.push(key.slice(0, key.length - suffix.length));
    return out;
  }

  /**
   * Takes every offset of `table` (a master's, on a slave: RocketMQ's `syncConsumerOffset`, a
   * put-all); entries that are not queue ids with integer offsets >= 0 are skipped. Returns how many changed.
   */
  mergeFrom(table: unknown): number {
    let changed = 0;
    forEachStoredOffset(table, (key, queueId, offset) => {
      if (this.setOffset(key, queueId, offset)) changed++;
    });
    return changed;
  }

  /** The table in its stored form. */
  toJSON(): ConsumerOffsetFile {
    const offsetTable: Record<string, Record<string, number>> = {};
    for (const [key, m] of this.table) {
      const q: Record<string, number> = {};
      for (const [qid, off] of m) q[String(qid)] = off;
      offsetTable[key] = q;
    }
    return { offsetTable };
  }

  /**
   * Writes the table atomically when it changed since the last write (or always with `force`),
   * after the periodic write in flight: started before this one, with an older table, it must not
   * rename its file over this one's.
   */
  async persist(force = false): Promise<void> {
    while (this.writing) await this.writing;
    if (!this.dirty && !force) return;
    this.dirty = false;
    try {
      JsonFile.write(this.file, this.toJSON());
    } catch (e) {
      this.dirty = true;
      throw e;
    }
  }

  /**
   * The periodic write (RocketMQ persists the table on a scheduler thread, not where requests are
   * served): the table is copied now and written off the event loop, whose two fsyncs would stall
   * every request for milliseconds. Skipped while the previous one is still writing; a failed one
   * leaves the table dirty for the next and is told to `onError`.
   */
  persistInBackground(onError: (e: unknown) => void): void {
    if (this.writing || !this.dirty) return;
    this.dirty = false;
    this.writing = JsonFile.writeAsync(this.file, this.toJSON()).then(
      () => {
        this.writing = undefined;
      },
      (e: unknown) => {
        this.writing = undefined;
        this.dirty = true;
        onError(e);
      },
    );
  }
}

const managers = new WeakMap<BrokerContext, ConsumerOffsetManager>();

/**
 * The offset table of a broker, shared by the `offsets` actor (requests, persistence) and the pull
 * processor (offsets committed on pulls, pending resets): loaded on first use.
 */
export function consumerOffsetsOf(ctx: BrokerContext): ConsumerOffsetManager {
  let m = managers.get(ctx);
  if (!m) {
    const created = ConsumerOffsetManager.load(path.join(ctx.config.storeDir, CONFIG_DIR, CONSUMER_OFFSET_FILE), ctx.logger);
    managers.set(ctx, created);
    // a member that leaves hands its queues over at once
    const members = consumerTableOf(ctx);
    members.onMemberLeft((group, clientId) => created.memberLeft(group, clientId));
    created.isMember = (group, clientId) => members.group(group)?.clients.has(clientId) === true;
    created.hasMembers = (group) => (members.group(group)?.clients.size ?? 0) > 0;
    m = created;
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Request handling

type Asked = { reply?: Replier };

export type OffsetsEvent =
  | ({ type: "QUERY_CONSUMER_OFFSET" } & QueryConsumerOffsetRequest & Asked)
  | ({ type: "UPDATE_CONSUMER_OFFSET" } & UpdateConsumerOffsetRequest & Asked)
  | ({ type: "GET_MAX_OFFSET" } & QueueOffsetRequest & Asked)
  | ({ type: "GET_MIN_OFFSET" } & QueueOffsetRequest & Asked)
  | ({ type: "GET_EARLIEST_MSG_STORETIME" } & QueueOffsetRequest & Asked)
  | ({ type: "SEARCH_OFFSET_BY_TIMESTAMP" } & SearchOffsetRequest & Asked)
  | ({ type: "GET_CONSUME_STATS" } & GetConsumeStatsRequest & Asked)
  | ({ type: "INVOKE_BROKER_TO_RESET_OFFSET" } & ResetOffsetRequest & Asked)
  | ({ type: "GET_ALL_CONSUMER_OFFSET" } & Asked)
  | { type: "PERSIST" }
  | ({ type: "SHUTDOWN" } & Asked);

export interface OffsetsContext {
  ctx: BrokerContext;
  offsets: ConsumerOffsetManager;
}

export interface OffsetsInput {
  ctx: BrokerContext;
}

function str(v: unknown, name: string): string {
  if (typeof v !== "string" || v.length === 0) throw new MQError("INVALID_PARAMETER", `The request needs a non-empty "${name}" field.`);
  return v;
}

function int(v: unknown, name: string): number {
  if (typeof v !== "number" || !Number.isInteger(v))
    throw new MQError("INVALID_PARAMETER", `The request needs an integer "${name}" field, got ${String(v)}.`);
  return v;
}

/** QUERY_CONSUMER_OFFSET (RocketMQ's rule, reference §14.3). */
export function queryConsumerOffset(
  ctx: BrokerContext,
  offsets: ConsumerOffsetManager,
  req: QueryConsumerOffsetRequest,
): { offset: number } {
  const group = str(req.consumerGroup, "consumerGroup");
  const topic = str(req.topic, "topic");
  const queueId = int(req.queueId, "queueId");
  const off = offsets.queryOffset(group, topic, queueId);
  if (off >= 0) return { offset: off };
  // RocketMQ answers 0 while the queue still starts at 0 and its first message is readable and
  // still "in memory" (or nothing was ever written), so a new group does not skip a young queue's
  // first messages; a group new to a long history starts where consumeFromWhere says
  const { store } = ctx;
  const startsAtZero =
    store.getMinOffset(topic, queueId) <= 0 &&
    (store.getMaxOffset(topic, queueId) === 0 ||
      (store.getStoreTime(topic, queueId, 0) >= 0 &&
        !checkInDiskByCommitOffset(store.maxPhyOffset, store.getCommitLogOffsetInQueue(topic, queueId, 0), haTuningOf(ctx.config))));
  if (req.setZeroIfNotFound !== false && startsAtZero) {
    return { offset: 0 };
  }
  throw new MQError(
    "QUERY_NOT_FOUND",
    `No offset of group ${group} is stored for ${topic} queue ${queueId} (maybe this group consumer boot first); start where consumeFromWhere says.`,
  );
}

/** UPDATE_CONSUMER_OFFSET: ignored while a server-side reset of the queue is pending. */
export function updateConsumerOffset(
  ctx: BrokerContext,
  offsets: ConsumerOffsetManager,
  req: UpdateConsumerOffsetRequest,
): Record<string, never> {
  const group = str(req.consumerGroup, "consumerGroup");
  const topic = str(req.topic, "topic");
  const queueId = int(req.queueId, "queueId");
  const commitOffset = int(req.commitOffset, "commitOffset");
  const release = req.release === true && typeof req.clientId === "string" && req.clientId.length > 0;
  // as a pull's piggy-backed commit: a negative or unsafe offset stored would make every later pull
  // of the group from it invalid (a release's -1: the member leaves no offset)
  if (!Number.isSafeInteger(commitOffset) || (commitOffset < 0 && !(release && commitOffset === -1)))
    throw new MQError("INVALID_PARAMETER", `UPDATE_CONSUMER_OFFSET needs a commitOffset from 0 to 2^53-1, got ${commitOffset}.`);
  if (!ctx.groups.findOrAutoCreate(group)) {
    throw new MQError(
      "SUBSCRIPTION_GROUP_NOT_EXIST",
      `Consumer group ${group} does not exist on broker ${ctx.config.brokerName}; create it first (autoCreateSubscriptionGroup is off).`,
    );
  }
  if (!ctx.topics.get(topic))
    throw new MQError(
      "TOPIC_NOT_EXIST",
      `topic[${topic}] not exist on broker ${ctx.config.brokerName}; create it with \`${topicCreateCommand(topic)}\` before committing offsets.`,
    );
  if (release) {
    offsets.release(group, topic, queueId, req.clientId as string, commitOffset);
    return {};
  }
  if (offsets.hasPendingReset(group, topic, queueId)) return {};
  offsets.commitOffset(group, topic, queueId, commitOffset);
  return {};
}

/**
 * QUERY_CONSUMER_OFFSET with `clientId` and `waitRelease` (a member taking a queue over in a
 * rebalance): answered by `respond` once the queue's previous holder released it, left the group,
 * or the hand-over timeout passed; at once when nobody else holds it.
 */
export function takeOverConsumerOffset(
  ctx: BrokerContext,
  offsets: ConsumerOffsetManager,
  req: QueryConsumerOffsetRequest,
  respond: () => void,
): void {
  const group = str(req.consumerGroup, "consumerGroup");
  const topic = str(req.topic, "topic");
  const queueId = int(req.queueId, "queueId");
  const clientId = str(req.clientId, "clientId");
  const timeoutMs = (ctx.config as OffsetTuning).queueHandOverTimeoutMs ?? DEFAULT_QUEUE_HANDOVER_TIMEOUT_MS;
  offsets.takeOver(group, topic, queueId, clientId, timeoutMs, respond);
}

/**
 * Throws SUBSCRIPTION_GROUP_NOT_EXIST unless this broker knows `group`: in its subscription group
 * table, with committed offsets, or with consumers online. As in RocketMQ, a reset of any other
 * group is refused, so a mistyped name does not create offsets (and lag) for a group nobody runs.
 */
function checkKnownGroup(ctx: BrokerContext, offsets: ConsumerOffsetManager, group: string): void {
  if (ctx.groups.get(group) || offsets.topicsOf(group).length > 0 || consumerTableOf(ctx).group(group)) return;
  throw new MQError(
    "SUBSCRIPTION_GROUP_NOT_EXIST",
    `Consumer group ${group} does not exist on broker ${ctx.config.brokerName}${isGroupName(group) ? "" : " (nor is it a valid group name)"}: a group exists once a consumer of it has started; list the groups that exist with \`actormq group list\`.`,
  );
}

/**
 * Throws NO_PERMISSION for a group whose members consume in broadcasting mode, online or not (see
 * {@link isBroadcastingGroup}): its offsets are the members', the broker's are none of them.
 * `consequence` completes the message ("so ...") with what the broker cannot do and what to do.
 */
function checkNotBroadcasting(ctx: BrokerContext, group: string, consequence: string): void {
  if (!isBroadcastingGroup(ctx, group)) return;
  throw new MQError(
    "NO_PERMISSION",
    `Consumer group ${group} consumes in broadcasting mode: each member keeps its offsets locally (<offsetStoreDir>/<host@instanceName>/${group}/offsets.json), so ${consequence}`,
  );
}

/**
 * GET_CONSUME_STATS: broker and consumer offset per queue of the group's topics (and its retry
 * topic); SUBSCRIPTION_GROUP_NOT_EXIST for a group the broker does not know, NO_PERMISSION for a
 * broadcasting one (its progress is its members').
 */
export function consumeStats(
  ctx: BrokerContext,
  offsets: ConsumerOffsetManager,
  req: GetConsumeStatsRequest,
  subscribedTopics: Iterable<string> = [],
): ConsumeStatsReply {
  const group = str(req.consumerGroup, "consumerGroup");
  checkKnownGroup(ctx, offsets, group);
  // what the broker holds for it is none of its members' offsets: every queue would show a lag of
  // everything, and a retry topic it does not use
  checkNotBroadcasting(
    ctx,
    group,
    "the broker has no progress of it to show: read a member's offsets.json (its next offset per queue; offsetStoreDir defaults to ~/.actormq_offsets on the member's host).",
  );
  const topics = new Set<string>();
  if (typeof req.topic === "string" && req.topic.length > 0) {
    topics.add(req.topic);
  } else {
    for (const t of offsets.topicsOf(group)) topics.add(t);
    for (const t of subscribedTopics) topics.add(t);
  }
  const offsetTable: QueueConsumeStats[] = [];
  let consumeTps = 0;
  for (const topic of [...topics].sort()) {
    consumeTps += offsets.consumeTps(group, topic);
    const tc = ctx.topics.get(topic);
    if (!tc) {
      if (req.topic)
        throw new MQError(
          "TOPIC_NOT_EXIST",
          `topic[${topic}] not exist on broker ${ctx.config.brokerName}: create it with \`${topicCreateCommand(topic)}\`.`,
        );
      continue;
    }
    for (let queueId = 0; queueId < tc.readQueueNums; queueId++) {
      const brokerOffset = ctx.store.getMaxOffset(topic, queueId);
      const committed = offsets.queryOffset(group, topic, queueId);
      const consumerOffset = Math.max(committed, 0);
      const lastTimestamp = consumerOffset > 0 ? Math.max(0, ctx.store.getStoreTime(topic, queueId, consumerOffset - 1)) : 0;
      offsetTable.push({ topic, brokerName: ctx.config.brokerName, queueId, brokerOffset, consumerOffset, lastTimestamp });
    }
  }
  return { offsetTable, consumeTps };
}

/**
 * INVOKE_BROKER_TO_RESET_OFFSET, server side (`useServerSideResetOffset`): per readable queue the
 * first offset stored at or after `timestamp` (the consumer's offset when it is already earlier,
 * unless `isForce`), committed and answered once to the queue's next pull as PULL_OFFSET_MOVED.
 * A group the broker does not know is refused (SUBSCRIPTION_GROUP_NOT_EXIST), as is any reset
 * on a slave and one of a group whose members consume in broadcasting mode, online or not
 * (NO_PERMISSION, see {@link isBroadcastingGroup}).
 */
export function resetOffset(
  ctx: BrokerContext,
  offsets: ConsumerOffsetManager,
  req: ResetOffsetRequest,
): { offsetTable: { queueId: number; offset: number }[] } {
  // a slave's offsets are overwritten by its master's at the next copy (RocketMQ refuses it too)
  if (ctx.config.role === "SLAVE")
    throw new MQError(
      "NO_PERMISSION",
      `Can not reset offset in slave broker: broker ${ctx.config.brokerName} is a slave; reset on its master.`,
    );
  const group = str(req.group, "group");
  const topic = str(req.topic, "topic");
  if (typeof req.timestamp !== "number" || !Number.isFinite(req.timestamp))
    throw new MQError("INVALID_PARAMETER", "INVOKE_BROKER_TO_RESET_OFFSET needs a numeric timestamp (ms since the epoch).");
  const tc = ctx.topics.get(topic);
  if (!tc)
    throw new MQError(
      "TOPIC_NOT_EXIST",
      `topic[${topic}] not exist on broker ${ctx.config.brokerName}; nothing to reset (create it with \`${topicCreateCommand(topic)}\`).`,
    );
  checkKnownGroup(ctx, offsets, group);
  // a pending reset is answered to one pull per queue: of a broadcasting group, whose members
  // keep their offsets locally, only the first member to pull would have moved; with none online,
  // the first to come back
  checkNotBroadcasting(
    ctx,
    group,
    "a broker cannot reset them. Stop the members, delete that directory of each (offsets.json and offsets.json.bak: a member without offsets.json resumes from its .bak) and start them again with consumeFromWhere CONSUME_FROM_TIMESTAMP and consumeTimestamp (or CONSUME_FROM_FIRST_OFFSET).",
  );
  const force = req.isForce !== false;
  const offsetTable: { queueId: number; offset: number }[] = [];
  for (let queueId = 0; queueId < tc.readQueueNums; queueId++) {
    const byTime = ctx.store.searchOffsetByTime(topic, queueId, req.timestamp);
    const current = offsets.queryOffset(group, topic, queueId);
    const offset = force || current < 0 || byTime < current ? byTime : current;
    offsets.assignResetOffset(group, topic, queueId, offset);
    offsetTable.push({ queueId, offset });
  }
  return { offsetTable };
}

function queueArgs(e: { topic?: unknown; queueId?: unknown }): [string, number] {
  return [str(e.topic, "topic"), int(e.queueId, "queueId")];
}

function handle(c: OffsetsContext, e: OffsetsEvent): object {
  const { ctx, offsets } = c;
  switch (e.type) {
    case "QUERY_CONSUMER_OFFSET":
      return queryConsumerOffset(ctx, offsets, e);
    case "UPDATE_CONSUMER_OFFSET":
      return updateConsumerOffset(ctx, offsets, e);
    case "GET_MAX_OFFSET":
      return { offset: ctx.store.getMaxOffset(...queueArgs(e)) };
    case "GET_MIN_OFFSET":
      return { offset: ctx.store.getMinOffset(...queueArgs(e)) };
    case "GET_EARLIEST_MSG_STORETIME":
      return { timestamp: ctx.store.getEarliestMessageTime(...queueArgs(e)) };
    case "SEARCH_OFFSET_BY_TIMESTAMP": {
      const [topic, queueId] = queueArgs(e);
      if (typeof e.timestamp !== "number") throw new MQError("INVALID_PARAMETER", "SEARCH_OFFSET_BY_TIMESTAMP needs a numeric timestamp.");
      return { offset: ctx.store.searchOffsetByTime(topic, queueId, e.timestamp) };
    }
    case "GET_CONSUME_STATS": {
      const group = str(e.consumerGroup, "consumerGroup");
      const subscribed = [...(consumerTableOf(ctx).group(group)?.subscriptions.keys() ?? [])];
      if (!e.topic) subscribed.push(RETRY_GROUP_TOPIC_PREFIX + group);
      return consumeStats(ctx, offsets, e, subscribed);
    }
    case "INVOKE_BROKER_TO_RESET_OFFSET":
      return resetOffset(ctx, offsets, e);
    case "GET_ALL_CONSUMER_OFFSET":
      return offsets.toJSON();
    default:
      throw new MQError(
        "REQUEST_CODE_NOT_SUPPORTED",
        `Broker ${ctx.config.brokerName} does not handle ${(e as { type: string }).type} on actor "offsets".`,
      );
  }
}

/** Sends PERSIST every interval while the actor runs. */
const persistTicker = fromCallback<{ type: string }, { intervalMs: number }>(({ sendBack, input }) => {
  const t = setInterval(() => sendBack({ type: "PERSIST" }), input.intervalMs);
  t.unref?.();
  return () => clearInterval(t);
});

/** The `offsets` actor. */
export const offsetsMachine = setup({
  types: {
    context: {} as OffsetsContext,
    events: {} as OffsetsEvent,
    input: {} as OffsetsInput,
  },
  actors: { persistTicker },
  actions: {
    answer: ({ context, event }) => {
      const reply = (event as Asked).reply;
      try {
        if (event.type === "QUERY_CONSUMER_OFFSET" && event.waitRelease === true && event.clientId !== undefined) {
          const { ctx, offsets } = context;
          takeOverConsumerOffset(ctx, offsets, event, () => {
            try {
              reply?.ok(queryConsumerOffset(ctx, offsets, event));
            } catch (e) {
              reply?.fail(
                e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to handle ${event.type}: ${String(e)}`),
              );
            }
          });
          return;
        }
        reply?.ok(handle(context, event));
      } catch (e) {
        reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `The broker failed to handle ${event.type}: ${String(e)}`));
      }
    },
    persist: ({ context }) => {
      const { offsets, ctx } = context;
      offsets.persistInBackground((e) => ctx.logger.error({ err: e }, "writing consumerOffset.json failed; retried at the next interval"));
    },
    persistAndAnswer: ({ context, event }) => {
      const reply = (event as Asked).reply;
      context.offsets.endAllWaits();
      context.offsets.persist(true).then(
        () => reply?.ok({}),
        (e: unknown) => {
          context.ctx.logger.error({ err: e }, "writing consumerOffset.json at close failed");
          reply?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", String(e)));
        },
      );
    },
  },
}).createMachine({
  id: "offsets",
  context: ({ input }) => ({ ctx: input.ctx, offsets: consumerOffsetsOf(input.ctx) }),
  initial: "serving",
  states: {
    serving: {
      invoke: {
        src: "persistTicker",
        input: ({ context }) => ({
          intervalMs: (context.ctx.config as OffsetTuning).flushConsumerOffsetIntervalMs ?? DEFAULT_FLUSH_CONSUMER_OFFSET_INTERVAL_MS,
        }),
      },
      on: {
        PERSIST: { actions: "persist" },
        SHUTDOWN: { target: "closed", actions: "persistAndAnswer" },
        "*": { actions: "answer" },
      },
    },
    closed: {
      on: {
        SHUTDOWN: { actions: "persistAndAnswer" },
        PERSIST: {},
        "*": { actions: "answer" },
      },
    },
  },
});
