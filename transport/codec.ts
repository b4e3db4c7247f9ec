/**
 * The frame codec. A ZeroMQ message (after the ROUTER's routing id) is one frame holding a batch
 * of logical frames, each `[u32le headerLength][header][body]`: the header is a msgpack array,
 * the body raw bytes whose length the header states (-1 = no body). Frames queued in the same
 * tick travel in one batch, so a burst costs one socket operation and one receive; arrays
 * instead of maps keep the header small and its decoding free of key lookups.
 *
 * Request header: `[KIND_REQUEST, code, corrId, target, senderNodeId, event, deadline, bodyLength, timeoutMs]`
 * Reply header:   `[KIND_REPLY, corrId, responseCode, fieldsOrError, bodyLength]`
 *
 * `corrId` is 0 for one-way sends. `deadline` is the time (ms, on the sender's monotonic clock,
 * transport/clock.ts) after which the sender no longer waits for the request: the sender drops the
 * frame unsent past it (a peer that was unreachable). `timeoutMs` is the ask's timeout, so
 * `deadline − timeoutMs` is when it was sent: a listening receiver drops unserved an ask that waited
 * at least `timeoutMs`, the wait being its lag over the least lag seen on that connection
 * (zmqNode.ts, RouterLink.waitedMs); it never compares the sender's clock with its own. Older
 * senders send no `timeoutMs` (8 fields): their requests are served however late. A failed reply
 * carries `{code, message}` with `code` an {@link ErrorCodes} name.
 */
import { Packr } from "msgpackr";
import { type ErrorCode, MQError, RequestCode, ResponseCode, shownValue } from "./protocol.ts";

export const KIND_REQUEST = 0;
export const KIND_REPLY = 1;

/** Bytes of the header-length prefix of each logical frame. */
export const FRAME_PREFIX_BYTES = 4;
/** Largest header accepted (a longer one is malformed). */
export const MAX_HEADER_BYTES = 16 * 1024 * 1024;

const packr = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true });

/** Encodes any msgpack-able value (used for headers and inspection records). */
export function encode(value: unknown): Buffer {
  return packr.pack(value);
}

/** Decodes msgpack; throws on malformed input. */
export function decode(buf: Uint8Array): unknown {
  return packr.unpack(buf);
}

const codeByName = new Map<string, number>(Object.entries(RequestCode));
const knownCodes = new Set<number>(Object.values(RequestCode));

/** The request code for an event type: RocketMQ's number, or ACTOR_EVENT for other types. */
export function requestCodeOf(type: string): number {
  return codeByName.get(type) ?? RequestCode.ACTOR_EVENT;
}

/** True when `code` is a request code this protocol knows. */
export function isKnownRequestCode(code: number): boolean {
  return knownCodes.has(code);
}

const responseCodeByName = new Map<string, number>(Object.entries(ResponseCode));

/** The RocketMQ response number for an error code (SYSTEM_ERROR for actormq-only codes). */
export function responseCodeOf(code: ErrorCode): number {
  return responseCodeByName.get(code) ?? ResponseCode.SYSTEM_ERROR;
}

/** Body parts as the sender gives them. */
export type BodyParts = Uint8Array | Uint8Array[] | undefined;

/**
 * Body length for the header: -1 when there is no body. Throws MQError ILLEGAL_ARGUMENT for a body
 * that is not bytes (a string has no byteLength: the queued batch would be cut to NaN bytes).
 */
export function bodyLength(body: BodyParts): number {
  if (body === undefined) return -1;
  if (body instanceof Uint8Array) return body.byteLength;
  if (!Array.isArray(body)) throw notBytes(body);
  let n = 0;
  for (let i = 0; i < body.length; i++) {
    const part = body[i];
    if (!(part instanceof Uint8Array)) throw notBytes(part);
    n += part.byteLength;
  }
  return n;
}

/** The ILLEGAL_ARGUMENT for a body (or a part of one) that is not bytes. */
export function notBytes(v: unknown): MQError {
  const shown = v === null || typeof v !== "object" ? shownValue(v).slice(0, 64) : (v.constructor?.name ?? "an object");
  return new MQError(
    "ILLEGAL_ARGUMENT",
    `A body must be bytes: a Buffer or Uint8Array, or an array of them, got ${shown}. Encode text with Buffer.from(text).`,
  );
}

/** Appends the body parts to `out`. */
export function pushBody(out: Uint8Array[], body: BodyParts): void {
  if (body === undefined) return;
  if (Array.isArray(body)) for (let i = 0; i < body.length; i++) out.push(body[i]!);
  else out.push(body);
}

/** The length prefix of a logical frame. */
export function framePrefix(headerLength: number): Buffer {
  const b = Buffer.allocUnsafe(FRAME_PREFIX_BYTES);
  b.writeUInt32LE(headerLength, 0);
  return b;
}
