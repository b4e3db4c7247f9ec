/**
 * Big-endian integer fields (and a byte-range comparison) by byte arithmetic, for the hot paths (record append, dispatch, pull
 * entry reads, client decode). Buffer's readInt32BE / writeInt32BE & co. validate their arguments
 * on every call: 10-40 ns a field, and a record has sixteen fields (five of them 64-bit, two calls
 * each). These check nothing: the caller has framed the bytes first (checkRecord, walkMessageBatch,
 * whole consume-queue entries, buffers it sized itself). A read past the end yields 0 instead of
 * throwing, so never use them on bytes whose length is not known to cover the field.
 */

/** Whether `a[ai, ai+len)` equals `b[bi, bi+len)`: compared in place, cheaper than Buffer.compare's own cost for names and topics. */
export function bytesEqual(a: Uint8Array, ai: number, b: Uint8Array, bi: number, len: number): boolean {
  for (let i = 0; i < len; i++) if (a[ai + i] !== b[bi + i]) return false;
  return true;
}

export function int32BE(b: Uint8Array, p: number): number {
  return (b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!;
}

export function uint32BE(b: Uint8Array, p: number): number {
  return int32BE(b, p) >>> 0;
}

export function uint16BE(b: Uint8Array, p: number): number {
  return (b[p]! << 8) | b[p + 1]!;
}

/** A signed 64-bit field as a JS number (exact below 2^53). */
export function int64BE(b: Uint8Array, p: number): number {
  return int32BE(b, p) * 0x100000000 + uint32BE(b, p + 4);
}

/** Writes the low 32 bits of an integer (signed or unsigned: the bytes are the same). */
export function putInt32BE(b: Uint8Array, p: number, v: number): void {
  b[p] = v >>> 24;
  b[p + 1] = v >>> 16;
  b[p + 2] = v >>> 8;
  b[p + 3] = v;
}

export function putUint16BE(b: Uint8Array, p: number, v: number): void {
  b[p] = v >>> 8;
  b[p + 1] = v;
}

/** Writes a JS integer (|v| < 2^53) as a signed 64-bit field. */
export function putInt64BE(b: Uint8Array, p: number, v: number): void {
  const hi = Math.floor(v / 0x100000000);
  putInt32BE(b, p, hi);
  putInt32BE(b, p + 4, v - hi * 0x100000000);
}
