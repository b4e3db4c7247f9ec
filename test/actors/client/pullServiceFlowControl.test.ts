/**
 * Flow control with pipelined pulls: the pulls in flight are placed by what the queue's earlier
 * answers looked like, so when the messages change (small ones, then large ones) the answers of
 * pulls already in flight must not take the cache past pullThresholdSizeForQueue by more than one
 * pull, as RocketMQ's one pull at a time does; and a flow-controlled queue is re-checked by one
 * timer, not one per answer that came in meanwhile.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ProcessQueue } from "../../../actors/client/processQueue.ts";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import {
  defaultPullSettings,
  FLOW_CONTROL_LOG_INTERVAL_MS,
  type FlowControlKind,
  flowControlLogger,
  PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL,
  PullService,
  type PullServiceDeps,
  type PullSettings,
  pullLog,
} from "../../../actors/client/pullService.ts";
import { SubscriptionTable } from "../../../actors/client/subscriptions.ts";
import { encodeRecord, type MessageExt } from "../../../transport/messageRecord.ts";
import { MASTER_ID } from "../../../transport/protocol.ts";
import { monotonicFollowsDate } from "../../helpers.ts";

const MIB = 1024 * 1024;
/** The broker's transfer limit per pull (maxTransferBytesOnMessageInMemory): the first record may exceed it. */
const TRANSFER_BYTES = 256 * 1024;

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await turns(1);
  assert.ok(cond(), what);
}

function record(queueOffset: number, bodyBytes: number): Buffer {
  return encodeRecord({
    topic: "T",
    queueId: 0,
    queueOffset,
    physicalOffset: queueOffset * 1000,
    body: Buffer.alloc(bodyBytes),
    bornTimestamp: 1,
    bornHost: "127.0.0.1:1",
    storeTimestamp: 1,
    storeHost: "127.0.0.1:2",
  });
}

/** A pull service over one queue of `max` messages of `bodyBytes(offset)` bytes, served as a broker does. */
function queueOf(
  max: number,
  bodyBytes: (offset: number) => number,
  settings: Partial<PullSettings>,
  onFlowControl?: PullServiceDeps["onFlowControl"],
) {
  const subscriptions = new SubscriptionTable();
  subscriptions.subscribe("T", "*");
  const deps = {
    host: {
      brokerAddress: () => "tcp://127.0.0.1:1",
      node: {
        ref: () => ({
          ask: (req: { queueOffset: number; maxMsgNums: number }) =>
            new Promise((resolve) =>
              setImmediate(() => {
                const records: Buffer[] = [];
                let bytes = 0;
                let o = req.queueOffset;
                for (; o < Math.min(max, req.queueOffset + req.maxMsgNums); o++) {
                  const r = record(o, bodyBytes(o));
                  if (records.length > 0 && bytes + r.length > TRANSFER_BYTES) break;
                  records.push(r);
                  bytes += r.length;
                }
                const fields = { nextBeginOffset: o, minOffset: 0, maxOffset: max, suggestWhichBrokerId: MASTER_ID };
                resolve(
                  records.length > 0
                    ? { fields: { status: "SUCCESS", ...fields }, body: Buffer.concat(records) }
                    : { fields: { status: "PULL_NOT_FOUND", ...fields } },
                );
              }),
            ),
        }),
      },
    },
    group: "g",
    model: "CLUSTERING",
    subscriptions,
    offsetStore: { readOffsetFromMemory: () => -1, updateOffset: () => {} },
    settings: { ...defaultPullSettings(), ...settings },
    // the listener never finishes: nothing leaves the cache
    onFound: () => {},
    onOffsetIllegal: () => {},
    onFlowControl,
  } as unknown as PullServiceDeps;
  const service = new PullService(deps);
  const pq = new ProcessQueue<MessageExt>();
  const request: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 0 },
    pq,
    nextOffset: 0,
    brokerId: MASTER_ID,
  };
  return { service, pq, request };
}

test("pulls in flight placed by small messages do not take the cache of large ones past pullThresholdSizeForQueue", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
  // 32 small messages, then 200 KB ones: the broker answers those one per pull
  const { service, pq, request } = queueOf(10_000, (o) => (o < 32 ? 10 : 200_000), { pullThresholdSizeForQueue: 1 });
  try {
    service.executeNow(request);
    await until(() => service.stats.flowControlSize > 0 && service.pullsInFlight === 0, "flow-controlled, no pull in flight");
    // RocketMQ stops pulling once the cache is above 1 MiB in whole MiB (2 MiB), then one pull more at most
    assert.ok(
      pq.msgSize <= 2 * MIB + TRANSFER_BYTES,
      `cached ${pq.msgCount} messages, ${(pq.msgSize / MIB).toFixed(2)} MiB under pullThresholdSizeForQueue 1`,
    );
    // one re-check per back-off, not one per answer that arrived while the queue was over its limit
    const before = service.stats.flowControlSize;
    for (let i = 0; i < 10; i++) {
      t.mock.timers.tick(PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL);
      await turns(2);
    }
    assert.equal(service.stats.flowControlSize - before, 10, "flow-control checks in 10 back-offs");
  } finally {
    service.stop();
  }
});

test("flow control is reported, and logged at most once per interval per threshold with the count held back", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "setInterval", "Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const kinds: FlowControlKind[] = [];
  const { service, request } = queueOf(
    10_000,
    () => 10,
    { pullThresholdForQueue: 40 },
    (_r, kind) => kinds.push(kind),
  );
  try {
    service.executeNow(request);
    await until(() => kinds.length > 0, "flow control reported");
    assert.deepEqual([...new Set(kinds)], ["count"]);
  } finally {
    service.stop();
  }

  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(pullLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  const log = flowControlLogger("g", { pullThresholdForQueue: 1000, pullThresholdSizeForQueue: 100, consumeConcurrentlyMaxSpan: 2000 });
  const pq = new ProcessQueue<MessageExt>();
  pq.putMessages([
    { queueOffset: 7, body: Buffer.alloc(1) },
    { queueOffset: 2100, body: Buffer.alloc(1) },
  ] as MessageExt[]);
  const stuck: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 3 },
    pq,
    nextOffset: 2101,
    brokerId: MASTER_ID,
  };
  log(stuck, "span");
  assert.equal(lines.length, 1);
  assert.match(lines[0]!.msg, /T@b@3/);
  assert.match(lines[0]!.msg, /consumeConcurrentlyMaxSpan 2000/);
  assert.match(lines[0]!.msg, /offset 7 is still in the listener/);
  assert.equal(lines[0]!.fields.kind, "span");
  // every 50 ms while it lasts: quiet within the interval, another threshold has its own line
  for (let i = 0; i < 10; i++) log(stuck, "span");
  log(stuck, "count");
  assert.equal(lines.length, 2);
  assert.match(lines[1]!.msg, /pullThresholdForQueue 1000/);
  t.mock.timers.tick(FLOW_CONTROL_LOG_INTERVAL_MS);
  log(stuck, "span");
  assert.equal(lines.length, 3);
  assert.equal(lines[2]!.fields.suppressed, 10);
});
