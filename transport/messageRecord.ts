/**
 * The stored-message layout: RocketMQ's commit-log record (MAGIC V1, big-endian, IPv4 hosts) with a
 * whole-record CRC carried as the trailing reserved property `__CRC32#`, plus the compact batch
 * body a producer sends. The broker writes these bytes once; a pull hands them out as they are and
 * the client decodes them here, once.
 */

import { randomBytes } from "node:crypto";
import { networkInterfaces } from "node:os";
import { crc32, inflateSync } from "node:zlib";
import { bytesEqual, int32BE, int64BE, putInt32BE, putInt64BE, putUint16BE, uint16BE, uint32BE } from "./bigEndian.ts";
import { MessageConst, MQError, TOPIC_MAX_LENGTH } from "./protocol.ts";

if (typeof crc32 !== "function") {
  throw new MQError("SYSTEM_ERROR", "zlib.crc32 is missing: actormq needs Node.js 20.15 or newer.");
}

/** RocketMQ's MESSAGE_MAGIC_CODE (V1, 1-byte topic length). */
export const MAGIC_V1 = 0xdaa320a7;
/** RocketMQ's BLANK_MAGIC_CODE: the end-of-file marker. */
export const BLANK_MAGIC = 0xcbd43194;
/** Bytes of a BLANK end-of-file marker (total size + magic). */
export const BLANK_MARKER_BYTES = 8;
/** NAME_VALUE_SEPARATOR between a property's name and value. */
export const NAME_VALUE_SEPARATOR = "\u0001";
/** PROPERTY_SEPARATOR after each property. */
export const PROPERTY_SEPARATOR = "\u0002";
/** The reserved trailing property that carries the whole-record CRC (RocketMQ 5's PROPERTY_CRC32). */
export const CRC_PROPERTY = "__CRC32#";
/** `__CRC32#` + separator + 10 decimal digits + separator. */
export const CRC_RESERVED_BYTES = CRC_PROPERTY.length + 1 + 10 + 1;
/** Longest properties section a record may carry (2-byte length). */
export const MAX_PROPERTIES_BYTES = 32767;
/** Longest properties a message may be sent with: the store appends the CRC property within the same 2-byte length. */
export const MAX_MESSAGE_PROPERTIES_BYTES = MAX_PROPERTIES_BYTES - CRC_RESERVED_BYTES;
/** Longest ORIGIN_MESSAGE_ID a send-back stores: a UNIQ_KEY or an offset message id (32 hex characters). */
export const ORIGIN_MESSAGE_ID_MAX_LENGTH = 32;
/** Digits of the longest delay level or queue id the broker writes into a property (a 32-bit int). */
const INT32_DIGITS = 10;
/**
 * The most the broker adds to a message's properties after it was sent: RETRY_TOPIC (its topic),
 * ORIGIN_MESSAGE_ID and DELAY when it sends the message back (the dead-letter copy adds only the
 * first two), and REAL_TOPIC (`%RETRY%<group>` or the real topic, at most the longest topic) and
 * REAL_QID when a delay level routes it through SCHEDULE_TOPIC_XXXX.
 */
export const BROKER_ADDED_PROPERTIES_BYTES =
  encodeProperty(MessageConst.RETRY_TOPIC, "t".repeat(TOPIC_MAX_LENGTH)).length +
  encodeProperty(MessageConst.ORIGIN_MESSAGE_ID, "0".repeat(ORIGIN_MESSAGE_ID_MAX_LENGTH)).length +
  encodeProperty(MessageConst.DELAY, "0".repeat(INT32_DIGITS)).length +
  encodeProperty(MessageConst.REAL_TOPIC, "t".repeat(TOPIC_MAX_LENGTH)).length +
  encodeProperty(MessageConst.REAL_QUEUE_ID, "0".repeat(INT32_DIGITS)).length;
/**
 * Longest properties a producer may send (checked by the producer and by the broker's send path):
 * the room {@link BROKER_ADDED_PROPERTIES_BYTES} is left, so a message taken can always be delayed,
 * sent back for a retry and dead-lettered within {@link MAX_MESSAGE_PROPERTIES_BYTES}.
 */
export const MAX_SEND_PROPERTIES_BYTES = MAX_MESSAGE_PROPERTIES_BYTES - BROKER_ADDED_PROPERTIES_BYTES;
/** Longest topic a V1 record can carry (1-byte length). */
export const MAX_TOPIC_BYTES = 127;

/** Field offsets inside a stored record. */
export const RecordOffset = {
  TOTAL_SIZE: 0,
  MAGIC: 4,
  BODY_CRC: 8,
  QUEUE_ID: 12,
  FLAG: 16,
  QUEUE_OFFSET: 20,
  PHYSICAL_OFFSET: 28,
  SYS_FLAG: 36,
  BORN_TIMESTAMP: 40,
  BORN_HOST: 48,
  STORE_TIMESTAMP: 56,
  STORE_HOST: 64,
  RECONSUME_TIMES: 72,
  PREPARED_TRANSACTION_OFFSET: 76,
  BODY_LENGTH: 84,
  BODY: 88,
} as const;
/** Fixed part of a record before the body bytes (IPv4 hosts, V1), including the body length field. */
export const RECORD_FIXED_BYTES = RecordOffset.BODY;
/** Smallest possible record: empty body, 1-char topic, the CRC property only. */
export const MIN_RECORD_BYTES = RECORD_FIXED_BYTES + 1 + 1 + 2 + CRC_RESERVED_BYTES;

/** sysFlag bits (`MessageSysFlag`). */
export const MessageSysFlag = {
  COMPRESSED: 0x1,
  MULTI_TAGS: 0x2,
  TRANSACTION_PREPARED: 0x4,
  TRANSACTION_COMMIT: 0x8,
  TRANSACTION_ROLLBACK: 0xc,
  BORNHOST_V6: 0x10,
  STOREHOST_V6: 0x20,
  /** bits 8-10: how a COMPRESSED body is compressed (RocketMQ 5; 0 in 4.x, which had zlib only) */
  COMPRESSION_TYPE_MASK: 0x700,
  COMPRESSION_LZ4_TYPE: 0x100,
  COMPRESSION_ZSTD_TYPE: 0x200,
  COMPRESSION_ZLIB_TYPE: 0x300,
} as const;
/** The host-layout bits: records are written with IPv4 hosts, so the store owns them. */
export const HOST_V6_FLAGS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6;

/**
 * Whether a sysFlag marks a half (prepared) or rolled-back transaction message: stored, but never
 * dispatched to a consume queue (RocketMQ's `MessageSysFlag.getTransactionValue` type 0x4 / 0xc).
 */
export function isUndispatchedTransaction(sysFlag: number): boolean {
  const type = sysFlag & 0xc;
  return type === MessageSysFlag.TRANSACTION_PREPARED || type === MessageSysFlag.TRANSACTION_ROLLBACK;
}

/** A message as the client sees it (API.md `MessageExt`). */
export interface MessageExt {
  topic: string;
  brokerName: string;
  queueId: number;
  queueOffset: number;
  commitLogOffset: number;
  /** UNIQ_KEY when present, else the offset message id */
  msgId: string;
  offsetMsgId: string;
  tags: string | undefined;
  keys: string | undefined;
  properties: Record<string, string>;
  /**
   * As the application gave it to its producer: a zlib-compressed body is inflated. One still
   * compressed (LZ4 or ZSTD from other clients, or one that could not be inflated) keeps COMPRESSED
   * in `sysFlag`.
   */
  body: Buffer;
  bornTimestamp: number;
  bornHost: string;
  storeTimestamp: number;
  storeHost: string;
  reconsumeTimes: number;
  /**
   * as stored (`MessageSysFlag`), except that an inflated body's COMPRESSED and compression-type
   * bits are cleared: COMPRESSED means the delivered body is still compressed (RocketMQ's decoder
   * keeps the stored flag on an inflated body)
   */
  sysFlag: number;
  flag: number;
  storeSize: number;
  preparedTransactionOffset: number;
}

// ---------------------------------------------------------------------------------------------
// Properties

/** `name\u0001value\u0002...` */
export function encodeProperties(p: Record<string, string> | undefined | null): string {
  if (!p) return "";
  let s = "";
  for (const k in p) {
    const v = p[k];
    if (v === undefined || v === null) continue;
    s += encodeProperty(k, v);
  }
  return s;
}

/** One property as {@link encodeProperties} writes it. */
export function encodeProperty(name: string, value: string): string {
  return name + NAME_VALUE_SEPARATOR + value + PROPERTY_SEPARATOR;
}

/** Inverse of {@link encodeProperties}; tolerates a missing final separator. */
export function decodeProperties(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  const n = s.length;
  while (i < n) {
    let end = s.indexOf(PROPERTY_SEPARATOR, i);
    if (end < 0) end = n;
    const sep = s.indexOf(NAME_VALUE_SEPARATOR, i);
    if (sep >= 0 && sep < end) out[s.slice(i, sep)] = s.slice(sep + 1, end);
    i = end + 1;
  }
  return out;
}

/** Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, as int32. */
export function javaHashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 31) + s.charCodeAt(i)) | 0;
  return h;
}

// ---------------------------------------------------------------------------------------------
// Batch body: what a producer sends in one SEND (one message or many)

/** Per message in a batch body: entry size 4 | flag 4 | body length 4 | body | properties length 2 | properties. */
const BATCH_ENTRY_FIXED = 4 + 4 + 4 + 2;

/** One message of a batch body. `properties` is already encoded ({@link encodeProperties}). */
export interface BatchMessage {
  body: Uint8Array;
  flag?: number;
  properties?: string;
}

/** Client -> broker batch body: the messages of one SEND, compact, no per-message headers beyond sizes. */
export function encodeMessageBatch(msgs: ReadonlyArray<BatchMessage>): Buffer {
  // one pass, properties written in place: room for the longest UTF-8 they could take (3 bytes per
  // UTF-16 unit), the unused tail cut off at the end
  let room = 0;
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    room += BATCH_ENTRY_FIXED + m.body.length + 3 * (m.properties?.length ?? 0);
  }
  const out = Buffer.allocUnsafe(room);
  let pos = 0;
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    const bodyLen = m.body.length;
    const pp = pos + 12 + bodyLen;
    const propsLen = m.properties ? out.write(m.properties, pp + 2, "utf8") : 0;
    if (propsLen > MAX_MESSAGE_PROPERTIES_BYTES) throw propertiesTooLong(propsLen);
    const size = BATCH_ENTRY_FIXED + bodyLen + propsLen;
    putInt32BE(out, pos, size);
    putInt32BE(out, pos + 4, (m.flag ?? 0) | 0);
    putInt32BE(out, pos + 8, bodyLen);
    out.set(m.body, pos + 12);
    putUint16BE(out, pp, propsLen);
    pos += size;
  }
  return pos === room ? out : out.subarray(0, pos);
}

/**
 * Walks a batch body without copying: `fn(bodyStart, bodyEnd, flag, propsStart, propsEnd)` per
 * message (none: only the framing is checked). Returns the message count; throws MQError
 * MESSAGE_ILLEGAL on a malformed body.
 */
export function walkMessageBatch(
  buf: Buffer,
  fn?: (bodyStart: number, bodyEnd: number, flag: number, propsStart: number, propsEnd: number) => void,
): number {
  let pos = 0;
  let count = 0;
  const n = buf.length;
  while (pos < n) {
    if (n - pos < BATCH_ENTRY_FIXED) throw malformedBatch(pos);
    const size = uint32BE(buf, pos);
    if (size < BATCH_ENTRY_FIXED || pos + size > n) throw malformedBatch(pos);
    const bodyStart = pos + 12;
    const bodyEnd = bodyStart + uint32BE(buf, pos + 8);
    if (bodyEnd + 2 > pos + size) throw malformedBatch(pos);
    const propsStart = bodyEnd + 2;
    if (propsStart + uint16BE(buf, bodyEnd) !== pos + size) throw malformedBatch(pos);
    fn?.(bodyStart, bodyEnd, int32BE(buf, pos + 4), propsStart, pos + size);
    pos += size;
    count++;
  }
  return count;
}

/** Broker-side iteration over a batch body without copying bodies; returns the message count. */
export function forEachBatchMessage(
  buf: Buffer,
  fn: (bodyStart: number, bodyEnd: number, flag: number, properties: string) => void,
): number {
  return walkMessageBatch(buf, (bs, be, flag, ps, pe) => fn(bs, be, flag, ps === pe ? "" : buf.toString("utf8", ps, pe)));
}

function malformedBatch(pos: number): MQError {
  return new MQError("MESSAGE_ILLEGAL", `The message batch body is malformed at byte ${pos}: build it with encodeMessageBatch.`);
}

// ---------------------------------------------------------------------------------------------
// Record CRC

/** CRC32 over a whole record except its reserved CRC property tail. */
export function recordCrc(buf: Buffer, start: number, totalSize: number): number {
  return crc32(buf.subarray(start, start + totalSize - CRC_RESERVED_BYTES));
}

const CRC_PROPERTY_BYTES = Buffer.from(CRC_PROPERTY + NAME_VALUE_SEPARATOR, "latin1");

/** Writes the reserved `__CRC32#` tail (the last CRC_RESERVED_BYTES bytes) of a record that is otherwise complete. */
export function writeRecordCrc(buf: Buffer, start: number, totalSize: number): void {
  const tail = start + totalSize - CRC_RESERVED_BYTES;
  writeCrcTail(buf, tail, crc32(buf.subarray(start, tail)));
}

function writeCrcTail(buf: Buffer, tail: number, crc: number): void {
  // nine bytes: a loop costs less than Buffer.copy's argument handling
  const name = CRC_PROPERTY_BYTES;
  for (let i = 0; i < name.length; i++) buf[tail + i] = name[i]!;
  let v = crc >>> 0;
  const digits = tail + name.length;
  for (let i = 9; i >= 0; i--) {
    const q = (v / 10) >>> 0; // exact: v < 2^32
    buf[digits + i] = 48 + v - 10 * q;
    v = q;
  }
  buf[digits + 10] = 2;
}

/** CRC-32 polynomial (reflected), as zlib uses it. */
const CRC_POLY = 0xedb88320;

/** a·b modulo the CRC polynomial (zlib's multmodp). */
function crcMultModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if ((a & m) !== 0) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ CRC_POLY : b >>> 1;
  }
  return p >>> 0;
}

/** x^(2^n) modulo the polynomial, n = 0..31 (zlib's x2n_table). */
const X2N_TABLE = (() => {
  const t = new Array<number>(32);
  let p = 0x40000000; // x^1
  t[0] = p;
  for (let n = 1; n < 32; n++) t[n] = p = crcMultModP(p, p);
  return t;
})();

/** x^(8·bytes) modulo the polynomial: the shift {@link crc32Combine} applies for `bytes` bytes. */
function crcShiftFor(bytes: number): number {
  let p = 0x80000000; // x^0
  let k = 3;
  let n = bytes;
  while (n > 0) {
    if (n & 1) p = crcMultModP(X2N_TABLE[k & 31]!, p);
    n = Math.floor(n / 2);
    k++;
  }
  return p;
}

// bodies of one producer mostly have one length: its shift is computed once
let lastShiftBytes = -1;
let lastShift = 0;

/**
 * The CRC-32 of A followed by B from crc(A), crc(B) and B's length (zlib's crc32_combine), without
 * reading either again: O(log lenB), a few dozen word operations.
 */
export function crc32Combine(crcA: number, crcB: number, lenB: number): number {
  if (lenB !== lastShiftBytes) {
    lastShift = crcShiftFor(lenB);
    lastShiftBytes = lenB;
  }
  return (crcMultModP(lastShift, crcA >>> 0) ^ (crcB >>> 0)) >>> 0;
}

/**
 * Writes the `__CRC32#` tail of a record whose body (at RecordOffset.BODY, `bodyLen` bytes) has
 * CRC `bodyCrc`: the record CRC is combined from the fixed part, the body CRC and the part after
 * the body, so the body is read once per append (for its own CRC) instead of twice.
 */
export function writeRecordCrcWithBody(buf: Buffer, start: number, totalSize: number, bodyLen: number, bodyCrc: number): void {
  const bodyStart = start + RecordOffset.BODY;
  const bodyEnd = bodyStart + bodyLen;
  const tail = start + totalSize - CRC_RESERVED_BYTES;
  const head = crc32Range(buf, start, bodyStart, 0);
  const crc = crc32Range(buf, bodyEnd, tail, crc32Combine(head, bodyCrc, bodyLen));
  writeCrcTail(buf, tail, crc);
}

/** Below this many bytes the table loop beats zlib.crc32, whose call costs ~150 ns before the first byte. */
const SHORT_CRC_BYTES = 192;

/** zlib's crc32 table, eight slices (slice-by-8: eight bytes per step). */
const CRC_TABLE = (() => {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ CRC_POLY : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let s = 1; s < 8; s++) t[s * 256 + n] = c = t[c & 0xff]! ^ (c >>> 8);
  }
  return t;
})();

/**
 * zlib.crc32 of `buf[start, end)` continuing from `seed`. The two short pieces around a record's
 * body (88 and ~70 bytes) cost 180-200 ns each through zlib (argument checks, a view, the binding
 * call) and 50-80 ns in this loop; longer ranges go to zlib.
 */
export function crc32Range(buf: Uint8Array, start: number, end: number, seed: number): number {
  if (end - start > SHORT_CRC_BYTES) return crc32(buf.subarray(start, end), seed);
  const t = CRC_TABLE;
  let c = ~seed;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    c ^= buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24);
    c =
      t[1792 + (c & 0xff)]! ^
      t[1536 + ((c >>> 8) & 0xff)]! ^
      t[1280 + ((c >>> 16) & 0xff)]! ^
      t[1024 + (c >>> 24)]! ^
      t[768 + buf[i + 4]!]! ^
      t[512 + buf[i + 5]!]! ^
      t[256 + buf[i + 6]!]! ^
      t[buf[i + 7]!]!;
  }
  for (; i < end; i++) c = t[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** The CRC stored in a record's tail, or -1 when the tail is not a well-formed `__CRC32#` property. */
export function storedRecordCrc(buf: Buffer, start: number, totalSize: number): number {
  const tail = start + totalSize - CRC_RESERVED_BYTES;
  for (let i = 0; i < CRC_PROPERTY_BYTES.length; i++) if (buf[tail + i] !== CRC_PROPERTY_BYTES[i]) return -1;
  const digits = tail + CRC_PROPERTY_BYTES.length;
  let v = 0;
  for (let i = 0; i < 10; i++) {
    const c = buf[digits + i]! - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  if (buf[digits + 10] !== 2 || v > 0xffffffff) return -1;
  return v;
}

/**
 * Checks one record at `start` in `buf` (which must hold at least `available` bytes from `start`):
 * size consistency, magic, field lengths and the whole-record CRC (which covers the body and its CRC field). Returns the
 * record's total size, or -1 when anything is off. BLANK markers are not records (-1).
 */
export function checkRecord(buf: Buffer, start: number, available: number): number {
  if (available < MIN_RECORD_BYTES) return -1;
  const total = int32BE(buf, start);
  if (total < MIN_RECORD_BYTES || total > available) return -1;
  if (uint32BE(buf, start + RecordOffset.MAGIC) !== MAGIC_V1) return -1;
  const sysFlag = int32BE(buf, start + RecordOffset.SYS_FLAG);
  if ((sysFlag & HOST_V6_FLAGS) !== 0) return -1;
  const bodyLen = int32BE(buf, start + RecordOffset.BODY_LENGTH);
  if (bodyLen < 0 || RECORD_FIXED_BYTES + bodyLen + 3 > total) return -1;
  const topicLenPos = start + RecordOffset.BODY + bodyLen;
  const topicLen = buf[topicLenPos]!;
  const propsLenPos = topicLenPos + 1 + topicLen;
  if (propsLenPos + 2 - start > total) return -1;
  const propsLen = uint16BE(buf, propsLenPos);
  if (propsLenPos + 2 + propsLen - start !== total || propsLen < CRC_RESERVED_BYTES) return -1;
  // the record CRC covers every byte before the tail, body and BODY_CRC field included: checking
  // the body's own CRC as well would read the body twice and catch nothing more
  const stored = storedRecordCrc(buf, start, total);
  if (stored < 0 || stored !== recordCrc(buf, start, total) >>> 0) return -1;
  return total;
}

/** The fields of one record, for {@link encodeRecord}. */
export interface RecordFields {
  topic: string;
  queueId: number;
  queueOffset: number;
  physicalOffset: number;
  body: Uint8Array;
  /** encoded properties, without the CRC tail */
  properties?: string;
  flag?: number;
  sysFlag?: number;
  bornTimestamp: number;
  bornHost: string;
  storeTimestamp: number;
  storeHost: string;
  reconsumeTimes?: number;
  preparedTransactionOffset?: number;
}

/** MESSAGE_ILLEGAL for properties (tags, keys and user properties, encoded) of `bytes` bytes. */
export function propertiesTooLong(bytes: number, limit = MAX_MESSAGE_PROPERTIES_BYTES, why = ""): MQError {
  return new MQError(
    "MESSAGE_ILLEGAL",
    `The message properties are ${bytes} bytes; at most ${limit} are allowed${why}: use fewer or shorter properties.`,
  );
}

/**
 * Refuses (MESSAGE_ILLEGAL) a sent message's encoded properties past {@link MAX_SEND_PROPERTIES_BYTES}:
 * the producer's check, and the broker's for clients that do not make it. One UTF-16 unit is at
 * most 3 UTF-8 bytes: only long properties are measured.
 */
export function checkSendProperties(properties: string): void {
  if (properties.length * 3 > MAX_SEND_PROPERTIES_BYTES) {
    const bytes = Buffer.byteLength(properties);
    if (bytes > MAX_SEND_PROPERTIES_BYTES) throw sendPropertiesTooLong(bytes);
  }
}

/** MESSAGE_ILLEGAL for a sent message whose properties leave no room for what the broker adds on a retry. */
export function sendPropertiesTooLong(bytes: number): MQError {
  return propertiesTooLong(
    bytes,
    MAX_SEND_PROPERTIES_BYTES,
    ` (the store's ${MAX_MESSAGE_PROPERTIES_BYTES} less ${BROKER_ADDED_PROPERTIES_BYTES} kept for the properties the broker adds when it delays the message or sends it back for retries)`,
  );
}

/** Encodes one complete record (body CRC and whole-record CRC included). */
export function encodeRecord(f: RecordFields): Buffer {
  const topic = Buffer.from(f.topic, "utf8");
  const props = Buffer.from(f.properties ?? "", "utf8");
  if (topic.length > MAX_TOPIC_BYTES)
    throw new MQError("MESSAGE_ILLEGAL", `The topic is ${topic.length} bytes; at most ${MAX_TOPIC_BYTES} are allowed.`);
  if (props.length + CRC_RESERVED_BYTES > MAX_PROPERTIES_BYTES)
    throw new MQError("MESSAGE_ILLEGAL", `The properties are ${props.length} bytes; use fewer or shorter properties.`);
  const total = RECORD_FIXED_BYTES + f.body.length + 1 + topic.length + 2 + props.length + CRC_RESERVED_BYTES;
  const b = Buffer.alloc(total);
  b.writeInt32BE(total, RecordOffset.TOTAL_SIZE);
  b.writeUInt32BE(MAGIC_V1, RecordOffset.MAGIC);
  b.writeUInt32BE(crc32(f.body) >>> 0, RecordOffset.BODY_CRC);
  b.writeInt32BE(f.queueId, RecordOffset.QUEUE_ID);
  b.writeInt32BE(f.flag ?? 0, RecordOffset.FLAG);
  writeLong(b, RecordOffset.QUEUE_OFFSET, f.queueOffset);
  writeLong(b, RecordOffset.PHYSICAL_OFFSET, f.physicalOffset);
  b.writeInt32BE(f.sysFlag ?? 0, RecordOffset.SYS_FLAG);
  writeLong(b, RecordOffset.BORN_TIMESTAMP, f.bornTimestamp);
  writeHost(b, RecordOffset.BORN_HOST, f.bornHost);
  writeLong(b, RecordOffset.STORE_TIMESTAMP, f.storeTimestamp);
  writeHost(b, RecordOffset.STORE_HOST, f.storeHost);
  b.writeInt32BE(f.reconsumeTimes ?? 0, RecordOffset.RECONSUME_TIMES);
  writeLong(b, RecordOffset.PREPARED_TRANSACTION_OFFSET, f.preparedTransactionOffset ?? 0);
  b.writeInt32BE(f.body.length, RecordOffset.BODY_LENGTH);
  b.set(f.body, RecordOffset.BODY);
  let p = RecordOffset.BODY + f.body.length;
  b[p++] = topic.length;
  topic.copy(b, p);
  p += topic.length;
  b.writeUInt16BE(props.length + CRC_RESERVED_BYTES, p);
  props.copy(b, p + 2);
  writeRecordCrc(b, 0, total);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Hosts and message ids

/** `ip:port` to 8 bytes (IPv4 4 + port 4) written at `pos`. Non-IPv4 hosts are written as 0.0.0.0. */
export function writeHost(buf: Buffer, pos: number, host: string): void {
  const colon = host.lastIndexOf(":");
  const ip = colon >= 0 ? host.slice(0, colon) : host;
  const port = colon >= 0 ? Number(host.slice(colon + 1)) | 0 : 0;
  const parts = ip.split(".");
  for (let i = 0; i < 4; i++) buf[pos + i] = parts.length === 4 ? Number(parts[i]) & 0xff : 0;
  putInt32BE(buf, pos + 4, port);
}

/** 8 host bytes at `pos` to `ip:port`. */
export function readHost(buf: Buffer, pos: number): string {
  return `${buf[pos]}.${buf[pos + 1]}.${buf[pos + 2]}.${buf[pos + 3]}:${buf.readInt32BE(pos + 4)}`;
}

const HEX = "0123456789ABCDEF";

/** RocketMQ's offset message id: store host IPv4 (4) + port (4) + commit-log offset (8), upper-case hex. */
export function offsetMsgId(storeHost: string, port: number | undefined, commitLogOffset: number): string {
  const b = Buffer.allocUnsafe(16);
  writeHost(b, 0, port === undefined ? storeHost : `${storeHost.split(":")[0]}:${port}`);
  b.writeBigInt64BE(BigInt(commitLogOffset), 8);
  return b.toString("hex").toUpperCase();
}

const HEX_CODES = Buffer.from(HEX, "latin1");

/**
 * Writes offset message ids for one store host with one string allocation each: the host's 16 hex
 * digits are written once, only the 16 offset digits change per id.
 */
export class OffsetMsgIdWriter {
  private readonly scratch = Buffer.alloc(32);
  /** a batch's ids, 33 bytes each (the comma included) */
  private joinBuf = Buffer.alloc(33 * 32);
  constructor(hostBytes: Buffer, hostPos = 0) {
    for (let i = 0; i < 8; i++) {
      const v = hostBytes[hostPos + i]!;
      this.scratch[2 * i] = HEX_CODES[v >> 4]!;
      this.scratch[2 * i + 1] = HEX_CODES[v & 15]!;
    }
  }
  /** The id of the record at `commitLogOffset` (same text as {@link offsetMsgId}). */
  idFor(commitLogOffset: number): string {
    writeOffsetHex(this.scratch, 0, commitLogOffset);
    return this.scratch.toString("latin1", 0, 32);
  }
  /** The ids of the first `n` offsets, comma-separated (a batch's SendResult form): one string, not n. */
  joinedIds(commitLogOffsets: readonly number[], n: number): string {
    if (n === 1) return this.idFor(commitLogOffsets[0]!);
    if (this.joinBuf.length < 33 * n) this.joinBuf = Buffer.alloc(33 * n);
    const b = this.joinBuf;
    const host = this.scratch; // its first 16 bytes: the host's digits
    for (let k = 0; k < n; k++) {
      const at = 33 * k;
      for (let i = 0; i < 16; i++) b[at + i] = host[i]!;
      writeOffsetHex(b, at, commitLogOffsets[k]!);
      b[at + 32] = 44; // ','
    }
    return b.toString("latin1", 0, 33 * n - 1);
  }
}

/** The 16 hex digits of a commit-log offset, after the 16 of the host in an id written at `at`. */
function writeOffsetHex(buf: Buffer, at: number, offset: number): void {
  writeHex32(buf, at + 16, Math.floor(offset / 0x100000000));
  writeHex32(buf, at + 24, offset >>> 0);
}

/** Whether `id` has the form of a message id: 32 hex characters (an offset msg id and a UNIQ_KEY alike). */
export function isMessageIdText(id: unknown): id is string {
  return typeof id === "string" && /^[0-9A-Fa-f]{32}$/.test(id);
}

/** Parses an offset message id; throws MQError INVALID_PARAMETER when it is not one. */
export function parseOffsetMsgId(id: string): { storeHost: string; commitLogOffset: number } {
  if (!isMessageIdText(id)) {
    throw new MQError("INVALID_PARAMETER", `"${id}" is not an offset message id (32 hex characters): pass the offsetMsgId of a message.`);
  }
  const b = Buffer.from(id, "hex");
  return { storeHost: readHost(b, 0), commitLogOffset: Number(b.readBigInt64BE(8)) };
}

/**
 * The first non-internal IPv4 address of this host (RocketMQ's getLocalAddress picks one the same
 * way), else 127.0.0.1: the producer's bornHost and the first bytes of its message ids.
 */
export function localIPv4(): string {
  for (const list of Object.values(networkInterfaces())) {
    const a = list?.find((x) => x.family === "IPv4" && !x.internal);
    if (a) return a.address;
  }
  return "127.0.0.1";
}

/**
 * UNIQ_KEY text, RocketMQ's layout (MessageClientIDSetter): 16 bytes as 32 upper-case hex chars =
 * IPv4 (4) | pid (2) | a per-process random int, RocketMQ's class-loader hash (4) | ms since the
 * start of the month, local time (4) | counter (2). The first 20 chars are written once, the time
 * when it changes, the counter per id. Null until the first id.
 */
let uniqText: Buffer | null = null;
let uniqCounter = 0;
/** the time the id's time field holds: never goes back, and moves on when a millisecond's 65 536 counter values are used */
let uniqTime = -1;
/** ids made at `uniqTime` */
let uniqTimeIds = 0;
let monthStart = 0;
let nextMonthStart = 0;

function uniqPrefix(): Buffer {
  const b = Buffer.allocUnsafe(10);
  const ip = localIPv4().split(".");
  for (let i = 0; i < 4; i++) b[i] = Number(ip[i]) & 0xff;
  b.writeUInt16BE(process.pid & 0xffff, 4);
  randomBytes(4).copy(b, 6);
  return Buffer.from(`${b.toString("hex").toUpperCase()}${"0".repeat(12)}`, "latin1");
}

function setMonth(now: number): void {
  const d = new Date(now);
  monthStart = new Date(d.getFullYear(), d.getMonth(), 1).getTime();
  nextMonthStart = new Date(d.getFullYear(), d.getMonth() + 1, 1).getTime();
}

/** Writes `v` (uint32) as 8 upper-case hex digits at `pos`. */
function writeHex32(buf: Buffer, pos: number, v: number): void {
  for (let i = pos + 7; i >= pos; i--) {
    buf[i] = HEX_CODES[v & 15]!;
    v >>>= 4;
  }
}

/** Writes `v` (uint16) as 4 upper-case hex digits at `pos`. */
function writeHex16(buf: Buffer, pos: number, v: number): void {
  for (let i = pos + 3; i >= pos; i--) {
    buf[i] = HEX_CODES[v & 15]!;
    v >>>= 4;
  }
}

/**
 * A message's UNIQ_KEY in RocketMQ's layout (see {@link uniqText}), decodable with
 * {@link uniqIdInfo} as RocketMQ's getIPStrFromID / getNearlyTimeFromID decode it. Unique within
 * the process: the time field never goes back (a clock stepped back keeps the last time) and moves
 * on by a millisecond once one has had 65 536 ids.
 */
export function createUniqId(): string {
  const text = (uniqText ??= uniqPrefix());
  const now = Date.now();
  if (now > uniqTime || uniqTimeIds === 0x10000) {
    uniqTime = now > uniqTime ? now : uniqTime + 1;
    uniqTimeIds = 0;
    if (uniqTime >= nextMonthStart) setMonth(uniqTime);
    writeHex32(text, 20, (uniqTime - monthStart) >>> 0);
  }
  uniqTimeIds++;
  uniqCounter = (uniqCounter + 1) & 0xffff;
  writeHex16(text, 28, uniqCounter);
  return text.toString("latin1", 0, 32);
}

/**
 * What a UNIQ_KEY in RocketMQ's layout says (RocketMQ's getIPStrFromID, getPidFromID and
 * getNearlyTimeFromID): the producer's IPv4 address, its pid (low 16 bits) and when the id was
 * made, to the ms, taken as within the month before `now`. Null when `id` is not 32 hex chars.
 */
export function uniqIdInfo(id: string, now = Date.now()): { ip: string; pid: number; time: number } | null {
  if (!isMessageIdText(id)) return null;
  const b = Buffer.from(id, "hex");
  const span = b.readUInt32BE(10);
  const d = new Date(now);
  let start = new Date(d.getFullYear(), d.getMonth(), 1).getTime();
  // (RocketMQ goes back a month already at start + span === now, which misdates an id made this very ms)
  if (start + span > now) start = new Date(d.getFullYear(), d.getMonth() - 1, 1).getTime();
  return { ip: `${b[0]}.${b[1]}.${b[2]}.${b[3]}`, pid: b.readUInt16BE(4), time: start + span };
}

// ---------------------------------------------------------------------------------------------
// Decoding stored records (the client side of a pull)

/**
 * Decodes concatenated stored records (a pull body) into MessageExt objects, in one pass. Bodies are
 * slices of `buf`, except COMPRESSED ones, inflated unless `decompressBody` is false (the broker's
 * own reads, which store them again as they are: RocketMQ's `deCompressBody`), within
 * {@link MAX_INFLATED_PULL_BYTES} for the whole call. Throws MQError
 * MALFORMED on a record whose size, magic or CRC does not check out.
 */
export function decodeRecords(buf: Buffer, brokerName: string, decompressBody = true): MessageExt[] {
  const out: MessageExt[] = [];
  // what the pull's compressed records may still inflate to; null: bodies stay as stored
  const inflate: InflateBudget | null = decompressBody ? { left: MAX_INFLATED_PULL_BYTES } : null;
  let pos = 0;
  while (pos < buf.length) {
    const total = checkRecord(buf, pos, buf.length - pos);
    if (total < 0) {
      throw new MQError(
        "MALFORMED",
        `A stored record at byte ${pos} of the pulled data fails its size or CRC check; it was not delivered. Pull again with verifyRecords (the push and pull consumers do): the broker then checks every record it serves and skips a damaged one.`,
      );
    }
    out.push(decodeCheckedRecord(buf, pos, total, brokerName, inflate));
    pos += total;
  }
  return out;
}

/**
 * The last host seen at one record position and its `ip:port` text: the records of one pull share
 * their store host and mostly their born host, so each is formatted once, not once per message.
 */
class HostTextCache {
  private ip = -1;
  private port = -1;
  private text = "";
  read(buf: Buffer, pos: number): string {
    const ip = uint32BE(buf, pos);
    const port = int32BE(buf, pos + 4);
    if (ip !== this.ip || port !== this.port) {
      this.ip = ip;
      this.port = port;
      this.changed(buf, pos);
    }
    return this.text;
  }
  protected changed(buf: Buffer, pos: number): void {
    this.text = readHost(buf, pos);
  }
}

/** The last store host seen: its `ip:port` text and its offset-message-id writer (16 hex digits written once). */
class StoreHostCache extends HostTextCache {
  private writer: OffsetMsgIdWriter | null = null;
  protected override changed(buf: Buffer, pos: number): void {
    super.changed(buf, pos);
    this.writer = new OffsetMsgIdWriter(buf, pos);
  }
  /** Call after {@link read} of the same record. */
  idFor(commitLogOffset: number): string {
    return this.writer!.idFor(commitLogOffset);
  }
}

/** The last topic decoded: the records of one pull share it, so its text is made once. */
class TopicTextCache {
  private readonly bytes = Buffer.alloc(MAX_TOPIC_BYTES);
  private len = -1;
  private text = "";
  read(buf: Buffer, pos: number, len: number): string {
    if (len !== this.len || !bytesEqual(buf, pos, this.bytes, 0, len)) {
      this.text = buf.toString("utf8", pos, pos + len);
      buf.copy(this.bytes, 0, pos, pos + len);
      this.len = len;
    }
    return this.text;
  }
}

const topicText = new TopicTextCache();
const bornHostText = new HostTextCache();
const storeHosts = new StoreHostCache();

/** Largest body a COMPRESSED record is inflated to (16 times the default 4 MiB message limit); a larger one is delivered as stored. */
export const MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024;
/** Most bytes the compressed records of one pull body may inflate to together; past it they are delivered as stored. */
export const MAX_INFLATED_PULL_BYTES = 256 * 1024 * 1024;

/** What the compressed records of one pull body may still inflate to, in bytes. */
export interface InflateBudget {
  left: number;
}

/**
 * The inflated body of a COMPRESSED record: zlib (compression type 0 from RocketMQ 4.x, or ZLIB);
 * null when it stays as stored — LZ4 and ZSTD, which Node cannot inflate, a body that fails to
 * inflate, or one that would inflate past {@link MAX_INFLATED_BODY_BYTES} or the pull's budget
 * (a few KiB of deflate can claim gigabytes). Handing over the stored bytes, flagged, is better than
 * losing the message or stopping the consumer's queue on it.
 */
function inflatedBody(stored: Buffer, sysFlag: number, budget: InflateBudget): Buffer | null {
  const type = sysFlag & MessageSysFlag.COMPRESSION_TYPE_MASK;
  if (type !== 0 && type !== MessageSysFlag.COMPRESSION_ZLIB_TYPE) return null;
  try {
    const body = inflateSync(stored, { maxOutputLength: Math.max(1, Math.min(MAX_INFLATED_BODY_BYTES, budget.left)) });
    budget.left -= body.length;
    return body;
  } catch {
    return null;
  }
}

/**
 * Decodes one record already checked with {@link checkRecord}; a COMPRESSED body is inflated within
 * `inflate` (null: left as stored, as {@link decodeRecords} with `decompressBody` false).
 */
export function decodeCheckedRecord(
  buf: Buffer,
  pos: number,
  total: number,
  brokerName: string,
  inflate: InflateBudget | null = { left: MAX_INFLATED_PULL_BYTES },
): MessageExt {
  const bodyLen = int32BE(buf, pos + RecordOffset.BODY_LENGTH);
  const bodyStart = pos + RecordOffset.BODY;
  const topicLenPos = bodyStart + bodyLen;
  const topicLen = buf[topicLenPos]!;
  const topic = topicText.read(buf, topicLenPos + 1, topicLen);
  const propsStart = topicLenPos + 1 + topicLen + 2;
  const propsEnd = pos + total - CRC_RESERVED_BYTES;
  const properties = propsEnd > propsStart ? decodeProperties(buf.toString("utf8", propsStart, propsEnd)) : {};
  const commitLogOffset = int64BE(buf, pos + RecordOffset.PHYSICAL_OFFSET);
  const storeHost = storeHosts.read(buf, pos + RecordOffset.STORE_HOST);
  const offsetId = storeHosts.idFor(commitLogOffset);
  let sysFlag = int32BE(buf, pos + RecordOffset.SYS_FLAG);
  let body = buf.subarray(bodyStart, bodyStart + bodyLen);
  if (inflate !== null && (sysFlag & MessageSysFlag.COMPRESSED) !== 0) {
    const inflated = inflatedBody(body, sysFlag, inflate);
    // the delivered flag describes the delivered body: COMPRESSED stays only on bytes still compressed
    if (inflated) {
      body = inflated;
      sysFlag &= ~(MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_TYPE_MASK);
    }
  }
  return {
    topic,
    brokerName,
    queueId: int32BE(buf, pos + RecordOffset.QUEUE_ID),
    queueOffset: int64BE(buf, pos + RecordOffset.QUEUE_OFFSET),
    commitLogOffset,
    msgId: properties[MessageConst.UNIQ_KEY] ?? offsetId,
    offsetMsgId: offsetId,
    tags: properties[MessageConst.TAGS],
    keys: properties[MessageConst.KEYS],
    properties,
    body,
    bornTimestamp: int64BE(buf, pos + RecordOffset.BORN_TIMESTAMP),
    bornHost: bornHostText.read(buf, pos + RecordOffset.BORN_HOST),
    storeTimestamp: int64BE(buf, pos + RecordOffset.STORE_TIMESTAMP),
    storeHost,
    reconsumeTimes: int32BE(buf, pos + RecordOffset.RECONSUME_TIMES),
    sysFlag,
    flag: int32BE(buf, pos + RecordOffset.FLAG),
    storeSize: total,
    preparedTransactionOffset: int64BE(buf, pos + RecordOffset.PREPARED_TRANSACTION_OFFSET),
  };
}

/** A big-endian signed 64-bit field as a JS number (exact below 2^53). */
export function readLong(buf: Buffer, pos: number): number {
  checkLongAt(buf, pos);
  return int64BE(buf, pos);
}

/** Writes a JS integer (|v| < 2^53) as a big-endian signed 64-bit field. */
export function writeLong(buf: Buffer, pos: number, v: number): void {
  checkLongAt(buf, pos);
  putInt64BE(buf, pos, v);
}

function checkLongAt(buf: Buffer, pos: number): void {
  if (!(pos >= 0 && pos + 8 <= buf.length)) throw new RangeError(`A 64-bit field at ${pos} does not fit in ${buf.length} bytes.`);
}
