/**
 * The dispatcher ("reput"): from newly appended commit-log records it writes consume-queue entries
 * and index entries and announces arrivals, one notice per run of records for one queue. It reads
 * only the record bytes it is given (the append buffer, a replica's bytes or recovery's window),
 * with no per-message objects on the way.
 */

import { bytesEqual, int32BE, int64BE, putInt32BE, putInt64BE, uint32BE } from "../transport/bigEndian.ts";
import {
  BLANK_MAGIC,
  CRC_RESERVED_BYTES,
  decodeProperties,
  isUndispatchedTransaction,
  javaHashCode,
  RecordOffset,
} from "../transport/messageRecord.ts";
import { SCHEDULE_TOPIC } from "../transport/protocol.ts";
import { type ConsumeQueue, CQ_ENTRY_BYTES } from "./consumeQueue.ts";
import type { IndexService } from "./indexFile.ts";

/** What the long-poll service hears after each dispatched run of records for one queue. */
export interface ArrivalNotice {
  topic: string;
  queueId: number;
  /** the queue's new max offset (next offset to be written) */
  maxOffset: number;
  /** tag hash code of the run's first message (delivery time for SCHEDULE_TOPIC_XXXX) */
  tagsCode: number;
  storeTimestamp: number;
  /** properties of the run's first message */
  properties: Record<string, string>;
  /** messages in the run; when > 1, a filter should re-run the pull rather than trust tagsCode/properties */
  count: number;
}

enum Prop {
  NONE = 0,
  TAGS = 1,
  KEYS = 2,
  UNIQ = 3,
  DELAY = 4,
}

const TAGS_BYTES = Buffer.from("TAGS", "latin1");
const KEYS_BYTES = Buffer.from("KEYS", "latin1");
const UNIQ_KEY_BYTES = Buffer.from("UNIQ_KEY", "latin1");
const DELAY_BYTES = Buffer.from("DELAY", "latin1");

function propName(buf: Buffer, s: number, e: number): Prop {
  const n = e - s;
  if (n === 4) {
    if (bytesEqual(buf, s, TAGS_BYTES, 0, 4)) return Prop.TAGS;
    if (bytesEqual(buf, s, KEYS_BYTES, 0, 4)) return Prop.KEYS;
  } else if (n === 8) {
    if (bytesEqual(buf, s, UNIQ_KEY_BYTES, 0, 8)) return Prop.UNIQ;
  } else if (n === 5) {
    if (bytesEqual(buf, s, DELAY_BYTES, 0, 5)) return Prop.DELAY;
  }
  return Prop.NONE;
}

/** Continues a Java hash over UTF-8 bytes (as the UTF-16 string they decode to). */
export function javaHashContinue(h: number, buf: Buffer, s: number, e: number): number {
  for (let i = s; i < e; i++) {
    if (buf[i]! >= 0x80) {
      const str = buf.toString("utf8", i, e);
      for (let j = 0; j < str.length; j++) h = (Math.imul(h, 31) + str.charCodeAt(j)) | 0;
      return h;
    }
    h = (Math.imul(h, 31) + buf[i]!) | 0;
  }
  return h;
}

/** Builds consume queues and the index from record bytes. */
export class Dispatcher {
  private cqBuf = Buffer.allocUnsafe(CQ_ENTRY_BYTES * 1024);
  /** store time of the last record dispatched (the checkpoint's logics/index timestamp) */
  lastStoreTimestamp = 0;
  /**
   * After a dispatch that threw: the commit-log offset below which every record has its index
   * entries, so dispatching those records again adds none (index entries are not positional). The
   * store sets it back to 0 once what the failure left is dispatched.
   */
  indexedEnd = 0;
  private listeners: Array<(a: ArrivalNotice) => void> = [];

  constructor(
    private readonly queueFor: (topic: string, queueId: number) => ConsumeQueue,
    private readonly index: IndexService,
    private readonly delayLevelsMs: number[],
    /** deleted topics: topic -> commit-log offset below which its records are skipped (see deletedTopics.ts) */
    private readonly deletedBelow: ReadonlyMap<string, number> = new Map(),
  ) {}

  onArrival(fn: (a: ArrivalNotice) => void): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter((x) => x !== fn);
    };
  }

  /** Delivery time of a delay message stored at `storeTimestamp` with `level` (unknown level: +1 s). */
  deliverTime(storeTimestamp: number, level: number): number {
    const max = this.delayLevelsMs.length;
    if (level > max) level = max;
    const d = level >= 1 ? this.delayLevelsMs[level - 1] : undefined;
    return storeTimestamp + (d ?? 1000);
  }

  /**
   * Dispatches the whole records in `buf[start, end)`, the first of which sits at commit-log
   * offset `basePhy`. Stops at a BLANK marker. `notify` false during recovery; `toQueues` false
   * writes index entries only (recovery rebuilding a lost index under kept consume queues); records
   * below {@link indexedEnd} get no index entries (a dispatch again after a failed one: they have theirs).
   */
  dispatch(buf: Buffer, start: number, end: number, basePhy: number, notify = true, toQueues = true): void {
    const indexFrom = this.indexedEnd;
    let p = start;
    let runTopicPos = -1;
    let runTopicLen = 0;
    let runTopic = "";
    let runQueueId = -1;
    let runFirstOffset = 0;
    let runCount = 0;
    let runTagsCode = 0;
    let runStoreTs = 0;
    let runPropsStart = 0;
    let runPropsEnd = 0;
    let topicHash = 0;
    // records of the run's topic below this offset belong to a deleted topic: skipped
    let runDeletedBelow = -1;

    const flushRun = () => {
      if (runCount === 0) return;
      if (!toQueues) {
        runCount = 0;
        return;
      }
      const cq = this.queueFor(runTopic, runQueueId);
      cq.put(runFirstOffset, this.cqBuf, runCount);
      if (notify && this.listeners.length) {
        const notice: ArrivalNotice = {
          topic: runTopic,
          queueId: runQueueId,
          maxOffset: cq.maxOffset,
          tagsCode: runTagsCode,
          storeTimestamp: runStoreTs,
          properties: decodeProperties(buf.toString("utf8", runPropsStart, runPropsEnd)),
          count: runCount,
        };
        for (const l of this.listeners) l(notice);
      }
      runCount = 0;
    };

    try {
      while (p + 8 <= end) {
        const total = int32BE(buf, p);
        if (total <= 0 || uint32BE(buf, p + 4) === BLANK_MAGIC || p + total > end) break;
        const phy = basePhy + (p - start);
        const queueId = int32BE(buf, p + RecordOffset.QUEUE_ID);
        const queueOffset = int64BE(buf, p + RecordOffset.QUEUE_OFFSET);
        const sysFlag = int32BE(buf, p + RecordOffset.SYS_FLAG);
        const storeTs = int64BE(buf, p + RecordOffset.STORE_TIMESTAMP);
        const bodyLen = int32BE(buf, p + RecordOffset.BODY_LENGTH);
        const topicLenPos = p + RecordOffset.BODY + bodyLen;
        const topicLen = buf[topicLenPos]!;
        const topicPos = topicLenPos + 1;
        const propsStart = topicPos + topicLen + 2;
        const propsEnd = p + total - CRC_RESERVED_BYTES;
        if (isUndispatchedTransaction(sysFlag)) {
          p += total;
          continue;
        }

        const sameTopic = runTopicPos >= 0 && runTopicLen === topicLen && bytesEqual(buf, runTopicPos, buf, topicPos, topicLen);
        if (!sameTopic || queueId !== runQueueId || queueOffset !== runFirstOffset + runCount) {
          flushRun();
          if (!sameTopic) {
            runTopic = buf.toString("utf8", topicPos, topicPos + topicLen);
            topicHash = javaHashCode(`${runTopic}#`);
            runDeletedBelow = this.deletedBelow.size > 0 ? (this.deletedBelow.get(runTopic) ?? -1) : -1;
          }
          runTopicPos = topicPos;
          runTopicLen = topicLen;
          runQueueId = queueId;
          runFirstOffset = queueOffset;
        }
        if (phy < runDeletedBelow) {
          p += total;
          continue;
        }

        let tagsCode = 0;
        let delayLevel = 0;
        const indexed = phy >= indexFrom;
        let i = propsStart;
        while (i < propsEnd) {
          const sep = buf.indexOf(1, i);
          if (sep < 0 || sep >= propsEnd) break;
          let ve = buf.indexOf(2, sep + 1);
          if (ve < 0 || ve > propsEnd) ve = propsEnd;
          const name = propName(buf, i, sep);
          if (name === Prop.TAGS) {
            tagsCode = javaHashContinue(0, buf, sep + 1, ve);
          } else if (name === Prop.UNIQ) {
            if (indexed) this.index.add(javaHashContinue(topicHash, buf, sep + 1, ve), phy, storeTs);
          } else if (name === Prop.KEYS && indexed) {
            let ks = sep + 1;
            for (let k = sep + 1; k <= ve; k++) {
              if (k === ve || buf[k] === 32) {
                if (k > ks) this.index.add(javaHashContinue(topicHash, buf, ks, k), phy, storeTs);
                ks = k + 1;
              }
            }
          } else if (name === Prop.DELAY) {
            delayLevel = Number(buf.toString("latin1", sep + 1, ve)) | 0;
          }
          i = ve + 1;
        }
        if (topicLen === SCHEDULE_TOPIC.length && runTopic === SCHEDULE_TOPIC) tagsCode = this.deliverTime(storeTs, delayLevel);

        if (runCount === 0) {
          runTagsCode = tagsCode;
          runStoreTs = storeTs;
          runPropsStart = propsStart;
          runPropsEnd = propsEnd;
        }
        const need = (runCount + 1) * CQ_ENTRY_BYTES;
        if (need > this.cqBuf.length) {
          const bigger = Buffer.allocUnsafe(this.cqBuf.length * 2);
          this.cqBuf.copy(bigger, 0, 0, runCount * CQ_ENTRY_BYTES);
          this.cqBuf = bigger;
        }
        const e = runCount * CQ_ENTRY_BYTES;
        putInt64BE(this.cqBuf, e, phy);
        putInt32BE(this.cqBuf, e + 8, total);
        putInt64BE(this.cqBuf, e + 12, tagsCode);
        runCount++;
        p += total;
        if (storeTs > this.lastStoreTimestamp) this.lastStoreTimestamp = storeTs;
      }
      flushRun();
      this.index.writePending();
    } catch (e) {
      // how far indexing got: every record before `p` has its index entries (dispatching again skips them)
      this.indexedEnd = Math.max(this.indexedEnd, basePhy + (p - start));
      throw e;
    }
  }
}
