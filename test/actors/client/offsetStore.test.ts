import assert from "node:assert/strict";
import fsPromises, { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import path from "node:path";
import { test } from "node:test";
import { setup } from "xstate";
import { ConsumerOffsetManager } from "../../../actors/broker/consumerOffsetManager.ts";
import {
  LOCAL_OFFSETS_FAILURE_LOG_INTERVAL_MS,
  LocalFileOffsetStore,
  localOffsetsClientId,
  localOffsetsPath,
  localPersistFailureLogger,
  offsetLog,
  RemoteOffsetStore,
} from "../../../actors/client/offsetStore.ts";
import { ActorNode, type Replier } from "../../../actors/runtime/index.ts";
import { dirIo } from "../../../store/durableDir.ts";
import {
  isMQError,
  type MessageQueue,
  MQError,
  type QueryConsumerOffsetRequest,
  type UpdateConsumerOffsetRequest,
} from "../../../transport/protocol.ts";
import { EPHEMERAL, monotonicFollowsDate, tempDir } from "../../helpers.ts";

const q0: MessageQueue = { topic: "T", brokerName: "broker-a", queueId: 0 };
const q1: MessageQueue = { topic: "T", brokerName: "broker-a", queueId: 1 };

/** A broadcasting offsets file of group g holding offset 9 of q0, its .bak offset 4 (the write before). */
async function offsetsWithBak(dir: string): Promise<string> {
  const file = localOffsetsPath(dir, "host@m", "g");
  const s = new LocalFileOffsetStore(file);
  s.updateOffset(q0, 4, false);
  await s.persistAll([q0]);
  s.updateOffset(q0, 9, false);
  await s.persistAll([q0]);
  return file;
}

/** A node hosting `offsets` as a broker's offsets actor, and a client node to reach it. */
async function offsetsBrokerAndClient(offsets: Parameters<ActorNode["spawn"]>[1]): Promise<{ broker: ActorNode; client: ActorNode }> {
  const broker = await ActorNode.start({ listen: EPHEMERAL });
  broker.spawn("offsets", offsets);
  return { broker, client: await ActorNode.start({ listen: null }) };
}

/** The offset stores' warnings from now to the test's end. */
function offsetWarnings(t: import("node:test").TestContext): { fields: Record<string, unknown>; msg: string }[] {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(offsetLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  return lines;
}

test("local file store: persists atomically, reloads, falls back to .bak, forgets nothing it did not hold", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = localOffsetsPath(dir, "host@1@x", "g");
    assert.ok(file.endsWith("host@1@x/g/offsets.json"));
    const s = new LocalFileOffsetStore(file);
    await s.load();
    assert.equal(await s.readOffset(q0, "READ_FROM_STORE"), -1);
    s.updateOffset(q0, 10, true);
    s.updateOffset(q0, 5, true);
    s.updateOffset(q1, 7, false);
    assert.equal(s.readOffsetFromMemory(q0), 10);
    await s.persistAll([q0, q1]);
    s.updateOffset(q0, 12, true);
    await s.persistAll([q0, q1]);
    const reloaded = new LocalFileOffsetStore(file);
    await reloaded.load();
    assert.equal(await reloaded.readOffset(q0, "READ_FROM_STORE"), 12);
    assert.equal(await reloaded.readOffset(q1, "READ_FROM_STORE"), 7);
    // a torn main file: the .bak (previous version) is used
    await writeFile(file, "{ not json");
    const fromBak = new LocalFileOffsetStore(file);
    await fromBak.load();
    assert.equal(await fromBak.readOffset(q0, "READ_FROM_STORE"), 10);
    const json = JSON.parse(await readFile(`${file}.bak`, "utf8")) as { offsetTable: Record<string, number> };
    assert.deepEqual(json.offsetTable, { "T@broker-a@0": 10, "T@broker-a@1": 7 });
  } finally {
    await cleanup();
  }
});

test("local file store: each write syncs the file's directory after its rename, so the new name survives a power loss", async () => {
  const { dir, cleanup } = await tempDir();
  const real = dirIo.fsyncAsync;
  const synced: string[] = [];
  dirIo.fsyncAsync = async (d) => {
    // the rename is done when the directory is synced
    const offsets = JSON.parse(await readFile(path.join(d, "offsets.json"), "utf8")) as { offsetTable: Record<string, number> };
    synced.push(`${d}:${offsets.offsetTable["T@broker-a@0"]}`);
    return real(d);
  };
  try {
    const file = localOffsetsPath(dir, "host@1@x", "g");
    const s = new LocalFileOffsetStore(file);
    s.updateOffset(q0, 3, false);
    await s.persistAll([q0]);
    s.updateOffset(q0, 8, false);
    await s.persistAll([q0]);
    assert.deepEqual(synced, [`${path.dirname(file)}:3`, `${path.dirname(file)}:8`]);
  } finally {
    dirIo.fsyncAsync = real;
    await cleanup();
  }
});

test("local file store: offsets.json deleted but its .bak left is loaded with a warning naming both; the group's directory deleted starts afresh", async (t) => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = await offsetsWithBak(dir);
    const lines = offsetWarnings(t);
    await rm(file);
    const fromBak = new LocalFileOffsetStore(file);
    await fromBak.load();
    assert.equal(await fromBak.readOffset(q0, "READ_FROM_STORE"), 4, "RocketMQ's readLocalOffsetBak");
    assert.equal(lines.length, 1, "the fallback is told");
    assert.ok(lines[0]!.msg.includes(file) && lines[0]!.msg.includes(`${file}.bak`), lines[0]!.msg);
    await rm(path.dirname(file), { recursive: true });
    const fresh = new LocalFileOffsetStore(file);
    await fresh.load();
    assert.equal(await fresh.readOffset(q0, "READ_FROM_STORE"), -1, "consumeFromWhere applies");
    assert.equal(lines.length, 1, "nothing to warn about");
  } finally {
    await cleanup();
  }
});

test("local file store: a damaged or unreadable offsets.json is read from its .bak with a warning naming it and why", async (t) => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = await offsetsWithBak(dir);
    const lines = offsetWarnings(t);
    // zero-filled (a power loss), JSON without the table, a directory in its place (EISDIR)
    for (const damage of [
      async () => writeFile(file, Buffer.alloc(64)),
      async () => writeFile(file, "[]"),
      async () => {
        await mkdir(file);
      },
    ]) {
      await rm(file, { recursive: true, force: true });
      await damage();
      lines.length = 0;
      const fromBak = new LocalFileOffsetStore(file);
      await fromBak.load();
      assert.equal(await fromBak.readOffset(q0, "READ_FROM_STORE"), 4);
      assert.equal(lines.length, 1, "the fallback is told");
      assert.ok(lines[0]!.msg.includes(file) && lines[0]!.msg.includes(`${file}.bak`), lines[0]!.msg);
      assert.equal(typeof lines[0]!.fields.error, "string");
    }
  } finally {
    await cleanup();
  }
});

test("local file store: the first write after a load that fell back to the .bak keeps the good .bak, not the damaged file", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = await offsetsWithBak(dir);
    await writeFile(file, Buffer.alloc(64)); // damaged: the .bak holds 4
    const fromBak = new LocalFileOffsetStore(file);
    await fromBak.load();
    fromBak.updateOffset(q0, 5, false);
    await fromBak.persistAll([q0]);
    assert.deepEqual(JSON.parse(await readFile(`${file}.bak`, "utf8")).offsetTable, { [`${q0.topic}@${q0.brokerName}@${q0.queueId}`]: 4 });
    // the main file damaged again before the next write: the .bak still loads
    await writeFile(file, Buffer.alloc(64));
    const again = new LocalFileOffsetStore(file);
    await again.load();
    assert.equal(await again.readOffset(q0, "READ_FROM_STORE"), 4);
  } finally {
    await cleanup();
  }
});

test("local file store: a directory this user may not read (EACCES) starts from consumeFromWhere with a warning, not MALFORMED", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const file = localOffsetsPath(dir, "host@m", "g");
  // tests run as root, which permissions do not stop: the read fails as it would for another user
  const denied = Object.assign(new Error(`EACCES: permission denied, open '${file}'`), { code: "EACCES" });
  t.mock.method(fsPromises, "readFile", async () => {
    throw denied;
  });
  syncBuiltinESMExports();
  t.after(() => {
    t.mock.restoreAll();
    syncBuiltinESMExports();
  });
  const lines = offsetWarnings(t);
  const s = new LocalFileOffsetStore(file);
  await s.load();
  assert.equal(await s.readOffset(q0, "READ_FROM_STORE"), -1, "nothing read: consumeFromWhere applies");
  assert.equal(lines.length, 1);
  assert.match(lines[0]!.msg, /cannot be read by this user \(EACCES/);
  assert.match(lines[0]!.msg, /offsetStoreDir/);
});

test("local file store: offsets files that exist but none of which can be read refuse the load with MALFORMED naming them", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = localOffsetsPath(dir, "host@m", "g");
    await mkdir(path.dirname(file), { recursive: true });
    const cases: [string, string | null, string | null][] = [
      ["both damaged", "\0\0\0", '{ "offsetTable": {'],
      ["main damaged, no .bak", "not json", null],
      ["main missing, .bak damaged", null, "{}"],
    ];
    for (const [what, main, bak] of cases) {
      await rm(file, { force: true });
      await rm(`${file}.bak`, { force: true });
      if (main !== null) await writeFile(file, main);
      if (bak !== null) await writeFile(`${file}.bak`, bak);
      await assert.rejects(
        new LocalFileOffsetStore(file).load(),
        (e) =>
          e instanceof MQError &&
          e.code === "MALFORMED" &&
          e.message.includes(file) &&
          e.message.includes(`${file}.bak`) &&
          e.message.includes(path.dirname(file)) &&
          /consumeFromWhere/.test(e.message),
        what,
      );
    }
  } finally {
    await cleanup();
  }
});

test("local file store: an entry that is not a queue and an integer offset >= 0 is skipped with a warning naming it; the others load", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const file = localOffsetsPath(dir, "host@m", "g");
  await mkdir(path.dirname(file), { recursive: true });
  // 1.5 would be pulled from: every pull refused (INVALID_PARAMETER) and retried, the queue never consumed again
  const table = { "T@broker-a@0": 1.5, "T@broker-a@1": 7, "T@broker-a@2": -1, "T@broker-a@3": "8", "T@broker-a@4": 2 ** 60, "no-queue": 3 };
  await writeFile(file, JSON.stringify({ offsetTable: table }));
  const lines = offsetWarnings(t);
  const s = new LocalFileOffsetStore(file);
  await s.load();
  assert.equal(await s.readOffset(q0, "READ_FROM_STORE"), -1, "1.5 skipped: the queue starts where consumeFromWhere says");
  assert.equal(await s.readOffset(q1, "READ_FROM_STORE"), 7);
  for (const queueId of [2, 3, 4]) assert.equal(await s.readOffset({ ...q0, queueId }, "READ_FROM_STORE"), -1, `queue ${queueId}`);
  assert.equal(lines.length, 1, "one warning for all of them");
  assert.ok(lines[0]!.msg.includes(file), lines[0]!.msg);
  for (const k of ["T@broker-a@0", "T@broker-a@2", "T@broker-a@3", "T@broker-a@4", "no-queue"]) assert.ok(lines[0]!.msg.includes(k), k);
  assert.ok(!lines[0]!.msg.includes("T@broker-a@1"), "the good entry is not named");
  // the next write keeps none of them
  s.updateOffset(q1, 9, false);
  await s.persistAll([q1]);
  assert.deepEqual(JSON.parse(await readFile(file, "utf8")).offsetTable, { "T@broker-a@1": 9 });
});

test("local file store: a write that fails after its temp file was made leaves no temp file behind", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = localOffsetsPath(dir, "host@m", "g");
    // a directory where offsets.json should be: the temp file is written, the rename fails
    await mkdir(file, { recursive: true });
    const s = new LocalFileOffsetStore(file);
    s.updateOffset(q0, 3, false);
    for (let i = 0; i < 3; i++) await assert.rejects(s.persistAll([q0]));
    assert.deepEqual(
      (await readdir(path.dirname(file))).filter((f) => f.endsWith(".tmp")),
      [],
      "every persist interval would leave one more",
    );
  } finally {
    await cleanup();
  }
});

test("local file store: kept under host@instanceName; the default instance name is replaced by pid#start time, once per process", () => {
  assert.equal(localOffsetsClientId("member-1", "h", 123, 7n), "h@member-1");
  assert.equal(localOffsetsClientId("member-1", "h", 456, 8n), "h@member-1", "a new process finds the same file");
  assert.equal(localOffsetsClientId("DEFAULT", "h", 123, 7n), "h@123#7");
  // RocketMQ's <pid>#<nanoTime>: a later process given the same pid (pid 1 in a container) does not resume an earlier one's file
  assert.notEqual(localOffsetsClientId("DEFAULT", "h", 1, 7n), localOffsetsClientId("DEFAULT", "h", 1, 8n));
  const own = localOffsetsClientId("DEFAULT");
  assert.match(own, new RegExp(`@${process.pid}#\\d+$`));
  assert.equal(localOffsetsClientId("DEFAULT"), own, "the same for every consumer of this process");
});

test("freeze after OFFSET_ILLEGAL: later updates are ignored until the offset is removed", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const s = new LocalFileOffsetStore(localOffsetsPath(dir, "c", "g"));
    s.updateAndFreeze(q0, 100);
    s.updateOffset(q0, 150, true);
    assert.equal(s.readOffsetFromMemory(q0), 100);
    s.removeOffset(q0);
    s.updateOffset(q0, 3, false);
    assert.equal(s.readOffsetFromMemory(q0), 3);
  } finally {
    await cleanup();
  }
});

test("remote store: QUERY_CONSUMER_OFFSET not found is -1, other failures -2; persistAll sends held queues only", async () => {
  const stored = new Map<number, number>();
  const offsets = setup({
    types: {
      events: {} as { type: string; queueId?: number; commitOffset?: number; reply?: { ok(f?: object): void; fail(e: MQError): void } },
    },
  }).createMachine({
    on: {
      "*": {
        actions: ({ event }) => {
          if (event.type === "QUERY_CONSUMER_OFFSET") {
            if (event.queueId === 9) event.reply?.fail(new MQError("SYSTEM_BUSY", "busy"));
            else if (stored.has(event.queueId!)) event.reply?.ok({ offset: stored.get(event.queueId!) });
            else event.reply?.fail(new MQError("QUERY_NOT_FOUND", "none"));
          } else if (event.type === "UPDATE_CONSUMER_OFFSET") {
            stored.set(event.queueId!, event.commitOffset!);
            event.reply?.ok({});
          }
        },
      },
    },
  });
  const { broker, client } = await offsetsBrokerAndClient(offsets);
  try {
    const s = new RemoteOffsetStore({ node: client, brokerAddress: () => broker.address! }, "g");
    assert.equal(await s.readOffset(q0, "READ_FROM_STORE"), -1);
    assert.equal(await s.readOffset({ ...q0, queueId: 9 }, "READ_FROM_STORE"), -2);
    s.updateOffset(q0, 1024, false);
    s.updateOffset(q1, 5, false);
    await s.persistAll([q0]);
    assert.deepEqual([...stored], [[0, 1024]]);
    assert.equal(s.readOffsetFromMemory(q1), -1, "queues not held are forgotten");
    assert.equal(await s.readOffset(q0, "READ_FROM_STORE"), 1024);
  } finally {
    await client.close();
    await broker.close();
  }
});

test("remote store: a periodic persist may be dropped by an overloaded broker once its asker gave up; the last one at close, and a release, are served however late", async () => {
  // how each UPDATE_CONSUMER_OFFSET came: with a give-up time (droppable once past it) or served late (none)
  const came: string[] = [];
  const offsets = setup({
    types: { events: {} as { type: string; release?: boolean; reply?: { ok(f?: object): void; answerBy?: number } } },
  }).createMachine({
    on: {
      "*": {
        actions: ({ event }) => {
          if (event.type !== "UPDATE_CONSUMER_OFFSET") return;
          came.push(`${event.release ? "release" : "commit"} ${event.reply?.answerBy === undefined ? "late ok" : "droppable"}`);
          event.reply?.ok({});
        },
      },
    },
  });
  const { broker, client } = await offsetsBrokerAndClient(offsets);
  try {
    const s = new RemoteOffsetStore({ node: client, brokerAddress: () => broker.address! }, "g");
    s.updateOffset(q0, 7, false);
    await s.persistAll([q0]);
    await s.persistAll([q0], [], true);
    await s.persist(q0, true); // an orderly queue's last offset before its unlock
    s.updateOffset(q1, 3, false);
    await s.release(q1, "me");
    await s.persistAll([q0]);
    assert.deepEqual(came, ["commit droppable", "commit late ok", "commit late ok", "release late ok", "commit droppable"]);
  } finally {
    await client.close();
    await broker.close();
  }
});

test("remote store: persistAll keeps unsynced queues' offsets without sending them; resync reads as a take-over and keeps the larger", async () => {
  const stored = new Map<number, number>([
    [0, 250],
    [1, 90],
  ]);
  const queries: string[] = [];
  const offsets = setup({
    types: {
      events: {} as
        | (QueryConsumerOffsetRequest & { type: "QUERY_CONSUMER_OFFSET"; reply?: Replier })
        | (UpdateConsumerOffsetRequest & { type: "UPDATE_CONSUMER_OFFSET"; reply?: Replier }),
    },
  }).createMachine({
    on: {
      "*": {
        actions: ({ event: e }) => {
          if (e.type === "QUERY_CONSUMER_OFFSET") {
            queries.push(`${e.queueId}:${e.clientId ?? ""}:${e.waitRelease === true}`);
            e.reply?.ok({ offset: stored.get(e.queueId) });
          } else if (e.type === "UPDATE_CONSUMER_OFFSET") {
            stored.set(e.queueId, e.commitOffset);
            e.reply?.ok({});
          }
        },
      },
    },
  });
  const { broker, client } = await offsetsBrokerAndClient(offsets);
  try {
    const s = new RemoteOffsetStore({ node: client, brokerAddress: () => broker.address! }, "g");
    s.updateOffset(q0, 100, false);
    s.updateOffset(q1, 100, false);
    await s.persistAll([], [q0, q1]);
    assert.deepEqual([...stored].sort(), [
      [0, 250],
      [1, 90],
    ]);
    // a pull consumer's commit() (strict) is told they were not committed
    await assert.rejects(
      s.persistAll([], [q0, q1], false, true),
      (e: unknown) =>
        isMQError(e, "SERVICE_NOT_AVAILABLE") &&
        /T@broker-a@0 \(the connection to its broker was lost/.test(e.message) &&
        /T@broker-a@1 /.test(e.message),
    );
    assert.equal(stored.get(0), 250, "nothing sent");
    assert.equal(s.readOffsetFromMemory(q0), 100, "kept in memory");
    // another member went further on queue 0: taken; queue 1's older commit is this member's own
    assert.equal(await s.resync(q0, "A"), 250);
    assert.equal(await s.resync(q1, "A"), 90);
    assert.deepEqual(queries, ["0:A:true", "1:A:true"], "read as take-overs by A");
    assert.equal(s.readOffsetFromMemory(q0), 250);
    assert.equal(s.readOffsetFromMemory(q1), 100, "the larger offset in memory stays");
    await s.persistAll([q0, q1]);
    assert.deepEqual([...stored].sort(), [
      [0, 250],
      [1, 100],
    ]);
  } finally {
    await client.close();
    await broker.close();
  }
});

test("remote store: a release that cannot reach its broker is kept, sent at the next persist or before the queue's offset is read again", async () => {
  const calls: string[] = [];
  const stored = new Map<number, number>();
  const offsets = setup({
    types: {
      events: {} as {
        type: string;
        queueId?: number;
        commitOffset?: number;
        release?: boolean;
        reply?: { ok(f?: object): void; fail(e: MQError): void };
      },
    },
  }).createMachine({
    on: {
      "*": {
        actions: ({ event }) => {
          if (event.type === "QUERY_CONSUMER_OFFSET") {
            calls.push(`query ${event.queueId}`);
            event.reply?.ok({ offset: stored.get(event.queueId!) ?? 0 });
          } else if (event.type === "UPDATE_CONSUMER_OFFSET") {
            calls.push(`${event.release ? "release" : "commit"} ${event.queueId}@${event.commitOffset}`);
            stored.set(event.queueId!, event.commitOffset!);
            event.reply?.ok({});
          }
        },
      },
    },
  });
  const { broker, client } = await offsetsBrokerAndClient(offsets);
  try {
    // the route poll no longer names the broker (its name server restarted)
    let address: string | undefined;
    const s = new RemoteOffsetStore({ node: client, brokerAddress: () => address }, "g");
    s.updateOffset(q0, 70, false);
    s.updateOffset(q1, 69, false);
    await s.release(q0, "me");
    await s.release(q1, "me");
    s.removeOffset(q0);
    s.removeOffset(q1);
    assert.deepEqual(s.unreleasedQueues, [q0, q1], "kept, though the queues' offsets are forgotten");
    await s.persistAll([]);
    assert.deepEqual(calls, [], "no address yet");
    address = broker.address!;
    // taken again: its own release goes first, then the take-over reads the offset it committed
    assert.equal(await s.takeOver(q0, "me"), 70);
    assert.deepEqual(calls, ["release 0@70", "query 0"]);
    await s.persistAll([q0]);
    assert.deepEqual(calls, ["release 0@70", "query 0", "commit 0@70", "release 1@69"], "the other one at the next persist");
    assert.deepEqual(s.unreleasedQueues, []);
    calls.length = 0;
    await s.persistAll([q0]);
    assert.deepEqual(calls, ["commit 0@70"], "each release is sent once");
  } finally {
    await client.close();
    await broker.close();
  }
});

/**
 * Member A lets q0 go at 100, but its release cannot reach the broker and is kept; B takes q0 over
 * (after the hand-over timeout) from the older committed 50, consumes to 200 and lets it go too.
 * Then A's route is back and `resend` sends A's kept release. Returns the group's committed offset
 * after it (the broker's real offset table and hand-over rules behind a stand-in `offsets` actor).
 */
async function keptReleaseAfterAnotherHolder(resend: (a: RemoteOffsetStore) => Promise<unknown>): Promise<number> {
  const mgr = new ConsumerOffsetManager("/nonexistent/consumerOffset.json");
  mgr.isMember = () => true;
  const offsets = setup({
    types: {
      events: {} as
        | (QueryConsumerOffsetRequest & { type: "QUERY_CONSUMER_OFFSET"; reply?: Replier })
        | (UpdateConsumerOffsetRequest & { type: "UPDATE_CONSUMER_OFFSET"; reply?: Replier }),
    },
  }).createMachine({
    on: {
      "*": {
        actions: ({ event: e }) => {
          if (e.type === "QUERY_CONSUMER_OFFSET") {
            const answer = () => e.reply?.ok({ offset: mgr.queryOffset(e.consumerGroup, e.topic, e.queueId) });
            if (e.waitRelease && e.clientId) mgr.takeOver(e.consumerGroup, e.topic, e.queueId, e.clientId, 50, answer);
            else answer();
          } else if (e.type === "UPDATE_CONSUMER_OFFSET") {
            if (e.release && e.clientId) mgr.release(e.consumerGroup, e.topic, e.queueId, e.clientId, e.commitOffset);
            else mgr.commitOffset(e.consumerGroup, e.topic, e.queueId, e.commitOffset);
            e.reply?.ok({});
          }
        },
      },
    },
  });
  const { broker, client } = await offsetsBrokerAndClient(offsets);
  try {
    mgr.commitOffset("g", "T", 0, 50);
    mgr.notePuller("g", "T", 0, "A");
    let address: string | undefined;
    const a = new RemoteOffsetStore({ node: client, brokerAddress: () => address }, "g");
    a.updateOffset(q0, 100, false);
    await a.release(q0, "A");
    a.removeOffset(q0);
    assert.deepEqual(a.unreleasedQueues, [q0]);
    await new Promise<void>((answered) => mgr.takeOver("g", "T", 0, "B", 50, answered));
    mgr.commitOffset("g", "T", 0, 200);
    mgr.release("g", "T", 0, "B", 200);
    address = broker.address!;
    await resend(a);
    assert.deepEqual(a.unreleasedQueues, [], "answered: A forgets its release");
    return mgr.queryOffset("g", "T", 0);
  } finally {
    await client.close();
    await broker.close();
  }
}

test("remote store: a kept release that arrives after another member held the queue and let it go does not move the offset back", async () => {
  assert.equal(await keptReleaseAfterAnotherHolder((a) => a.persistAll([])), 200, "sent at the next persist");
  assert.equal(await keptReleaseAfterAnotherHolder((a) => a.takeOver(q0, "A")), 200, "sent before A takes the queue again");
});

test("local file store: a file that cannot be written rejects persistAll; its warning names the file, once per interval, always at close", async (t) => {
  const { dir, cleanup } = await tempDir();
  try {
    await writeFile(`${dir}/not-a-dir`, "x");
    const file = localOffsetsPath(`${dir}/not-a-dir`, "host@u", "g");
    const s = new LocalFileOffsetStore(file);
    s.updateOffset(q0, 3, true);
    const err = await s.persistAll([q0]).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof Error, "the write fails");
    t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
    monotonicFollowsDate(t);
    const lines = offsetWarnings(t);
    const warn = localPersistFailureLogger(file, "g");
    warn(err, false);
    assert.equal(lines.length, 1);
    assert.deepEqual(lines[0]!.fields, { group: "g", file, error: (err as Error).message, closing: false, suppressed: 0 });
    assert.ok(lines[0]!.msg.includes(file));
    warn(err, false);
    assert.equal(lines.length, 1, "held back within the interval");
    t.mock.timers.tick(LOCAL_OFFSETS_FAILURE_LOG_INTERVAL_MS);
    warn(err, false);
    assert.equal(lines.length, 2);
    assert.equal(lines[1]!.fields.suppressed, 1);
    warn(err, true);
    assert.equal(lines.length, 3, "the write at close is always reported");
    assert.match(lines[2]!.msg, /at close/);
  } finally {
    await cleanup();
  }
});
