/**
 * MessageStore: the commit log, consume queues and index of one broker, with group-committed
 * durability, RocketMQ's getMessage rules, recovery and file expiry. Plain TypeScript; the
 * broker's store actor wraps it and serialises calls.
 */
import fs from "node:fs";
import { isIPv4 } from "node:net";
import path from "node:path";
import { crc32 } from "node:zlib";
import { int32BE, int64BE, putInt32BE, putInt64BE, putUint16BE, uint16BE, uint32BE } from "../transport/bigEndian.ts";
import { monotonicNow } from "../transport/clock.ts";
import {
  BLANK_MAGIC,
  BLANK_MARKER_BYTES,
  CRC_RESERVED_BYTES,
  checkRecord,
  decodeProperties,
  encodeMessageBatch,
  encodeProperties,
  HOST_V6_FLAGS,
  javaHashCode,
  MAGIC_V1,
  MAX_MESSAGE_PROPERTIES_BYTES,
  MIN_RECORD_BYTES,
  OffsetMsgIdWriter,
  propertiesTooLong,
  RECORD_FIXED_BYTES,
  RecordOffset,
  readLong,
  walkMessageBatch,
  writeHost,
  writeRecordCrcWithBody,
} from "../transport/messageRecord.ts";
import { checkOptionNames, optionNamesOf } from "../transport/optionNames.ts";
import {
  checkTopic,
  DEFAULT_MAX_MESSAGE_BYTES,
  isMQError,
  isPortText,
  MAX_TIMER_MS,
  MessageConst,
  MQError,
} from "../transport/protocol.ts";
import {
  checkpointMinTimestamp,
  type QueueMark,
  readCheckpoint,
  type StoreCheckpoint,
  writeCheckpoint,
  writeCheckpointAsync,
} from "./checkpoint.ts";
import { CommitLog, FILLER_HEADER_BYTES, FILLER_MAGIC, fillerBytes, writeFillerHeader } from "./commitLog.ts";
import { ConsumeQueue, CQ_ENTRY_BYTES, consumeQueueFilesToOpen, listConsumeQueues } from "./consumeQueue.ts";
import { DEFAULT_MESSAGE_DELAY_LEVEL, parseDelayLevels } from "./delayLevels.ts";
import { DELETED_TOPICS_FILE, DeletedTopics } from "./deletedTopics.ts";
import { type ArrivalNotice, Dispatcher } from "./dispatcher.ts";
import { mkdirDurable } from "./durableDir.ts";
import { DEFAULT_INDEX_SLOTS, IndexService } from "./indexFile.ts";
import { ioError } from "./ioError.ts";
import { openFilesShort } from "./openFiles.ts";
import { findRecord, type LogScanResult, recordHeadLength, resync, scanCommitLog } from "./recovery.ts";
import { segmentName } from "./segment.ts";
import { acquireStoreLock } from "./storeLock.ts";
import { UndeletedFiles } from "./undeletedFiles.ts";
import { checkWrittenSizes } from "./writtenSizes.ts";

export const DEFAULT_COMMIT_LOG_SEGMENT_BYTES = 1024 * 1024 * 1024;
export const DEFAULT_CONSUME_QUEUE_ENTRIES = 300_000;
export const DEFAULT_FILE_RESERVED_TIME_HOURS = 72;
export const DEFAULT_FLUSH_INTERVAL_MS = 500;
/** async flush also starts when this many bytes are unflushed (RocketMQ: 4 pages; we batch more) */
export const DEFAULT_FLUSH_LEAST_BYTES = 4 * 1024 * 1024;
export const DEFAULT_STORE_HOST = "127.0.0.1:10911";
export const DEFAULT_SYNC_FLUSH_TIMEOUT_MS = 5000;
/** maxTransferBytesOnMessageInMemory */
export const DEFAULT_MAX_TRANSFER_BYTES = 256 * 1024;
/** maxTransferCountOnMessageInMemory */
export const DEFAULT_MAX_TRANSFER_COUNT = 32;
/** how often expired files are looked for (cleanResourceInterval) */
export const DEFAULT_CLEAN_INTERVAL_MS = 10_000;
/** Segments deleted before they expire per check at most (RocketMQ's deleteFileBatchMax). */
const FORCIBLE_DELETES_PER_CHECK = 10;

/** Whether `host` is `a.b.c.d:port`, the only form a store host can be written in. */
function isIPv4HostPort(host: unknown): boolean {
  if (typeof host !== "string") return false;
  const colon = host.lastIndexOf(":");
  const port = host.slice(colon + 1);
  return colon > 0 && isIPv4(host.slice(0, colon)) && isPortText(port, 0);
}

const isWhole = (min: number) => (v: number) => Number.isSafeInteger(v) && v >= min;
/** Node runs a timer of more ms than this after 1 ms */
const isTimerMs = (min: number) => (v: number) => v >= min && v <= MAX_TIMER_MS;
const isPercentOrOff = (v: number) => (v > 0 && v <= 100) || v === Number.POSITIVE_INFINITY;

/** The numeric options, what each takes, and that range in words. */
const NUMERIC_OPTIONS: ReadonlyArray<[keyof MessageStoreOptions, (v: number) => boolean, string]> = [
  ["commitLogSegmentBytes", isWhole(4096), "an integer number of bytes >= 4096"],
  ["consumeQueueEntries", isWhole(1), "an integer number of entries per file >= 1"],
  ["indexSlots", isWhole(1), "an integer number of hash slots >= 1"],
  ["maxMessageBytes", isWhole(1), "an integer number of bytes >= 1"],
  ["maxTransferBytes", isWhole(1), "an integer number of bytes >= 1"],
  ["maxTransferCount", isWhole(1), "an integer number of messages >= 1"],
  ["flushLeastBytes", isWhole(0), "an integer number of bytes >= 0"],
  ["fileReservedTimeHours", (v) => v > 0, "a number of hours > 0"],
  ["flushIntervalMs", isTimerMs(1), `a number of ms from 1 to ${MAX_TIMER_MS}`],
  ["syncFlushTimeoutMs", isTimerMs(1), `a number of ms from 1 to ${MAX_TIMER_MS}`],
  ["cleanIntervalMs", isTimerMs(0), `a number of ms from 0 (no timer) to ${MAX_TIMER_MS}`],
  ["checkpointIntervalMs", isTimerMs(0), `a number of ms from 0 (no timer) to ${MAX_TIMER_MS}`],
  ["diskCleanForciblyPercent", isPercentOrOff, "a percentage in (0, 100], or Infinity (off)"],
  ["diskFullPercent", isPercentOrOff, "a percentage in (0, 100], or Infinity (off)"],
];

/** Throws MQError ILLEGAL_ARGUMENT naming the first numeric option out of its range (one that would give NaN file names, empty index answers or busy timers). */
function checkNumericOptions(opts: Required<MessageStoreOptions>): void {
  for (const [name, ok, range] of NUMERIC_OPTIONS) {
    const v = opts[name];
    if (typeof v !== "number" || !ok(v)) throw new MQError("ILLEGAL_ARGUMENT", `${name} must be ${range}, not ${String(v)}.`);
  }
}

/**
 * Percent of a file system in use as `df` and RocketMQ's UtilAll.getDiskPartitionSpaceUsedPercent
 * count it: used / (used + available to this user). Blocks reserved for root (5 % of an ext4 by
 * default, far more on some hosts) are neither; counting them as used put a disk 31 % full by df
 * at 72 %, so `--disk-clean-forcibly` and `--disk-full` acted that much early.
 */
export function usedPercent(st: { blocks: number; bfree: number; bavail: number }): number {
  const used = st.blocks - st.bfree;
  const entire = used + st.bavail;
  return entire > 0 ? (100 * used) / entire : Number.NaN;
}

/** Percent of the file system holding `dir` in use ({@link usedPercent}), or NaN when it cannot be read. */
export function statfsUsedPercent(dir: string): number {
  try {
    return usedPercent(fs.statfsSync(dir));
  } catch {
    return Number.NaN;
  }
}
/** how often consume queues and index are flushed and the checkpoint written (flushIntervalConsumeQueue) */
export const DEFAULT_CHECKPOINT_INTERVAL_MS = 1000;
/** commit-log files before the last that a normal recovery checks when the dispatched position is past every file (RocketMQ 4.x: the 3rd-last file) */
const NORMAL_RECOVERY_FILES_BACK = 2;
/** how far around a damaged consume-queue entry the log is searched for the record it stands for */
const REFIND_SCAN_BYTES = 16 * 1024 * 1024;
/** damaged entries remembered so that later pulls do not search for their records again */
const MAX_REMEMBERED_DAMAGE = 4096;
/** filter scan cap of one getMessage, in consume-queue bytes */
const MAX_FILTER_SCAN_BYTES = 16_000;
const MAX_PULL_BYTES = 128 * 1024 * 1024;
/**
 * Index entries one key lookup reads at most (each costs a record read): keys sharing the key's
 * hash are passed over up to this many entries, rather than ending the lookup at the first 64.
 */
const MAX_LOOKUP_ENTRIES = 4096;

/** Options of {@link MessageStore.open}. */
export interface MessageStoreOptions {
  /** store root directory */
  dir: string;
  /** "sync": a put resolves once on disk (group commit); "async": RocketMQ's ASYNC_FLUSH. @default "sync" */
  flush?: "sync" | "async";
  /** @default 1 GiB */
  commitLogSegmentBytes?: number;
  /** entries per consume-queue file. @default 300000 */
  consumeQueueEntries?: number;
  /** @default 4 MiB */
  maxMessageBytes?: number;
  /** @default 72 */
  fileReservedTimeHours?: number;
  /** async flush interval. @default 500 */
  flushIntervalMs?: number;
  /** async flush byte threshold. @default 4 MiB */
  flushLeastBytes?: number;
  /** the IPv4 `ip:port` stamped in records and offset message ids (a host name is refused: resolve it first). @default "127.0.0.1:10911" */
  storeHost?: string;
  /** delay levels for SCHEDULE_TOPIC_XXXX delivery times. @default "1s 5s 10s 30s 1m ... 2h" */
  messageDelayLevel?: string;
  /** how long a sync put waits for its flush before answering FLUSH_DISK_TIMEOUT (less up to its flushDeadline). @default 5000 */
  syncFlushTimeoutMs?: number;
  /** per getMessage byte limit. @default 256 KiB */
  maxTransferBytes?: number;
  /** per getMessage count limit. @default 32 */
  maxTransferCount?: number;
  /** index hash slots. @default 1048576 */
  indexSlots?: number;
  /** expiry check interval; 0 disables the timer. @default 10000 */
  cleanIntervalMs?: number;
  /**
   * Disk use (percent of the store's file system) from which the oldest segments are deleted before
   * they expire, up to 10 per check (RocketMQ's diskSpaceCleanForciblyRatio, 85 there). @default off
   */
  diskCleanForciblyPercent?: number;
  /**
   * Disk use from which puts are refused with DISK_FULL until a check finds it at or below
   * diskCleanForciblyPercent (when that is set; else below this), as RocketMQ's diskSpaceWarningLevelRatio (90 there). @default off
   */
  diskFullPercent?: number;
  /** The store file system's use in percent (NaN when unknown). @default from `fs.statfsSync` */
  diskUsedPercent?: (dir: string) => number;
  /** consume-queue/index flush and checkpoint interval; 0 disables the timer (close still writes one). @default 1000 */
  checkpointIntervalMs?: number;
  /** told (once per store) when a damaged record is skipped on a read. @default a process warning */
  onDamage?: (message: string) => void;
  /** told of every failed fdatasync (see {@link FlushError}); they are counted in `flushErrors`. @default a process warning */
  onFlushError?: (failure: FlushError) => void;
  /** told when disk pressure changes what the store does (see {@link DiskSpaceChange}). @default a process warning */
  onDiskSpace?: (change: DiskSpaceChange) => void;
}

/** The names of {@link MessageStoreOptions}. */
export const MESSAGE_STORE_OPTION_NAMES = optionNamesOf<MessageStoreOptions>()([
  "dir",
  "flush",
  "commitLogSegmentBytes",
  "consumeQueueEntries",
  "maxMessageBytes",
  "fileReservedTimeHours",
  "flushIntervalMs",
  "flushLeastBytes",
  "storeHost",
  "messageDelayLevel",
  "syncFlushTimeoutMs",
  "maxTransferBytes",
  "maxTransferCount",
  "indexSlots",
  "cleanIntervalMs",
  "diskCleanForciblyPercent",
  "diskFullPercent",
  "diskUsedPercent",
  "checkpointIntervalMs",
  "onDamage",
  "onFlushError",
  "onDiskSpace",
]);

/** A check of the disk under the store (deleteExpiredFiles) that changed what the store does. */
export interface DiskSpaceChange {
  /**
   * full: use reached diskFullPercent, puts are refused with DISK_FULL from now on; notFull: use is
   * at or below diskCleanForciblyPercent again (below diskFullPercent when that is off), puts are taken; cleanedForcibly: use was at or above diskCleanForciblyPercent
   * and the oldest commit-log segments were deleted before they expired; cleanFailed: the periodic
   * deletion of expired files failed (said once until one succeeds): expired files stay, the disk fills
   * (a file that could not be deleted is no longer read, and is deleted again at every check)
   */
  kind: "full" | "notFull" | "cleanedForcibly" | "cleanFailed";
  /** the store's directory */
  dir: string;
  /** disk use in percent after the check (NaN when it could not be read) */
  usedPercent: number;
  /** cleanedForcibly: how many segments were deleted */
  segments?: number;
  /** what happened and what to do, for a log line */
  message: string;
}

const DISK_SPACE_WARNING_CODES = {
  full: "ACTORMQ_DISK_FULL",
  notFull: "ACTORMQ_DISK_NOT_FULL",
  cleanedForcibly: "ACTORMQ_DISK_CLEAN_FORCIBLY",
  cleanFailed: "ACTORMQ_DISK_CLEAN_FAILED",
} as const;

/**
 * A flush that failed. Linux reports an fdatasync error once and may drop the pages it could not
 * write: a later fdatasync that succeeds does not bring them back, so what was written in the range
 * may be missing after a power loss or an OS crash even though the log reads it back now.
 */
export interface FlushError {
  /** the commit-log segment whose fdatasync failed; for a failed checkpoint (of a consume-queue, index or checkpoint file, named in the error), the checkpoint file */
  file: string;
  /** start of the commit-log range the flush was to make durable */
  from: number;
  /** end (exclusive) of that range */
  to: number;
  error: MQError;
}

/** Defaults for every {@link MessageStoreOptions} but `dir`. */
export function defaultMessageStoreOptions(): Required<Omit<MessageStoreOptions, "dir">> {
  return {
    flush: "sync",
    commitLogSegmentBytes: DEFAULT_COMMIT_LOG_SEGMENT_BYTES,
    consumeQueueEntries: DEFAULT_CONSUME_QUEUE_ENTRIES,
    maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
    fileReservedTimeHours: DEFAULT_FILE_RESERVED_TIME_HOURS,
    flushIntervalMs: DEFAULT_FLUSH_INTERVAL_MS,
    flushLeastBytes: DEFAULT_FLUSH_LEAST_BYTES,
    storeHost: DEFAULT_STORE_HOST,
    messageDelayLevel: DEFAULT_MESSAGE_DELAY_LEVEL,
    syncFlushTimeoutMs: DEFAULT_SYNC_FLUSH_TIMEOUT_MS,
    maxTransferBytes: DEFAULT_MAX_TRANSFER_BYTES,
    maxTransferCount: DEFAULT_MAX_TRANSFER_COUNT,
    indexSlots: DEFAULT_INDEX_SLOTS,
    cleanIntervalMs: DEFAULT_CLEAN_INTERVAL_MS,
    diskCleanForciblyPercent: Number.POSITIVE_INFINITY,
    diskFullPercent: Number.POSITIVE_INFINITY,
    diskUsedPercent: statfsUsedPercent,
    checkpointIntervalMs: DEFAULT_CHECKPOINT_INTERVAL_MS,
    onDamage: (message: string) => process.emitWarning(message, { code: "ACTORMQ_DAMAGED_RECORD" }),
    onFlushError: (f: FlushError) =>
      process.emitWarning(`${f.error.message} (commit-log range ${f.from}-${f.to} may not be on disk)`, { code: "ACTORMQ_FLUSH_ERROR" }),
    onDiskSpace: (c: DiskSpaceChange) => process.emitWarning(c.message, { code: DISK_SPACE_WARNING_CODES[c.kind] }),
  };
}

/** One SEND's messages for one queue: the producer's batch body as it came. */
export interface PutBatch {
  topic: string;
  queueId: number;
  bornTimestamp: number;
  bornHost: string;
  sysFlag?: number;
  reconsumeTimes?: number;
  /** {@link encodeMessageBatch} body */
  body: Buffer;
  /**
   * sync flush: when (monotonicNow, transport/clock.ts) the put must be answered if sooner than
   * `syncFlushTimeoutMs` (its sender gives up then): not on disk by then, it is FLUSH_DISK_TIMEOUT.
   * The puts of one {@link MessageStore.putMessagesGroup} call share their earliest.
   */
  flushDeadline?: number;
}

/** The outcome of a put. */
export interface PutResult {
  status: "PUT_OK" | "FLUSH_DISK_TIMEOUT";
  firstQueueOffset: number;
  count: number;
  /** the messages' offset message ids, comma-separated (RocketMQ's batch SendResult form) */
  offsetMsgIds: string;
  commitLogOffset: number;
  wroteBytes: number;
}

/** Most bytes one group append writes at once (puts past it go in the next write). */
const MAX_GROUP_WRITE_BYTES = 4 * 1024 * 1024;

/** A record's bytes besides its body and properties, for a topic. */
function recordFixedBytes(topicBytes: Buffer): number {
  return RECORD_FIXED_BYTES + 1 + topicBytes.length + 2 + CRC_RESERVED_BYTES;
}

/**
 * What the batches of one put group planned so far open: consume-queue files, and (groups of several
 * batches) each queue's next offset, keyed by its ConsumeQueue (a queue not made yet: `topic\0queueId`).
 */
interface GroupFiles {
  opening: number;
  several: boolean;
  readonly next: Map<ConsumeQueue | string, number>;
}

/** One checked batch of a group put, and its result once encoded. */
interface PutPlan {
  batch: PutBatch;
  /** position in the group */
  index: number;
  topicBytes: Buffer;
  count: number;
  /** record bytes */
  total: number;
  result: PutResult | undefined;
}

/** RocketMQ's GetMessageStatus. */
export type GetMessageStatus =
  | "FOUND"
  | "NO_MATCHED_MESSAGE"
  | "MESSAGE_WAS_REMOVING"
  | "OFFSET_FOUND_NULL"
  | "OFFSET_OVERFLOW_BADLY"
  | "OFFSET_OVERFLOW_ONE"
  | "OFFSET_TOO_SMALL"
  | "NO_MATCHED_LOGIC_QUEUE"
  | "NO_MESSAGE_IN_QUEUE";

/** What getMessage returns: the stored records themselves, as slices. */
export interface GetMessageResult {
  status: GetMessageStatus;
  nextBeginOffset: number;
  minOffset: number;
  maxOffset: number;
  messageCount: number;
  buffers: Buffer[];
  lastPhysicalOffset: number;
  suggestPullingFromSlave: boolean;
}

/** A pull's filter: tag hash codes checked on the consume queue, properties checked on the record. */
export interface MessageFilter {
  tagsCodes?: Set<number> | null;
  matchProperties?: (props: Record<string, string>) => boolean;
}

/** How the last open recovered. */
export interface RecoveryReport {
  mode: "normal" | "abnormal";
  log: LogScanResult;
  /** commit-log offset the check started at (a segment start) */
  checkedFrom: number;
  /** records at or after this offset were dispatched again */
  redispatchedFrom: number;
  /** why consume queues and index (or the index alone) were rebuilt from the whole log, or null when they were kept */
  rebuilt: string | null;
  /** commit-log ranges [from, to) whose segment files are missing between others: their messages are lost */
  missingLog: Array<{ from: number; to: number }>;
}

/** Damage met while serving reads since the store opened. */
export interface DamageStats {
  /** records skipped by getMessage (and other readers) because they failed their checks */
  damagedRecordsSkipped: number;
  /** consume-queue entries rewritten after their record was found again nearby */
  entriesRepaired: number;
  /** commit-log bytes replaced by a filler or BLANK marker in replication reads */
  replicationBytesSkipped: number;
}

/** The store of one broker. */
export class MessageStore {
  readonly options: Required<MessageStoreOptions>;
  readonly commitLog: CommitLog;
  private readonly queues = new Map<string, Map<number, ConsumeQueue>>();
  private readonly index: IndexService;
  private readonly dispatcher: Dispatcher;
  /** topics deleted, with the commit-log offset below which their records are old (loaded before recovery) */
  private readonly deleted: DeletedTopics;
  private readonly storeHostBytes = Buffer.alloc(8);
  private readonly topicBytes = new Map<string, Buffer>();
  private writeBuf = Buffer.allocUnsafe(1024 * 1024);
  /** reused by every put group (see planPut) */
  private readonly groupFiles: GroupFiles = { opening: 0, several: false, next: new Map() };
  /** the fields shared by the records of one batch, copied into each record */
  private readonly headBuf = Buffer.alloc(RECORD_FIXED_BYTES);
  /** the header of the first record of a replication read */
  private readonly replicaHead = Buffer.alloc(RECORD_FIXED_BYTES);
  /** start of the log's last entry (record, filler or BLANK marker); -1 when not known (found by a scan on demand) */
  private tailAt = -1;
  /** the max offset at which {@link findTail} last ran */
  private tailSearchedAt = -1;
  /** the CRC {@link replicaTail} last computed, and the entry it is of */
  private tailCrc = { at: -1, end: -1, crc: 0 };
  /** the born host whose bytes headBuf holds (a producer's batches share it) */
  private headBornHost = "";
  /** commit-log offsets of the records of the batch being appended, for its offset message ids */
  private readonly recordOffsets: number[] = [];
  private readonly msgIdWriter: OffsetMsgIdWriter;
  private timers: NodeJS.Timeout[] = [];
  private releaseLock: () => void;
  private closed = false;
  /** Commit-log offset from which appended records wait to be dispatched again after a failed consume-queue or index write; -1: none. */
  private undispatchedFrom = -1;
  /** disk use at the last check, when at or above diskFullPercent: puts are refused */
  private diskFullAt: number | null = null;
  /** the last periodic clean-up failed (reported once until one succeeds) */
  private cleanFailing = false;
  /** files of dropped segments that could not be deleted yet: deleted again at every clean-up */
  private readonly undeleted = new UndeletedFiles();
  private checkpointing: Promise<void> | null = null;
  private warnedDamage = false;
  private readonly knownDamage = new Set<string>();
  /** how the last open recovered */
  recovery!: RecoveryReport;
  /**
   * Records from here on were appended by this process: built by the put path or CRC-checked by
   * appendReplica. Pulls check their framing only, unless asked to verify; records from before the
   * open get the full CRC check. The consumer checks every CRC when it decodes and, when one fails,
   * pulls again asking for the check here, so a record damaged in its file is then skipped and
   * reported instead of served (getMessage's `verify`). The CRC is computed once per read, by the
   * reader that has the cores for it: the clients, not the one broker they share.
   */
  private verifiedFrom = Number.MAX_SAFE_INTEGER;
  /** failed flushes (commit-log fdatasyncs and checkpoints) since the store opened */
  flushErrors = 0;
  /** the commit-log offset the last checkpoint covered */
  private checkpointedOffset = 0;
  /** damage met while serving reads */
  readonly damage: DamageStats = { damagedRecordsSkipped: 0, entriesRepaired: 0, replicationBytesSkipped: 0 };

  private constructor(opts: Required<MessageStoreOptions>, releaseLock: () => void) {
    this.options = opts;
    this.releaseLock = releaseLock;
    // before any file is opened: a file that cannot be read stops the open
    this.deleted = DeletedTopics.load(opts.dir);
    writeHost(this.storeHostBytes, 0, opts.storeHost);
    this.msgIdWriter = new OffsetMsgIdWriter(this.storeHostBytes);
    // the header's fields that never change (headBuf is zeroed, so the prepared-transaction offset is 0)
    putInt32BE(this.headBuf, RecordOffset.MAGIC, MAGIC_V1);
    this.storeHostBytes.copy(this.headBuf, RecordOffset.STORE_HOST);
    this.commitLog = new CommitLog(path.join(opts.dir, "commitlog"), opts.commitLogSegmentBytes);
    this.commitLog.onSyncError = (error, file, from, to) => this.reportFlushError({ file, from, to, error });
    this.index = new IndexService(path.join(opts.dir, "index"), undefined, opts.indexSlots);
    this.dispatcher = new Dispatcher(
      (t, q) => this.queue(t, q, true)!,
      this.index,
      parseDelayLevels(opts.messageDelayLevel),
      this.deleted.below,
    );
  }

  /** Opens (creating when needed) and recovers the store in `opts.dir`. */
  static async open(options: MessageStoreOptions): Promise<MessageStore> {
    checkOptionNames("MessageStore.open", options, MESSAGE_STORE_OPTION_NAMES);
    const opts = { ...defaultMessageStoreOptions(), ...options } as Required<MessageStoreOptions>;
    if (!opts.dir) throw new MQError("ILLEGAL_ARGUMENT", "MessageStore.open needs a dir.");
    if (opts.flush !== "sync" && opts.flush !== "async")
      throw new MQError("ILLEGAL_ARGUMENT", `flush must be "sync" or "async", not ${String(opts.flush)}.`);
    // strict where a born host is not: a store host written as 0.0.0.0 would give brokers on one port the same offset msg ids
    if (!isIPv4HostPort(opts.storeHost))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `storeHost "${String(opts.storeHost)}" is not an IPv4 ip:port (offset message ids carry 4 address bytes and the port): pass the broker's resolved address, e.g. "10.0.0.2:10911".`,
      );
    checkNumericOptions(opts);
    parseDelayLevels(opts.messageDelayLevel);
    mkdirDurable(opts.dir);
    const release = acquireStoreLock(opts.dir);
    let store: MessageStore | undefined;
    try {
      // before any file is opened: a file of another size is never resized
      const recordSizes = checkWrittenSizes(opts.dir, opts.commitLogSegmentBytes, opts.consumeQueueEntries);
      store = new MessageStore(opts, release);
      store.recover();
      recordSizes();
      store.verifiedFrom = store.commitLog.writeOffset;
      store.checkpointedOffset = store.commitLog.writeOffset;
    } catch (e) {
      store?.closeFiles();
      release();
      throw e;
    }
    store.startTimers();
    return store;
  }

  private get abortFile(): string {
    return path.join(this.options.dir, "abort");
  }

  private get checkpointFile(): string {
    return path.join(this.options.dir, "checkpoint");
  }

  private get maxRecordBytes(): number {
    return this.options.maxMessageBytes + 64 * 1024;
  }

  /**
   * RocketMQ's recovery (reference §10.6). Consume queues and index are loaded and checked first
   * (against the checkpoint's marks); then only the end of the commit log is checked record by
   * record: after a clean shutdown from the file holding the dispatched position (else the
   * 3rd-last file), after a crash from the newest file whose first record is older than the
   * checkpoint's timestamps. Records past the dispatched position are dispatched again, the torn
   * tail is cut and consume-queue and index entries pointing past the valid end are dropped.
   * Without a checkpoint, or when a consume queue is behind its mark, consume queues and index are
   * rebuilt from the whole log; when only the index is damaged or short, the index alone is. Older
   * records are not rechecked here: every read checks the record it serves.
   */
  private recover(): void {
    const mode = fs.existsSync(this.abortFile) ? "abnormal" : "normal";
    let cpDamage: string | null = null;
    const cp = readCheckpoint(this.checkpointFile, (why) => (cpDamage = why));
    try {
      fs.writeFileSync(this.abortFile, String(process.pid));
    } catch (e) {
      throw ioError(e, `writing the unclean-shutdown marker ${this.abortFile}`);
    }
    const log = this.commitLog;
    const last = log.segments[log.segments.length - 1];
    const extent = last ? last.start + log.segmentBytes : 0;
    const why = !cp ? (last ? (cpDamage ?? "no checkpoint") : null) : this.loadQueues(cp, mode === "normal", extent);
    if (why || !cp) {
      this.rebuildAll(mode, why, cp, extent);
      return;
    }
    // a lost or damaged index (an index file deleted by expiry after the last checkpoint looks so
    // too) is rebuilt alone from the whole log; the consume queues are kept
    this.dropUndeletedSegments();
    const indexLost = this.index.load(cp.indexEntries, extent) === "damaged";
    if (indexLost) this.index.reset();
    this.dispatcher.lastStoreTimestamp = Math.min(cp.logicsMsgTimestamp, cp.indexMsgTimestamp);
    let from = 0;
    let redispatchFrom = log.minOffset;
    const n = log.segments.length;
    if (mode === "normal") {
      redispatchFrom = Math.max(log.minOffset, Math.min(cp.confirmOffset, extent));
      const holding = log.segments.findIndex((seg) => redispatchFrom < seg.start + log.segmentBytes);
      from = holding >= 0 ? holding : Math.max(0, n - 1 - NORMAL_RECOVERY_FILES_BACK);
    } else {
      const trusted = checkpointMinTimestamp(cp);
      for (let i = n - 1; i >= 0; i--) {
        const ts = this.firstStoreTime(log.segments[i]!.start);
        if (ts >= 0 && ts <= trusted) {
          from = i;
          break;
        }
      }
      redispatchFrom = log.segments[from]?.start ?? log.minOffset;
    }
    if (indexLost) from = 0;
    else this.index.truncateFrom(redispatchFrom);
    const scan = scanCommitLog(
      log,
      this.maxRecordBytes,
      (buf, s, e, phy) => {
        let p = s;
        while (p < e && phy + (p - s) < redispatchFrom) p += buf.readInt32BE(p);
        if (indexLost && p > s) this.dispatcher.dispatch(buf, s, p, phy, false, false);
        if (p < e) this.dispatcher.dispatch(buf, p, e, phy + (p - s), false);
      },
      from,
      this.zerosEndFrom(cp),
    );
    this.commitLog.truncateTo(scan.end);
    this.tailAt = scan.lastEntry;
    // after a clean shutdown entries can only point past the end when the log was cut below what
    // was dispatched; otherwise such an entry is damaged and getMessage finds its record again
    if (mode === "abnormal" || scan.end < redispatchFrom) {
      for (const m of this.queues.values()) for (const q of m.values()) q.truncateAbove(scan.end);
      this.index.truncateFrom(scan.end);
    }
    this.recovery = {
      mode,
      log: scan,
      checkedFrom: log.segments[from]?.start ?? scan.end,
      redispatchedFrom: redispatchFrom,
      rebuilt: indexLost ? "index files missing or damaged: the index was rebuilt, consume queues kept" : null,
      missingLog: log.missingRanges(),
    };
    // a crash before the next periodic checkpoint must not rebuild it again
    if (indexLost) this.writeCheckpointNow();
  }

  /** Loads every consume queue; the reason to rebuild them, or null when they are usable. */
  private loadQueues(cp: StoreCheckpoint, clean: boolean, extent: number): string | null {
    const root = path.join(this.options.dir, "consumequeue");
    for (const { topic, queueId } of listConsumeQueues(root)) {
      const q = this.queue(topic, queueId, true)!;
      if (q.recover(this.checkpointMarks(cp, topic)?.[String(queueId)], clean, extent, this.maxRecordBytes) === "behind")
        return `consume queue ${topic}/${queueId} is behind the checkpoint`;
      if (this.holdsOldRecords(q)) {
        // a deletion stopped (a crash) before it removed the queue's files
        this.dropQueue(topic, queueId);
        continue;
      }
      if (this.commitLog.minOffset > 0) q.deleteBelow(this.commitLog.minOffset);
    }
    for (const topic of Object.keys(cp.queues)) {
      for (const [id, mark] of Object.entries(this.checkpointMarks(cp, topic) ?? {})) {
        if (mark.max > mark.min && !this.queues.get(topic)?.has(Number(id))) return `consume queue ${topic}/${id} is missing`;
      }
    }
    return null;
  }

  /**
   * The checkpoint's marks of the queues of `topic`; none when the checkpoint was written before
   * the topic's deletion (it names the deleted queues). A checkpoint written since names the queues
   * of the topic created again, whose entries point at records at or past the deletion's offset: it
   * saw the log past that offset, where one written before saw it no further than the log's end at
   * the deletion. (A replica that deleted at its master's offset, below its own end, cannot tell
   * them apart when the checkpoint saw past that offset: the marks are taken, and a queue behind or
   * missing against them makes recovery rebuild the queues from the log.)
   */
  private checkpointMarks(cp: StoreCheckpoint | null, topic: string): Record<string, QueueMark> | undefined {
    const marks = cp?.queues[topic];
    const at = this.deleted.at(topic);
    return marks && (at === undefined || cp.flushedOffset > at) ? marks : undefined;
  }

  /**
   * Drops the leading commit-log segments that lie before a gap and below the first entry of every
   * consume queue: left by a clean-up that could not delete them. Nothing is dropped when a queue's
   * first entry cannot be read (a hole) or no queue has one: a gap the store cannot place is
   * reported as missing log.
   */
  private dropUndeletedSegments(): void {
    const log = this.commitLog;
    if (log.missingRanges().length === 0) return;
    let minPhy = Number.POSITIVE_INFINITY;
    for (const m of this.queues.values())
      for (const q of m.values()) {
        const phy = q.firstPhyOffset();
        if (phy === null) return;
        if (phy !== undefined) minPhy = Math.min(minPhy, phy);
      }
    if (minPhy === Number.POSITIVE_INFINITY) return;
    log.dropLeftoversBelow(minPhy, this.undeleted);
  }

  /** Whether the first entry of `q` points at an old record of its topic, deleted since. */
  private holdsOldRecords(q: ConsumeQueue): boolean {
    const at = this.deleted.at(q.topic);
    if (at === undefined) return false;
    const phy = q.firstPhyOffset();
    // a hole says nothing
    return typeof phy === "number" && phy < at;
  }

  /** Closes a consume queue and removes its files. */
  private dropQueue(topic: string, queueId: number): void {
    const m = this.queues.get(topic);
    const q = m?.get(queueId);
    if (!m || !q) return;
    q.close();
    m.delete(queueId);
    if (m.size === 0) this.queues.delete(topic);
    fs.rmSync(q.dir, { recursive: true, force: true });
  }

  /**
   * Where recovery may take a window of zeros for the unwritten end of the log: the last segment,
   * and not below what the checkpoint saw flushed (below that, records were on disk: a region of
   * zeros there is damage, scanned through for the records after it).
   */
  private zerosEndFrom(cp: StoreCheckpoint | null): number {
    const log = this.commitLog;
    const lastStart = log.segments[log.segments.length - 1]?.start ?? 0;
    return Math.max(lastStart, cp?.flushedOffset ?? 0);
  }

  /**
   * Rebuilds consume queues and index from the whole commit log, checked record by record. A queue
   * whose records all expired has none left in the log: it continues at the max offset its old
   * files or the checkpoint knew (RocketMQ keeps a queue's last file for this), and a checkpoint is
   * written at once so that the rebuilt queues are what the next open finds.
   */
  private rebuildAll(mode: "normal" | "abnormal", why: string | null, cp: StoreCheckpoint | null, extent: number): void {
    for (const m of this.queues.values()) for (const q of m.values()) q.close();
    this.queues.clear();
    const root = path.join(this.options.dir, "consumequeue");
    const lastOffsets = this.queueMaxOffsets(root, cp, extent);
    // on disk before the files that hold them go: a rebuild killed part-way, with no checkpoint to
    // fall back on, would restart a queue whose records all expired at 0 (behind committed offsets)
    if (lastOffsets.size > 0) writeCheckpoint(this.checkpointFile, rebuildCheckpoint(cp, lastOffsets));
    fs.rmSync(root, { recursive: true, force: true });
    this.index.reset();
    // no queue says where the log starts: leading segments before a gap that a clean-up would have
    // deleted by age are what one could not delete; read, their expired records would come back
    const limit = Date.now() - this.options.fileReservedTimeHours * 3600_000;
    this.commitLog.dropLeftoversBelow(Number.POSITIVE_INFINITY, this.undeleted, (s) => s.mtimeMs() < limit);
    const log = scanCommitLog(
      this.commitLog,
      this.maxRecordBytes,
      (buf, s, e, phy) => this.dispatcher.dispatch(buf, s, e, phy, false),
      0,
      this.zerosEndFrom(cp),
    );
    this.commitLog.truncateTo(log.end);
    this.tailAt = log.lastEntry;
    for (const [topic, m] of lastOffsets) for (const [queueId, max] of m) this.queue(topic, queueId, true)!.continueAt(max);
    this.recovery = {
      mode,
      log,
      checkedFrom: this.commitLog.minOffset,
      redispatchedFrom: this.commitLog.minOffset,
      rebuilt: why,
      missingLog: this.commitLog.missingRanges(),
    };
    if (log.end > 0 || lastOffsets.size > 0) this.writeCheckpointNow();
  }

  /**
   * The max offset of every consume queue before a rebuild: the larger of the checkpoint's mark and
   * what the queue's files hold (checked as recovery checks a queue without a mark). Files that
   * cannot be read as this store's queues give none; the rebuild replaces them.
   */
  private queueMaxOffsets(root: string, cp: StoreCheckpoint | null, extent: number): Map<string, Map<number, number>> {
    const out = new Map<string, Map<number, number>>();
    const note = (topic: string, queueId: number, max: number) => {
      if (!(max > 0)) return;
      let m = out.get(topic);
      if (!m) out.set(topic, (m = new Map()));
      m.set(queueId, Math.max(m.get(queueId) ?? 0, max));
    };
    // a deleted topic's queues start again from what the log still holds of it after the deletion
    // (the marks of a checkpoint written before it are not taken)
    for (const topic of Object.keys(cp?.queues ?? {}))
      for (const [id, mark] of Object.entries(this.checkpointMarks(cp, topic) ?? {})) note(topic, Number(id), mark.max);
    for (const { topic, queueId } of listConsumeQueues(root)) {
      if (this.deleted.at(topic) !== undefined) continue;
      let q: ConsumeQueue | undefined;
      try {
        q = new ConsumeQueue(root, topic, queueId, this.options.consumeQueueEntries);
        q.recover(undefined, false, extent, this.maxRecordBytes);
        note(topic, queueId, q.maxOffset);
      } catch (e) {
        // files of another consumeQueueEntries: refused, as when a checkpoint exists (never rebuilt over)
        if (isMQError(e, "ILLEGAL_ARGUMENT")) throw e;
        /* damaged: rebuilt without it */
      } finally {
        q?.close();
      }
    }
    return out;
  }

  /** Store time of the record at the start of the segment at `start`, or -1 when there is no valid one. */
  private firstStoreTime(start: number): number {
    const size = this.commitLog.read(start, 4)?.readInt32BE(0) ?? 0;
    if (size < MIN_RECORD_BYTES || size > Math.min(this.maxRecordBytes, this.commitLog.segmentBytes)) return -1;
    const rec = this.commitLog.read(start, size);
    if (!rec || checkRecord(rec, 0, size) !== size) return -1;
    return readLong(rec, RecordOffset.STORE_TIMESTAMP);
  }

  /** Flushes commit log, consume queues and index now; the checkpoint that says so. */
  private flushAllNow(): StoreCheckpoint {
    this.commitLog.flushNow();
    for (const m of this.queues.values()) for (const q of m.values()) q.syncNow();
    this.index.syncNow();
    const ts = this.dispatcher.lastStoreTimestamp;
    const end = this.commitLog.writeOffset;
    return {
      physicMsgTimestamp: ts,
      logicsMsgTimestamp: ts,
      indexMsgTimestamp: ts,
      flushedOffset: end,
      confirmOffset: this.dispatchedEnd(end),
      indexEntries: this.index.entries,
      queues: this.queueMarks(),
    };
  }

  /** Flushes everything and writes the checkpoint (after recovery rebuilt consume queues or index). */
  private writeCheckpointNow(): void {
    writeCheckpoint(this.checkpointFile, this.flushAllNow());
  }

  /** The min and max offsets of every consume queue. */
  private queueMarks(): Record<string, Record<string, QueueMark>> {
    const out: Record<string, Record<string, QueueMark>> = {};
    for (const [topic, m] of this.queues) {
      const t: Record<string, QueueMark> = {};
      for (const [id, q] of m) t[String(id)] = { min: q.minOffset, max: q.maxOffset };
      out[topic] = t;
    }
    return out;
  }

  /**
   * Flushes commit log, consume queues and index up to what was dispatched when it started, then
   * writes the checkpoint saying so. One at a time; close waits for the one running.
   */
  checkpoint(): Promise<void> {
    if (this.checkpointing) return this.checkpointing;
    const run = async () => {
      const ts = this.dispatcher.lastStoreTimestamp;
      const target = this.commitLog.writeOffset;
      const queues = this.queueMarks();
      const indexEntries = this.index.entries;
      // a failed commit-log fdatasync is reported by the commit log
      await this.commitLog.waitFlushed(target);
      try {
        const syncs: Array<Promise<void>> = [this.index.sync()];
        for (const m of this.queues.values()) for (const q of m.values()) syncs.push(q.sync());
        await Promise.all(syncs);
        if (this.closed) return;
        await writeCheckpointAsync(this.checkpointFile, {
          physicMsgTimestamp: ts,
          logicsMsgTimestamp: ts,
          indexMsgTimestamp: ts,
          flushedOffset: target,
          confirmOffset: this.dispatchedEnd(target),
          indexEntries,
          queues,
        });
      } catch (e) {
        const error = ioError(e, `writing ${this.checkpointFile}`);
        this.reportFlushError({ file: this.checkpointFile, from: this.checkpointedOffset, to: target, error });
        throw error;
      }
      this.checkpointedOffset = Math.max(this.checkpointedOffset, target);
    };
    this.checkpointing = run().finally(() => {
      this.checkpointing = null;
    });
    return this.checkpointing;
  }

  private startTimers(): void {
    if (this.options.checkpointIntervalMs > 0) {
      const t = setInterval(() => {
        if (this.closed) return;
        try {
          this.catchUpDispatch();
        } catch {
          /* retried at the next interval and before the next put */
        }
        this.checkpoint().catch(() => {
          /* reported (reportFlushError); retried at the next interval; close writes one */
        });
      }, this.options.checkpointIntervalMs);
      t.unref();
      this.timers.push(t);
    }
    if (this.options.flush === "async") {
      const t = setInterval(() => this.commitLog.flushSoon(), this.options.flushIntervalMs);
      t.unref();
      this.timers.push(t);
    }
    if (this.options.cleanIntervalMs > 0) {
      const t = setInterval(() => {
        try {
          this.deleteExpiredFiles();
          this.cleanFailing = false;
        } catch (e) {
          // retried at the next interval; said once per run of failures (RocketMQ logs each)
          if (!this.cleanFailing)
            this.reportDiskSpace({
              kind: "cleanFailed",
              dir: this.options.dir,
              usedPercent: Number.NaN,
              message:
                `Deleting expired files in ${this.options.dir} failed (${(e as Error).message}): expired files stay and the disk fills ` +
                `until it works again (retried every ${this.options.cleanIntervalMs} ms). Check the store directory's permissions and file system.`,
            });
          this.cleanFailing = true;
        }
      }, this.options.cleanIntervalMs);
      t.unref();
      this.timers.push(t);
    }
  }

  private queue(topic: string, queueId: number, create: boolean): ConsumeQueue | undefined {
    let m = this.queues.get(topic);
    if (!m) {
      if (!create) return undefined;
      m = new Map();
      this.queues.set(topic, m);
    }
    let q = m.get(queueId);
    if (!q && create) {
      q = new ConsumeQueue(path.join(this.options.dir, "consumequeue"), topic, queueId, this.options.consumeQueueEntries);
      m.set(queueId, q);
    }
    return q;
  }

  private checkOpen(): void {
    if (this.closed) throw new MQError("CLOSED", "The message store is closed.");
  }

  /** Registers an arrival listener (one notice per dispatched run of records per queue). */
  onArrival(listener: (a: ArrivalNotice) => void): () => void {
    return this.dispatcher.onArrival(listener);
  }

  get maxPhyOffset(): number {
    return this.commitLog.writeOffset;
  }

  get minPhyOffset(): number {
    return this.commitLog.minOffset;
  }

  /** Commit-log bytes appended but not yet in the consume queues and index (RocketMQ's dispatchBehindBytes): 0 unless a dispatch failed. */
  get dispatchBehindBytes(): number {
    return this.undispatchedFrom >= 0 ? Math.max(0, this.commitLog.writeOffset - this.undispatchedFrom) : 0;
  }

  /** Store time of the commit log's first message (RocketMQ's getEarliestMessageTime), or -1 when it holds none. */
  earliestMessageTime(): number {
    const min = this.commitLog.minOffset;
    return min < this.commitLog.writeOffset ? this.firstStoreTime(min) : -1;
  }

  /**
   * Deletes topics (RocketMQ's `deleteTopics`): their consume queues are removed, so they serve
   * nothing and a topic created again under the same name starts empty, at queue offset 0; their
   * old records stay in the commit log until their segments expire, skipped by recovery and
   * consume-queue rebuilds and by lookups by key, unique key and offset, because the deletion is
   * kept in `deletedTopics.json` with the commit-log offset it happened at (`at`: a slave gives
   * its master's, and has what it dispatched of the topic from there dispatched again). The commit
   * log is flushed (synchronously) before the deletion is written, so that no crash leaves a
   * deletion past the log's durable end; a failed flush fails the deletion. Resolves after a
   * checkpoint without the deleted queues is written. Returns how many topics had queues.
   */
  async deleteTopics(topics: Iterable<string>, at?: number): Promise<number> {
    this.checkOpen();
    try {
      this.catchUpDispatch();
    } catch {
      /* the deletion stands; what is left is dispatched later, and skipped when old */
    }
    const end = this.commitLog.writeOffset;
    const cut = at === undefined ? end : Math.max(0, Math.min(at, end));
    const names = [...new Set(topics)];
    if (names.length === 0) return 0;
    // the log is on disk up to the deletion's offset before the deletion is: a power loss must not
    // keep the deletion and lose records below its offset, or the records appended there after
    // recovery (the topic's new messages among them) would be taken for old ones. A failed
    // fdatasync fails the deletion, recording nothing
    this.commitLog.flushNow(true);
    // the deletion is on disk before the queues go: a crash in between finds their files and drops
    // them. It is written before it is taken into memory: a failed write deletes nothing
    try {
      this.deleted.add(names, at ?? cut);
    } catch (e) {
      const err = ioError(e, `writing ${DELETED_TOPICS_FILE}`);
      const shown = names.length > 3 ? `${names.slice(0, 3).join(", ")} and ${names.length - 3} more` : names.join(", ");
      throw new MQError(err.code, `Deleting ${shown} failed, nothing was deleted (the topics are still served): ${err.message}`, {
        cause: e,
      });
    }
    let n = 0;
    for (const t of names) {
      const m = this.queues.get(t);
      if (m) n++;
      for (const queueId of [...(m?.keys() ?? [])]) this.dropQueue(t, queueId);
      fs.rmSync(path.join(this.options.dir, "consumequeue", t), { recursive: true, force: true });
    }
    // records after the cut already dispatched (a slave learning of its master's deletion late)
    // belong to the topic created again: dispatched again into its new queues. Consume-queue
    // entries are positional, so those of other topics are rewritten as they were; no index entry is added
    if (cut < end) this.redispatch(Math.max(cut, this.commitLog.minOffset), end);
    // a checkpoint running now has the deleted queues' marks: the next one has not
    await this.checkpointing?.catch(() => {});
    await this.checkpoint().catch(() => {
      /* reported (reportFlushError); recovery skips the deleted topics' marks */
    });
    return n;
  }

  /** The deleted topics still marked, with the commit-log offset each was deleted at. */
  deletedTopics(): Record<string, number> {
    return this.deleted.toJSON();
  }

  /** Most bytes {@link redispatch} reads at once (a record longer than this is read whole). */
  redispatchChunkBytes = 4 * 1024 * 1024;

  /** Dispatches the records in [from, to) again into the consume queues, without index entries or arrival notices. */
  private redispatch(from: number, to: number): void {
    const indexedEnd = this.dispatcher.indexedEnd;
    this.dispatcher.indexedEnd = to;
    try {
      let phy = from;
      while (phy < to) {
        const seg = this.commitLog.segmentFor(phy);
        if (!seg) break;
        const segEnd = Math.min(to, seg.start + this.commitLog.segmentBytes);
        // in chunks of whole records: a slave far behind must not read a whole segment at once
        while (phy < segEnd) {
          let buf = this.commitLog.read(phy, Math.min(segEnd - phy, this.redispatchChunkBytes));
          if (!buf || buf.length < 8) break;
          let whole = 0;
          for (;;) {
            const total = whole + 8 <= buf.length ? buf.readInt32BE(whole) : 0;
            if (total <= 0 || buf.readUInt32BE(whole + 4) === BLANK_MAGIC || whole + total > buf.length) break;
            whole += total;
          }
          if (whole === 0) {
            // one record longer than a chunk, or the segment's end (a blank or nothing written)
            const total = buf.readInt32BE(0);
            if (total <= 0 || buf.readUInt32BE(4) === BLANK_MAGIC || phy + total > segEnd) break;
            buf = this.commitLog.read(phy, total);
            if (!buf || buf.length < total) break;
            whole = total;
          }
          this.dispatcher.dispatch(buf, 0, whole, phy, false);
          phy += whole;
        }
        phy = seg.start + this.commitLog.segmentBytes;
      }
    } finally {
      this.dispatcher.indexedEnd = indexedEnd;
    }
  }

  /** Topics and queue ids that have consume queues. */
  topicQueues(): Array<{ topic: string; queueId: number; maxOffset: number }> {
    const out: Array<{ topic: string; queueId: number; maxOffset: number }> = [];
    for (const [topic, m] of this.queues) for (const [queueId, q] of m) out.push({ topic, queueId, maxOffset: q.maxOffset });
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // Put

  /** Appends one batch (one topic/queue) with one write; resolves per the flush mode. */
  putMessages(batch: PutBatch): Promise<PutResult> {
    return this.putMessagesGroup([batch])[0]!;
  }

  /**
   * Appends batches that arrived together (the store actor's group commit): one commit-log write
   * and one dispatch pass for all of them (as many as fit one segment), one flush wait in sync
   * mode. One result per batch, in order; a batch that fails its checks fails alone.
   */
  putMessagesGroup(batches: readonly PutBatch[]): Array<Promise<PutResult>> {
    const out = new Array<Promise<PutResult>>(batches.length);
    const plans: PutPlan[] = [];
    const files = this.groupFiles;
    files.opening = 0;
    files.several = batches.length > 1;
    // the group's puts are answered together (the store actor answers its PUT_GROUP as one): its
    // flush wait ends at the earliest deadline, so no sender hears the answer after it gave up
    let flushDeadline = Number.POSITIVE_INFINITY;
    for (let i = 0; i < batches.length; i++) {
      const by = batches[i]!.flushDeadline;
      if (by !== undefined && by < flushDeadline) flushDeadline = by;
      try {
        plans.push(this.planPut(batches[i]!, i, files));
      } catch (e) {
        out[i] = Promise.reject(e);
      }
    }
    if (files.several) files.next.clear();
    // as many batches as fit one segment and one write
    const limit = Math.min(this.commitLog.segmentBytes - BLANK_MARKER_BYTES, MAX_GROUP_WRITE_BYTES);
    let from = 0;
    while (from < plans.length) {
      let to = from + 1;
      let total = plans[from]!.total;
      while (to < plans.length && total + plans[to]!.total <= limit) total += plans[to++]!.total;
      const group = plans.slice(from, to);
      from = to;
      let results: Promise<void>;
      try {
        this.catchUpDispatch();
        // records this store appends are no old ones of a deleted topic
        this.deleted.lowerTo(this.commitLog.writeOffset);
        results = this.appendGroup(group, total, flushDeadline);
      } catch (e) {
        results = Promise.reject(e);
      }
      for (const pl of group) {
        out[pl.index] = results.then(() => pl.result!);
      }
    }
    return out;
  }

  /**
   * Dispatches records just appended. When a consume-queue or index write fails, the records stay
   * in the log and their queue offsets stay taken: the store remembers where dispatch stopped, and
   * no record is appended before that range is dispatched (RocketMQ's reput retries the same way),
   * so no later put can reuse those offsets. The put that failed still fails visibly.
   */
  private dispatchAppended(buf: Buffer, len: number, phy0: number): void {
    try {
      this.dispatcher.dispatch(buf, 0, len, phy0);
    } catch (e) {
      if (this.undispatchedFrom < 0) this.undispatchedFrom = phy0;
      throw e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `Dispatch failed: ${(e as Error).message}`, { cause: e });
    }
  }

  /**
   * Dispatches what a failed dispatch left (consume-queue entries are positional, so writing them
   * again is harmless; index entries are not, so records indexed before the failure get none again);
   * throws while it still fails.
   */
  private catchUpDispatch(): void {
    let phy = this.undispatchedFrom;
    if (phy < 0) return;
    const end = this.commitLog.writeOffset;
    while (phy < end) {
      const seg = this.commitLog.segmentFor(phy);
      const segEnd = seg ? Math.min(end, seg.start + this.commitLog.segmentBytes) : end;
      const buf = seg ? this.commitLog.read(phy, segEnd - phy) : null;
      try {
        if (buf) this.dispatcher.dispatch(buf, 0, buf.length, phy);
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        const code = ((e as Error).cause as NodeJS.ErrnoException | undefined)?.code ?? (e as NodeJS.ErrnoException).code;
        const fix =
          code === "EMFILE" || code === "ENFILE"
            ? "raise the open-file limit (`ulimit -n`, systemd LimitNOFILE)"
            : "fix the cause (free space, permissions)";
        throw new MQError(
          e instanceof MQError ? e.code : "SYSTEM_ERROR",
          `Records already in the commit log from offset ${this.undispatchedFrom} cannot be indexed yet (${why}); puts resume once they are: ${fix}.`,
          { cause: e },
        );
      }
      phy = segEnd;
    }
    this.undispatchedFrom = -1;
    this.dispatcher.indexedEnd = 0;
  }

  /** The checkpoint's dispatched position: `end`, or where a failed dispatch stopped (recovery dispatches from there). */
  private dispatchedEnd(end: number): number {
    return this.undispatchedFrom >= 0 ? Math.min(end, this.undispatchedFrom) : end;
  }

  /** Checks one batch of a put group and measures its records; `files`: what the group's batches planned before it open. */
  private planPut(batch: PutBatch, index: number, files: GroupFiles): PutPlan {
    this.checkOpen();
    if (this.diskFullAt !== null)
      throw new MQError(
        "DISK_FULL",
        `The disk holding ${this.options.dir} is ${this.diskFullAt.toFixed(0)} % full (puts stop at ${this.options.diskFullPercent} % ` +
          `and resume ${this.diskOkAt()}): free space, or let older segments expire or be deleted.`,
      );
    const { topic, queueId, body } = batch;
    checkTopic(topic);
    if (!Number.isInteger(queueId) || queueId < 0)
      throw new MQError("MESSAGE_ILLEGAL", `queueId ${queueId} is not a non-negative integer.`);
    if (!Buffer.isBuffer(body)) throw new MQError("MESSAGE_ILLEGAL", "The batch body must be a Buffer built with encodeMessageBatch.");
    let topicBytes = this.topicBytes.get(topic);
    if (!topicBytes) {
      topicBytes = Buffer.from(topic, "utf8");
      this.topicBytes.set(topic, topicBytes);
    }
    const fixed = recordFixedBytes(topicBytes);
    const maxBody = this.options.maxMessageBytes;
    let total = 0;
    // one walk: the framing, then each message's limits
    const count = walkMessageBatch(body, (bodyStart, bodyEnd, _flag, propsStart, propsEnd) => {
      const bodyLen = bodyEnd - bodyStart;
      const propsLen = propsEnd - propsStart;
      if (bodyLen > maxBody) {
        throw new MQError(
          "MESSAGE_ILLEGAL",
          `A message body is ${bodyLen} bytes; the limit is ${maxBody} (maxMessageBytes): send smaller messages.`,
        );
      }
      if (propsLen > MAX_MESSAGE_PROPERTIES_BYTES) throw propertiesTooLong(propsLen);
      total += fixed + bodyLen + propsLen;
    });
    if (count === 0) throw new MQError("MESSAGE_ILLEGAL", "The batch holds no message.");
    // refused before anything is appended: a record whose consume-queue file cannot be opened would
    // stop every later put until it can be, and a process with no descriptor left accepts no connection.
    // The group's batches are appended together, after every check: the files the ones before this
    // one open count too, and a queue met before continues where that batch ends
    const q = this.queue(topic, queueId, false);
    const key = files.several ? (q ?? `${topic}\0${queueId}`) : undefined;
    const continued = key === undefined ? undefined : files.next.get(key);
    const from = continued ?? q?.maxOffset ?? 0;
    const opens = consumeQueueFilesToOpen(q, this.options.consumeQueueEntries, from, count, continued !== undefined);
    if (opens > 0) {
      const short = openFilesShort(files.opening + opens);
      if (short)
        throw new MQError(
          "SYSTEM_ERROR",
          `Too many open files to open a consume-queue file of ${topic}/${queueId}: ${short.inUse} of the open-file limit of ${short.limit} are in use, ` +
            `and the last ${short.reserve} are kept for connections, config files and the checkpoint; the broker keeps one file open per ` +
            "commit-log segment, consume-queue file and index file. Raise the open-file limit (`ulimit -n`, systemd LimitNOFILE, e.g. 65536), then retry.",
        );
      files.opening += opens;
    }
    if (key !== undefined) files.next.set(key, from + count);
    // a put too big for a segment goes alone to appendGroup, where CommitLog.reserve refuses it
    return { batch, index, topicBytes, count, total, result: undefined };
  }

  /**
   * Encodes the planned batches back to back, appends them with one write and dispatches them once;
   * sync flush: waits for them to be on disk, until `flushDeadline` at the latest.
   */
  private appendGroup(group: PutPlan[], total: number, flushDeadline: number): Promise<void> {
    const phy0 = this.commitLog.reserve(total);
    if (this.writeBuf.length < total) this.writeBuf = Buffer.allocUnsafe(Math.max(total, this.writeBuf.length * 2));
    const w = this.writeBuf;
    const storeTs = Date.now();
    // next queue offset per topic and queue id among the group's batches (a group can hold
    // thousands); a group of one batch, the usual case at low load, needs none
    const groupNext = group.length > 1 ? new Map<string, Map<number, number>>() : undefined;
    let p = 0;
    for (let g = 0; g < group.length; g++) {
      const pl = group[g]!;
      const { batch, topicBytes, count } = pl;
      const { topic, queueId, body } = batch;
      // a queue met earlier in this group continues where that batch ended
      let nextOffsets = groupNext?.get(topic);
      if (groupNext && !nextOffsets) groupNext.set(topic, (nextOffsets = new Map()));
      const firstQueueOffset = nextOffsets?.get(queueId) ?? this.queue(topic, queueId, false)?.maxOffset ?? 0;
      nextOffsets?.set(queueId, firstQueueOffset + count);
      const batchPhy = phy0 + p;
      const start = p;
      // the fields every record of the batch shares are written once, then copied per record
      const head = this.headBuf;
      putInt32BE(head, RecordOffset.QUEUE_ID, queueId);
      // the host-layout bits are the store's: it writes IPv4 hosts, and a record claiming IPv6 ones could not be read back
      putInt32BE(head, RecordOffset.SYS_FLAG, (batch.sysFlag ?? 0) & ~HOST_V6_FLAGS);
      putInt64BE(head, RecordOffset.BORN_TIMESTAMP, batch.bornTimestamp);
      if (batch.bornHost !== this.headBornHost) {
        writeHost(head, RecordOffset.BORN_HOST, batch.bornHost);
        this.headBornHost = batch.bornHost;
      }
      putInt64BE(head, RecordOffset.STORE_TIMESTAMP, storeTs);
      putInt32BE(head, RecordOffset.RECONSUME_TIMES, batch.reconsumeTimes ?? 0);
      const fixed = recordFixedBytes(topicBytes);
      const recordOffsets = this.recordOffsets;
      let k = 0;
      // one pass over the batch: the body is copied, then its CRC read from the copy (hot in cache)
      const n = body.length;
      let pos = 0;
      while (pos < n) {
        const size = uint32BE(body, pos);
        const flag = int32BE(body, pos + 4);
        const bodyLen = uint32BE(body, pos + 8);
        const bs = pos + 12;
        const be = bs + bodyLen;
        const propsLen = uint16BE(body, be);
        const len = fixed + bodyLen + propsLen;
        head.copy(w, p + RecordOffset.MAGIC, RecordOffset.MAGIC, RecordOffset.BODY_LENGTH);
        putInt32BE(w, p, len);
        putInt32BE(w, p + RecordOffset.FLAG, flag);
        putInt64BE(w, p + RecordOffset.QUEUE_OFFSET, firstQueueOffset + k);
        putInt64BE(w, p + RecordOffset.PHYSICAL_OFFSET, phy0 + p);
        putInt32BE(w, p + RecordOffset.BODY_LENGTH, bodyLen);
        const wb = p + RecordOffset.BODY;
        body.copy(w, wb, bs, be);
        const bodyCrc = crc32(w.subarray(wb, wb + bodyLen)) >>> 0;
        putInt32BE(w, p + RecordOffset.BODY_CRC, bodyCrc);
        let x = wb + bodyLen;
        w[x++] = topicBytes.length;
        topicBytes.copy(w, x);
        x += topicBytes.length;
        putUint16BE(w, x, propsLen + CRC_RESERVED_BYTES);
        body.copy(w, x + 2, be + 2, be + 2 + propsLen);
        writeRecordCrcWithBody(w, p, len, bodyLen, bodyCrc);
        recordOffsets[k] = phy0 + p;
        p += len;
        k++;
        pos += size;
      }
      const offsetMsgIds = this.msgIdWriter.joinedIds(recordOffsets, count);
      pl.result = { status: "PUT_OK", firstQueueOffset, count, offsetMsgIds, commitLogOffset: batchPhy, wroteBytes: p - start };
    }
    this.commitLog.append(w, total, phy0);
    this.tailAt = -1;
    this.dispatchAppended(w, total, phy0);
    if (this.options.flush === "sync") {
      return this.waitFlush(phy0 + total, flushDeadline).then((status) => {
        for (const pl of group) pl.result!.status = status;
      });
    }
    if (this.commitLog.writeOffset - this.commitLog.flushedOffset >= this.options.flushLeastBytes) this.commitLog.flushSoon();
    return Promise.resolve();
  }

  /** PUT_OK once `target` is on disk, else FLUSH_DISK_TIMEOUT after `syncFlushTimeoutMs` or at `deadline` (monotonic) if sooner. */
  private waitFlush(target: number, deadline: number): Promise<"PUT_OK" | "FLUSH_DISK_TIMEOUT"> {
    const waitMs = Math.max(0, Math.min(this.options.syncFlushTimeoutMs, deadline - monotonicNow()));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve("FLUSH_DISK_TIMEOUT"), waitMs);
      this.commitLog.waitFlushed(target).then(
        () => {
          clearTimeout(timer);
          resolve("PUT_OK");
        },
        (e) => {
          clearTimeout(timer);
          reject(e);
        },
      );
    });
  }

  /** Convenience for one message; same path as {@link putMessages}. */
  putMessage(msg: {
    topic: string;
    queueId: number;
    body: Uint8Array;
    flag?: number;
    properties?: Record<string, string>;
    bornTimestamp: number;
    bornHost: string;
    sysFlag?: number;
    reconsumeTimes?: number;
  }): Promise<PutResult> {
    const body = encodeMessageBatch([{ body: msg.body, flag: msg.flag, properties: encodeProperties(msg.properties) }]);
    return this.putMessages({ ...msg, body });
  }

  // -------------------------------------------------------------------------------------------
  // Read

  /**
   * The verified record at `phy` (size from the record when not given), or null. Its length is
   * bounded by its segment, not by today's maxMessageBytes (records stored under a larger one stay
   * readable): a length not given, or above that limit, is taken from a header that names its own
   * offset before the record is read whole.
   */
  private readRecord(phy: number, size?: number): Buffer | null {
    if (phy < this.commitLog.minOffset || phy >= this.commitLog.writeOffset) return null;
    let len = size;
    if (len === undefined || len > this.maxRecordBytes) {
      const head = this.commitLog.read(phy, RECORD_FIXED_BYTES);
      const total = head ? recordHeadLength(head, 0, phy) : -1;
      if (total < 0 || (len !== undefined && len !== total)) return null;
      len = total;
    }
    if (!(len > 0) || phy + len > this.commitLog.writeOffset) return null;
    // null when it would cross its segment's end
    const buf = this.commitLog.read(phy, len);
    if (!buf || checkRecord(buf, 0, len) !== len || readLong(buf, RecordOffset.PHYSICAL_OFFSET) !== phy) return null;
    return buf;
  }

  /** A stored record by commit-log offset, checked; null when absent, damaged or an old record of a deleted topic. */
  viewMessage(commitLogOffset: number, size?: number): Buffer | null {
    this.checkOpen();
    const rec = this.readRecord(commitLogOffset, size);
    if (rec && this.deleted.size > 0 && this.deleted.isOld(recordTopic(rec), commitLogOffset)) return null;
    return rec;
  }

  getMinOffset(topic: string, queueId: number): number {
    return this.queue(topic, queueId, false)?.minOffset ?? 0;
  }

  getMaxOffset(topic: string, queueId: number): number {
    return this.queue(topic, queueId, false)?.maxOffset ?? 0;
  }

  /** Commit-log offset of the queue's entry at `offset` (RocketMQ's getCommitLogOffsetInQueue), or -1 without one. */
  getCommitLogOffsetInQueue(topic: string, queueId: number, offset: number): number {
    const q = this.queue(topic, queueId, false);
    if (!q || offset < q.minOffset || offset >= q.maxOffset) return -1;
    const e = q.read(offset, 1);
    return e && e.length >= CQ_ENTRY_BYTES ? readLong(e, 0) : -1;
  }

  /** Store time of the message at `offset`, or -1. */
  getStoreTime(topic: string, queueId: number, offset: number): number {
    const q = this.queue(topic, queueId, false);
    if (!q || offset < q.minOffset || offset >= q.maxOffset) return -1;
    const e = q.read(offset, 1);
    if (!e || e.length < CQ_ENTRY_BYTES) return -1;
    const rec = this.readRecord(readLong(e, 0), e.readInt32BE(8));
    return rec ? readLong(rec, RecordOffset.STORE_TIMESTAMP) : -1;
  }

  /** Store time of the queue's first readable message, or -1. */
  getEarliestMessageTime(topic: string, queueId: number): number {
    const q = this.queue(topic, queueId, false);
    if (!q) return -1;
    for (let o = q.minOffset; o < q.maxOffset && o < q.minOffset + 64; o++) {
      const t = this.getStoreTime(topic, queueId, o);
      if (t >= 0) return t;
    }
    return -1;
  }

  /** The first queue offset whose store time is >= `timestamp` (binary search); maxOffset when none. */
  searchOffsetByTime(topic: string, queueId: number, timestamp: number): number {
    const q = this.queue(topic, queueId, false);
    if (!q) return 0;
    let lo = q.minOffset;
    let hi = q.maxOffset;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      let t = -1;
      let probe = mid;
      while (probe < hi && (t = this.getStoreTime(topic, queueId, probe)) < 0) probe++;
      if (t < 0) {
        hi = mid;
      } else if (t < timestamp) {
        lo = probe + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /**
   * Reads up to `maxMsgNums` messages from `offset` with RocketMQ's statuses and next-offset rules.
   * Records are handed out as stored (slices); a record that fails its checks is skipped, never served.
   * `verify`: CRC-check every record, also those this process appended (a consumer asks after a
   * record failed its check on decode).
   */
  getMessage(
    group: string,
    topic: string,
    queueId: number,
    offset: number,
    maxMsgNums: number,
    filter?: MessageFilter | null,
    maxMsgBytes?: number,
    verify = false,
  ): GetMessageResult {
    this.checkOpen();
    void group;
    const q = this.queue(topic, queueId, false);
    const res: GetMessageResult = {
      status: "NO_MATCHED_LOGIC_QUEUE",
      nextBeginOffset: 0,
      minOffset: 0,
      maxOffset: 0,
      messageCount: 0,
      buffers: [],
      lastPhysicalOffset: -1,
      suggestPullingFromSlave: false,
    };
    if (!q) return res;
    const min = q.minOffset;
    const max = q.maxOffset;
    res.minOffset = min;
    res.maxOffset = max;
    if (max === 0) {
      res.status = "NO_MESSAGE_IN_QUEUE";
      return res;
    }
    if (offset < min) {
      res.status = "OFFSET_TOO_SMALL";
      res.nextBeginOffset = min;
      return res;
    }
    if (offset === max) {
      res.status = "OFFSET_OVERFLOW_ONE";
      res.nextBeginOffset = offset;
      return res;
    }
    if (offset > max) {
      res.status = "OFFSET_OVERFLOW_BADLY";
      res.nextBeginOffset = max;
      return res;
    }
    const maxNums = Math.max(1, Math.min(maxMsgNums, this.options.maxTransferCount));
    const maxBytes = Math.min(
      maxMsgBytes && maxMsgBytes >= 100 ? maxMsgBytes : this.options.maxTransferBytes,
      MAX_PULL_BYTES,
      this.options.maxTransferBytes,
    );
    const tags = filter?.tagsCodes && filter.tagsCodes.size > 0 ? filter.tagsCodes : null;
    // up to 16 000 bytes of entries are scanned (RocketMQ's maxFilterMessageSize), as a filter or
    // entries into removed files may skip many; without a filter the first read takes only as many
    // entries as the batch needs and the rest are read only when some were skipped
    const scanEnd = offset + Math.max(MAX_FILTER_SCAN_BYTES / CQ_ENTRY_BYTES, maxNums);
    let entries = q.read(offset, tags || filter?.matchProperties ? scanEnd - offset : maxNums);
    if (!entries) {
      res.status = "OFFSET_FOUND_NULL";
      res.nextBeginOffset = q.nextFileOffset(offset);
      return res;
    }
    const candPhy: number[] = [];
    const candSize: number[] = [];
    const candOffset: number[] = [];
    const topicBytes = this.topicBytes.get(topic) ?? Buffer.from(topic, "utf8");
    const minPhy = this.commitLog.minOffset;
    let served = 0; // bytes of the records in the batch
    let next = offset;
    let removed = false;
    let anyCandidate = false;
    let base = offset; // the queue offset of entries' first entry
    let i = 0; // the entry of `entries` to look at next
    // rounds: pick candidates from the consume queue, then read their records in as few reads as
    // possible; records the SQL92 filter refuses, or damaged ones, leave batch places that the next
    // round fills from where this one stopped, as RocketMQ reads on until the batch is full
    for (;;) {
      candPhy.length = 0;
      candSize.length = 0;
      candOffset.length = 0;
      let bytes = served;
      for (;;) {
        const n = entries.length / CQ_ENTRY_BYTES;
        for (; i < n; i++) {
          const e = i * CQ_ENTRY_BYTES;
          const phy = int64BE(entries, e);
          let size = int32BE(entries, e + 8);
          // only a batch's first record may exceed the byte limit
          if ((candPhy.length > 0 || res.buffers.length > 0) && (candPhy.length >= maxNums || bytes + size > maxBytes)) break;
          next = base + i + 1;
          if (size <= 0) {
            if (phy === 0 && size === 0) continue; // a hole: a record recovery could not read
            size = 0; // a damaged entry: its record is looked for below
          }
          if (phy < 0)
            size = 0; // a damaged entry: its record is looked for below
          else if (phy < minPhy) {
            removed = true;
            continue;
          }
          if (tags && !tags.has(int64BE(entries, e + 12))) continue;
          candPhy.push(phy);
          candSize.push(size);
          candOffset.push(base + i);
          bytes += size;
        }
        if (i < n || candPhy.length >= maxNums || n === 0 || base + n >= scanEnd || base + n >= max) break;
        const more = q.read(base + n, scanEnd - (base + n));
        if (!more) break;
        base += n;
        entries = more;
        i = 0;
      }
      if (candPhy.length > 0) anyCandidate = true;
      const records = this.readRecords(candPhy, candSize, verify);
      let left = 0; // damaged, or refused by the filter
      for (let k = 0; k < records.length; k++) {
        // a later round takes a whole batch of candidates, as refused ones are likely to follow refused
        // ones; once the batch is full the rest are left for the next pull
        if (res.buffers.length >= maxNums) {
          next = candOffset[k]!;
          break;
        }
        let rec = records[k];
        if (!rec || !this.recordMatches(rec, topicBytes, queueId, candOffset[k]!)) {
          rec = this.refindRecord(q, candOffset[k]!, topicBytes);
          if (!rec) {
            left++;
            continue;
          }
        }
        if (filter?.matchProperties && !filter.matchProperties(recordProperties(rec))) {
          left++;
          continue;
        }
        res.buffers.push(rec);
        served += rec.length;
        res.lastPhysicalOffset = rec === records[k] ? candPhy[k]! : readLong(rec, RecordOffset.PHYSICAL_OFFSET);
      }
      // a round that left nothing out stopped at the batch's count or byte limit, or the scan's end
      if (left === 0 || res.buffers.length >= maxNums || next >= max || next >= scanEnd) break;
    }
    res.messageCount = res.buffers.length;
    res.nextBeginOffset = next;
    res.status = res.messageCount > 0 ? "FOUND" : removed && !anyCandidate ? "MESSAGE_WAS_REMOVING" : "NO_MATCHED_MESSAGE";
    return res;
  }

  /**
   * Checked records for the given (phy, size) pairs, read with one read when they sit close together.
   * `verify`: check the CRC of records this process appended too (see {@link verifiedFrom}).
   */
  private readRecords(phys: number[], sizes: number[], verify: boolean): Array<Buffer | null> {
    const out: Array<Buffer | null> = new Array(phys.length).fill(null);
    if (phys.length === 0) return out;
    let i = 0;
    while (i < phys.length) {
      // extend a span while the next record is in the same segment and the gap is small
      const seg = this.commitLog.segmentFor(phys[i]!);
      let j = i + 1;
      const lo = phys[i]!;
      let hi = phys[i]! + sizes[i]!;
      let want = sizes[i]!;
      while (seg && j < phys.length) {
        const p = phys[j]!;
        const e = p + sizes[j]!;
        if (p < lo || this.commitLog.segmentFor(p) !== seg || e - lo > 2 * (want + sizes[j]!) + 65536) break;
        hi = Math.max(hi, e);
        want += sizes[j]!;
        j++;
      }
      const span = seg && hi <= this.commitLog.writeOffset ? this.commitLog.read(lo, hi - lo) : null;
      for (let k = i; k < j; k++) {
        const p = phys[k]!;
        const s = sizes[k]!;
        if (!span) {
          out[k] = this.readRecord(p, s);
          continue;
        }
        const rel = p - lo;
        const ok =
          p >= this.verifiedFrom && !verify
            ? int32BE(span, rel) === s && uint32BE(span, rel + RecordOffset.MAGIC) === MAGIC_V1
            : checkRecord(span, rel, s) === s;
        if (ok && readLong(span, rel + RecordOffset.PHYSICAL_OFFSET) === p) out[k] = span.subarray(rel, rel + s);
      }
      i = j;
    }
    return out;
  }

  /**
   * The record of queue offset `offset` whose consume-queue entry did not lead to it: either the
   * record is damaged (counted, reported once, skipped: null) or the entry is, in which case the
   * record is looked for between the records of the neighbouring entries and the entry rewritten.
   */
  private refindRecord(q: ConsumeQueue, offset: number, topicBytes: Buffer): Buffer | null {
    const key = `${q.topic}/${q.queueId}/${offset}`;
    if (this.knownDamage.has(key)) return null;
    const maxRec = this.maxRecordBytes;
    const entry = (o: number): { phy: number; size: number } | null => {
      if (o < q.minOffset || o >= q.maxOffset) return null;
      const e = q.read(o, 1);
      if (!e || e.length < CQ_ENTRY_BYTES) return null;
      const phy = readLong(e, 0);
      const size = e.readInt32BE(8);
      return size >= MIN_RECORD_BYTES && size <= maxRec && phy >= 0 ? { phy, size } : null;
    };
    const self = entry(offset);
    const prev = entry(offset - 1);
    const next = entry(offset + 1);
    const logMin = this.commitLog.minOffset;
    const logEnd = this.commitLog.writeOffset;
    let lo = prev ? prev.phy + prev.size : -1;
    let hi = next ? next.phy : -1;
    let found: { phy: number; size: number } | null = null;
    if (lo >= 0 || hi >= 0) {
      if (lo < 0) lo = hi - REFIND_SCAN_BYTES;
      if (hi < 0) hi = lo + REFIND_SCAN_BYTES;
      lo = Math.max(lo, logMin);
      hi = Math.min(hi, logEnd);
      const ranges: Array<[number, number]> = [];
      if (hi - lo <= REFIND_SCAN_BYTES) ranges.push([lo, hi]);
      else {
        if (self) ranges.push([Math.max(lo, self.phy - REFIND_SCAN_BYTES / 2), Math.min(hi, self.phy + REFIND_SCAN_BYTES / 2)]);
        ranges.push([lo, lo + REFIND_SCAN_BYTES / 4], [hi - REFIND_SCAN_BYTES / 4, hi]);
      }
      const match = (buf: Buffer, rel: number) => this.recordMatches(rel === 0 ? buf : buf.subarray(rel), topicBytes, q.queueId, offset);
      for (const [a, b] of ranges) if (!found && b > a) found = findRecord(this.commitLog, a, b, maxRec, match);
    }
    const rec = found ? this.readRecord(found.phy, found.size) : null;
    if (rec && found) {
      q.repairEntry(offset, found.phy, found.size);
      this.damage.entriesRepaired++;
      return rec;
    }
    if (this.knownDamage.size >= MAX_REMEMBERED_DAMAGE) this.knownDamage.clear();
    this.knownDamage.add(key);
    this.reportDamage(
      `The record of ${q.topic}/${q.queueId} offset ${offset}${self ? ` at commit-log offset ${self.phy}` : ""} is damaged and is skipped.`,
    );
    return null;
  }

  /** Counts a failed flush and reports it. */
  private reportFlushError(failure: FlushError): void {
    this.flushErrors++;
    this.options.onFlushError(failure);
  }

  /** Tells onDiskSpace; a failing listener must not fail the expiry check. */
  private reportDiskSpace(change: DiskSpaceChange): void {
    try {
      this.options.onDiskSpace(change);
    } catch {
      /* the state changed all the same */
    }
  }

  /** Counts a skipped damaged record and reports the first one. */
  private reportDamage(message: string): void {
    this.damage.damagedRecordsSkipped++;
    if (this.warnedDamage) return;
    this.warnedDamage = true;
    try {
      this.options.onDamage(`${message} Later damaged records are counted in store.damage without a report.`);
    } catch {
      /* a failing listener must not fail the read */
    }
  }

  /** The record is the one the consume-queue entry claims (topic, queue, offset). */
  private recordMatches(rec: Buffer, topicBytes: Buffer, queueId: number, queueOffset: number): boolean {
    if (rec.readInt32BE(RecordOffset.QUEUE_ID) !== queueId || readLong(rec, RecordOffset.QUEUE_OFFSET) !== queueOffset) return false;
    const bodyLen = rec.readInt32BE(RecordOffset.BODY_LENGTH);
    const tp = RecordOffset.BODY + bodyLen;
    return rec[tp] === topicBytes.length && rec.compare(topicBytes, 0, topicBytes.length, tp + 1, tp + 1 + topicBytes.length) === 0;
  }

  /** Stored records of `topic` whose KEYS contain `key`, store time in [beginTs, endTs], newest first. */
  queryMessageByKey(topic: string, key: string, maxNum: number, beginTs = 0, endTs = Number.MAX_SAFE_INTEGER): Buffer[] {
    this.checkOpen();
    const out: Buffer[] = [];
    if (maxNum <= 0) return out;
    // a record whose KEYS repeat the key has one index entry per repeat: it is served once
    const seen = new Set<number>();
    // entries of keys sharing the key's hash are read and passed over, up to MAX_LOOKUP_ENTRIES
    this.index.visit(javaHashCode(`${topic}#${key}`), beginTs, endTs, MAX_LOOKUP_ENTRIES, (phy) => {
      if (seen.has(phy)) return true;
      seen.add(phy);
      const rec = this.readRecord(phy);
      if (!rec || recordTopic(rec) !== topic || this.deleted.isOld(topic, phy)) return true;
      // the index keeps times to the second; the record has them to the millisecond
      const storeTs = readLong(rec, RecordOffset.STORE_TIMESTAMP);
      if (storeTs < beginTs || storeTs > endTs) return true;
      const keys = recordProperties(rec)[MessageConst.KEYS];
      if (keys?.split(" ").includes(key)) out.push(rec);
      return out.length < maxNum;
    });
    return out;
  }

  /** The stored record of `topic` with this UNIQ_KEY, or null. */
  queryMessageByUniqKey(topic: string, uniqKey: string): Buffer | null {
    this.checkOpen();
    let found: Buffer | null = null;
    this.index.visit(javaHashCode(`${topic}#${uniqKey}`), 0, Number.MAX_SAFE_INTEGER, MAX_LOOKUP_ENTRIES, (phy) => {
      const rec = this.readRecord(phy);
      if (rec && recordTopic(rec) === topic && !this.deleted.isOld(topic, phy) && recordProperties(rec)[MessageConst.UNIQ_KEY] === uniqKey)
        found = rec;
      return found === null;
    });
    return found;
  }

  // -------------------------------------------------------------------------------------------
  // Replication

  /**
   * Whole, checked records from `from` (within one segment), at most about `maxBytes`; a BLANK
   * marker alone when `from` is at one. When the record at `from` is damaged, a filler header
   * alone (see {@link FILLER_MAGIC}) whose total size reaches the next valid record, or a BLANK
   * marker when no valid record follows in that (finished) segment: the replica writes it and
   * stays at the master's byte offsets, and never receives a damaged record. A damaged tail of the
   * segment being written gets nothing (the replica waits as if caught up): recovery cuts such a
   * tail and writes new records there, which a filler would hide from the replica for good.
   */
  readCommitLog(from: number, maxBytes: number): Buffer {
    this.checkOpen();
    const end = this.commitLog.writeOffset;
    if (from >= end || from < this.commitLog.minOffset) return Buffer.alloc(0);
    const seg = this.commitLog.segmentFor(from);
    if (!seg) return Buffer.alloc(0);
    const segEnd = seg.start + this.commitLog.segmentBytes;
    const len = Math.min(end, segEnd) - from;
    // the first record is read whole, its length taken from its header as readRecord does: one
    // stored under a larger maxMessageBytes is longer than today's limit, and is no damage
    const head = this.commitLog.read(from, Math.min(len, RECORD_FIXED_BYTES), this.replicaHead);
    const first = head ? recordHeadLength(head, 0, from) : -1;
    const want = Math.min(len, Math.max(maxBytes, first, FILLER_HEADER_BYTES));
    const buf = this.commitLog.read(from, want);
    if (!buf) return Buffer.alloc(0);
    let p = 0;
    while (p + 8 <= buf.length) {
      const total = buf.readInt32BE(p);
      if (buf.readUInt32BE(p + 4) === BLANK_MAGIC) return p === 0 ? buf.subarray(0, BLANK_MARKER_BYTES) : buf.subarray(0, p);
      if (fillerBytes(buf, p, buf.length - p) > 0) return p === 0 ? buf.subarray(0, FILLER_HEADER_BYTES) : buf.subarray(0, p);
      if (p > 0 && p + total > maxBytes) break;
      const n = checkRecord(buf, p, buf.length - p);
      if (n < 0 || readLong(buf, p + RecordOffset.PHYSICAL_OFFSET) !== from + p) {
        if (p === 0) return this.skipDamaged(from, seg.start, Math.min(end, segEnd));
        break;
      }
      p += n;
    }
    return buf.subarray(0, p);
  }

  /**
   * What replicates a damaged range starting at `from`: a filler header up to the next valid record,
   * a BLANK marker when none follows in a finished segment, nothing when none follows yet in the
   * segment being written (that tail is cut by recovery after a crash, or a record follows it).
   */
  private skipDamaged(from: number, segStart: number, limit: number): Buffer {
    const out = this.standInFor(from, segStart, limit);
    if (out.length === 0) return out;
    this.damage.replicationBytesSkipped += out.readInt32BE(0);
    this.reportDamage(`The commit-log bytes at ${from} (${out.readInt32BE(0)} bytes) are damaged; replicas receive a filler for them.`);
    return out;
  }

  /** {@link skipDamaged}'s answer, uncounted. */
  private standInFor(from: number, segStart: number, limit: number): Buffer {
    const seg = this.commitLog.segmentFor(from)!;
    const segBytes = this.commitLog.segmentBytes;
    const maxRec = this.maxRecordBytes;
    const next = resync(seg, from - segStart + 1, segBytes, maxRec, Math.min(segBytes, Math.max(64 * 1024, 2 * maxRec)), limit - segStart);
    const segEnd = segStart + segBytes;
    if (next < 0 && limit < segEnd) return Buffer.alloc(0);
    if (next < 0) {
      const out = Buffer.alloc(BLANK_MARKER_BYTES);
      out.writeInt32BE(segEnd - from, 0);
      out.writeUInt32BE(BLANK_MAGIC, 4);
      return out;
    }
    const total = segStart + next - from;
    if (total < FILLER_HEADER_BYTES) return Buffer.alloc(0);
    const out = Buffer.alloc(FILLER_HEADER_BYTES);
    writeFillerHeader(out, 0, total);
    return out;
  }

  /**
   * What a replica tells its master about the end of its log: the start of its last entry and a
   * CRC32 of it (a record's bytes; a filler's or BLANK marker's header, which is what a replica
   * holds of a damaged range). The master compares them with its own log
   * ({@link matchesReplicaTail}), so a replica whose log differs from the master's below its max
   * offset (the master lost a tail the replica holds) is refused, not continued. Null for an empty
   * log, or one whose last entry is in an expired segment (its max offset is a segment start).
   */
  replicaTail(): { at: number; crc: number } | null {
    this.checkOpen();
    const log = this.commitLog;
    const end = log.writeOffset;
    if (end <= log.minOffset) return null;
    if (this.tailAt < 0 || this.tailAt >= end) {
      // one scan per max offset: a log whose end no entry reaches is not scanned at every request
      if (this.tailSearchedAt === end) return null;
      this.tailSearchedAt = end;
      this.tailAt = this.findTail();
    }
    const at = this.tailAt;
    if (at < log.minOffset) return null;
    if (this.tailCrc.at !== at || this.tailCrc.end !== end) {
      const head = log.read(at, Math.min(FILLER_HEADER_BYTES, end - at));
      if (!head) return null;
      const magic = head.length >= 8 ? head.readUInt32BE(4) : 0;
      const len = magic === BLANK_MAGIC ? BLANK_MARKER_BYTES : magic === FILLER_MAGIC ? FILLER_HEADER_BYTES : end - at;
      const image = log.read(at, len);
      if (!image) return null;
      this.tailCrc = { at, end, crc: crc32(image) >>> 0 };
    }
    return { at, crc: this.tailCrc.crc };
  }

  /** Start of the entry ending at the log's max offset, found by scanning its segment; -1 when none does. */
  private findTail(): number {
    const log = this.commitLog;
    const end = log.writeOffset;
    const i = log.segments.findIndex((seg) => end - 1 >= seg.start && end - 1 < seg.start + log.segmentBytes);
    if (i < 0) return -1;
    const scan = scanCommitLog(log, this.maxRecordBytes, () => {}, i);
    return scan.end === end ? scan.lastEntry : -1;
  }

  /**
   * True when this log holds, at `at`, the entry a replica reports as its last ({@link replicaTail})
   * and that entry ends at the replica's max offset `end`: then `end` is an entry boundary here and
   * the replica's log is this one's up to it. A damaged record here matches the filler or BLANK
   * marker a replica was sent for it. Nothing is counted as damage.
   */
  matchesReplicaTail(end: number, at: number, crc: number): boolean {
    this.checkOpen();
    const log = this.commitLog;
    if (!Number.isSafeInteger(at) || at < 0 || at >= end || end > log.writeOffset) return false;
    // the entry's segment expired here: it ended at a segment end, which is where this log begins
    if (at < log.minOffset) return end === log.minOffset;
    const image = this.entryImage(at, end);
    return image !== null && image.readInt32BE(0) === end - at && crc32(image) >>> 0 === crc;
  }

  /** What a replica holds as the entry at `at` (within `at`'s segment, below `end`): record bytes, or a filler or BLANK header; null when nothing there. */
  private entryImage(at: number, end: number): Buffer | null {
    const found = this.readRecord(at) ?? this.markerAt(at);
    if (found) return found;
    const seg = this.commitLog.segmentFor(at);
    if (!seg) return null;
    const image = this.standInFor(at, seg.start, Math.min(this.commitLog.writeOffset, seg.start + this.commitLog.segmentBytes));
    return image.length > 0 && at + image.readInt32BE(0) <= end ? image : null;
  }

  /** The BLANK marker that ends `at`'s segment there, or a filler's header beginning at `at`; null when neither. */
  private markerAt(at: number): Buffer | null {
    const seg = this.commitLog.segmentFor(at);
    if (!seg) return null;
    const segEnd = seg.start + this.commitLog.segmentBytes;
    const head = this.commitLog.read(at, Math.min(FILLER_HEADER_BYTES, segEnd - at));
    if (!head || head.length < BLANK_MARKER_BYTES) return null;
    if (head.readUInt32BE(4) === BLANK_MAGIC && head.readInt32BE(0) === segEnd - at) return head.subarray(0, BLANK_MARKER_BYTES);
    return fillerBytes(head, 0, head.length) > 0 ? head : null;
  }

  /**
   * True when a replica may continue at `phy` without telling its last entry: the start or end of
   * this log, a segment start, or where a valid record, filler or BLANK marker begins here.
   */
  isEntryStart(phy: number): boolean {
    this.checkOpen();
    const log = this.commitLog;
    if (phy === log.minOffset || phy === log.writeOffset || phy % log.segmentBytes === 0) return true;
    if (phy < log.minOffset || phy > log.writeOffset) return false;
    return this.readRecord(phy) !== null || this.markerAt(phy) !== null;
  }

  /**
   * The missing range [from, to) of the log (segment files deleted by hand or lost, see
   * {@link CommitLog.missingRanges}) that `phy` lies in, with the first missing file's path; null
   * when `phy`'s segment is there or `phy` is outside the log. A replica cannot copy past such a range.
   */
  missingLogAt(phy: number): { from: number; to: number; file: string } | null {
    this.checkOpen();
    const log = this.commitLog;
    if (phy < log.minOffset || phy >= log.writeOffset || log.segmentFor(phy)) return null;
    const gap = log.missingRanges().find((r) => phy >= r.from && phy < r.to);
    return gap ? { ...gap, file: path.join(log.dir, segmentName(gap.from)) } : null;
  }

  /**
   * Where an empty replica begins: this log's oldest offset, or the end of its last missing range
   * (past which every byte to the max offset is here).
   */
  replicaBegin(): number {
    this.checkOpen();
    const gaps = this.commitLog.missingRanges();
    return gaps.length > 0 ? gaps[gaps.length - 1]!.to : this.commitLog.minOffset;
  }

  /**
   * True when the store holds no commit-log bytes and no consume queue ever had an entry (a store
   * whose every record expired is not empty: its queues would go on from their old offsets).
   */
  isEmpty(): boolean {
    if (this.maxPhyOffset !== this.minPhyOffset) return false;
    for (const m of this.queues.values()) for (const q of m.values()) if (q.maxOffset > 0) return false;
    return true;
  }

  /**
   * Makes an empty store's commit log begin at `phy`, a segment boundary: a replica joining a
   * master whose oldest segments were deleted. Consume queues then begin at the queue offsets of
   * the first records replicated.
   */
  startReplicaAt(phy: number): void {
    this.checkOpen();
    if (!this.isEmpty())
      throw new MQError("ILLEGAL_ARGUMENT", "Only an empty store can begin at another commit-log offset; this one holds records.");
    if (!Number.isSafeInteger(phy) || phy < 0 || phy % this.commitLog.segmentBytes !== 0)
      throw new MQError(
        "MALFORMED",
        `The master's commit log begins at ${phy}, not a multiple of this store's commitLogSegmentBytes (${this.commitLog.segmentBytes}): master and replica need the same commitLogSegmentBytes.`,
      );
    this.commitLog.beginEmptyAt(phy);
    this.tailAt = -1;
  }

  /** Appends bytes read from a master's {@link readCommitLog} at this store's max offset, checked, then dispatches them. */
  async appendReplica(bytes: Buffer): Promise<number> {
    this.checkOpen();
    this.catchUpDispatch();
    let p = 0;
    while (p + 8 <= bytes.length) {
      if (bytes.readUInt32BE(p + 4) === BLANK_MAGIC) {
        if (this.commitLog.writeOffset % this.commitLog.segmentBytes !== 0) this.tailAt = this.commitLog.writeOffset;
        this.commitLog.rollToNextSegment();
        p += BLANK_MARKER_BYTES;
        continue;
      }
      const filler = fillerBytes(bytes, p, bytes.length - p);
      if (filler > 0) {
        this.tailAt = this.commitLog.writeOffset;
        this.commitLog.appendFiller(filler);
        p += FILLER_HEADER_BYTES;
        continue;
      }
      const start = p;
      const phy0 = this.commitLog.writeOffset;
      let last = p;
      while (p + 8 <= bytes.length && bytes.readUInt32BE(p + 4) !== BLANK_MAGIC && fillerBytes(bytes, p, bytes.length - p) < 0) {
        const n = checkRecord(bytes, p, bytes.length - p);
        if (n < 0 || readLong(bytes, p + RecordOffset.PHYSICAL_OFFSET) !== phy0 + (p - start)) {
          throw new MQError(
            "MALFORMED",
            `Replicated bytes at ${phy0 + (p - start)} do not check out (size, CRC or offset): resync the replica from its max offset.`,
          );
        }
        last = p;
        p += n;
      }
      const len = p - start;
      const seg = this.commitLog.segmentFor(phy0);
      if (!seg || phy0 - seg.start + len > this.commitLog.segmentBytes)
        throw new MQError(
          "MALFORMED",
          "Replicated records cross a segment boundary: master and replica need the same commitLogSegmentBytes.",
        );
      const chunk = start === 0 && p === bytes.length ? bytes : bytes.subarray(start, p);
      this.commitLog.append(chunk, len, phy0);
      if (len > 0) this.tailAt = phy0 + (last - start);
      this.dispatchAppended(chunk, len, phy0);
    }
    if (this.options.flush === "sync") await this.commitLog.waitFlushed(this.commitLog.writeOffset);
    return this.commitLog.writeOffset;
  }

  // -------------------------------------------------------------------------------------------
  // Expiry and close

  /**
   * Deletes commit-log segments older than fileReservedTime and what points only into them; with the
   * disk at or above diskCleanForciblyPercent also the oldest unexpired ones (up to 10 per call, while
   * it stays there); at or above diskFullPercent puts are refused until a later call finds it at or
   * below diskCleanForciblyPercent (below diskFullPercent when that is off).
   * Never the segment being written.
   */
  deleteExpiredFiles(nowMs = Date.now()): number {
    this.checkOpen();
    this.undeleted.retry();
    const limit = nowMs - this.options.fileReservedTimeHours * 3600_000;
    let n = this.commitLog.deleteSegments((s) => s.mtimeMs() < limit, undefined, this.undeleted);
    const watch = Number.isFinite(this.options.diskCleanForciblyPercent) || Number.isFinite(this.options.diskFullPercent);
    let used = watch ? this.options.diskUsedPercent(this.options.dir) : Number.NaN;
    let forced = 0;
    // while a dropped file cannot be deleted, dropping more frees nothing: unexpired messages are kept
    while (used >= this.options.diskCleanForciblyPercent && forced < FORCIBLE_DELETES_PER_CHECK && this.undeleted.size === 0) {
      if (this.commitLog.deleteSegments(() => true, 1, this.undeleted) === 0) break;
      forced++;
      used = this.options.diskUsedPercent(this.options.dir);
    }
    const { dir, diskCleanForciblyPercent, diskFullPercent } = this.options;
    if (forced > 0)
      this.reportDiskSpace({
        kind: "cleanedForcibly",
        dir,
        usedPercent: used,
        segments: forced,
        message:
          `The disk holding ${dir} was over ${diskCleanForciblyPercent} % full: deleted the ${forced} oldest commit-log segment(s) ` +
          `before they expired (now ${used.toFixed(0)} %). Free space on the disk to keep messages for their reserved time.`,
      });
    const wasFull = this.diskFullAt !== null;
    // as RocketMQ's isSpaceToDelete: a full disk is marked OK again only at or below the forcible
    // clean ratio, so puts do not resume (and fill it up again) between the two thresholds
    const full = used >= diskFullPercent || (wasFull && used > diskCleanForciblyPercent);
    this.diskFullAt = full ? used : null;
    const okAt = this.diskOkAt();
    if (full && !wasFull)
      this.reportDiskSpace({
        kind: "full",
        dir,
        usedPercent: used,
        message:
          `The disk holding ${dir} is ${used.toFixed(0)} % full (puts stop at ${diskFullPercent} %): puts are refused with DISK_FULL ` +
          `until it is ${okAt}. Free space on the disk, or let older segments expire or be deleted.`,
      });
    else if (!full && wasFull)
      this.reportDiskSpace({
        kind: "notFull",
        dir,
        usedPercent: used,
        message: Number.isNaN(used)
          ? `The use of the disk holding ${dir} could not be read: puts are taken again.`
          : `The disk holding ${dir} is ${used.toFixed(0)} % full, ${okAt}: puts are taken again.`,
      });
    n += forced;
    if (n > 0) {
      const minPhy = this.commitLog.minOffset;
      for (const m of this.queues.values()) for (const q of m.values()) q.deleteBelow(minPhy, this.undeleted);
      this.index.deleteBelow(minPhy, this.undeleted);
      // a deletion whose old records are all gone is forgotten
      if (this.deleted.expireBelow(minPhy)) this.deleted.save();
    }
    // after the rest of the clean-up, so the run is reported (cleanFailed) without holding it back
    this.undeleted.throwIfAny();
    return n;
  }

  /** The disk use at which puts are taken again once it was full, in words. */
  private diskOkAt(): string {
    const { diskCleanForciblyPercent, diskFullPercent } = this.options;
    return Number.isFinite(diskCleanForciblyPercent) ? `at or below ${diskCleanForciblyPercent} %` : `below ${diskFullPercent} %`;
  }

  /** Flushes, releases files and the lock, removes the abort marker. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.checkpointing?.catch(() => {});
    // an fdatasync still queued on the libuv pool would run on a closed (or reused) descriptor and be
    // reported as a disk error (EBADF) at every such close
    await this.commitLog.syncsSettled();
    let err: unknown;
    let cp: StoreCheckpoint | null = null;
    try {
      // a refused put's records still in the log (no put came since to cut them): cut now, or the
      // close fails and keeps the abort file rather than look clean
      this.commitLog.clearDirtyTail();
    } catch (e) {
      err = e;
    }
    try {
      cp = this.flushAllNow();
    } catch (e) {
      err = e;
    }
    // the files are closed before the checkpoint is written: a store that ran out of descriptors
    // gets them back for it, so it still shuts down cleanly
    this.closeFiles();
    if (cp) {
      try {
        writeCheckpoint(this.checkpointFile, cp);
      } catch (e) {
        err = e;
      }
    }
    if (!err) fs.rmSync(this.abortFile, { force: true });
    this.releaseLock();
    if (err) throw err;
  }

  private closeFiles(): void {
    this.commitLog.close();
    try {
      this.index.close();
    } catch {
      /* index is rebuilt from the log on open */
    }
    for (const m of this.queues.values()) for (const q of m.values()) q.close();
    this.queues.clear();
  }
}

/**
 * The checkpoint written before a rebuild removes the consume queues: the old one (or, without one,
 * one that trusts nothing: the whole log is checked and dispatched again), with every queue's max
 * offset marked (and the old min, if any). A queue marked but not found again makes the next open
 * rebuild, with that max.
 */
function rebuildCheckpoint(cp: StoreCheckpoint | null, maxOffsets: Map<string, Map<number, number>>): StoreCheckpoint {
  const queues: Record<string, Record<string, QueueMark>> = {};
  for (const [topic, m] of maxOffsets) {
    const marks: Record<string, QueueMark> = {};
    for (const [queueId, max] of m) marks[String(queueId)] = { min: Math.min(cp?.queues[topic]?.[String(queueId)]?.min ?? 0, max), max };
    queues[topic] = marks;
  }
  const none = { physicMsgTimestamp: 0, logicsMsgTimestamp: 0, indexMsgTimestamp: 0, flushedOffset: 0, confirmOffset: 0, indexEntries: 0 };
  return { ...(cp ?? none), queues };
}

/** The topic of a stored record. */
export function recordTopic(rec: Buffer): string {
  const tp = RecordOffset.BODY + rec.readInt32BE(RecordOffset.BODY_LENGTH);
  return rec.toString("utf8", tp + 1, tp + 1 + rec[tp]!);
}

/** The properties of a stored record (without the CRC property). */
export function recordProperties(rec: Buffer): Record<string, string> {
  const tp = RecordOffset.BODY + rec.readInt32BE(RecordOffset.BODY_LENGTH);
  const ps = tp + 1 + rec[tp]! + 2;
  return decodeProperties(rec.toString("utf8", ps, rec.length - CRC_RESERVED_BYTES));
}
