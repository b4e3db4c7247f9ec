/**
 * Consumer offset stores (RocketMQ's `RemoteBrokerOffsetStore` and `LocalFileOffsetStore`,
 * reference §14.1). Offsets are "next offset to consume". The in-memory rules (increase-only
 * updates, freeze after OFFSET_ILLEGAL) are {@link OffsetTable}'s; these classes add where the
 * table is persisted: the group's broker (clustering) or a file of this client (broadcasting).
 */
import { readFile } from "node:fs/promises";
import { homedir, hostname } from "node:os";
import path from "node:path";
import { JsonFile } from "../../store/jsonFile.ts";
import { monotonicNow } from "../../transport/clock.ts";
import {
  ConsumptionActorFor,
  isMQError,
  MASTER_ID,
  type MessageQueue,
  MQError,
  mqKey,
  type QueryConsumerOffsetRequest,
  shownValue,
  type UpdateConsumerOffsetRequest,
} from "../../transport/protocol.ts";
import { LogThrottle, lazyClientLogger } from "../logger.ts";
import { askUnlessConnectionLost } from "../runtime/index.ts";
import { DEFAULT_INSTANCE_NAME } from "./clientInstance.ts";
import { OFFSET_NOT_FOUND, OFFSET_QUERY_FAILED, OffsetTable, type ReadOffsetType } from "./offsetTable.ts";
import type { ConsumerHost } from "./pullRequest.ts";
import { findBrokerAddressInSubscribe } from "./pullService.ts";

/** @default 5000 — how often offsets are persisted (persistConsumerOffsetInterval). */
export const DEFAULT_PERSIST_OFFSET_INTERVAL_MS = 5_000;
/** Timeout of QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET. */
export const OFFSET_REQUEST_TIMEOUT_MS = 5_000;
/**
 * Timeout of a take-over query: the broker holds it until the previous holder released the queue
 * (at most its hand-over timeout, 5 s by default), plus the usual request time.
 */
export const TAKE_OVER_REQUEST_TIMEOUT_MS = 15_000;
export type { ReadOffsetType };
/** Default directory of broadcasting offset files (RocketMQ: ~/.rocketmq_offsets). */
export const DEFAULT_OFFSET_STORE_DIR = path.join(homedir(), ".actormq_offsets");
/** Failed writes of broadcasting offsets files, at warn (ACTORMQ_LOG_LEVEL). */
export const offsetLog = lazyClientLogger("client:offsets");
/** A broadcasting consumer's offsets file that keeps failing is logged at most once per this interval. */
export const LOCAL_OFFSETS_FAILURE_LOG_INTERVAL_MS = 30_000;

/**
 * What a broadcasting consumer does with a failed write of its offsets file: a warning naming the
 * file and the error, at most once per `intervalMs` (the periodic persist retries every interval),
 * and always at close (its last write). A member that cannot write it would otherwise run on
 * silently and, once restarted, start again from older offsets or consumeFromWhere.
 */
export function localPersistFailureLogger(
  file: string,
  group: string,
  intervalMs = LOCAL_OFFSETS_FAILURE_LOG_INTERVAL_MS,
): (error: unknown, closing: boolean) => void {
  const throttle = new LogThrottle(intervalMs);
  return (e, closing) => {
    const suppressed = throttle.pass(file);
    if (suppressed === undefined && !closing) return;
    const error = e instanceof Error ? e.message : String(e);
    offsetLog().warn(
      { group, file, error, closing, suppressed: suppressed ?? 0 },
      `Writing the offsets of broadcasting group ${group} to ${file}${closing ? " at close" : ""} failed: ${error} ` +
        (closing
          ? "A member restarted with this instance name resumes from older offsets, or from consumeFromWhere without any; make offsetStoreDir writable."
          : `Offsets stay in memory and the write is retried every persist interval (logged at most once every ${Math.round(intervalMs / 1000)} s); make offsetStoreDir writable.`),
    );
  };
}

/** What the consumer asks of an offset store. */
export interface OffsetStore {
  /** reads persisted state (the local file); no-op for the remote store */
  load(): Promise<void>;
  updateOffset(mq: MessageQueue, offset: number, increaseOnly: boolean): void;
  updateAndFreeze(mq: MessageQueue, offset: number): void;
  /** >= 0 the offset; -1 none stored; -2 could not be read */
  readOffset(mq: MessageQueue, type: ReadOffsetType): Promise<number>;
  /** the offset in memory or -1, synchronously (the pull path's commit offset) */
  readOffsetFromMemory(mq: MessageQueue): number;
  /**
   * persists the offsets of the held queues and forgets the others, but those of `unsynced`: held
   * queues whose offset in memory may be behind the broker's (ProcessQueue.isOffsetStale), kept
   * and not sent until {@link resync} read it again. `final`: the member's last persist, at close
   * (see {@link RemoteOffsetStore.persistAll})
   */
  persistAll(held: readonly MessageQueue[], unsynced?: readonly MessageQueue[], final?: boolean): Promise<void>;
  /** `final`: the queue's last offset before this member lets it go (as persistAll's) */
  persist(mq: MessageQueue, final?: boolean): Promise<void>;
  removeOffset(mq: MessageQueue): void;
  /**
   * Clustering hand-over: the committed offset of a queue `clientId` was just given, read once
   * the member that held it released it (the broker waits a bounded time); like
   * `readOffset(mq, "READ_FROM_STORE")` otherwise. Internals §6.5.
   */
  takeOver?(mq: MessageQueue, clientId: string): Promise<number>;
  /**
   * Clustering hand-over: commits the in-memory offset as `clientId`'s final one and lets the queue
   * go; a release that does not reach the broker is sent again later (remote store).
   */
  release?(mq: MessageQueue, clientId: string): Promise<void>;
  /**
   * Clustering: reads again the committed offset of a queue `clientId` holds, whose connection to
   * its broker was lost since it was read (a take-over: another member the broker gave the queue to
   * meanwhile releases it first). The table keeps the larger of it and the offset in memory. Returns
   * the broker's offset, -1 when none is stored, -2 when it could not be read.
   */
  resync?(mq: MessageQueue, clientId: string): Promise<number>;
}

/**
 * What both stores share: the in-memory table (RocketMQ's rules, offsetTable.ts) and
 * `readOffset`'s memory-first order; each store says how it reads from its own storage.
 */
abstract class TableOffsetStore {
  readonly table = new OffsetTable();

  /** The offset kept in the store proper (broker or file), cached in the table when found. */
  protected abstract readFromStore(mq: MessageQueue): Promise<number>;

  updateOffset(mq: MessageQueue, offset: number, increaseOnly: boolean): void {
    this.table.updateOffset(mq, offset, increaseOnly);
  }

  updateAndFreeze(mq: MessageQueue, offset: number): void {
    this.table.updateAndFreeze(mq, offset);
  }

  readOffsetFromMemory(mq: MessageQueue): number {
    return this.table.readOffset(mq);
  }

  removeOffset(mq: MessageQueue): void {
    this.table.removeOffset(mq);
  }

  async readOffset(mq: MessageQueue, type: ReadOffsetType): Promise<number> {
    if (type !== "READ_FROM_STORE") {
      const v = this.table.readOffset(mq);
      if (v >= 0 || type === "READ_FROM_MEMORY") return v;
    }
    return this.readFromStore(mq);
  }
}

/** Clustering: offsets kept in memory, pushed to the queue's master broker. */
export class RemoteOffsetStore extends TableOffsetStore implements OffsetStore {
  /**
   * Releases that did not reach the broker (no address known for it, or no answer), by mqKey.
   * Forgotten, the broker would keep an older offset and whoever takes the queue next, this member
   * included, would consume again what this member did: each is sent at the next persist, and
   * before the queue's offset is read from the broker again.
   */
  private readonly unreleased = new Map<string, { mq: MessageQueue; offset: number; clientId: string }>();

  constructor(
    private readonly host: Pick<ConsumerHost, "node" | "brokerAddress" | "isBrokerUnreachable">,
    private readonly group: string,
  ) {
    super();
  }

  async load(): Promise<void> {}

  protected readFromStore(mq: MessageQueue): Promise<number> {
    return this.queryIntoTable(mq);
  }

  takeOver(mq: MessageQueue, clientId: string): Promise<number> {
    return this.queryIntoTable(mq, clientId);
  }

  resync(mq: MessageQueue, clientId: string): Promise<number> {
    return this.queryIntoTable(mq, clientId, true);
  }

  /**
   * The broker's offset (asked as the queue's new holder `takeOverBy`, if given), cached in the
   * table (`keepLarger`: unless the table's is larger).
   */
  private async queryIntoTable(mq: MessageQueue, takeOverBy?: string, keepLarger = false): Promise<number> {
    // this member's own release comes first: sent after the read, it would let go of the queue again
    const pending = this.unreleased.get(mqKey(mq));
    if (pending && !(await this.sendRelease(pending))) return OFFSET_QUERY_FAILED;
    try {
      const offset = await this.queryBroker(mq, takeOverBy);
      this.table.updateOffset(mq, offset, keepLarger);
      return offset;
    } catch (e) {
      return isMQError(e, "QUERY_NOT_FOUND") ? OFFSET_NOT_FOUND : OFFSET_QUERY_FAILED;
    }
  }

  async release(mq: MessageQueue, clientId: string): Promise<void> {
    const offset = this.table.readOffset(mq);
    await this.sendRelease({ mq, offset: offset >= 0 ? offset : -1, clientId });
  }

  /** Sends a release; one that fails is kept in {@link unreleased} (replacing an older one of the queue). Returns true when sent. */
  private async sendRelease(r: { mq: MessageQueue; offset: number; clientId: string }): Promise<boolean> {
    const k = mqKey(r.mq);
    this.unreleased.set(k, r);
    try {
      await this.updateBroker(r.mq, r.offset, r.clientId);
    } catch {
      return false;
    }
    if (this.unreleased.get(k) === r) this.unreleased.delete(k);
    return true;
  }

  /** Queues let go whose release has not reached their broker yet (tests, tools). */
  get unreleasedQueues(): MessageQueue[] {
    return [...this.unreleased.values()].map((r) => r.mq);
  }

  /**
   * `final` (close) sends the offsets to be served however late (serveLate): they reach the broker
   * before the member's goodbye on the same connection, so no other member holds the queues yet. A
   * periodic one is dropped by an overloaded broker once its timeout passed: served later, after the
   * queue moved to another member, it could move that member's newer offset back.
   *
   * `strict` (a pull consumer's commit()): rejects, once every send ended, with an MQError naming
   * the held queues whose offset the broker did not acknowledge; they stay in memory and the next
   * persist sends them again. Otherwise such failures wait silently for the next persist.
   */
  async persistAll(held: readonly MessageQueue[], unsynced: readonly MessageQueue[] = [], final = false, strict = false): Promise<void> {
    const keep = new Set(held.map(mqKey));
    // held, but possibly behind another member's commits: sent, it would move the group's offset back
    const hold = new Set(unsynced.map(mqKey));
    const work: Promise<unknown>[] = [];
    const drop: MessageQueue[] = [];
    const failed: { mq: MessageQueue; error: unknown }[] = [];
    for (const { mq, offset } of this.table.entries()) {
      const k = mqKey(mq);
      if (keep.has(k)) {
        if (offset >= 0)
          work.push(this.updateBroker(mq, offset, undefined, final, strict).catch((error: unknown) => failed.push({ mq, error })));
      } else if (!hold.has(k)) drop.push(mq);
    }
    for (const [k, r] of this.unreleased) {
      // held again without its offset read from the broker: sent now, the release would let go of it
      if (keep.has(k) || hold.has(k)) this.unreleased.delete(k);
      else work.push(this.sendRelease(r));
    }
    for (const mq of drop) this.table.removeOffset(mq);
    await Promise.all(work);
    // held but not sent: a strict commit did not commit them either
    if (strict)
      for (const mq of unsynced)
        if (this.table.readOffset(mq) >= 0)
          failed.push({
            mq,
            error: new MQError(
              "SERVICE_NOT_AVAILABLE",
              "the connection to its broker was lost since its offset was read there; it is read again once the broker answers, then committed",
            ),
          });
    if (strict && failed.length > 0) throw commitFailedError(failed);
  }

  async persist(mq: MessageQueue, final = false): Promise<void> {
    const offset = this.table.readOffset(mq);
    if (offset >= 0) await this.updateBroker(mq, offset, undefined, final).catch(() => {});
  }

  /** One queue's offset, as a strict {@link persistAll}: fails once its connection is lost, and rejects as that does. */
  async persistStrict(mq: MessageQueue): Promise<void> {
    const offset = this.table.readOffset(mq);
    if (offset < 0) return;
    await this.updateBroker(mq, offset, undefined, false, true).catch((error: unknown) => {
      throw commitFailedError([{ mq, error }]);
    });
  }

  private address(mq: MessageQueue): string {
    // the master, else a slave while the master is down; the next persist after the master is back carries the offset to it
    const addr = findBrokerAddressInSubscribe(this.host, mq.brokerName, MASTER_ID)?.addr;
    if (!addr)
      throw new MQError(
        "SERVICE_NOT_AVAILABLE",
        `No address is known for broker ${mq.brokerName}; the offset of ${mqKey(mq)} is sent once its route is back.`,
      );
    return addr;
  }

  /** QUERY_CONSUMER_OFFSET; with `takeOverBy`, a take-over that waits for the previous holder's release. */
  private async queryBroker(mq: MessageQueue, takeOverBy?: string): Promise<number> {
    const req: QueryConsumerOffsetRequest = {
      consumerGroup: this.group,
      topic: mq.topic,
      queueId: mq.queueId,
      ...(takeOverBy ? { clientId: takeOverBy, waitRelease: true } : {}),
    };
    const timeoutMs = takeOverBy ? TAKE_OVER_REQUEST_TIMEOUT_MS : OFFSET_REQUEST_TIMEOUT_MS;
    const r = await this.host.node
      .ref(this.address(mq), ConsumptionActorFor.QUERY_CONSUMER_OFFSET)
      .ask<{ offset: number }>({ type: "QUERY_CONSUMER_OFFSET", ...req }, { timeoutMs });
    return Number(r.fields.offset);
  }

  /**
   * UPDATE_CONSUMER_OFFSET; with `releasedBy`, that member's final offset (-1: none) and its release
   * of the queue. `failFast` (a caller waits for the answer): fails once the connection is lost.
   */
  private async updateBroker(mq: MessageQueue, offset: number, releasedBy?: string, final = false, failFast = false): Promise<void> {
    const req: UpdateConsumerOffsetRequest = {
      consumerGroup: this.group,
      topic: mq.topic,
      queueId: mq.queueId,
      commitOffset: offset,
      ...(releasedBy ? { clientId: releasedBy, release: true } : {}),
    };
    const event = { type: "UPDATE_CONSUMER_OFFSET", ...req };
    // a release (the broker checks its holder) or a last offset sent at close matters after this
    // side stops waiting for it
    const opts = { timeoutMs: OFFSET_REQUEST_TIMEOUT_MS, serveLate: releasedBy !== undefined || final };
    const [addr, actor] = [this.address(mq), ConsumptionActorFor.UPDATE_CONSUMER_OFFSET];
    // a closing member waits for its last offsets only while the broker can get them: a connection
    // lost now, or one already lost whose next reconnect fails (at most a second away), ends the
    // wait; a broker restarted on its address gets them with that reconnect. A pull consumer's
    // commit() is told as soon, not after the request timeout
    await (final || failFast
      ? askUnlessConnectionLost(this.host.node, addr, actor, event, opts, monotonicNow())
      : this.host.node.ref(addr, actor).ask(event, opts));
  }
}

/** What a strict {@link RemoteOffsetStore.persistAll} rejects with: the first failure's code, every queue named. */
function commitFailedError(failed: readonly { mq: MessageQueue; error: unknown }[]): MQError {
  const first = failed[0]!.error;
  const each = failed.map(({ mq, error }) => `${mqKey(mq)} (${error instanceof Error ? error.message : String(error)})`);
  return new MQError(
    isMQError(first) ? first.code : "SYSTEM_ERROR",
    `The offsets of ${each.join("; ")} were not committed: the broker did not acknowledge them. ` +
      "They are kept: call commit() again once the broker can be reached.",
    { cause: first },
  );
}

/** The JSON of a broadcasting offsets file: `{ offsetTable: { "topic@broker@queueId": offset } }`. */
interface OffsetsFile {
  offsetTable: Record<string, number>;
}

let processRun: bigint | undefined;
/** A monotonic time taken once per process: with the pid, it tells this process from an earlier one given the same pid. */
function processRunTime(): bigint {
  processRun ??= process.hrtime.bigint();
  return processRun;
}

/**
 * The client id a broadcasting consumer's offsets file is kept under: RocketMQ's
 * `ip@instanceName` (the host name here), not the full client id, which holds this process's pid:
 * a member restarted as a new process with the same instance name finds its offsets. The default
 * instance name is replaced by `<pid>#<monotonic time>`, as RocketMQ's changeInstanceNameToPID does
 * (`<pid>#<nanoTime>`), taken once per process: unnamed members of one host never share a file, and
 * a later process given the same pid (pid 1 in a container) does not resume an earlier one's offsets.
 */
export function localOffsetsClientId(instanceName: string, host = hostname(), pid = process.pid, runTime = processRunTime()): string {
  return `${host}@${instanceName === DEFAULT_INSTANCE_NAME ? `${pid}#${runTime}` : instanceName}`;
}

/** The path of a broadcasting consumer's offsets file, under {@link localOffsetsClientId}. */
export function localOffsetsPath(dir: string | undefined, clientId: string, group: string): string {
  return path.join(dir ?? DEFAULT_OFFSET_STORE_DIR, clientId.replace(/[\\/]/g, "_"), group, "offsets.json");
}

function parseKey(k: string): MessageQueue | null {
  const a = k.lastIndexOf("@");
  const b = k.lastIndexOf("@", a - 1);
  if (a < 0 || b < 0) return null;
  const queueId = Number(k.slice(a + 1));
  if (!(Number.isInteger(queueId) && queueId >= 0)) return null;
  return { topic: k.slice(0, b), brokerName: k.slice(b + 1, a), queueId };
}

/** Broadcasting: offsets of this client alone, in a local file written atomically. */
export class LocalFileOffsetStore extends TableOffsetStore implements OffsetStore {
  /** what the file held at load (the store's view of READ_FROM_STORE) */
  private readonly fileOffsets = new Map<string, number>();
  private writing: Promise<void> = Promise.resolve();

  constructor(readonly file: string) {
    super();
  }

  /**
   * Reads the file, else its `.bak` with a warning (RocketMQ's readLocalOffset / readLocalOffsetBak).
   * MQError MALFORMED when files exist but none can be read: starting from consumeFromWhere instead
   * would skip (LAST_OFFSET) or consume again what was sent since the offsets were written.
   */
  async load(): Promise<void> {
    const bak = `${this.file}.bak`;
    const dir = path.dirname(this.file);
    const main = await readOffsetsFile(this.file);
    const backup = main.data ? {} : await readOffsetsFile(bak);
    const data = main.data ?? backup.data;
    if (!data && (main.error || backup.error))
      throw new MQError(
        "MALFORMED",
        `The broadcasting offsets of this member cannot be read: ${this.file}: ${main.error ?? "missing"}; ${bak}: ${backup.error ?? "missing"}. ` +
          `Restore the files from a backup, or, to start from consumeFromWhere, delete the directory ${dir} (offsets.json and offsets.json.bak).`,
      );
    // said, since deleting offsets.json alone does not start the member afresh
    if (!main.data && backup.data)
      offsetLog().warn(
        { file: this.file, bak, ...(main.error ? { error: main.error } : {}) },
        `The broadcasting offsets file ${this.file} ${main.error ? `cannot be read (${main.error})` : "is missing"}: resuming from its backup ${bak} (the offsets before its last write). ` +
          `To start from consumeFromWhere instead, stop the member and delete the directory ${dir} (offsets.json and offsets.json.bak).`,
      );
    if (!data) {
      const denied = main.denied ?? backup.denied;
      if (denied)
        offsetLog().warn(
          { file: this.file, error: denied },
          `The broadcasting offsets file ${this.file} cannot be read by this user (${denied}): starting from consumeFromWhere. Give this user access to ${dir}, or set offsetStoreDir to a directory it owns.`,
        );
      return;
    }
    const skipped: string[] = [];
    for (const [k, v] of Object.entries(data.offsetTable)) {
      const mq = parseKey(k);
      // a fractional offset would be pulled from, every pull refused (INVALID_PARAMETER) and retried:
      // the queue would never be consumed again
      if (mq && Number.isSafeInteger(v) && (v as number) >= 0) {
        this.fileOffsets.set(k, v as number);
        this.table.updateOffset(mq, v as number, false);
      } else skipped.push(`${JSON.stringify(k)}: ${shownValue(v)}`);
    }
    if (skipped.length > 0)
      offsetLog().warn(
        { file: main.data ? this.file : bak, skipped },
        `The broadcasting offsets file ${main.data ? this.file : bak} has entries that are not "topic@broker@queueId": offset (an integer >= 0), skipped: ` +
          `${skipped.join(", ")}. Those queues start where consumeFromWhere says; the next write drops the entries.`,
      );
  }

  protected async readFromStore(mq: MessageQueue): Promise<number> {
    const v = this.fileOffsets.get(mqKey(mq));
    if (v === undefined) return OFFSET_NOT_FOUND;
    this.table.updateOffset(mq, v, false);
    return v;
  }

  async persistAll(held: readonly MessageQueue[]): Promise<void> {
    if (held.length === 0) return;
    const keep = new Set(held.map(mqKey));
    const offsetTable: Record<string, number> = {};
    for (const [k, v] of this.fileOffsets) offsetTable[k] = v;
    for (const { mq, offset } of this.table.entries()) {
      const k = mqKey(mq);
      if (keep.has(k) && offset >= 0) offsetTable[k] = offset;
    }
    for (const [k, v] of Object.entries(offsetTable)) this.fileOffsets.set(k, v);
    await this.write({ offsetTable });
  }

  async persist(mq: MessageQueue): Promise<void> {
    await this.persistAll([mq]);
  }

  /**
   * Serialised writes (temp file, fsync, the previous file kept as `.bak`, rename, fsync the
   * directory): a damaged file (one load fell back from) does not replace the good `.bak`.
   */
  private write(data: OffsetsFile): Promise<void> {
    const run = () => JsonFile.writeAsync(this.file, data, isOffsetsFile);
    this.writing = this.writing.then(run, run);
    return this.writing;
  }
}

/** An offsets file's table and text; neither `data` nor `error` when it does not exist. */
async function readOffsetsFile(file: string): Promise<{ data?: OffsetsFile; text?: string; error?: string; denied?: string }> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    // ENOTDIR: a file where a directory of its path should be, so no offsets file either (the writes say so)
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return {};
    // a directory this user may not enter says nothing of what the files hold (nor may they be
    // there): read as missing, as RocketMQ's readLocalOffset does, and said at load
    if (code === "EACCES" || code === "EPERM") return { denied: (e as Error).message };
    return { error: (e as Error).message };
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    return { error: `not valid JSON: ${(e as Error).message}` };
  }
  if (isOffsetsFile(data)) return { data, text };
  return { error: 'no "offsetTable" object' };
}

function isOffsetsFile(data: unknown): data is OffsetsFile {
  return !!data && typeof data === "object" && "offsetTable" in data && !!data.offsetTable && typeof data.offsetTable === "object";
}
