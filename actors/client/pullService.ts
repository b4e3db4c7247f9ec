/**
 * The pull service (RocketMQ's `PullMessageService` + `DefaultMQPushConsumerImpl#pullMessage`,
 * reference §8): one loop over the PullRequests of the assigned queues. Each request pulls a batch
 * asynchronously (long polling on the broker), hands what it found to the consume service and
 * re-enqueues itself: at once, or after a flow-control / error delay.
 *
 * The loop runs in {@link PullService}; {@link pullServiceMachine} is the actor that owns it
 * (running, suspended, stopped) and takes new requests from the rebalancer. Pulled messages go
 * to the consume service as one call per batch, never one event per message.
 */
import { assertEvent, setup } from "xstate";
import { monotonicNow } from "../../transport/clock.ts";
import { decodeRecords, type MessageExt } from "../../transport/messageRecord.ts";
import {
  ConsumptionActorFor,
  isBrokerId,
  isMQError,
  MASTER_ID,
  MAX_TIMER_MS,
  MessageConst,
  type MessageModel,
  MQError,
  mqKey,
  type PullMessageReply,
  type PullMessageRequest,
  PullSysFlag,
  RETRY_GROUP_TOPIC_PREFIX,
} from "../../transport/protocol.ts";
import { LogThrottle, lazyClientLogger } from "../logger.ts";
import type { OffsetStore } from "./offsetStore.ts";
import type { ConsumerHost, PullRequest } from "./pullRequest.ts";
import { SubscriptionTable } from "./subscriptions.ts";

/** @default 32 */
export const DEFAULT_PULL_BATCH_SIZE = 32;
/** @default 1000 messages cached per queue */
export const DEFAULT_PULL_THRESHOLD_FOR_QUEUE = 1000;
/** @default 100 MiB cached per queue */
export const DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE = 100;
const MIB = 1024 * 1024;
/** @default 2000 offsets between the first and last cached message */
export const DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN = 2000;
/** Re-pull delay when a cache threshold is hit. */
export const PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50;
/** Re-pull delay after the broker answered FLOW_CONTROL. */
export const PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20;
/** How often the queues parked by a suspended consumer are looked at (RocketMQ's paused pull re-checks every second). */
export const PULL_TIME_DELAY_MILLS_WHEN_SUSPEND = 1000;
/** Re-pull delay after any other error (pullTimeDelayMillsWhenException). */
export const PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION = 1000;
/**
 * Re-pull delay after NO_PERMISSION (the group's consumption disabled, the broker or topic not
 * readable): an operator's decision, not a fault that passes within a second; RocketMQ 4.x's
 * pullTimeDelayMillsWhenException. Pulls resume within this long of the permission coming back.
 */
export const PULL_TIME_DELAY_MILLS_WHEN_NO_PERMISSION = 3000;

/** How long a failed pull waits before it is tried again. */
export function pullRetryDelayFor(e: unknown): number {
  if (isMQError(e, "FLOW_CONTROL")) return PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL;
  return isMQError(e, "NO_PERMISSION") ? PULL_TIME_DELAY_MILLS_WHEN_NO_PERMISSION : PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION;
}
/** How long the broker may hold a pull that finds nothing (long polling). */
export const BROKER_SUSPEND_MAX_TIME_MILLIS = 15_000;
/** The same for the pull consumer (RocketMQ's DefaultLitePullConsumer holds its pulls longer). */
export const LITE_BROKER_SUSPEND_MAX_TIME_MILLIS = 20_000;
/** Client timeout of a long-polling pull. */
export const CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND = 30_000;
/** A held pull's own timeout: the broker's suspend time plus this (RocketMQ's 15 s). */
const PULL_TIMEOUT_MARGIN_MS = 15_000;
/** Longest brokerSuspendMaxTimeMillis: the pull's own timeout, 15 s longer, must still be a timer Node keeps. */
export const MAX_BROKER_SUSPEND_MS = MAX_TIMER_MS - PULL_TIMEOUT_MARGIN_MS;

/** The timeout of a pull the broker may hold `brokerSuspendMaxTimeMillis` (at least 30 s, RocketMQ's). */
export function pullTimeoutFor(brokerSuspendMaxTimeMillis: number): number {
  return Math.max(CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND, brokerSuspendMaxTimeMillis + PULL_TIMEOUT_MARGIN_MS);
}
/**
 * Pulls kept in flight per queue while the queue is known to hold more than they ask for. The
 * first pull of a queue is RocketMQ's; the others are issued at the offsets the earlier ones will
 * end at, so a backlog drains at several batches per round trip instead of one. 16 measured better
 * than 8 once big frames were sent mid-tick (bench/RESULTS.md, round 4): W1 drain +10 %, W2 +15-30 %.
 * @default 16
 */
export const DEFAULT_PULLS_IN_FLIGHT_PER_QUEUE = 16;

/** Failures of one queue's pulls are logged at most once per this long (they are retried every second, forever). */
export const PULL_FAILURE_LOG_INTERVAL_MS = 30_000;

/** Failed pulls, at warn (ACTORMQ_LOG_LEVEL). */
export const pullLog = lazyClientLogger("client:pull");

/**
 * The `onError` of a consumer's pull service: RocketMQ's "execute the pull request exception"
 * warning, naming the queue, the broker and the error, at most once per queue per `intervalMs`.
 * A pull that keeps failing (SQL92 on a broker without property filtering, a group the broker
 * refuses) would otherwise leave the consumer silently receiving nothing. Like RocketMQ, it says
 * nothing of FLOW_CONTROL (back-pressure, retried within 20 ms) or of the group's retry topic.
 */
export function pullFailureLogger(
  host: Pick<ConsumerHost, "brokerAddress">,
  group: string,
  intervalMs = PULL_FAILURE_LOG_INTERVAL_MS,
): (request: PullRequest, error: unknown) => void {
  const throttle = new LogThrottle(intervalMs);
  return (request, e) => {
    const { mq } = request;
    if (isMQError(e, "FLOW_CONTROL") || mq.topic.startsWith(RETRY_GROUP_TOPIC_PREFIX)) return;
    const key = mqKey(mq);
    // a refusal every queue of the group gets at once (consumption disabled, a broker not readable):
    // one line for all of them, not one per queue
    const refused = isMQError(e, "NO_PERMISSION");
    if (throttle.pass(refused ? "NO_PERMISSION" : key) === undefined) return;
    const code = isMQError(e) ? e.code : undefined;
    const message = e instanceof Error ? e.message : String(e);
    const target = findBrokerAddressInSubscribe(host, mq.brokerName, request.brokerId);
    if (refused) {
      pullLog().warn(
        { group, topic: mq.topic, brokerName: mq.brokerName, broker: target?.addr, queueId: mq.queueId, code, error: message },
        `Pulls of group ${group} are refused with NO_PERMISSION by broker ${mq.brokerName} (${target?.addr ?? "no address"}): ${message} ` +
          `Each queue is retried every ${PULL_TIME_DELAY_MILLS_WHEN_NO_PERMISSION / 1000} s; this is logged at most once every ` +
          `${Math.round(intervalMs / 1000)} s for all the group's queues. Consumption resumes once the permission is given back.`,
      );
      return;
    }
    pullLog().warn(
      {
        group,
        topic: mq.topic,
        brokerName: mq.brokerName,
        brokerId: target?.brokerId ?? request.brokerId,
        broker: target?.addr,
        queueId: mq.queueId,
        code,
        error: message,
      },
      `Pulling ${key} for group ${group} from broker ${mq.brokerName} (${target?.addr ?? "no address"}) failed` +
        `${code ? ` with ${code}` : ""} (retried every ${PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION / 1000} s, ` +
        `logged at most once every ${Math.round(intervalMs / 1000)} s per queue): ${message}`,
    );
  };
}

/** Which cache threshold holds a queue's pulls back. */
export type FlowControlKind = "count" | "size" | "span";

/** Flow control is logged at most once per this long per consumer and threshold (RocketMQ: every 1000th time). */
export const FLOW_CONTROL_LOG_INTERVAL_MS = 30_000;

/**
 * The `onFlowControl` of a consumer's pull service: RocketMQ's "so do flow control" warning, naming
 * the queue, its cache and the threshold, at most once per `intervalMs` per threshold for all the
 * consumer's queues (a backlog keeps every queue flow-controlled, checked every 50 ms). Without it a
 * queue stopped by one message stuck in the listener (the span) would say nothing for as long as
 * consumeTimeoutMinutes.
 */
export function flowControlLogger(
  group: string,
  settings: Pick<PullSettings, "pullThresholdForQueue" | "pullThresholdSizeForQueue" | "consumeConcurrentlyMaxSpan">,
  intervalMs = FLOW_CONTROL_LOG_INTERVAL_MS,
): (request: PullRequest, kind: FlowControlKind) => void {
  const throttle = new LogThrottle(intervalMs);
  return (request, kind) => {
    const suppressed = throttle.pass(kind);
    if (suppressed === undefined) return;
    const { mq, pq } = request;
    const key = mqKey(mq);
    const first = pq.firstOffset();
    const cached = `${pq.msgCount} messages, ${(pq.msgSize / MIB).toFixed(1)} MiB, offsets ${first ?? "-"}..${first === undefined ? "-" : first + pq.maxSpan}`;
    const why =
      kind === "span"
        ? `the cached offsets span ${pq.maxSpan}, above consumeConcurrentlyMaxSpan ${settings.consumeConcurrentlyMaxSpan}: ` +
          `the message at offset ${first} is still in the listener or waiting to be consumed again (one stuck in the listener is sent ` +
          "back after consumeTimeoutMinutes)"
        : kind === "count"
          ? `${pq.msgCount} messages are cached, above pullThresholdForQueue ${settings.pullThresholdForQueue}: the listener is slower ` +
            "than delivery (raise consumeThreads or consumeMessageBatchMaxSize, or add members)"
          : `${pq.cachedMsgMiB} MiB are cached, above pullThresholdSizeForQueue ${settings.pullThresholdSizeForQueue}: the listener is ` +
            "slower than delivery (raise consumeThreads or consumeMessageBatchMaxSize, or add members)";
    pullLog().warn(
      { group, topic: mq.topic, brokerName: mq.brokerName, queueId: mq.queueId, kind, cached, suppressed },
      `Flow control: ${key} of group ${group} is not pulled until its cache shrinks; ${why} ` +
        `(logged at most once every ${Math.round(intervalMs / 1000)} s per threshold for all the group's queues; ` +
        "suppressed: the times not logged since the last line).",
    );
  };
}

// --- replication: which broker of a broker name a pull goes to -------------------------------
/** Highest slave id probed when the wanted broker is not in the route. */
const MAX_SLAVE_ID_PROBED = 16;
/** How often pulls in flight are checked against the route (a master that left it will never answer). */
const PULL_ROUTE_CHECK_MS = 1_000;

/**
 * RocketMQ's `findBrokerAddressInSubscribe`: the broker the pull is told to use (master, or the
 * slave the broker suggested), else the master, else any slave of the broker name (the master is
 * down or out of the route).
 *
 * A broker whose connection is lost (`isBrokerUnreachable`: a killed master) is passed over for
 * another of the same name. RocketMQ's name server drops a broker whose connection closes, so its
 * consumers turn to the slave within a route poll; a ROUTER cannot tell which peer left, so the
 * name servers keep a killed master until its registration expires (120 s) and the client judges
 * by its own connection instead. When every broker of the name is unreachable, the usual choice.
 */
export function findBrokerAddressInSubscribe(
  host: Pick<ConsumerHost, "brokerAddress" | "isBrokerUnreachable">,
  brokerName: string,
  brokerId: number,
): { addr: string; brokerId: number } | undefined {
  const exact = host.brokerAddress(brokerName, brokerId);
  if (exact && !host.isBrokerUnreachable?.(exact)) return { addr: exact, brokerId };
  const master = brokerId === MASTER_ID ? exact : host.brokerAddress(brokerName, MASTER_ID);
  if (master && !host.isBrokerUnreachable?.(master)) return { addr: master, brokerId: MASTER_ID };
  let slave: { addr: string; brokerId: number } | undefined;
  for (let id = 1; id <= MAX_SLAVE_ID_PROBED; id++) {
    const a = id === brokerId ? undefined : host.brokerAddress(brokerName, id);
    if (!a) continue;
    if (!host.isBrokerUnreachable?.(a)) return { addr: a, brokerId: id };
    slave ??= { addr: a, brokerId: id };
  }
  if (exact) return { addr: exact, brokerId };
  if (master) return { addr: master, brokerId: MASTER_ID };
  return slave;
}

/** Whether the broker name's master, else a slave, can be reached now (where a pull or an offset query goes). */
export function brokerReachable(host: Pick<ConsumerHost, "brokerAddress" | "isBrokerUnreachable">, brokerName: string): boolean {
  const t = findBrokerAddressInSubscribe(host, brokerName, MASTER_ID);
  return t !== undefined && !host.isBrokerUnreachable?.(t.addr);
}

/** A pull in flight, so that one whose broker left the route can be given up without waiting for its timeout. */
interface InflightPull {
  brokerName: string;
  brokerId: number;
  addr: string;
  settled: boolean;
  /** `why`: what happened to the broker ("left the route", "lost its connection") */
  abandon(why: string): void;
}

/** The pull-side knobs of a push consumer. */
export interface PullSettings {
  pullBatchSize: number;
  pullThresholdForQueue: number;
  /** MiB */
  pullThresholdSizeForQueue: number;
  consumeConcurrentlyMaxSpan: number;
  /** orderly consumers skip the span check */
  orderly: boolean;
  brokerSuspendMaxTimeMillis: number;
  pullTimeoutMillis: number;
  /** pulls in flight per queue when a backlog is known (1: RocketMQ's one at a time). @default 16 */
  pullsInFlightPerQueue?: number;
  /** orderly: how long a queue's lock holds after its last renewal (rebalanceLockMaxLiveTimeMs). @default 30000 */
  lockMaxLiveTimeMs?: number;
}

export function defaultPullSettings(): PullSettings {
  return {
    pullBatchSize: DEFAULT_PULL_BATCH_SIZE,
    pullThresholdForQueue: DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
    pullThresholdSizeForQueue: DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE,
    consumeConcurrentlyMaxSpan: DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    orderly: false,
    brokerSuspendMaxTimeMillis: BROKER_SUSPEND_MAX_TIME_MILLIS,
    pullTimeoutMillis: CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND,
    pullsInFlightPerQueue: DEFAULT_PULLS_IN_FLIGHT_PER_QUEUE,
  };
}

/** How one pull of a queue ended, kept until the pulls issued before it are handled. */
type FlightOutcome = { ok: true; fields: PullMessageReply; body: Buffer | undefined } | { ok: false; error: unknown };

/** The pulls in flight of one queue, oldest first, and what the broker said its queue holds. */
interface QueuePipeline {
  flights: QueueFlight[];
  /** the queue's max offset from the latest answer (-1: unknown) */
  knownMaxOffset: number;
  /** messages the latest answer carried: what a speculative pull asks for (a byte limit may cut batches) */
  stride: number;
  /** average body bytes of the messages this queue cached, as last seen (0: none yet) */
  msgBytes: number;
}

/** One pull of a queue in flight, at the offset it asked for. */
interface QueueFlight {
  offset: number;
  /** messages it is expected to bring (its answer ends at offset + count) */
  count: number;
  /** dropped: its answer is ignored (the offsets it guessed no longer follow on) */
  dropped: boolean;
  /** asked the broker to CRC-check every record (after one failed its check here) */
  verify: boolean;
  outcome?: FlightOutcome;
}

/** What the pull service works with. */
export interface PullServiceDeps {
  /** with `clientId`, pulls name their puller (but orderly ones): the broker knows who holds each queue (hand-over) */
  host: Pick<ConsumerHost, "node" | "brokerAddress" | "isBrokerUnreachable"> & Partial<Pick<ConsumerHost, "clientId">>;
  group: string;
  model: MessageModel;
  subscriptions: SubscriptionTable;
  offsetStore: OffsetStore;
  settings: PullSettings;
  /** a pulled, re-filtered, non-empty batch already put into the request's process queue */
  onFound(request: PullRequest, msgs: MessageExt[], dispatchToConsume: boolean): void;
  /** PULL_OFFSET_MOVED: the request's process queue is dropped; nextOffset holds the broker's offset */
  onOffsetIllegal(request: PullRequest): void;
  /** a pull failed (logged by the caller, retried here) */
  onError?(request: PullRequest, error: unknown): void;
  /** a queue is not pulled for now: its cache is over a threshold (logged by the caller, checked again in 50 ms) */
  onFlowControl?(request: PullRequest, kind: FlowControlKind): void;
  /**
   * a queue is not pulled because its offset may be stale (ProcessQueue.isOffsetStale) and its
   * broker is reachable again: read it again (a rebalance round does); asked every retry until then
   */
  onOffsetStale?(request: PullRequest): void;
  /**
   * false: only the application's commit moves the committed offset (a pull consumer without
   * autoCommit, as RocketMQ's lite pull consumer): pulls carry no commit offset and a filtered-out
   * stretch does not advance it. @default true
   */
  autoCommit?: boolean;
}

/** Counters for tests, benchmarks and the inspector. */
export interface PullServiceStats {
  pulls: number;
  found: number;
  messages: number;
  flowControlCount: number;
  flowControlSize: number;
  flowControlSpan: number;
  errors: number;
  offsetIllegal: number;
  /** pulls issued behind another of the same queue (pipelined) */
  pipelined: number;
  /** pipelined pulls whose answers are ignored: an earlier pull of the queue ended elsewhere than predicted, or the queue went over a flow-control threshold */
  pipelineDropped: number;
  /** answers whose records failed their check on decode; the queue's next pull asked the broker to verify */
  recordsRefused: number;
  /** the last pull failure, for tools and tests */
  lastError?: unknown;
}

/** The pull loop of one consumer. */
export class PullService {
  readonly stats: PullServiceStats = {
    pulls: 0,
    found: 0,
    messages: 0,
    flowControlCount: 0,
    flowControlSize: 0,
    flowControlSpan: 0,
    errors: 0,
    offsetIllegal: 0,
    pipelined: 0,
    pipelineDropped: 0,
    recordsRefused: 0,
  };
  private suspended = false;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private parked: PullRequest[] = [];
  private parkedTouch: NodeJS.Timeout | null = null;
  private inflight = 0;
  private readonly inflightPulls = new Set<InflightPull>();
  private routeCheck: NodeJS.Timeout | null = null;
  private readonly pipelines = new WeakMap<PullRequest, QueuePipeline>();

  constructor(private readonly deps: PullServiceDeps) {}

  /**
   * Gives up pulls in flight to an address the route no longer lists for their broker, or whose
   * connection is lost while another broker of the name is reachable (a killed master): they are
   * retried there.
   */
  private checkInflightRoutes(): void {
    for (const p of this.inflightPulls) {
      if (findBrokerAddressInSubscribe(this.deps.host, p.brokerName, p.brokerId)?.addr === p.addr) continue;
      p.abandon(this.deps.host.brokerAddress(p.brokerName, p.brokerId) === p.addr ? "lost its connection" : "left the route");
    }
  }

  /** Pulls now (the request's next pull). */
  executeNow(request: PullRequest): void {
    if (this.stopped || request.pq.dropped) return;
    if (this.suspended) {
      request.pq.lastPullTimestamp = monotonicNow();
      this.parked.push(request);
      return;
    }
    this.pull(request);
  }

  /** Pulls after `delayMs`. */
  executeLater(request: PullRequest, delayMs: number): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.executeNow(request);
    }, delayMs);
    this.timers.add(t);
  }

  /** Stops pulling (pending pulls finish; their requests park until resume). */
  suspend(): void {
    this.suspended = true;
    // RocketMQ's paused pull sets lastPullTimestamp each time it re-checks (every second): a parked
    // queue is being pulled, just not now, and must not look pull-expired (120 s) to the rebalancer
    if (this.parkedTouch || this.stopped) return;
    this.parkedTouch = setInterval(() => {
      const now = monotonicNow();
      for (const r of this.parked) r.pq.lastPullTimestamp = now;
    }, PULL_TIME_DELAY_MILLS_WHEN_SUSPEND);
    this.parkedTouch.unref();
  }

  resume(): void {
    this.suspended = false;
    this.stopParkedTouch();
    const parked = this.parked;
    this.parked = [];
    for (const r of parked) this.executeNow(r);
  }

  /** Stops for good: timers cleared, answers of pulls in flight dropped. */
  stop(): void {
    this.stopped = true;
    this.stopParkedTouch();
    if (this.routeCheck) clearInterval(this.routeCheck);
    this.routeCheck = null;
    this.inflightPulls.clear();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.parked = [];
  }

  private stopParkedTouch(): void {
    if (this.parkedTouch) clearInterval(this.parkedTouch);
    this.parkedTouch = null;
  }

  get pullsInFlight(): number {
    return this.inflight;
  }

  private pull(request: PullRequest): void {
    const { pq, mq } = request;
    const s = this.deps.settings;
    pq.lastPullTimestamp = monotonicNow();
    if (pq.msgCount > s.pullThresholdForQueue) {
      this.stats.flowControlCount++;
      this.flowControl(request, "count");
      return;
    }
    if (pq.cachedMsgMiB > s.pullThresholdSizeForQueue) {
      this.stats.flowControlSize++;
      this.flowControl(request, "size");
      return;
    }
    // orderly clustering: a queue whose broker lock was lost is not pulled until it is locked again
    if (s.orderly && this.deps.model === "CLUSTERING" && !pq.locked) {
      this.retryLater(request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION);
      return;
    }
    // concurrent clustering: nor is one whose broker connection was lost since its offset was read
    // (another member may have consumed it meanwhile) until the offset is read again: from the
    // master once it is reachable again, or a slave of it meanwhile (a killed master)
    if (pq.isOffsetStale()) {
      if (brokerReachable(this.deps.host, mq.brokerName)) this.deps.onOffsetStale?.(request);
      this.retryLater(request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION);
      return;
    }
    if (!s.orderly && pq.maxSpan > s.consumeConcurrentlyMaxSpan) {
      this.stats.flowControlSpan++;
      this.flowControl(request, "span");
      return;
    }
    const sd = this.deps.subscriptions.get(mq.topic);
    if (!sd) {
      this.retryLater(request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION);
      return;
    }
    let pl = this.pipelines.get(request);
    if (!pl) {
      pl = { flights: [], knownMaxOffset: -1, stride: s.pullBatchSize, msgBytes: 0 };
      this.pipelines.set(request, pl);
    }
    // pulls in flight that no longer start where the queue goes on are dropped
    if (pl.flights.length > 0 && pl.flights[0]!.offset !== request.nextOffset) this.dropFlights(pl);
    if (pl.flights.length === 0) this.issue(request, pl, sd, request.nextOffset, s.pullBatchSize, false);
    // a backlog the broker reported: ask for the next batches too. Only without a filter can the
    // offset each answer ends at be known before it arrives (a full batch of what was asked).
    const depth = Math.max(1, s.pullsInFlightPerQueue ?? DEFAULT_PULLS_IN_FLIGHT_PER_QUEUE);
    if (depth > 1 && !s.orderly && sd.expressionType === "TAG" && sd.tagsSet.length === 0) {
      const stride = pl.stride;
      // the flow control above sees only what is cached: the pulls in flight count too (bytes by
      // the message size seen last, kept while the cache is empty), or they overshoot the MiB
      // limit many times over with large messages, and the span by up to depth x pullBatchSize
      if (pq.msgCount > 0) pl.msgBytes = pq.msgSize / pq.msgCount;
      const pullBytes = stride * pl.msgBytes;
      const maxBytes = s.pullThresholdSizeForQueue * MIB;
      const spanFrom = pq.firstOffset() ?? request.nextOffset;
      while (pl.flights.length < depth && pl.flights.length > 0 && !this.suspended) {
        const last = pl.flights[pl.flights.length - 1]!;
        const next = last.offset + last.count;
        if (next + stride > pl.knownMaxOffset) break;
        if (pq.msgCount + (pl.flights.length + 1) * stride > s.pullThresholdForQueue) break;
        if (pq.msgSize + (pl.flights.length + 1) * pullBytes > maxBytes) break;
        if (next + stride - 1 - spanFrom > s.consumeConcurrentlyMaxSpan) break;
        this.issue(request, pl, sd, next, stride, true);
      }
    }
  }

  /**
   * A queue over a cache threshold is checked again after the back-off. Its pulls in flight were
   * placed by the answers before them (a message size that changed, a batch cut short): theirs
   * would take the cache further past the threshold, one pull each, where RocketMQ's single pull
   * stops at one; they are dropped and pulled again once the cache is below it. So is the
   * re-check each of their answers would start: one timer per queue.
   */
  private flowControl(request: PullRequest, kind: FlowControlKind): void {
    this.deps.onFlowControl?.(request, kind);
    this.retryLater(request, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL);
  }

  /**
   * Looks at a queue that is not pulled now again after `delayMs`, its pulls in flight dropped:
   * each of their answers would start a look of its own (up to pullsInFlightPerQueue timers, and
   * as many reads of a stale offset asked for, every retry), and one not pulled now must not
   * deliver what they bring.
   */
  private retryLater(request: PullRequest, delayMs: number): void {
    const pl = this.pipelines.get(request);
    if (pl && pl.flights.length > 0) this.dropFlights(pl);
    this.executeLater(request, delayMs);
  }

  private dropFlights(pl: QueuePipeline): void {
    this.stats.pipelineDropped += pl.flights.length;
    for (const f of pl.flights) f.dropped = true;
    pl.flights.length = 0;
  }

  /**
   * Sends one pull of `request`'s queue at `offset`. A speculative pull (one behind another in
   * flight) does not wait on the broker (no SUSPEND) when the queue holds nothing at its offset.
   */
  private issue(
    request: PullRequest,
    pl: QueuePipeline,
    sd: NonNullable<ReturnType<SubscriptionTable["get"]>>,
    offset: number,
    count: number,
    speculative: boolean,
  ): void {
    const { mq } = request;
    const s = this.deps.settings;
    let commitOffset = 0;
    let sysFlag = speculative ? PullSysFlag.SUBSCRIPTION : PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION;
    // every pull carries the consumed offset, speculative ones too: with several pulls in flight
    // the first one is rarely the one that comes next, and a queue handed to another member
    // starts where the broker last heard this one got to
    // orderly: a queue whose lock lapsed (this client frozen or cut off, or its connection to the
    // broker lost: a restarted broker forgot the lock) may have been consumed by another member
    // since; the offset in memory is stale and would move the group's back
    const lapsed = s.orderly && request.pq.isLockExpired(undefined, s.lockMaxLiveTimeMs);
    if (this.deps.model === "CLUSTERING" && this.deps.autoCommit !== false && !lapsed) {
      const v = this.deps.offsetStore.readOffsetFromMemory(mq);
      if (v > 0) {
        commitOffset = v;
        sysFlag |= PullSysFlag.COMMIT_OFFSET;
      }
    }
    const target = findBrokerAddressInSubscribe(this.deps.host, mq.brokerName, request.brokerId);
    if (!target) {
      if (speculative) return;
      this.fail(request, new MQError("NO_ROUTE", `No address known for broker ${mq.brokerName}.`));
      return;
    }
    const addr = target.addr;
    const req: PullMessageRequest = {
      consumerGroup: this.deps.group,
      topic: mq.topic,
      queueId: mq.queueId,
      queueOffset: offset,
      maxMsgNums: count,
      sysFlag,
      commitOffset,
      suspendTimeoutMillis: s.brokerSuspendMaxTimeMillis,
      subscription: sd.subString,
      subVersion: sd.subVersion,
      expressionType: sd.expressionType,
    };
    // not orderly: its queues change hands under broker locks, unannounced to the hand-over, which
    // would take a member back under its client id for one whose pulls predate its release
    if (this.deps.model === "CLUSTERING" && !s.orderly && this.deps.host.clientId) req.clientId = this.deps.host.clientId;
    const verify = request.verifyRecords === true;
    if (verify) req.verifyRecords = true;
    this.stats.pulls++;
    if (speculative) this.stats.pipelined++;
    this.inflight++;
    // the first pull asks for pullBatchSize; the next ones are placed where a batch like the last one would end
    const qf: QueueFlight = { offset, count: speculative ? count : Math.min(count, pl.stride), dropped: false, verify };
    pl.flights.push(qf);
    const flight: InflightPull = {
      brokerName: mq.brokerName,
      brokerId: target.brokerId,
      addr,
      settled: false,
      abandon: (why) => {
        if (flight.settled) return;
        flight.settled = true;
        this.inflightPulls.delete(flight);
        this.inflight--;
        if (!this.stopped)
          this.settle(request, pl, qf, {
            ok: false,
            error: new MQError(
              "NO_ROUTE",
              `Broker ${mq.brokerName}/${target.brokerId} at ${addr} ${why} while a pull was waiting; pulling from another broker of ${mq.brokerName}.`,
            ),
          });
      },
    };
    this.inflightPulls.add(flight);
    if (!this.routeCheck && !this.stopped) {
      this.routeCheck = setInterval(() => this.checkInflightRoutes(), PULL_ROUTE_CHECK_MS);
      this.routeCheck.unref();
    }
    this.deps.host.node
      .ref(addr, ConsumptionActorFor.PULL_MESSAGE)
      .ask<PullMessageReply>({ type: "PULL_MESSAGE", ...req }, { timeoutMs: s.pullTimeoutMillis })
      .then(
        (r) => {
          if (flight.settled) return;
          flight.settled = true;
          this.inflightPulls.delete(flight);
          this.inflight--;
          if (!this.stopped) this.settle(request, pl, qf, { ok: true, fields: r.fields, body: r.body });
        },
        (e: unknown) => {
          if (flight.settled) return;
          flight.settled = true;
          this.inflightPulls.delete(flight);
          this.inflight--;
          if (!this.stopped) this.settle(request, pl, qf, { ok: false, error: e });
        },
      );
  }

  /** Handles the answers of a queue's pulls in the order they were issued. */
  private settle(request: PullRequest, pl: QueuePipeline, qf: QueueFlight, outcome: FlightOutcome): void {
    if (qf.dropped) return;
    qf.outcome = outcome;
    while (pl.flights.length > 0 && pl.flights[0]!.outcome && !this.stopped) {
      const f = pl.flights.shift()!;
      const o = f.outcome!;
      if (!o.ok) {
        this.dropFlights(pl);
        this.fail(request, o.error);
        return;
      }
      if (f.offset !== request.nextOffset) {
        // cannot happen while the chain holds; start over from where the queue goes on
        this.dropFlights(pl);
        this.executeNow(request);
        return;
      }
      if (typeof o.fields.maxOffset === "number") pl.knownMaxOffset = o.fields.maxOffset;
      if (o.fields.status !== "SUCCESS") this.dropFlights(pl);
      else if (o.fields.nextBeginOffset > f.offset)
        pl.stride = Math.min(this.deps.settings.pullBatchSize, o.fields.nextBeginOffset - f.offset);
      try {
        this.onReply(request, o.fields, o.body);
      } catch (e) {
        this.dropFlights(pl);
        if (isMQError(e, "MALFORMED") && !f.verify) {
          // a record that fails its CRC here may be damaged in the broker's store, which frames the
          // records it appended without their CRC: pull the same offsets again, asking it to check
          this.stats.recordsRefused++;
          this.stats.lastError = e;
          request.verifyRecords = true;
          this.executeNow(request);
        } else this.fail(request, e);
        return;
      }
      if (f.verify) request.verifyRecords = false;
    }
  }

  private fail(request: PullRequest, e: unknown): void {
    this.stats.errors++;
    this.stats.lastError = e;
    this.deps.onError?.(request, e);
    this.executeLater(request, pullRetryDelayFor(e));
  }

  private onReply(request: PullRequest, reply: PullMessageReply, body: Buffer | undefined): void {
    const { pq, mq } = request;
    if (pq.dropped) return;
    // a broker id from the wire: one that is not (a fraction, past 2^53) would name no broker, or another
    if (isBrokerId(reply.suggestWhichBrokerId)) request.brokerId = reply.suggestWhichBrokerId;
    switch (reply.status) {
      case "SUCCESS": {
        // decoded before the offset moves on: an answer refused here is pulled again from where it started
        const all = body && body.length > 0 ? decodeRecords(body, mq.brokerName) : [];
        request.nextOffset = reply.nextBeginOffset;
        const sd = this.deps.subscriptions.get(mq.topic);
        const msgs =
          sd && sd.tagsSet.length > 0 && sd.expressionType === "TAG" ? all.filter((m) => SubscriptionTable.matches(sd, m.tags)) : all;
        this.stats.found++;
        if (msgs.length === 0) {
          this.reportResult(request, reply.status, 0);
          this.executeNow(request);
          return;
        }
        const minS = String(reply.minOffset);
        const maxS = String(reply.maxOffset);
        for (const m of msgs) {
          m.properties[MessageConst.MIN_OFFSET] = minS;
          m.properties[MessageConst.MAX_OFFSET] = maxS;
        }
        this.stats.messages += msgs.length;
        const dispatch = pq.putMessages(msgs);
        this.deps.onFound(request, msgs, dispatch);
        this.reportResult(request, reply.status, msgs.length);
        this.executeNow(request);
        return;
      }
      case "PULL_NOT_FOUND":
      case "PULL_RETRY_IMMEDIATELY": {
        // a slave sends a caught-up pull back to its master at once; when this client's route has no
        // address for that master, the pull lands on the slave again: the second such answer in a
        // row waits like an error instead of spinning
        const idle = reply.status === "PULL_RETRY_IMMEDIATELY" && reply.nextBeginOffset === request.nextOffset;
        request.idleRedirects = idle ? (request.idleRedirects ?? 0) + 1 : 0;
        request.nextOffset = reply.nextBeginOffset;
        // correctTagsOffset: a filtered-out stretch still advances the committed offset
        if (pq.msgCount === 0 && this.deps.autoCommit !== false) this.deps.offsetStore.updateOffset(mq, request.nextOffset, true);
        this.reportResult(request, reply.status, 0);
        if (request.idleRedirects > 1) this.executeLater(request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION);
        else this.executeNow(request);
        return;
      }
      case "PULL_OFFSET_MOVED": {
        this.stats.offsetIllegal++;
        request.nextOffset = reply.nextBeginOffset;
        pq.dropped = true;
        this.deps.onOffsetIllegal(request);
        return;
      }
      default:
        throw new MQError(
          "SYSTEM_ERROR",
          `The broker answered the pull of ${mq.topic}@${mq.brokerName}@${mq.queueId} with an unknown status ${String(reply.status)}.`,
        );
    }
  }

  /** Hears one PULL_RESULT per answered pull (set by {@link pullServiceMachine}: the actor shows pulls). */
  onPullResult: ((e: PullResultEvent) => void) | null = null;

  private reportResult(request: PullRequest, status: string, count: number): void {
    const { mq } = request;
    this.onPullResult?.({
      type: "PULL_RESULT",
      topic: mq.topic,
      brokerName: mq.brokerName,
      queueId: mq.queueId,
      status,
      count,
      nextOffset: request.nextOffset,
    });
  }
}

/** One answered pull (one per batch, never per message), as the pull service actor receives it. */
export interface PullResultEvent {
  type: "PULL_RESULT";
  topic: string;
  brokerName: string;
  queueId: number;
  /** the broker's pull status (SUCCESS, PULL_NOT_FOUND, ...) */
  status: string;
  /** messages handed to the consume service */
  count: number;
  nextOffset: number;
}

/** Events of {@link pullServiceMachine}. */
export type PullServiceEvent =
  | { type: "EXECUTE_PULL"; request: PullRequest; delayMs?: number }
  | { type: "SUSPEND" }
  | { type: "RESUME" }
  | { type: "STOP" }
  | PullResultEvent;

export interface PullServiceInput {
  service: PullService;
  /** whether an inspector listens (then every PULL_RESULT is sent, for its timeline); default: always */
  inspecting?: () => boolean;
}

export interface PullServiceContext {
  service: PullService;
}

/** The pull service actor: owns the loop, takes new PullRequests, suspends, resumes, stops. */
export const pullServiceMachine = setup({
  types: {
    context: {} as PullServiceContext,
    events: {} as PullServiceEvent,
    input: {} as PullServiceInput,
  },
  actions: {
    execute: ({ context, event }) => {
      assertEvent(event, "EXECUTE_PULL");
      if (event.delayMs && event.delayMs > 0) context.service.executeLater(event.request, event.delayMs);
      else context.service.executeNow(event.request);
    },
    suspend: ({ context }) => context.service.suspend(),
    resume: ({ context }) => context.service.resume(),
    stop: ({ context }) => context.service.stop(),
  },
  guards: {
    found: ({ event }) => event.type === "PULL_RESULT" && event.count > 0,
    empty: ({ event }) => event.type === "PULL_RESULT" && event.count === 0,
  },
}).createMachine({
  id: "pullService",
  context: ({ input, self }) => {
    const inspecting = input.inspecting ?? (() => true);
    input.service.onPullResult = (e) => {
      // a result no transition takes (another found batch, another empty answer) changes nothing
      // but the inspector's timeline: without one it costs no macrostep
      if (!inspecting() && !self.getSnapshot().can(e)) return;
      self.send(e);
    };
    return { service: input.service };
  },
  initial: "running",
  states: {
    running: {
      // waiting: the last answered pull brought nothing (the next one long-polls); found: it brought messages
      initial: "waiting",
      states: {
        waiting: { on: { PULL_RESULT: { guard: "found", target: "found" } } },
        found: { on: { PULL_RESULT: { guard: "empty", target: "waiting" } } },
      },
      on: {
        EXECUTE_PULL: { actions: "execute" },
        SUSPEND: { target: "suspended", actions: "suspend" },
        STOP: "stopped",
      },
    },
    suspended: {
      on: {
        EXECUTE_PULL: { actions: "execute" },
        RESUME: { target: "running", actions: "resume" },
        STOP: "stopped",
      },
    },
    stopped: { type: "final", entry: "stop" },
  },
});
