/**
 * Queue allocation strategies of a clustering consumer group (RocketMQ
 * `AllocateMessageQueueStrategy` implementations). Each is a pure function of the sorted queue
 * list and the sorted consumer id list; the rebalancer sorts both before calling
 * (`compareMessageQueue`, plain string order for ids).
 */
import { createHash } from "node:crypto";
import { hasMessageQueueFields, type MessageQueue, MQError } from "../../transport/protocol.ts";

/** Names accepted by the push consumer's `allocateStrategy` option. */
export type AllocateStrategyName = "AVERAGELY" | "AVERAGELY_BY_CIRCLE" | "CONSISTENT_HASH" | "BY_CONFIG" | "BY_MACHINE_ROOM";

/** Settings that some strategies need. */
export interface AllocateOptions {
  /** CONSISTENT_HASH: virtual nodes per consumer. @default 10 */
  virtualNodes?: number;
  /** BY_CONFIG: the queues every consumer takes. */
  messageQueueList?: readonly MessageQueue[];
  /** BY_MACHINE_ROOM: machine rooms whose queues this group consumes. */
  consumeridcs?: Iterable<string>;
  /**
   * BY_MACHINE_ROOM: the machine room of a broker, by broker name (RocketMQ's resolver of
   * `AllocateMachineRoomNearby`); undefined for a broker of no known room. Required by the
   * consumers: broker names cannot carry a room (`@` is refused in them), so RocketMQ's
   * `room@broker` naming, read when this is absent, never matches a real broker.
   */
  machineRoomOf?: (brokerName: string) => string | undefined;
}

/**
 * Returns the queues `currentCID` should hold. `mqAll` and `cidAll` must be sorted. A consumer
 * that is not in `cidAll` gets nothing.
 * @throws MQError ILLEGAL_ARGUMENT on an empty currentCID, mqAll or cidAll.
 */
export type AllocateStrategy = (
  consumerGroup: string,
  currentCID: string,
  mqAll: readonly MessageQueue[],
  cidAll: readonly string[],
  options?: AllocateOptions,
) => MessageQueue[];

export const DEFAULT_ALLOCATE_STRATEGY: AllocateStrategyName = "AVERAGELY";
export const DEFAULT_VIRTUAL_NODES = 10;

/** `AbstractAllocateMessageQueueStrategy#check`: false means "not a member, allocate nothing". */
function check(
  currentCID: string,
  mqAll: readonly MessageQueue[] | null | undefined,
  cidAll: readonly string[] | null | undefined,
): boolean {
  if (!currentCID)
    throw new MQError("ILLEGAL_ARGUMENT", "currentCID is empty: the consumer needs a client id before it can be allocated queues.");
  if (!mqAll || mqAll.length === 0)
    throw new MQError("ILLEGAL_ARGUMENT", "mqAll is null or mqAll empty: the topic has no readable queues; check its route.");
  if (!cidAll || cidAll.length === 0)
    throw new MQError("ILLEGAL_ARGUMENT", "cidAll is null or cidAll empty: no consumer of the group is known to the broker yet.");
  return cidAll.includes(currentCID);
}

/** AVERAGELY: contiguous blocks, the first `N mod M` consumers take one more queue. */
export const allocateAveragely: AllocateStrategy = (_group, currentCID, mqAll, cidAll) => {
  if (!check(currentCID, mqAll, cidAll)) return [];
  const n = mqAll.length;
  const m = cidAll.length;
  const index = cidAll.indexOf(currentCID);
  const mod = n % m;
  const averageSize = n <= m ? 1 : mod > 0 && index < mod ? Math.floor(n / m) + 1 : Math.floor(n / m);
  const startIndex = mod > 0 && index < mod ? index * averageSize : index * averageSize + mod;
  const range = Math.min(averageSize, n - startIndex);
  const result: MessageQueue[] = [];
  for (let i = 0; i < range; i++) result.push(mqAll[(startIndex + i) % n]!);
  return result;
};

/** AVERAGELY_BY_CIRCLE: round robin, consumer i takes queues i, i+M, i+2M, ... */
export const allocateAveragelyByCircle: AllocateStrategy = (_group, currentCID, mqAll, cidAll) => {
  if (!check(currentCID, mqAll, cidAll)) return [];
  const result: MessageQueue[] = [];
  for (let i = cidAll.indexOf(currentCID); i < mqAll.length; i += cidAll.length) result.push(mqAll[i]!);
  return result;
};

/** RocketMQ's default consistent-hash function: MD5, first 4 bytes big-endian, unsigned. */
export function md5Hash32(key: string): number {
  return createHash("md5").update(key, "utf8").digest().readUInt32BE(0);
}

/** RocketMQ's `MessageQueue.toString`, the key a queue is hashed by. */
export function messageQueueString(mq: MessageQueue): string {
  return `MessageQueue [topic=${mq.topic}, brokerName=${mq.brokerName}, queueId=${mq.queueId}]`;
}

/**
 * CONSISTENT_HASH with `virtualNodes` per consumer: virtual node `<cid>-<i>` on an MD5 ring
 * (later collisions overwrite earlier ones); a queue goes to the first node whose hash is >= its
 * own, wrapping around. Adding or removing a consumer moves only the queues it gains or loses.
 */
export function createConsistentHashStrategy(virtualNodes: number = DEFAULT_VIRTUAL_NODES): AllocateStrategy {
  if (!Number.isInteger(virtualNodes) || virtualNodes < 0) {
    throw new MQError("ILLEGAL_ARGUMENT", `virtualNodes must be a non-negative integer, got ${virtualNodes}.`);
  }
  return (_group, currentCID, mqAll, cidAll) => {
    if (!check(currentCID, mqAll, cidAll)) return [];
    const ring = new Map<number, string>();
    for (const cid of cidAll) {
      for (let i = 0; i < virtualNodes; i++) ring.set(md5Hash32(`${cid}-${i}`), cid);
    }
    if (ring.size === 0) return [];
    const hashes = [...ring.keys()].sort((a, b) => a - b);
    const result: MessageQueue[] = [];
    for (const mq of mqAll) {
      const h = md5Hash32(messageQueueString(mq));
      let lo = 0;
      let hi = hashes.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (hashes[mid]! < h) lo = mid + 1;
        else hi = mid;
      }
      const node = hashes[lo === hashes.length ? 0 : lo]!;
      if (ring.get(node) === currentCID) result.push(mq);
    }
    return result;
  };
}

const defaultConsistentHash = createConsistentHashStrategy(DEFAULT_VIRTUAL_NODES);

/** CONSISTENT_HASH with `options.virtualNodes` (default 10). */
export const allocateConsistentHash: AllocateStrategy = (group, currentCID, mqAll, cidAll, options) =>
  options?.virtualNodes === undefined || options.virtualNodes === DEFAULT_VIRTUAL_NODES
    ? defaultConsistentHash(group, currentCID, mqAll, cidAll)
    : createConsistentHashStrategy(options.virtualNodes)(group, currentCID, mqAll, cidAll);

/** BY_CONFIG: every consumer takes the configured list, whatever the group looks like (no checks). */
export const allocateByConfig: AllocateStrategy = (_group, _currentCID, _mqAll, _cidAll, options) => {
  if (!options?.messageQueueList) {
    throw new MQError("ILLEGAL_ARGUMENT", "The BY_CONFIG allocation needs the queue list: pass allocateOptions.messageQueueList.");
  }
  return [...options.messageQueueList];
};

/** Java `String.split("@")`, which drops trailing empty strings. */
function splitAt(s: string): string[] {
  const parts = s.split("@");
  while (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
  return parts;
}

/** RocketMQ's room of a broker named `room@broker` (undefined for any other name). */
function roomInName(brokerName: string): string | undefined {
  const parts = splitAt(brokerName);
  return parts.length === 2 ? parts[0] : undefined;
}

/**
 * BY_MACHINE_ROOM: only queues of brokers whose room (`options.machineRoomOf`, else the `room`
 * of a `room@broker` name) is in `consumeridcs`; consumer i takes `base` consecutive queues from
 * `i*base`, plus queue `i + base*M` while remainders last.
 */
export const allocateByMachineRoom: AllocateStrategy = (_group, currentCID, mqAll, cidAll, options) => {
  if (!options?.consumeridcs) {
    throw new MQError("ILLEGAL_ARGUMENT", "The BY_MACHINE_ROOM allocation needs the consumer's rooms: pass allocateOptions.consumeridcs.");
  }
  if (!check(currentCID, mqAll, cidAll)) return [];
  const rooms = new Set(options.consumeridcs);
  const roomOf = options.machineRoomOf ?? roomInName;
  const index = cidAll.indexOf(currentCID);
  const premq = mqAll.filter((mq) => {
    const room = roomOf(mq.brokerName);
    return room !== undefined && rooms.has(room);
  });
  const base = Math.floor(premq.length / cidAll.length);
  const rem = premq.length % cidAll.length;
  const result = premq.slice(base * index, base * index + base);
  if (rem > index) result.push(premq[index + base * cidAll.length]!);
  return result;
};

/** A queue a BY_CONFIG list may hold: a MessageQueue's fields, names not empty, an id from 0. */
function isConfiguredQueue(q: unknown): q is MessageQueue {
  return hasMessageQueueFields(q) && q.topic !== "" && q.brokerName !== "" && Number.isSafeInteger(q.queueId) && q.queueId >= 0;
}

function shownEntry(q: unknown): string {
  try {
    return JSON.stringify(q) ?? String(q);
  } catch {
    return String(q);
  }
}

/**
 * Checks a consumer's `allocateOptions` for its strategy at start, so that a configuration that
 * can never allocate a queue is refused instead of leaving the consumer idle. Returns the options
 * to use (`consumeridcs` read once into an array).
 * @throws MQError ILLEGAL_ARGUMENT for BY_MACHINE_ROOM without rooms or without `machineRoomOf`,
 * for BY_CONFIG without `messageQueueList`, and for CONSISTENT_HASH with a `virtualNodes` that is
 * not a positive integer (0 leaves the ring empty: RocketMQ takes it and allocates nothing).
 */
export function checkAllocateOptions(name: AllocateStrategyName, options: AllocateOptions | undefined): AllocateOptions | undefined {
  if (name === "BY_CONFIG" && !Array.isArray(options?.messageQueueList)) {
    throw new MQError("ILLEGAL_ARGUMENT", "The BY_CONFIG allocation needs the queue list: pass allocateOptions.messageQueueList.");
  }
  // an entry that is no queue fails every rebalance (unlogged) or is pulled with a wrong field
  if (name === "BY_CONFIG") {
    const bad = options!.messageQueueList!.flatMap((q, i) => (isConfiguredQueue(q) ? [] : [`messageQueueList[${i}] ${shownEntry(q)}`]));
    if (bad.length > 0)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `The BY_CONFIG allocation takes queues { topic, brokerName, queueId } (non-empty strings, an integer queueId >= 0): ${bad.join(", ")} is not one.`,
      );
  }
  // the strategy would throw at every rebalance, which the rebalancer takes for "try next round"
  const vn: unknown = options?.virtualNodes;
  if (name === "CONSISTENT_HASH" && vn !== undefined && !(typeof vn === "number" && Number.isInteger(vn) && vn >= 1)) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `allocateOptions.virtualNodes must be a positive integer (virtual nodes per consumer on the CONSISTENT_HASH ring, default ${DEFAULT_VIRTUAL_NODES}), got ${typeof vn === "string" ? JSON.stringify(vn) : String(vn)}.`,
    );
  }
  if (name !== "BY_MACHINE_ROOM") return options;
  const idcs = options?.consumeridcs;
  const rooms = idcs !== undefined && idcs !== null && typeof idcs !== "string" && Symbol.iterator in Object(idcs) ? [...idcs] : [];
  if (rooms.length === 0 || !rooms.every((r) => typeof r === "string" && r.length > 0)) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      'The BY_MACHINE_ROOM allocation needs the machine rooms whose queues the group consumes: pass allocateOptions.consumeridcs, e.g. ["room1"].',
    );
  }
  if (typeof options?.machineRoomOf !== "function") {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      "The BY_MACHINE_ROOM allocation needs allocateOptions.machineRoomOf, a function from a broker name to its machine room: broker names cannot carry the room (RocketMQ's room@broker), so without it no queue is ever allocated.",
    );
  }
  return { ...options, consumeridcs: rooms };
}

/** The strategies by name, as the push consumer's `allocateStrategy` option selects them. */
export const allocateStrategies: Readonly<Record<AllocateStrategyName, AllocateStrategy>> = Object.freeze({
  AVERAGELY: allocateAveragely,
  AVERAGELY_BY_CIRCLE: allocateAveragelyByCircle,
  CONSISTENT_HASH: allocateConsistentHash,
  BY_CONFIG: allocateByConfig,
  BY_MACHINE_ROOM: allocateByMachineRoom,
});

/**
 * Looks a strategy up by name.
 * @throws MQError ILLEGAL_ARGUMENT on an unknown name.
 */
export function getAllocateStrategy(name: string): AllocateStrategy {
  const s = (allocateStrategies as Record<string, AllocateStrategy | undefined>)[name];
  if (!s || !Object.hasOwn(allocateStrategies, name)) {
    throw new MQError("ILLEGAL_ARGUMENT", `Unknown allocateStrategy "${name}": use one of ${Object.keys(allocateStrategies).join(", ")}.`);
  }
  return s;
}
