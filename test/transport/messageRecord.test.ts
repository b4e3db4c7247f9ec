import assert from "node:assert/strict";
import { test } from "node:test";
import { deflateSync } from "node:zlib";
import {
  CRC_RESERVED_BYTES,
  checkRecord,
  createUniqId,
  decodeProperties,
  decodeRecords,
  encodeMessageBatch,
  encodeProperties,
  encodeRecord,
  forEachBatchMessage,
  javaHashCode,
  MAX_INFLATED_BODY_BYTES,
  MAX_INFLATED_PULL_BYTES,
  MIN_RECORD_BYTES,
  offsetMsgId,
  parseOffsetMsgId,
} from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";

const base = {
  topic: "TopicA",
  queueId: 3,
  queueOffset: 7,
  physicalOffset: 4096,
  bornTimestamp: 1_700_000_000_123,
  bornHost: "10.0.0.2:5555",
  storeTimestamp: 1_700_000_000_456,
  storeHost: "127.0.0.1:10911",
};

test("javaHashCode matches Java's String.hashCode", () => {
  assert.equal(javaHashCode(""), 0);
  assert.equal(javaHashCode("a"), 97);
  assert.equal(javaHashCode("TagA"), 2598919);
  assert.equal(javaHashCode("hello world"), 1794106052);
  assert.equal(javaHashCode("polygenelubricants"), -2147483648);
  assert.equal(javaHashCode("\u{1F600}"), 1772899); // two UTF-16 code units
});

test("properties round-trip with RocketMQ separators", () => {
  const p = { TAGS: "TagA", KEYS: "k1 k2", UNIQ_KEY: "ABC" };
  const s = encodeProperties(p);
  assert.equal(s, "TAGS\u0001TagA\u0002KEYS\u0001k1 k2\u0002UNIQ_KEY\u0001ABC\u0002");
  assert.deepEqual(decodeProperties(s), p);
  assert.deepEqual(decodeProperties("A\u0001b"), { A: "b" });
});

test("a record encodes to RocketMQ's layout and decodes back", () => {
  const body = Buffer.from("hello");
  const rec = encodeRecord({
    ...base,
    body,
    properties: encodeProperties({ TAGS: "t1", KEYS: "k", UNIQ_KEY: "U1" }),
    reconsumeTimes: 2,
    flag: 9,
  });
  assert.equal(rec.readInt32BE(0), rec.length);
  assert.equal(rec.readUInt32BE(4), 0xdaa320a7);
  assert.equal(84 + 4, 88);
  assert.equal(rec.readInt32BE(84), 5);
  assert.equal(rec.subarray(rec.length - CRC_RESERVED_BYTES, rec.length - CRC_RESERVED_BYTES + 9).toString("latin1"), "__CRC32#\u0001");
  const [m] = decodeRecords(Buffer.concat([rec]), "broker-a");
  assert.ok(m);
  assert.equal(m.topic, "TopicA");
  assert.equal(m.brokerName, "broker-a");
  assert.equal(m.queueId, 3);
  assert.equal(m.queueOffset, 7);
  assert.equal(m.commitLogOffset, 4096);
  assert.equal(m.body.toString(), "hello");
  assert.equal(m.tags, "t1");
  assert.equal(m.keys, "k");
  assert.equal(m.msgId, "U1");
  assert.equal(m.reconsumeTimes, 2);
  assert.equal(m.flag, 9);
  assert.equal(m.bornHost, "10.0.0.2:5555");
  assert.equal(m.storeTimestamp, base.storeTimestamp);
  assert.deepEqual(Object.keys(m.properties).sort(), ["KEYS", "TAGS", "UNIQ_KEY"]);
  assert.equal(m.offsetMsgId, offsetMsgId("127.0.0.1:10911", undefined, 4096));
  assert.deepEqual(parseOffsetMsgId(m.offsetMsgId), { storeHost: "127.0.0.1:10911", commitLogOffset: 4096 });
});

test("every single-bit flip in a record is detected", () => {
  const rec = encodeRecord({ ...base, body: Buffer.from("0123456789"), properties: encodeProperties({ TAGS: "x" }) });
  assert.equal(checkRecord(rec, 0, rec.length), rec.length);
  for (let bit = 0; bit < rec.length * 8; bit++) {
    const b = Buffer.from(rec);
    b[bit >> 3]! ^= 1 << (bit & 7);
    assert.equal(checkRecord(b, 0, b.length), -1, `bit ${bit} not detected`);
    assert.throws(
      () => decodeRecords(b, "b"),
      (e: unknown) => e instanceof MQError && e.code === "MALFORMED",
    );
  }
});

test("several records decode in one pass; a truncated one is refused", () => {
  const recs = [0, 1, 2].map((i) => encodeRecord({ ...base, queueOffset: i, body: Buffer.from(`m${i}`) }));
  const all = Buffer.concat(recs);
  assert.deepEqual(
    decodeRecords(all, "b").map((m) => m.body.toString()),
    ["m0", "m1", "m2"],
  );
  assert.throws(() => decodeRecords(all.subarray(0, all.length - 1), "b"), /fails its size or CRC check/);
  assert.ok(MIN_RECORD_BYTES <= recs[0]!.length);
});

test("records of different topics and hosts in one body each decode to their own topic, hosts and offset id", () => {
  const variants = [
    { topic: "TopicA", bornHost: "10.0.0.2:5555", storeHost: "127.0.0.1:10911" },
    { topic: "TopicA", bornHost: "10.0.0.3:5555", storeHost: "127.0.0.1:10911" },
    { topic: "TopicB", bornHost: "10.0.0.3:5555", storeHost: "127.0.0.1:10912" },
    { topic: "TopicAB", bornHost: "10.0.0.3:5556", storeHost: "127.0.0.2:10912" },
    { topic: "TopicA", bornHost: "10.0.0.2:5555", storeHost: "127.0.0.1:10911" },
  ];
  const recs = variants.map((v, i) => encodeRecord({ ...base, ...v, physicalOffset: 4096 + i * 300, body: Buffer.from(`m${i}`) }));
  // decoded twice: the second pass starts with the last record's topic and hosts remembered
  for (let pass = 0; pass < 2; pass++) {
    const msgs = decodeRecords(Buffer.concat(recs), "b");
    assert.deepEqual(
      msgs.map((m) => [m.topic, m.bornHost, m.storeHost, m.offsetMsgId]),
      variants.map((v, i) => [v.topic, v.bornHost, v.storeHost, offsetMsgId(v.storeHost, undefined, 4096 + i * 300)]),
    );
  }
});

test("a batch body walks back into its messages", () => {
  const batch = encodeMessageBatch([
    { body: Buffer.from("a"), flag: 1, properties: encodeProperties({ TAGS: "A" }) },
    { body: new Uint8Array(0) },
    { body: Buffer.from("ccc"), properties: "" },
  ]);
  const seen: Array<[string, number, string]> = [];
  const n = forEachBatchMessage(batch, (bs, be, flag, props) => seen.push([batch.toString("utf8", bs, be), flag, props]));
  assert.equal(n, 3);
  assert.deepEqual(seen, [
    ["a", 1, "TAGS\u0001A\u0002"],
    ["", 0, ""],
    ["ccc", 0, ""],
  ]);
  const bad = Buffer.from(batch);
  bad.writeUInt32BE(3, 0);
  assert.throws(
    () => forEachBatchMessage(bad, () => {}),
    (e: unknown) => e instanceof MQError && e.code === "MESSAGE_ILLEGAL",
  );
});

test("createUniqId is 32 hex chars and unique", () => {
  const ids = new Set(Array.from({ length: 1000 }, () => createUniqId()));
  assert.equal(ids.size, 1000);
  for (const id of ids) assert.match(id, /^[0-9A-F]{32}$/);
});

test("crc32Combine and writeRecordCrcWithBody give the CRC of the whole; OffsetMsgIdWriter gives offsetMsgId's text", async () => {
  const { crc32 } = await import("node:zlib");
  const { crc32Combine, writeRecordCrc, writeRecordCrcWithBody, OffsetMsgIdWriter, RecordOffset } = await import(
    "../../transport/messageRecord.ts"
  );
  const rnd = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7919 + n * 31) & 0xff));
  for (const [la, lb] of [
    [0, 0],
    [1, 0],
    [0, 5],
    [13, 1024],
    [88, 1],
    [300, 65_537],
    [7, 3],
  ] as const) {
    const a = rnd(la);
    const b = rnd(lb).reverse();
    assert.equal(crc32Combine(crc32(a), crc32(b), lb), crc32(Buffer.concat([a, b])), `lengths ${la}+${lb}`);
  }
  for (const size of [0, 1, 1000, 1024, 4097]) {
    const rec = encodeRecord({ ...base, body: rnd(size), properties: encodeProperties({ TAGS: "T" }) });
    const want = Buffer.from(rec);
    const got = Buffer.from(rec);
    got.fill(0, got.length - CRC_RESERVED_BYTES);
    writeRecordCrc(want, 0, want.length);
    writeRecordCrcWithBody(got, 0, got.length, size, crc32(rec.subarray(RecordOffset.BODY, RecordOffset.BODY + size)));
    assert.deepEqual(got, want, `body of ${size} bytes`);
    assert.equal(checkRecord(got, 0, got.length), got.length);
  }
  const host = Buffer.from([127, 0, 0, 1, 0, 0, 0x2a, 0x9f]);
  const w = new OffsetMsgIdWriter(host);
  for (const off of [0, 1, 0xffffffff, 0x100000000, 2 ** 40 + 12345, Number.MAX_SAFE_INTEGER]) {
    assert.equal(w.idFor(off), offsetMsgId("127.0.0.1:10911", undefined, off));
    assert.deepEqual(parseOffsetMsgId(w.idFor(off)), { storeHost: "127.0.0.1:10911", commitLogOffset: off });
  }
  // a batch's ids in one string, past the writer's first buffer (32 ids) too
  for (const n of [1, 3, 40]) {
    const offs = Array.from({ length: n }, (_, k) => 2 ** 33 + k * 1187);
    assert.equal(w.joinedIds(offs, n), offs.map((o) => offsetMsgId("127.0.0.1:10911", undefined, o)).join(","), `${n} ids`);
  }
  assert.equal(w.joinedIds([5, 6, 7], 2), [5, 6].map((o) => offsetMsgId("127.0.0.1:10911", undefined, o)).join(","));
});

test("a COMPRESSED (0x1) record decodes to its inflated body for zlib (type 0 of RocketMQ 4.x, 0x300 of 5.x), its delivered sysFlag no longer COMPRESSED; LZ4, ZSTD, undecodable and oversized bodies stay as stored, flagged", () => {
  const text = "compressed body ".repeat(64);
  const zipped = deflateSync(Buffer.from(text));
  const rec = (sysFlag: number, body: Buffer) => encodeRecord({ ...base, body, sysFlag });
  for (const sysFlag of [0x1, 0x301]) {
    const [m] = decodeRecords(rec(sysFlag, zipped), "b");
    assert.equal(m!.body.toString(), text, `sysFlag ${sysFlag}`);
    assert.equal(m!.sysFlag, 0, "the delivered flag describes the delivered body: no longer compressed");
    // the broker's own reads keep the stored bytes: it re-stores them with their flag
    assert.deepEqual(decodeRecords(rec(sysFlag, zipped), "b", false)[0]!.body, zipped);
  }
  // Node cannot inflate LZ4 or ZSTD: the stored bytes and the flag tell the application
  for (const sysFlag of [0x101, 0x201]) {
    const [m] = decodeRecords(rec(sysFlag, zipped), "b");
    assert.deepEqual(m!.body, zipped);
    assert.equal(m!.sysFlag, sysFlag);
  }
  // a body that is not zlib is delivered as stored, with the other records of the pull
  const all = decodeRecords(Buffer.concat([rec(0x1, Buffer.from("not zlib")), rec(0, Buffer.from("plain"))]), "b");
  assert.deepEqual(
    all.map((m) => [m.body.toString(), m.sysFlag]),
    [
      ["not zlib", 0x1],
      ["plain", 0],
    ],
  );
  // without the flag nothing is inflated, zlib-looking or not
  assert.deepEqual(decodeRecords(rec(0x300, zipped), "b")[0]!.body, zipped);
  // a small body that would inflate past the bound (a "zip bomb") is delivered as stored, flagged
  const bomb = deflateSync(Buffer.alloc(MAX_INFLATED_BODY_BYTES + 1));
  assert.ok(bomb.length < 256 * 1024);
  const [b] = decodeRecords(rec(0x1, bomb), "b");
  assert.deepEqual([b!.body, b!.sysFlag], [bomb, 0x1]);
  // so are the records of one pull past its budget: each fits alone, together they do not
  const big = deflateSync(Buffer.alloc(MAX_INFLATED_BODY_BYTES));
  const n = MAX_INFLATED_PULL_BYTES / MAX_INFLATED_BODY_BYTES + 1;
  const pulled = decodeRecords(Buffer.concat(Array.from({ length: n }, () => rec(0x1, big))), "b");
  assert.deepEqual(
    pulled.map((m) => m.sysFlag),
    [...new Array(n - 1).fill(0), 0x1],
  );
  assert.equal(pulled[n - 1]!.body.length, big.length);
  // and the budget is per pull
  assert.equal(decodeRecords(rec(0x1, big), "b")[0]!.body.length, MAX_INFLATED_BODY_BYTES);
});
