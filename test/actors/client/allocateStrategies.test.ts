import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  type AllocateOptions,
  type AllocateStrategy,
  allocateAveragely,
  allocateAveragelyByCircle,
  allocateByConfig,
  allocateByMachineRoom,
  allocateConsistentHash,
  allocateStrategies,
  checkAllocateOptions,
  createConsistentHashStrategy,
  getAllocateStrategy,
  md5Hash32,
  messageQueueString,
} from "../../../actors/client/allocateStrategies.ts";
import { isMQError, type MessageQueue, mqKey } from "../../../transport/protocol.ts";

function queues(n: number, topic = "topic_test", brokerName = "broker-a"): MessageQueue[] {
  return Array.from({ length: n }, (_, queueId) => ({ topic, brokerName, queueId }));
}
function cids(m: number, prefix = "CID_PREFIX"): string[] {
  return Array.from({ length: m }, (_, i) => `${prefix}${i}`);
}
function ids(mqs: MessageQueue[]): number[] {
  return mqs.map((q) => q.queueId);
}
function allocateAll(s: AllocateStrategy, mqAll: MessageQueue[], cidAll: string[], options?: object): number[][] {
  return cidAll.map((c) => ids(s("g", c, mqAll, cidAll, options)));
}
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

describe("AVERAGELY", () => {
  it("reference table", () => {
    const table: Array<[number, number, number[][]]> = [
      [
        10,
        4,
        [
          [0, 1, 2],
          [3, 4, 5],
          [6, 7],
          [8, 9],
        ],
      ],
      [
        8,
        3,
        [
          [0, 1, 2],
          [3, 4, 5],
          [6, 7],
        ],
      ],
      [8, 2, [range(0, 3), range(4, 7)]],
      [
        9,
        4,
        [
          [0, 1, 2],
          [3, 4],
          [5, 6],
          [7, 8],
        ],
      ],
      [16, 5, [range(0, 3), [4, 5, 6], [7, 8, 9], [10, 11, 12], [13, 14, 15]]],
      [4, 4, [[0], [1], [2], [3]]],
      [3, 5, [[0], [1], [2], [], []]],
      [1, 2, [[0], []]],
    ];
    for (const [n, m, expected] of table) assert.deepEqual(allocateAll(allocateAveragely, queues(n), cids(m)), expected, `${n}/${m}`);
  });
  it("10 queues / 4 consumers gives counts 3,3,2,2 and a stranger gets nothing", () => {
    assert.deepEqual(
      allocateAll(allocateAveragely, queues(10), cids(4)).map((x) => x.length),
      [3, 3, 2, 2],
    );
    assert.deepEqual(allocateAveragely("g", "CID_PREFIX", queues(10), cids(4)), []);
  });
});

describe("AVERAGELY_BY_CIRCLE", () => {
  it("reference vectors", () => {
    assert.deepEqual(allocateAll(allocateAveragelyByCircle, queues(10), cids(4)), [
      [0, 4, 8],
      [1, 5, 9],
      [2, 6],
      [3, 7],
    ]);
    assert.deepEqual(allocateAll(allocateAveragelyByCircle, queues(8), cids(3)), [
      [0, 3, 6],
      [1, 4, 7],
      [2, 5],
    ]);
    assert.deepEqual(allocateAll(allocateAveragelyByCircle, queues(16), cids(5)), [
      [0, 5, 10, 15],
      [1, 6, 11],
      [2, 7, 12],
      [3, 8, 13],
      [4, 9, 14],
    ]);
    assert.deepEqual(allocateAll(allocateAveragelyByCircle, queues(2), cids(3)), [[0], [1], []]);
    assert.deepEqual(allocateAveragelyByCircle("g", "CID_PREFIX", queues(10), cids(4)), []);
  });
});

describe("CONSISTENT_HASH", () => {
  it("hash function matches the reference", () => {
    assert.equal(md5Hash32("CID-0-0"), 1900518137);
    assert.equal(md5Hash32(messageQueueString({ topic: "topic_test", brokerName: "broker-a", queueId: 0 })), 343361423);
  });
  it("6 queues, 10 virtual nodes: CID-0 {1,3,4,5}, CID-1 {0,2}; adding CID-2 changes nothing", () => {
    assert.deepEqual(allocateAll(allocateConsistentHash, queues(6), ["CID-0", "CID-1"]), [
      [1, 3, 4, 5],
      [0, 2],
    ]);
    assert.deepEqual(allocateAll(allocateConsistentHash, queues(6), ["CID-0", "CID-1", "CID-2"]), [[1, 3, 4, 5], [0, 2], []]);
  });
  it("8 queues, 3 virtual nodes, then CID-0 leaves", () => {
    const s = createConsistentHashStrategy(3);
    assert.deepEqual(allocateAll(s, queues(8), ["CID-0", "CID-1", "CID-2"]), [[1, 4, 5], [0, 2, 6, 7], [3]]);
    assert.deepEqual(allocateAll(s, queues(8), ["CID-1", "CID-2"]), [[0, 1, 2, 4, 5, 6, 7], [3]]);
    assert.deepEqual(allocateAll(allocateConsistentHash, queues(8), ["CID-0", "CID-1", "CID-2"], { virtualNodes: 3 }), [
      [1, 4, 5],
      [0, 2, 6, 7],
      [3],
    ]);
  });
  it("only the queues of a removed consumer move; only queues gained by an added consumer move", () => {
    const s = createConsistentHashStrategy(3);
    for (const [n, m] of [
      [20, 10],
      [10, 20],
    ] as const) {
      const mqAll = queues(n);
      const all = cids(m);
      const owner = (cidAll: string[]) => {
        const o = new Map<number, string>();
        for (const c of cidAll) for (const q of s("g", c, mqAll, cidAll)) o.set(q.queueId, c);
        return o;
      };
      const before = owner(all);
      assert.equal(before.size, n);
      const removed = all[3]!;
      const after = owner(all.filter((c) => c !== removed));
      for (const [q, c] of before) if (c !== removed) assert.equal(after.get(q), c);
      const added = owner([...all, "CID_NEW"]);
      for (const [q, c] of added) if (c !== "CID_NEW") assert.equal(before.get(q), c);
    }
  });
  it("rejects negative virtual node counts", () => {
    assert.throws(
      () => createConsistentHashStrategy(-1),
      (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"),
    );
  });
});

describe("BY_CONFIG and BY_MACHINE_ROOM", () => {
  it("BY_CONFIG gives every consumer the configured list", () => {
    const configured = queues(4);
    const all = queues(8);
    for (const c of cids(2)) assert.deepEqual(allocateByConfig("g", c, all, cids(2), { messageQueueList: configured }), configured);
    assert.throws(
      () => allocateByConfig("g", "c", all, ["c"]),
      (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"),
    );
  });
  it("BY_MACHINE_ROOM splits the chosen rooms' queues", () => {
    const mqAll = [
      ...queues(5).map((q) => ({ ...q, brokerName: "room1@broker-a" })),
      ...queues(10)
        .slice(5)
        .map((q) => ({ ...q, brokerName: "room2@broker-b" })),
    ];
    const options = { consumeridcs: ["room1"] };
    assert.deepEqual(allocateAll(allocateByMachineRoom, mqAll, cids(2), options), [
      [0, 1, 4],
      [2, 3],
    ]);
    assert.throws(
      () => allocateByMachineRoom("g", "CID_PREFIX0", [], cids(2), options),
      (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /mqAll is null or mqAll empty/.test((e as Error).message),
    );
  });
});

describe("BY_MACHINE_ROOM with broker names a broker accepts", () => {
  const rooms: Record<string, string> = { "broker-a": "room1", "broker-b": "room2", "broker-c": "room1" };
  const machineRoomOf = (brokerName: string) => rooms[brokerName];
  it("machineRoomOf maps each broker to its room: the chosen rooms' queues are split, the others left out", () => {
    const mqAll = [
      ...queues(3, "T", "broker-a"),
      ...queues(4, "T", "broker-b"),
      ...queues(2, "T", "broker-c"),
      ...queues(2, "T", "broker-d"),
    ];
    const got = cids(2).map((c) => allocateByMachineRoom("g", c, mqAll, cids(2), { consumeridcs: ["room1"], machineRoomOf }));
    assert.deepEqual(
      got.map((qs) => qs.map((q) => `${q.brokerName}:${q.queueId}`)),
      [
        ["broker-a:0", "broker-a:1", "broker-c:1"],
        ["broker-a:2", "broker-c:0"],
      ],
    );
  });
  it("a consumer's configuration that can never allocate a queue is refused", () => {
    const refused = (options: object | undefined, pattern: RegExp) =>
      assert.throws(
        () => checkAllocateOptions("BY_MACHINE_ROOM", options as AllocateOptions),
        (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && pattern.test((e as Error).message),
      );
    refused(undefined, /consumeridcs/);
    refused({ consumeridcs: [], machineRoomOf }, /consumeridcs/);
    refused({ consumeridcs: "room1", machineRoomOf }, /consumeridcs/);
    refused({ consumeridcs: ["room1"] }, /machineRoomOf/);
    const ok = checkAllocateOptions("BY_MACHINE_ROOM", { consumeridcs: new Set(["room1"]), machineRoomOf });
    assert.deepEqual(ok?.consumeridcs, ["room1"]);
    assert.throws(
      () => checkAllocateOptions("BY_CONFIG", {}),
      (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT") && /messageQueueList/.test((e as Error).message),
    );
    assert.equal(checkAllocateOptions("AVERAGELY", undefined), undefined);
  });
});

describe("common pre-checks and the registry", () => {
  it("empty currentCID / mqAll / cidAll are errors", () => {
    for (const name of ["AVERAGELY", "AVERAGELY_BY_CIRCLE", "CONSISTENT_HASH"] as const) {
      const s = allocateStrategies[name];
      assert.throws(() => s("g", "", queues(2), ["a"]), /currentCID is empty/);
      assert.throws(() => s("g", "a", [], ["a"]), /mqAll is null or mqAll empty/);
      assert.throws(() => s("g", "a", queues(2), []), /cidAll is null or cidAll empty/);
    }
  });
  it("looks strategies up by name", () => {
    assert.equal(getAllocateStrategy("AVERAGELY"), allocateAveragely);
    assert.throws(
      () => getAllocateStrategy("toString"),
      (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"),
    );
  });
  it("AVERAGELY, BY_CIRCLE and CONSISTENT_HASH partition the queues across the group", () => {
    const arb = fc.record({
      n: fc.integer({ min: 1, max: 40 }),
      m: fc.integer({ min: 1, max: 12 }),
      brokers: fc.integer({ min: 1, max: 3 }),
    });
    fc.assert(
      fc.property(arb, ({ n, m, brokers }) => {
        const mqAll = Array.from({ length: brokers }, (_, b) => queues(n, "T", `broker-${b}`)).flat();
        const cidAll = Array.from({ length: m }, (_, i) => `10.0.0.${i}@${i}`).sort();
        for (const name of ["AVERAGELY", "AVERAGELY_BY_CIRCLE", "CONSISTENT_HASH"] as const) {
          const seen = new Map<string, number>();
          for (const c of cidAll)
            for (const q of allocateStrategies[name]("g", c, mqAll, cidAll)) seen.set(mqKey(q), (seen.get(mqKey(q)) ?? 0) + 1);
          if (seen.size !== mqAll.length || [...seen.values()].some((v) => v !== 1)) return false;
        }
        return true;
      }),
      { numRuns: 150 },
    );
  });
});
