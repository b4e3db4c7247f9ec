/**
 * ConsumeOrderlyService with fake offset store, locks and send-back: one batch at a time per
 * queue in offset order, commit on SUCCESS, suspend and redeliver on SUSPEND or throw, DLQ after
 * maxReconsumeTimes, consumption only under a valid lock, release commits the batch in hand, a
 * lock that lapsed is a regain (QueueLocks) and a batch under it is not committed; and
 * PushConsumer.start's checks of the orderly timing options.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  type ConsumeOrderlyDeps,
  ConsumeOrderlyService,
  DLQ_DELAY_LEVEL,
  orderlySuspendTime,
} from "../../../actors/client/consumeOrderlyService.ts";
import { consumeLog, LISTENER_FAILURE_LOG_INTERVAL_MS, UNKNOWN_STATUS_LOG_INTERVAL_MS } from "../../../actors/client/consumeService.ts";
import type { OffsetStore } from "../../../actors/client/offsetStore.ts";
import { ProcessQueue } from "../../../actors/client/processQueue.ts";
import { type LockedQueue, lockRenewIntervalMs, QueueLocks } from "../../../actors/client/queueLocks.ts";
import { MQError, PushConsumer, type PushConsumerOptions } from "../../../index.ts";
import { monotonicNow } from "../../../transport/clock.ts";
import type { MessageExt } from "../../../transport/messageRecord.ts";
import type { MessageQueue } from "../../../transport/protocol.ts";
import { fakeWallClock, waitFor } from "../../helpers.ts";

const mq: MessageQueue = { topic: "T", brokerName: "b", queueId: 0 };

function msg(offset: number): MessageExt {
  return {
    topic: "T",
    brokerName: "b",
    queueId: 0,
    queueOffset: offset,
    commitLogOffset: offset * 100,
    msgId: `id${offset}`,
    tags: "",
    keys: "",
    properties: {},
    body: Buffer.from(`m${offset}`),
    bornTimestamp: 0,
    storeTimestamp: 0,
    reconsumeTimes: 0,
  } as unknown as MessageExt;
}

function fakeOffsets(): OffsetStore & { updates: [number, boolean][] } {
  const updates: [number, boolean][] = [];
  return {
    updates,
    load: async () => {},
    updateOffset: (_mq, offset, inc) => void updates.push([offset, inc]),
    updateAndFreeze: () => {},
    readOffset: async () => -1,
    readOffsetFromMemory: () => -1,
    persistAll: async () => {},
    persist: async () => {},
    removeOffset: () => {},
  };
}

function setup(
  listener: ConsumeOrderlyDeps["listener"],
  over: Partial<ConsumeOrderlyDeps> = {},
  settings: Partial<ConsumeOrderlyDeps["settings"]> = {},
) {
  const offsets = fakeOffsets();
  const service = new ConsumeOrderlyService({
    group: "g",
    model: "CLUSTERING",
    listener,
    offsetStore: offsets,
    settings: {
      consumeThreads: 20,
      consumeMessageBatchMaxSize: 1,
      suspendCurrentQueueTimeMillis: 30,
      maxReconsumeTimes: 2_147_483_647,
      lockMaxLiveTimeMs: 30_000,
      ...settings,
    },
    ...over,
  });
  const pq = new ProcessQueue<MessageExt>();
  pq.locked = true;
  return { service, pq, offsets };
}

function feed(service: ConsumeOrderlyService, pq: ProcessQueue<MessageExt>, offsets: number[]): void {
  service.submit(mq, pq, pq.putMessages(offsets.map(msg)));
}

test("one batch at a time per queue, in offset order; SUCCESS commits last + 1", async () => {
  let inListener = 0;
  let maxConcurrent = 0;
  const seen: number[][] = [];
  const { service, pq, offsets } = setup(
    async (msgs) => {
      inListener++;
      maxConcurrent = Math.max(maxConcurrent, inListener);
      await new Promise((r) => setTimeout(r, 2));
      seen.push(msgs.map((m) => m.queueOffset));
      inListener--;
      return "SUCCESS";
    },
    {},
    { consumeMessageBatchMaxSize: 3 },
  );
  feed(service, pq, [0, 1, 2, 3, 4]);
  feed(service, pq, [5, 6]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.equal(maxConcurrent, 1);
  assert.deepEqual(seen.flat(), [0, 1, 2, 3, 4, 5, 6]);
  assert.ok(seen.every((b) => b.length <= 3));
  assert.deepEqual(offsets.updates.at(-1), [7, false]);
  assert.ok(
    offsets.updates.every(([, inc]) => inc === false),
    "orderly commits are not increase-only",
  );
  await service.stop();
});

test("queues are consumed in parallel up to consumeThreads listener calls, one at a time per queue, taking turns", async () => {
  for (const consumeThreads of [4, 2, 1]) {
    let inListener = 0;
    let maxConcurrent = 0;
    const inQueue = new Map<number, number>();
    let maxPerQueue = 0;
    const calls: [number, number][] = [];
    const { service, offsets } = setup(
      async (msgs, ctx) => {
        const q = ctx.messageQueue.queueId;
        inListener++;
        inQueue.set(q, (inQueue.get(q) ?? 0) + 1);
        maxConcurrent = Math.max(maxConcurrent, inListener);
        maxPerQueue = Math.max(maxPerQueue, inQueue.get(q)!);
        calls.push([q, msgs[0]!.queueOffset]);
        await new Promise((r) => setTimeout(r, 3));
        inQueue.set(q, inQueue.get(q)! - 1);
        inListener--;
        return "SUCCESS";
      },
      {},
      { consumeThreads },
    );
    const pqs: ProcessQueue<MessageExt>[] = [];
    for (let q = 0; q < 4; q++) {
      const pq = new ProcessQueue<MessageExt>();
      pq.locked = true;
      pqs.push(pq);
      const queue = { ...mq, queueId: q };
      const msgs = [0, 1, 2].map((o) => ({ ...msg(o), queueId: q }) as MessageExt);
      service.submit(queue, pq, pq.putMessages(msgs));
    }
    await waitFor(() => pqs.every((pq) => pq.msgCount === 0) && service.activeCount === 0, 5_000, "queues drained");
    assert.equal(maxConcurrent, consumeThreads, `consumeThreads ${consumeThreads}: listener calls at once across queues`);
    assert.equal(maxPerQueue, 1, `consumeThreads ${consumeThreads}: one call at a time per queue`);
    for (let q = 0; q < 4; q++)
      assert.deepEqual(
        calls.filter(([c]) => c === q).map(([, o]) => o),
        [0, 1, 2],
        `queue ${q} in offset order`,
      );
    // a queue whose batch is done waits behind the others for its next turn
    assert.deepEqual(
      new Set(calls.slice(0, 4).map(([q]) => q)),
      new Set([0, 1, 2, 3]),
      `consumeThreads ${consumeThreads}: every queue has a turn before any has a second`,
    );
    assert.equal(offsets.updates.length, 12);
    await service.stop();
  }
});

test("SUSPEND (or a throw) redelivers the same batch after the suspend time, nothing later meanwhile", async () => {
  const calls: { offsets: number[]; reconsume: number[]; at: number }[] = [];
  let n = 0;
  const { service, pq, offsets } = setup(
    async (msgs) => {
      calls.push({ offsets: msgs.map((m) => m.queueOffset), reconsume: msgs.map((m) => m.reconsumeTimes), at: Date.now() });
      n++;
      if (n === 1) return "SUSPEND_CURRENT_QUEUE_A_MOMENT";
      if (n === 2) throw new Error("listener failed");
      return "SUCCESS";
    },
    {},
    { suspendCurrentQueueTimeMillis: 40 },
  );
  feed(service, pq, [10, 11]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(
    calls.map((c) => c.offsets),
    [[10], [10], [10], [11]],
  );
  assert.deepEqual(
    calls.map((c) => c.reconsume[0]),
    [0, 1, 2, 0],
  );
  assert.ok(calls[1]!.at - calls[0]!.at >= 35, "paused after SUSPEND");
  assert.ok(calls[2]!.at - calls[1]!.at >= 35, "paused after a throw");
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [11, 12],
    "nothing committed while suspended",
  );
  await service.stop();
});

test("a listener that throws is logged at warn with the error, group and queue, at most once per interval with a count", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(consumeLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  let calls = 0;
  const { service, pq, offsets } = setup(
    async () => {
      if (++calls <= 3) throw new Error("listener bug: cannot parse order");
      return "SUCCESS";
    },
    {},
    { suspendCurrentQueueTimeMillis: 10 },
  );
  feed(service, pq, [10]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.equal(calls, 4);
  assert.deepEqual(offsets.updates.at(-1)?.[0], 11);
  assert.equal(lines.length, 1, `one line per ${LISTENER_FAILURE_LOG_INTERVAL_MS} ms`);
  const { fields, msg } = lines[0]!;
  assert.equal((fields.err as Error).message, "listener bug: cannot parse order");
  assert.deepEqual([fields.group, fields.topic, fields.brokerName, fields.queueId, fields.suppressed], ["g", "T", "b", 0, 0]);
  assert.match(msg, /threw/);
  assert.match(msg, /SUSPEND_CURRENT_QUEUE_A_MOMENT/);
  await service.stop();
});

test("an unknown listener status counts as SUSPEND_CURRENT_QUEUE_A_MOMENT and is logged at warn, at most once per interval", async (t) => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(consumeLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  // a typo, a listener that forgot to return, an object without a prototype, then success
  const returned: unknown[] = ["SUCESS", undefined, Object.create(null), "SUCCESS"];
  let calls = 0;
  const { service, pq, offsets } = setup(async () => returned[calls++] as string, {}, { suspendCurrentQueueTimeMillis: 10 });
  feed(service, pq, [5]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.equal(calls, 4, "the same message again after each unknown status");
  assert.deepEqual(offsets.updates.at(-1)?.[0], 6);
  assert.equal(service.stats.suspended, 3);
  assert.equal(lines.length, 1, `one line per ${UNKNOWN_STATUS_LOG_INTERVAL_MS} ms`);
  const { fields, msg } = lines[0]!;
  assert.deepEqual([fields.group, fields.topic, fields.queueId, fields.status], ["g", "T", 0, '"SUCESS"']);
  assert.match(msg, /"SUCESS"/);
  assert.match(msg, /SUSPEND_CURRENT_QUEUE_A_MOMENT/);
  assert.doesNotMatch(msg, /threw/);
  await service.stop();
});

test("RECONSUME_LATER suspends an orderly queue without a warning, as CONSUME_SUCCESS commits without one", async (t) => {
  const lines: unknown[] = [];
  t.mock.method(consumeLog(), "warn", (fields: unknown) => void lines.push(fields));
  const returned = ["RECONSUME_LATER", "CONSUME_SUCCESS"];
  let calls = 0;
  const { service, pq, offsets } = setup(async () => returned[calls++]!, {}, { suspendCurrentQueueTimeMillis: 10 });
  feed(service, pq, [5]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.equal(calls, 2);
  assert.deepEqual(offsets.updates.at(-1)?.[0], 6);
  assert.deepEqual(lines, []);
  await service.stop();
});

test("a listener that empties its msgs array: the batch is still put back on SUSPEND and committed on SUCCESS", async () => {
  const calls: number[][] = [];
  const { service, pq, offsets } = setup(
    async (msgs) => {
      calls.push(msgs.splice(0).map((m) => m.queueOffset));
      return calls.length === 1 ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "SUCCESS";
    },
    {},
    { consumeMessageBatchMaxSize: 2, suspendCurrentQueueTimeMillis: 10 },
  );
  feed(service, pq, [0, 1, 2]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(calls, [[0, 1], [0, 1], [2]]);
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [2, 3],
  );
  await service.stop();
});

test("RocketMQ's deprecated COMMIT and ROLLBACK statuses commit like SUCCESS (autoCommit)", async () => {
  const statuses = ["COMMIT", "ROLLBACK"];
  const calls: number[] = [];
  const { service, pq, offsets } = setup(async (msgs) => {
    calls.push(msgs[0]!.queueOffset);
    return statuses[calls.length - 1] ?? "SUCCESS";
  });
  feed(service, pq, [0, 1]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(calls, [0, 1], "each delivered once");
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [1, 2],
  );
  assert.equal(service.stats.suspended, 0);
  await service.stop();
});

test("ctx.autoCommit = false: SUCCESS leaves the batch uncommitted, COMMIT commits all taken, ROLLBACK redelivers", async () => {
  // per delivery: the listener's answer with autoCommit false (RocketMQ's deprecated manual mode), then autoCommit
  const script = ["SUCCESS", "ROLLBACK", "SUCCESS", "COMMIT", "SUSPEND_CURRENT_QUEUE_A_MOMENT", "COMMIT"];
  const calls: { offset: number; reconsume: number; at: number }[] = [];
  const { service, pq, offsets } = setup(
    async (msgs, ctx) => {
      calls.push({ offset: msgs[0]!.queueOffset, reconsume: msgs[0]!.reconsumeTimes, at: Date.now() });
      const status = script[calls.length - 1];
      if (status === undefined) return "SUCCESS";
      ctx.autoCommit = false;
      return status;
    },
    {},
    { suspendCurrentQueueTimeMillis: 40 },
  );
  feed(service, pq, [0, 1, 2, 3]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(
    calls.map((c) => c.offset),
    [0, 1, 0, 1, 2, 2, 3],
    "ROLLBACK puts back everything taken since the last commit; SUSPEND only its batch",
  );
  assert.ok(calls[2]!.at - calls[1]!.at >= 35, "ROLLBACK pauses the queue for the suspend time");
  assert.deepEqual(
    calls.map((c) => c.reconsume),
    [0, 0, 0, 0, 0, 1, 0],
    "a rolled-back batch is not counted as a retry",
  );
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [2, 3, 4],
    "only COMMIT (and SUCCESS with autoCommit) moves the offset",
  );
  await service.stop();
});

test("ctx.autoCommit = false: a dead-lettered message waits for the COMMIT and is not redelivered after a ROLLBACK", async () => {
  const script = ["SUSPEND_CURRENT_QUEUE_A_MOMENT", "ROLLBACK", "COMMIT"];
  const delivered: number[] = [];
  const sentBack: number[] = [];
  const { service, pq, offsets } = setup(
    async (msgs, ctx) => {
      delivered.push(msgs[0]!.queueOffset);
      ctx.autoCommit = false;
      return script[delivered.length - 1] ?? "COMMIT";
    },
    {
      sendBack: async (msgs) => {
        sentBack.push(...msgs.map((m) => m.queueOffset));
        return [];
      },
    },
    { maxReconsumeTimes: 0, suspendCurrentQueueTimeMillis: 10 },
  );
  feed(service, pq, [70, 71]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(sentBack, [70]);
  assert.deepEqual(delivered, [70, 71, 71], "70, rolled back with 71, is skipped: it is in the dead-letter queue");
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [72],
    "nothing committed before the COMMIT",
  );
  await service.stop();
});

test("after maxReconsumeTimes the message goes to the DLQ (delay level -1) and the queue moves on", async () => {
  const sentBack: { offsets: number[]; level: number; times: number[]; inPlace: boolean | undefined }[] = [];
  const delivered: number[] = [];
  const { service, pq, offsets } = setup(
    async (msgs) => {
      delivered.push(...msgs.map((m) => m.queueOffset));
      return msgs[0]!.queueOffset === 20 ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "SUCCESS";
    },
    {
      sendBack: async (msgs, level, opts) => {
        sentBack.push({
          offsets: msgs.map((m) => m.queueOffset),
          level,
          times: msgs.map((m) => m.reconsumeTimes),
          inPlace: opts?.retriedInPlace,
        });
        return [];
      },
    },
    { maxReconsumeTimes: 2, suspendCurrentQueueTimeMillis: 10 },
  );
  feed(service, pq, [20, 21]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(delivered, [20, 20, 20, 21], "first delivery plus maxReconsumeTimes retries, then the next message");
  // the local count goes with it: the stored copy, retried in place, still says 0
  assert.deepEqual(sentBack, [{ offsets: [20], level: DLQ_DELAY_LEVEL, times: [2], inPlace: true }]);
  assert.equal(service.stats.deadLettered, 1);
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [21, 22],
  );
  await service.stop();
});

test("a failed DLQ send keeps the message and suspends the queue", async () => {
  let attempts = 0;
  const delivered: number[] = [];
  const { service, pq } = setup(
    async (msgs) => {
      delivered.push(msgs[0]!.queueOffset);
      return "SUSPEND_CURRENT_QUEUE_A_MOMENT";
    },
    { sendBack: async (msgs) => (attempts++ === 0 ? [...msgs] : []) },
    { maxReconsumeTimes: 0, suspendCurrentQueueTimeMillis: 10 },
  );
  feed(service, pq, [30]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(delivered, [30, 30], "redelivered once after the failed DLQ send");
  assert.equal(attempts, 2);
  await service.stop();
});

test("clustering: no consumption without a valid lock; the lock is retried and consumption follows", async () => {
  const delivered: number[] = [];
  let lockAnswer = false;
  const lockCalls: number[] = [];
  const { service, pq } = setup(
    async (msgs) => {
      delivered.push(msgs[0]!.queueOffset);
      return "SUCCESS";
    },
    {
      lockQueue: async (_mq, p) => {
        lockCalls.push(Date.now());
        if (lockAnswer) {
          p.locked = true;
          p.lastLockTimestamp = monotonicNow();
        }
        return lockAnswer;
      },
    },
    { lockMaxLiveTimeMs: 1_000 },
  );
  pq.locked = true;
  pq.lastLockTimestamp = monotonicNow() - 5_000; // renewed too long ago: expired in the client's view
  feed(service, pq, [40]);
  await waitFor(() => lockCalls.length >= 1, 2_000, "a lock attempt");
  assert.deepEqual(delivered, [], "an expired lock stops consumption");
  lockAnswer = true;
  await waitFor(() => delivered.length === 1, 6_000, "consumed once locked");
  assert.ok(lockCalls.length >= 2);
  await service.stop();
});

/** QueueLocks over a fake broker that grants every lock asked for. */
function grantingLocks(lockMaxLiveTimeMs: number, events: string[], held: LockedQueue[] = []): QueueLocks {
  const host = {
    clientId: "c1",
    brokerAddress: () => "tcp://fake",
    node: {
      ref: () => ({
        ask: async (m: { mqSet: MessageQueue[] }) => ({ fields: { lockOKMQSet: m.mqSet } }),
      }),
    },
  } as unknown as ConstructorParameters<typeof QueueLocks>[0]["host"];
  return new QueueLocks({
    host,
    group: "g",
    lockMaxLiveTimeMs,
    held: () => held,
    onLocked: (q) => events.push(`locked ${q.mq.queueId}`),
    onRegained: (q) => events.push(`regained ${q.mq.queueId}`),
  });
}

test("a lock granted again after it lapsed (pq.locked still true, last renewal too old) is a regain: the queue is rebuilt", async () => {
  // a client frozen (or cut off) past lockMaxLiveTimeMs never got a "not locked" answer: pq.locked
  // is still true, but the broker may have given the queue to another member meanwhile
  const events: string[] = [];
  const locks = grantingLocks(1_000, events);
  const pq = new ProcessQueue<MessageExt>();
  pq.locked = true;
  pq.lastLockTimestamp = monotonicNow() - 5_000;
  assert.equal(await locks.lock(mq, pq), true);
  assert.deepEqual(events, ["regained 0"], "the consume service's relock of a lapsed queue rebuilds it");
  assert.equal(pq.locked, true);
  assert.ok(monotonicNow() - pq.lastLockTimestamp < 1_000);
  // renewed in time: a renewal, not a regain
  assert.equal(await locks.lock(mq, pq), true);
  assert.deepEqual(events, ["regained 0", "locked 0"]);
  // the same through the periodic renewal of every held queue
  const held = { mq: { ...mq, queueId: 1 }, pq: new ProcessQueue<MessageExt>() };
  held.pq.locked = true;
  held.pq.lastLockTimestamp = monotonicNow() - 5_000;
  const renewing = grantingLocks(1_000, events, [held]);
  await renewing.lockAll();
  assert.deepEqual(events.slice(2), ["regained 1"]);
  await renewing.lockAll();
  assert.deepEqual(events.slice(2), ["regained 1", "locked 1"]);
});

test("a lock granted before the connection to its broker was lost is void (the broker may have restarted without it): the next grant is a regain", async () => {
  const events: string[] = [];
  let lostAt = 0;
  // set while an answer is on its way: the connection is lost before it is read
  let loseDuringAsk = false;
  const host = {
    clientId: "c1",
    brokerAddress: () => "tcp://fake",
    brokerLostAt: (addr: string) => (addr === "tcp://fake" ? lostAt : 0),
    node: {
      ref: () => ({
        ask: async (m: { mqSet: MessageQueue[] }) => {
          if (loseDuringAsk) lostAt = monotonicNow();
          return { fields: { lockOKMQSet: m.mqSet } };
        },
      }),
    },
  } as unknown as ConstructorParameters<typeof QueueLocks>[0]["host"];
  const pq = new ProcessQueue<MessageExt>();
  const locks = new QueueLocks({
    host,
    group: "g",
    held: () => [{ mq, pq }],
    onLocked: (q) => events.push(`locked ${q.mq.queueId}`),
    onRegained: (q) => events.push(`regained ${q.mq.queueId}`),
  });
  assert.equal(await locks.lock(mq, pq), true);
  assert.equal(locks.isLockHeld(pq), true);
  lostAt = monotonicNow();
  assert.equal(locks.isLockHeld(pq), false, "the connection was lost after the grant");
  assert.equal(pq.isLockExpired(), true, "pulls carry no commit offset");
  // granted again after the loss (by the restarted broker, which had nobody else's lock): a regain
  await locks.lockAll();
  assert.deepEqual(events, ["regained 0", "regained 0"]);
  assert.equal(locks.isLockHeld(pq), true);
  await locks.lockAll();
  assert.deepEqual(events.slice(2), ["locked 0"], "renewed with no loss since: a renewal");
  // an answer read after a loss that came while it was on its way may be the old broker's: not taken
  loseDuringAsk = true;
  assert.equal(await locks.lock(mq, pq), false);
  assert.equal(locks.isLockHeld(pq), false);
  assert.deepEqual(events.slice(3), []);
});

test("a wall clock step forward does not lapse a lock just granted: it is renewed, not regained, and consumption goes on without relocking", async () => {
  const clock = fakeWallClock();
  try {
    const events: string[] = [];
    const locks = grantingLocks(1_000, events);
    const pq = new ProcessQueue<MessageExt>();
    assert.equal(await locks.lock(mq, pq), true);
    clock.jump(5_000);
    assert.equal(locks.isLockHeld(pq), true);
    assert.equal(await locks.lock(mq, pq), true);
    assert.deepEqual(events, ["regained 0", "locked 0"]);

    const lockCalls: number[] = [];
    const delivered: number[] = [];
    const { service, pq: consumed } = setup(
      async (msgs) => {
        delivered.push(msgs[0]!.queueOffset);
        return "SUCCESS";
      },
      { lockQueue: async () => lockCalls.push(0) > 0 },
      { lockMaxLiveTimeMs: 1_000 },
    );
    await locks.lock(mq, consumed);
    clock.jump(5_000);
    feed(service, consumed, [80]);
    await waitFor(() => delivered.length === 1 || lockCalls.length > 0, 5_000, "consumed or relocked");
    assert.deepEqual([delivered, lockCalls], [[80], []]);
    await service.stop();
  } finally {
    clock.restore();
  }
});

test("a batch whose lock lapsed while it was in the listener is not committed: it is put back and the queue relocks", async () => {
  let finish!: () => void;
  const lockCalls: number[] = [];
  const delivered: number[] = [];
  const { service, pq, offsets } = setup(
    (msgs) => {
      delivered.push(msgs[0]!.queueOffset);
      return new Promise<string>((r) => (finish = () => r("SUCCESS")));
    },
    {
      lockQueue: async () => {
        lockCalls.push(Date.now());
        return false;
      },
    },
    { lockMaxLiveTimeMs: 1_000 },
  );
  pq.lastLockTimestamp = monotonicNow();
  try {
    feed(service, pq, [70, 71]);
    await waitFor(() => finish !== undefined, 2_000, "listener entered");
    // the client was frozen inside the batch: no renewal for longer than the lock lives
    pq.lastLockTimestamp = monotonicNow() - 5_000;
    finish();
    await waitFor(() => lockCalls.length >= 1, 2_000, "a relock attempt");
    assert.deepEqual(offsets.updates, [], "no offset committed under a lapsed lock (another member may have moved past it)");
    assert.deepEqual(delivered, [70], "nothing more consumed without a valid lock");
    assert.equal(pq.inFlightCount, 0);
    assert.deepEqual(
      pq.messages().map((m) => m.queueOffset),
      [70, 71],
      "the batch is put back, in order",
    );
  } finally {
    // the lock retries never end on their own
    await service.stop();
  }
});

test("release: the batch in hand finishes and commits although the queue was dropped", async () => {
  let finish!: () => void;
  const { service, pq, offsets } = setup(() => new Promise<string>((r) => (finish = () => r("SUCCESS"))));
  feed(service, pq, [50, 51]);
  await waitFor(() => finish !== undefined, 2_000, "listener entered");
  pq.dropped = true;
  const released = service.release(pq, 2_000);
  setTimeout(() => finish(), 20);
  assert.equal(await released, true);
  assert.deepEqual(offsets.updates, [[51, false]], "the batch in hand committed, nothing after it consumed");
  await service.stop();
});

test("release that gave up waiting: the batch in hand that ends later commits nothing (the queue may be held again from a newer offset)", async () => {
  // the queue was unlocked when the wait ended: another member (or this one, from the broker's newer
  // offset) may have consumed past the batch since, and its commit would move the offset back
  let finish!: () => void;
  const { service, pq, offsets } = setup(() => new Promise<string>((r) => (finish = () => r("SUCCESS"))));
  feed(service, pq, [50, 51]);
  await waitFor(() => finish !== undefined, 2_000, "listener entered");
  pq.dropped = true;
  assert.equal(await service.release(pq, 30), false, "the wait for the batch in hand gave up");
  finish();
  await waitFor(() => service.activeCount === 0, 2_000, "the late batch ended");
  assert.deepEqual(offsets.updates, [], "the late batch committed nothing");
  await service.stop();
});

test("a queue's replaced process queue waits for the old one's batch in hand, and the old one is let go", async () => {
  // an offset reset (PULL_OFFSET_MOVED) or a regained lock drops the queue's process queue and
  // gives the queue a new one while the old one's batch may still be in the listener
  let inListener = 0;
  let maxConcurrent = 0;
  let finishOld!: () => void;
  const seen: number[] = [];
  const {
    service,
    pq: oldPq,
    offsets,
  } = setup(async (msgs) => {
    inListener++;
    maxConcurrent = Math.max(maxConcurrent, inListener);
    seen.push(msgs[0]!.queueOffset);
    if (msgs[0]!.queueOffset === 60) await new Promise<void>((r) => (finishOld = r));
    inListener--;
    return "SUCCESS";
  });
  feed(service, oldPq, [60, 61]);
  await waitFor(() => finishOld !== undefined, 2_000, "old batch in the listener");
  oldPq.dropped = true;
  const newPq = new ProcessQueue<MessageExt>();
  newPq.locked = true;
  feed(service, newPq, [0, 1]);
  // the new process queue's first batch would start now: it must not while the old one is in hand
  await waitFor(() => seen.length > 1, 300, "a second batch").catch(() => {});
  assert.deepEqual(seen, [60], "the new process queue waits for the old batch");
  finishOld();
  await waitFor(() => newPq.msgCount === 0 && service.activeCount === 0, 5_000, "new process queue drained");
  assert.equal(maxConcurrent, 1, "one batch of the queue at a time");
  assert.deepEqual(seen, [60, 0, 1], "nothing more of the dropped process queue");
  assert.deepEqual(
    offsets.updates.map(([o]) => o),
    [1, 2],
    "the dropped process queue commits no offset",
  );
  const runs = (service as unknown as { runs: Map<ProcessQueue<MessageExt>, unknown> }).runs;
  assert.equal(runs.has(oldPq), false, "the dropped process queue (and its cached messages) is let go");
  // one dropped while idle goes when the queue gets its next process queue
  newPq.dropped = true;
  const thirdPq = new ProcessQueue<MessageExt>();
  thirdPq.locked = true;
  feed(service, thirdPq, [2]);
  assert.equal(runs.has(newPq), false, "an idle dropped process queue is let go");
  await waitFor(() => thirdPq.msgCount === 0 && service.activeCount === 0, 5_000, "third process queue drained");
  await service.stop();
});

test("a failure in the consume loop's own bookkeeping retries the queue after the suspend time", async () => {
  const seen: number[] = [];
  const { service, pq, offsets } = setup(async (msgs) => {
    seen.push(...msgs.map((m) => m.queueOffset));
    return "SUCCESS";
  });
  const update = offsets.updateOffset;
  let failures = 1;
  offsets.updateOffset = (q, offset, inc) => {
    if (failures-- > 0) throw new Error("offset table unavailable");
    update(q, offset, inc);
  };
  feed(service, pq, [0, 1, 2]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained after the failed commit");
  assert.deepEqual(seen, [0, 1, 2]);
  assert.deepEqual(offsets.updates.at(-1), [3, false]);
  await service.stop();
});

test("a batch whose bookkeeping failed comes again: the next batch's commit does not move past it", async () => {
  const delivered: number[] = [];
  const deadLettered: number[] = [];
  let sendBacks = 0;
  const { service, pq, offsets } = setup(
    async (msgs) => {
      delivered.push(msgs[0]!.queueOffset);
      return msgs[0]!.queueOffset === 0 ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "SUCCESS";
    },
    {
      sendBack: async (msgs) => {
        if (sendBacks++ === 0) throw new Error("send-back bookkeeping failed");
        deadLettered.push(...msgs.map((m) => m.queueOffset));
        return [];
      },
    },
    { maxReconsumeTimes: 0, suspendCurrentQueueTimeMillis: 10 },
  );
  feed(service, pq, [0, 1]);
  await waitFor(() => pq.msgCount === 0 && service.activeCount === 0, 5_000, "queue drained");
  assert.deepEqual(deadLettered, [0], "offset 0 reached the DLQ before the queue moved past it");
  assert.deepEqual(delivered, [0, 0, 1]);
  assert.deepEqual(offsets.updates.at(-1), [2, false]);
  await service.stop();
});

test("a consume loop that keeps failing retries at the suspend floor (10 ms), not in a busy loop", async () => {
  let runs = 0;
  const { service, pq, offsets } = setup(async () => "SUCCESS", {}, { suspendCurrentQueueTimeMillis: 0 });
  offsets.updateOffset = () => {
    runs++;
    throw new Error("offset table unavailable");
  };
  // each run consumes one message and fails at its commit
  feed(
    service,
    pq,
    Array.from({ length: 30 }, (_, i) => i),
  );
  await waitFor(() => runs >= 1, 5_000, "a failed run");
  const t0 = Date.now();
  await waitFor(() => runs >= 11, 5_000, "ten more failed runs");
  // ten pauses of at least 10 ms each (timers may fire a millisecond early)
  assert.ok(Date.now() - t0 >= 90, `ten retries took ${Date.now() - t0} ms`);
  await service.stop();
});

test("suspend time: -1 (or not a finite number) means the consumer's setting; clamped to 10 ms .. 30 s", () => {
  assert.equal(orderlySuspendTime(-1, 1000), 1000);
  assert.equal(orderlySuspendTime(5, 1000), 10);
  assert.equal(orderlySuspendTime(60_000, 1000), 30_000);
  assert.equal(orderlySuspendTime(250, 1000), 250);
  // a listener's non-number in the context would make the pause ~1 ms: the consumer's setting instead
  for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, "1s" as unknown as number])
    assert.equal(orderlySuspendTime(bad, 1000), 1000, String(bad));
});

test("orderly timing options out of range are refused at start with ILLEGAL_ARGUMENT naming the option", async () => {
  const bad: [keyof PushConsumerOptions, unknown][] = [
    ["suspendCurrentQueueTimeMillis", Number.NaN],
    ["suspendCurrentQueueTimeMillis", -1],
    ["suspendCurrentQueueTimeMillis", 2 ** 31],
    ["suspendCurrentQueueTimeMillis", 2.5],
    ["suspendCurrentQueueTimeMillis", "1s"],
    ["rebalanceLockIntervalMs", 0],
    ["rebalanceLockIntervalMs", -1000],
    ["rebalanceLockIntervalMs", "20s"],
    ["rebalanceLockIntervalMs", 2 ** 31],
    ["rebalanceLockMaxLiveTimeMs", 0],
    ["rebalanceLockMaxLiveTimeMs", Number.POSITIVE_INFINITY],
  ];
  for (const [name, value] of bad) {
    await assert.rejects(
      PushConsumer.start({
        group: "cgOrderlyOpts",
        nameservers: ["tcp://127.0.0.1:1"],
        subscriptions: { T: "*" },
        orderly: true,
        listener: async () => "SUCCESS",
        [name]: value,
      }),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && e.message.startsWith(name),
      `${name}: ${String(value)}`,
    );
  }
});

test("locks are renewed every rebalanceLockIntervalMs (RocketMQ's 20 s against a 30 s life), twice per lock life only when the interval leaves too little margin", () => {
  assert.equal(lockRenewIntervalMs(20_000, 30_000), 20_000, "the defaults keep RocketMQ's 20 s");
  assert.equal(lockRenewIntervalMs(500, 1_500), 500);
  assert.equal(lockRenewIntervalMs(20_000, 1_500), 750, "a life shorter than the interval: renewed twice per life");
  assert.equal(lockRenewIntervalMs(25_000, 30_000), 15_000, "under a third of the life as margin");
  assert.equal(lockRenewIntervalMs(20_000, 1), 1);
});
