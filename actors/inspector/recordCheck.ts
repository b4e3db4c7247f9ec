/**
 * Checks an incoming inspection record before the inspector keeps it: the shape must be one of
 * the runtime's record kinds, its size bounded, and message bodies are reduced to their size
 * (the runtime already summarises payloads; this holds even for a peer that does not).
 */
import type { InspectionRecord } from "../runtime/index.ts";

/** Largest record (estimated encoded bytes) the inspector keeps. @default 1 MiB */
export const DEFAULT_MAX_RECORD_BYTES = 1024 * 1024;

const KINDS = new Set(["actor", "event", "snapshot", "failure"]);
/** xstate's snapshot statuses: the page shows them as words (and classes) */
const STATUSES = new Set(["active", "done", "error", "stopped"]);
/** Field names whose values are message contents, never shown. */
const BODY_KEYS = new Set(["body", "bodies", "payloadBytes"]);

/** Why a record was refused, or the cleaned record. */
export type CheckResult = { ok: true; record: InspectionRecord; bytes: number } | { ok: false; reason: "malformed" | "oversized" };

/**
 * Estimated size of `v` in bytes, walking at most until `limit` is passed (then returns a value
 * above `limit`): cheap for the small records that are the norm, bounded for the huge ones.
 */
export function estimateSize(v: unknown, limit: number): number {
  let size = 0;
  const stack: unknown[] = [v];
  while (stack.length > 0) {
    const x = stack.pop();
    if (x === null || x === undefined || typeof x === "boolean") size += 1;
    else if (typeof x === "number") size += 9;
    else if (typeof x === "string") size += x.length + 5;
    else if (x instanceof Uint8Array) size += x.byteLength + 5;
    else if (Array.isArray(x)) {
      size += 5;
      for (let i = 0; i < x.length; i++) stack.push(x[i]);
    } else if (typeof x === "object") {
      size += 5;
      for (const k in x as Record<string, unknown>) {
        size += k.length + 1;
        stack.push((x as Record<string, unknown>)[k]);
      }
    } else size += 8;
    if (size > limit) return size;
  }
  return size;
}

/** A copy of `v` with every body-like field replaced by its size; depth bounded. */
export function redactBodies(v: unknown, depth = 0): unknown {
  if (v === null || typeof v !== "object" || depth > 8) return v;
  if (v instanceof Uint8Array) return { bytes: v.byteLength };
  if (Array.isArray(v)) return v.map((x) => redactBodies(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (BODY_KEYS.has(k) && x !== null && x !== undefined && !isSizeSummary(x)) out[k] = sizeSummary(x);
    else out[k] = redactBodies(x, depth + 1);
  }
  return out;
}

function isSizeSummary(x: unknown): boolean {
  return (
    typeof x === "object" && x !== null && !Array.isArray(x) && Object.keys(x).every((k) => k === "bytes" || k === "chars" || k === "items")
  );
}

function sizeSummary(x: unknown): unknown {
  if (typeof x === "string") return { chars: x.length };
  if (x instanceof Uint8Array) return { bytes: x.byteLength };
  if (Array.isArray(x)) return { items: x.length };
  return { bytes: "?" };
}

/** Largest distance from the epoch, in ms, a JavaScript Date can hold: the page formats record times as dates. */
const MAX_DATE_MS = 8.64e15;

function isRecordTime(t: unknown): boolean {
  return typeof t === "number" && Number.isFinite(t) && Math.abs(t) <= MAX_DATE_MS;
}

/** Validates and cleans one record; never throws. */
export function checkRecord(r: unknown, maxBytes = DEFAULT_MAX_RECORD_BYTES): CheckResult {
  if (r === null || typeof r !== "object" || Array.isArray(r)) return { ok: false, reason: "malformed" };
  const o = r as Record<string, unknown>;
  if (typeof o.kind !== "string" || !KINDS.has(o.kind)) return { ok: false, reason: "malformed" };
  if (typeof o.nodeId !== "string" || o.nodeId.length === 0 || o.nodeId.length > 256) return { ok: false, reason: "malformed" };
  if (typeof o.actorName !== "string" || o.actorName.length > 1024 || typeof o.sessionId !== "string" || !isRecordTime(o.time))
    return { ok: false, reason: "malformed" };
  if (o.kind === "event" && typeof o.type !== "string") return { ok: false, reason: "malformed" };
  if (o.kind === "snapshot" && !STATUSES.has(o.status as string)) return { ok: false, reason: "malformed" };
  // the estimate of the record as received: redaction only makes it smaller
  const bytes = estimateSize(r, maxBytes);
  if (bytes > maxBytes) return { ok: false, reason: "oversized" };
  if (o.kind === "event")
    return { ok: true, bytes, record: { ...(o as unknown as InspectionRecord), payload: redactBodies(o.payload) } as InspectionRecord };
  if (o.kind === "snapshot")
    return { ok: true, bytes, record: { ...(o as unknown as InspectionRecord), context: redactBodies(o.context) } as InspectionRecord };
  return { ok: true, bytes, record: o as unknown as InspectionRecord };
}
