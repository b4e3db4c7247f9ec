/**
 * Orderly consumption end to end: 100 orders x 10 steps, each order's steps sent to one queue
 * (selectByHash on the order id) of an 8-queue topic; 3 orderly consumers in child processes,
 * one killed with kill -9 and one added mid-stream; the killed and the added one take batches of up
 * to 3 messages (consumeMessageBatchMaxSize), the others one.
 *
 * Checked: nothing is lost; within each delivery run (one client's unbroken tenure of a queue)
 * queue offsets are consecutive and every order's steps strictly increase by one; no run leaves a
 * gap, and none repeats an offset a running client consumed: only what the killed client consumed
 * past its last committed offset is delivered again (by its successor, which may hand the queue
 * over gracefully before the end of that stretch); and no queue is ever consumed by two clients
 * at once (each client logs the start and end of every batch; a batch the killed client had open
 * ends when it has exited). That last check passes even with the broker lock broken: 10 ms
 * batches end before a newcomer gets to its first one. Hand-over under the lock is tested by
 * orderly-locks.test.ts, whose slow batches make a broken lock show.
 *
 * The broker's lock expiry is shortened to 3 s (`lockMaxLiveTimeMs`, default 60 s) so that the
 * killed client's queues are free again quickly; the clients renew every 500 ms and consider a
 * lock lost after 1.5 s, below the broker's expiry, as RocketMQ's 20 s / 30 s / 60 s do.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Admin, Producer, selectByHash, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const ORDERS = 100;
const STEPS = 10;
const QUEUES = 8;

interface Item {
  offset: number;
  order: number;
  step: number;
}
interface Batch {
  client: string;
  queueId: number;
  start: number;
  end: number;
  items: Item[];
}
interface OrderlyChild {
  name: string;
  proc: ChildProcess;
  batches: Batch[];
  /** batches begun and not ended: queueId -> start */
  open: Map<number, number>;
  ready: Promise<void>;
  exited: Promise<number | null>;
}

function startOrderlyChild(name: string, env: Record<string, string>): OrderlyChild {
  const proc = spawn(process.execPath, ["--import", "tsx", path.join(here, "fixtures", "orderlyConsumer.ts")], {
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "silent", INSTANCE: name, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const c: OrderlyChild = { name, proc, batches: [], open: new Map(), ready: Promise.resolve(), exited: Promise.resolve(null) };
  let isReady = false;
  let rest = "";
  proc.stdout!.setEncoding("utf8");
  proc.stdout!.on("data", (chunk: string) => {
    rest += chunk;
    let i: number;
    while ((i = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, i);
      rest = rest.slice(i + 1);
      const f = line.split(" ");
      if (line === "READY") isReady = true;
      else if (f[0] === "S") c.open.set(Number(f[1]), Number(f[2]));
      else if (f[0] === "E" && f.length === 5) {
        const queueId = Number(f[1]);
        c.open.delete(queueId);
        const items = f[4]!.split(",").map((s) => {
          const [off, order, step] = s.split(":").map(Number);
          return { offset: off!, order: order!, step: step! };
        });
        c.batches.push({ client: name, queueId, start: Number(f[2]), end: Number(f[3]), items });
      }
    }
  });
  c.exited = new Promise((resolve) => proc.on("exit", (code) => resolve(code)));
  c.ready = waitFor(() => isReady, 30_000, `orderly consumer ${name} READY`).then(() => undefined);
  return c;
}

function distinctConsumed(children: OrderlyChild[]): number {
  const seen = new Set<string>();
  for (const c of children) for (const b of c.batches) for (const it of b.items) seen.add(`${it.order}:${it.step}`);
  return seen.size;
}

test("orderly: 100 orders x 10 steps, 8 queues, 3 consumers, one killed and one added mid-stream", async () => {
  const { dir, cleanup } = await tempDir("actormq-orderly-");
  const cluster = await startLocalCluster({
    dir,
    broker: { flush: "async", lockMaxLiveTimeMs: 3000, channelExpiredTimeoutMs: 2000, clientScanIntervalMs: 250 } as object,
  });
  const producer = await Producer.start({ group: "pgOrderly", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const children: OrderlyChild[] = [];
  try {
    await admin.createTopic({ topic: "Orders", readQueueNums: QUEUES, writeQueueNums: QUEUES });
    const env = { NAMESRV: cluster.nameservers[0]!, GROUP: "cgOrderly", TOPIC: "Orders", DELAY_MS: "10" };
    const queueOfOrder = new Map<number, number>();
    const sendRounds = async (from: number, to: number) => {
      for (let step = from; step < to; step++) {
        // steps of one order go one after the other; different orders in parallel
        const results = await Promise.all(
          Array.from({ length: ORDERS }, (_, order) =>
            producer.send({ topic: "Orders", body: `${order}:${step}` }, { selector: selectByHash, arg: String(order) }),
          ),
        );
        results.forEach((r, order) => {
          const q = queueOfOrder.get(order);
          if (q === undefined) queueOfOrder.set(order, r.queue.queueId);
          else assert.equal(r.queue.queueId, q, `order ${order} always goes to queue ${q}`);
        });
      }
    };

    // B (killed) and D (added) take batches of up to 3 messages (consumeMessageBatchMaxSize), A and C one
    const [a, b, c] = ["A", "B", "C"].map((n) => startOrderlyChild(n, { ...env, BATCH: n === "B" ? "3" : "1" }));
    children.push(a!, b!, c!);
    await Promise.all(children.map((ch) => ch.ready));
    await sendRounds(0, 3);
    await waitFor(() => b!.batches.length > 0 && distinctConsumed(children) >= 200, 30_000, "200 steps consumed, some by B");

    b!.proc.kill("SIGKILL");
    await b!.exited;
    // taken once B is gone: a batch B began just before the signal still starts before this
    const killTime = Date.now();
    await sendRounds(3, 6);
    await waitFor(() => distinctConsumed(children) >= 450, 30_000, "450 steps consumed after the kill");

    const d = startOrderlyChild("D", { ...env, BATCH: "3" });
    children.push(d);
    await d.ready;
    await sendRounds(6, STEPS);
    await waitFor(() => distinctConsumed(children) === ORDERS * STEPS, 60_000, `all ${ORDERS * STEPS} steps consumed`);
    assert.ok(d.batches.length > 0, "the consumer added mid-stream took part");
    assert.ok(
      [b!, d].some((ch) => ch.batches.some((x) => x.items.length > 1)),
      "batches of more than one message were consumed",
    );
    assert.ok(
      [a!, c!, d].every((ch) => ch.batches.every((x) => x.items.length <= (ch === d ? 3 : 1))),
      "no batch above consumeMessageBatchMaxSize",
    );
    assert.ok(new Set(queueOfOrder.values()).size === QUEUES, "the orders spread over all 8 queues");

    // stop the survivors cleanly so every open batch has ended
    for (const ch of [a!, c!, d]) ch.proc.kill("SIGTERM");
    for (const ch of [a!, c!, d]) assert.equal(await ch.exited, 0, `${ch.name} closed cleanly`);

    // tenure: the killed client's open batch ends at its kill time
    const all: Batch[] = children.flatMap((ch) => ch.batches);
    for (const [queueId, start] of b!.open) all.push({ client: "B", queueId, start, end: killTime, items: [] });
    assert.equal(a!.open.size + c!.open.size + d.open.size, 0, "no survivor left a batch open");

    for (let q = 0; q < QUEUES; q++) {
      const batches = all.filter((x) => x.queueId === q).sort((x, y) => x.start - y.start || x.end - y.end);
      assert.ok(batches.length > 0, `queue ${q} was consumed`);
      // no two clients at once: a batch of another client starts only after every earlier batch ended
      let maxEnd = -Infinity;
      let lastClient = "";
      for (const x of batches) {
        if (x.client !== lastClient && lastClient !== "") {
          assert.ok(x.start >= maxEnd, `queue ${q}: ${x.client} began at ${x.start} while ${lastClient} held it until ${maxEnd}`);
        }
        assert.ok(x.end >= x.start);
        maxEnd = Math.max(maxEnd, x.end);
        lastClient = x.client;
      }

      // delivery runs: consecutive batches of one client on this queue
      const runs: Batch[][] = [];
      for (const x of batches) {
        if (x.items.length === 0) continue;
        const cur = runs[runs.length - 1];
        if (cur && cur[0]!.client === x.client) cur.push(x);
        else runs.push([x]);
      }
      // highest offset delivered so far by anyone, and by a client that was not killed
      let highest = -1;
      let liveHighest = -1;
      for (const run of runs) {
        const items = run.flatMap((x) => x.items);
        for (let i = 1; i < items.length; i++)
          assert.equal(items[i]!.offset, items[i - 1]!.offset + 1, `queue ${q}: offsets consecutive within ${run[0]!.client}'s run`);
        const lastStep = new Map<number, number>();
        for (const it of items) {
          assert.equal(queueOfOrder.get(it.order), q, `order ${it.order} consumed from its own queue`);
          const prev = lastStep.get(it.order);
          if (prev !== undefined)
            assert.equal(it.step, prev + 1, `queue ${q}: order ${it.order} steps in order within ${run[0]!.client}'s run`);
          lastStep.set(it.order, it.step);
        }
        const first = items[0]!.offset;
        const last = items[items.length - 1]!.offset;
        assert.ok(first <= highest + 1, `queue ${q}: ${run[0]!.client}'s run starts at ${first}, after a gap (highest so far ${highest})`);
        // redelivery from the last committed offset may repeat what the killed client consumed
        // (by its successor, or by the next owner after a graceful hand-over from that successor),
        // never what a running client consumed
        assert.ok(
          first > liveHighest,
          `queue ${q}: ${run[0]!.client}'s run repeats from ${first} what running clients had consumed (up to ${liveHighest}); only the killed client's work may be redelivered`,
        );
        highest = Math.max(highest, last);
        if (run[0]!.client !== "B") liveHighest = Math.max(liveHighest, last);
      }
    }

    // per consumer, over everything it saw: each order's steps never go backwards except by redelivery after the kill
    for (const ch of [a!, c!, d]) {
      const lastStep = new Map<number, number>();
      for (const x of [...ch.batches].sort((p, r) => p.start - r.start)) {
        for (const it of x.items) {
          const prev = lastStep.get(it.order);
          if (prev !== undefined && it.step <= prev)
            assert.ok(x.start > killTime, `${ch.name}: order ${it.order} step ${it.step} after ${prev} before the kill`);
          lastStep.set(it.order, it.step);
        }
      }
    }
  } finally {
    for (const ch of children) if (ch.proc.exitCode === null && ch.proc.signalCode === null) ch.proc.kill("SIGKILL");
    await Promise.all(children.map((ch) => ch.exited));
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
