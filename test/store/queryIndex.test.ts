import assert from "node:assert/strict";
import { test } from "node:test";
import { MessageStore, type MessageStoreOptions } from "../../store/index.ts";
import { decodeRecords, encodeMessageBatch, encodeProperties, javaHashCode } from "../../transport/messageRecord.ts";
import { tempDir } from "../helpers.ts";

const opts = (dir: string, o: Partial<MessageStoreOptions> = {}): MessageStoreOptions => ({
  dir,
  commitLogSegmentBytes: 1 << 20,
  consumeQueueEntries: 1000,
  cleanIntervalMs: 0,
  checkpointIntervalMs: 0,
  flush: "async",
  ...o,
});

async function put(s: MessageStore, topic: string, body: string, props: Record<string, string>): Promise<number> {
  const b = encodeMessageBatch([{ body: Buffer.from(body), properties: encodeProperties(props) }]);
  return (await s.putMessages({ topic, queueId: 0, bornTimestamp: 1, bornHost: "1.1.1.1:1", body: b })).commitLogOffset;
}
const bodiesOf = (recs: Buffer[]) => recs.flatMap((r) => decodeRecords(r, "b").map((m) => m.body.toString()));

test("a key whose hash a busier key shares is still found, and neither key returns the other's messages", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const s = await MessageStore.open(opts(dir));
  t.after(() => s.close());
  assert.equal(javaHashCode("T#Aa"), javaHashCode("T#BB"));
  await put(s, "T", "bb-old", { KEYS: "BB", UNIQ_KEY: "BB" });
  // (a UNIQ_KEY repeats when a producer sends a message again)
  for (let i = 0; i < 300; i++) await put(s, "T", `aa-${i}`, { KEYS: "Aa", UNIQ_KEY: "Aa" });
  // the index cannot tell the two keys apart: 300 newer entries of Aa lie before BB's on its chain
  assert.deepEqual(bodiesOf(s.queryMessageByKey("T", "BB", 32)), ["bb-old"]);
  assert.deepEqual(bodiesOf(s.queryMessageByKey("T", "Aa", 3)), ["aa-299", "aa-298", "aa-297"]);
  assert.equal(s.queryMessageByKey("T", "Aa", 64).length, 64);
  // UNIQ_KEYs too
  const byId = s.queryMessageByUniqKey("T", "BB");
  assert.ok(byId);
  assert.deepEqual(bodiesOf([byId]), ["bb-old"]);
});
