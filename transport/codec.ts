/**
 * The frame codec: a ZeroMQ message carries one or more frames `[header, body...]`, where the
 * header is a msgpack array and the body frames are raw bytes. Arrays instead of maps keep the
 * header small and its decoding free of key lookups.
 *
 * Request header: `[KIND_REQUEST, code, corrId, target, senderNodeId, event, deadline, bodyFrames]`
 * Reply header:   `[KIND_REPLY, corrId, responseCode, fieldsOrError, bodyFrames]`
 *
 * `corrId` is 0 for one-way sends. `deadline` is the sender's wall-clock ms after which the
 * request is stale and must be dropped rather than delivered (0 = none). A failed reply carries
 * `{code, message}` with `code` an {@link ErrorCodes} name.
 */
import { Packr } from "msgpackr";
import { RequestCode, ResponseCode, type ErrorCode } from "./protocol.ts";

export const KIND_REQUEST = 0;
export const KIND_REPLY = 1;

/** Largest number of body frames a header may announce; more is treated as malformed. */
export const MAX_BODY_FRAMES = 1024;

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

/** Number of frames a body occupies. */
export function bodyFrameCount(body: BodyParts): number {
  if (body === undefined) return 0;
  return Array.isArray(body) ? body.length : 1;
}

/** Appends the body frames to `out`. */
export function pushBody(out: Uint8Array[], body: BodyParts): void {
  if (body === undefined) return;
  if (Array.isArray(body)) for (let i = 0; i < body.length; i++) out.push(body[i]!);
  else out.push(body);
}

/** Joins received body frames into the one Buffer receivers get. */
export function joinBody(frames: Buffer[], start: number, count: number): Buffer | undefined {
  if (count === 0) return undefined;
  if (count === 1) return frames[start];
  return Buffer.concat(frames.slice(start, start + count));
}
