import assert from "node:assert/strict";
import { test } from "node:test";
import { crc32 } from "node:zlib";
import fc from "fast-check";
import { bytesEqual, int32BE, int64BE, putInt32BE, putInt64BE, putUint16BE, uint16BE, uint32BE } from "../../transport/bigEndian.ts";
import { crc32Range, readLong, writeLong } from "../../transport/messageRecord.ts";

const INT64_SAFE = fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });

test("the byte-arithmetic fields read and write what Buffer's own methods do", () => {
  fc.assert(
    fc.property(fc.integer({ min: -0x80000000, max: 0xffffffff }), fc.integer({ min: 0, max: 16 }), (v, p) => {
      const ours = Buffer.alloc(24, 0xa5);
      const node = Buffer.alloc(24, 0xa5);
      putInt32BE(ours, p, v);
      if (v < 0) node.writeInt32BE(v, p);
      else node.writeUInt32BE(v, p);
      assert.deepEqual(ours, node);
      assert.equal(int32BE(ours, p), node.readInt32BE(p));
      assert.equal(uint32BE(ours, p), node.readUInt32BE(p));
      putUint16BE(ours, p, v & 0xffff);
      node.writeUInt16BE(v & 0xffff, p);
      assert.deepEqual(ours, node);
      assert.equal(uint16BE(ours, p), node.readUInt16BE(p));
    }),
  );
  fc.assert(
    fc.property(INT64_SAFE, fc.integer({ min: 0, max: 16 }), (v, p) => {
      const ours = Buffer.alloc(24, 0x5a);
      const node = Buffer.alloc(24, 0x5a);
      putInt64BE(ours, p, v);
      node.writeBigInt64BE(BigInt(v), p);
      assert.deepEqual(ours, node);
      assert.equal(int64BE(ours, p), v);
      assert.equal(readLong(node, p), v);
      writeLong(node, p, -v);
      assert.equal(node.readBigInt64BE(p), BigInt(-v));
    }),
  );
});

test("readLong and writeLong still refuse a field that does not fit", () => {
  const b = Buffer.alloc(12);
  assert.throws(() => readLong(b, 5), RangeError);
  assert.throws(() => readLong(b, -1), RangeError);
  assert.throws(() => writeLong(b, 8, 1), RangeError);
  assert.deepEqual(b, Buffer.alloc(12));
});

test("crc32Range is zlib.crc32 of the range, from any seed, short or long", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 600 }), fc.nat(), fc.nat(), fc.integer({ min: 0, max: 0xffffffff }), (bytes, a, b, seed) => {
      // one spare byte: zlib.crc32 of a view with no backing store at all is 0 whatever the seed
      const buf = Buffer.alloc(bytes.length + 1);
      buf.set(bytes);
      const start = bytes.length ? a % (bytes.length + 1) : 0;
      const end = start + (bytes.length - start ? b % (bytes.length - start + 1) : 0);
      assert.equal(crc32Range(buf, start, end, seed), crc32(buf.subarray(start, end), seed));
    }),
    { numRuns: 500 },
  );
});

test("bytesEqual agrees with Buffer.compare on any two ranges, equal ones included", () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 1, maxLength: 24 }), fc.nat(), fc.nat(), fc.nat(), fc.boolean(), (x, r1, r2, r3, flip) => {
      const a = Buffer.from(x);
      const ai = r1 % a.length;
      const len = r2 % (a.length - ai + 1);
      const b = Buffer.concat([Buffer.alloc(r3 % 5, 7), a.subarray(ai, ai + len)]);
      const bi = r3 % 5;
      if (flip && len > 0) b[bi + (r2 % len)]! ^= 1;
      assert.equal(bytesEqual(a, ai, b, bi, len), a.compare(b, bi, bi + len, ai, ai + len) === 0);
      assert.equal(bytesEqual(a, ai, b, bi, len), !(flip && len > 0));
    }),
  );
});
