import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { assign, setup } from "xstate";
import {
  type ActorFailure,
  ActorNode,
  type InspectionRecord,
  logActorFailures,
  type Replier,
  type SpawnOptions,
  type Supervision,
} from "../../../actors/runtime/index.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { waitFor } from "../../helpers.ts";

let starts = 0;
const fragile = setup({
  types: { context: {} as { n: number }, events: {} as { type: "BOOM" } | { type: "INC" } | { type: "GET"; reply?: Replier } },
  actions: { countStart: () => void starts++ },
}).createMachine({
  context: { n: 0 },
  entry: "countStart",
  on: {
    BOOM: {
      actions: () => {
        throw new Error("boom");
      },
    },
    INC: { actions: assign({ n: ({ context }) => context.n + 1 }) },
    GET: { actions: ({ context, event }) => event.reply?.ok({ n: context.n }) },
  },
});

describe("supervision", () => {
  const nodes: ActorNode[] = [];
  after(async () => {
    for (const n of nodes) await n.close();
  });

  it("restarts a failing actor with backoff, reports each failure, stops after maxRestarts", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    const failures: ActorFailure[] = [];
    node.on("actorFailure", (f) => failures.push(f));
    const records: InspectionRecord[] = [];
    const stopInspect = node.inspect((r) => records.push(r));
    starts = 0;
    node.spawn("fragile", fragile, { supervision: { strategy: "restart", maxRestarts: 2, backoffMs: 20 } });
    const ref = node.ref(null, "fragile");
    ref.send({ type: "INC" });
    assert.equal((await ref.ask<{ n: number }>({ type: "GET" })).fields.n, 1);

    ref.send({ type: "BOOM" });
    assert.equal(failures.length, 1);
    assert.equal(failures[0]!.action, "restart");
    await assert.rejects(ref.ask({ type: "GET" }), (e) => isMQError(e, "SYSTEM_BUSY"));
    await waitFor(() => starts === 2, 2000, "first restart");
    assert.equal((await ref.ask<{ n: number }>({ type: "GET" })).fields.n, 0, "a restarted actor starts from its initial context");

    ref.send({ type: "BOOM" });
    await waitFor(() => starts === 3, 2000, "second restart");
    assert.equal(failures[1]!.backoffMs, 40, "backoff doubles");
    ref.send({ type: "BOOM" });
    assert.equal(failures.at(-1)!.action, "stop");
    await assert.rejects(ref.ask({ type: "GET" }), (e) => isMQError(e, "SYSTEM_ERROR"));
    assert.equal(node.stats().actorFailures, 3);
    assert.ok(records.some((r) => r.kind === "failure" && r.action === "stop"));
    stopInspect();
  });

  it("logActorFailures logs each failure at error with the error and what supervision did", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    const lines: { obj: Record<string, unknown>; msg: string }[] = [];
    const stop = logActorFailures(node, () => ({ error: (obj, msg) => lines.push({ obj: obj as Record<string, unknown>, msg }) }));
    starts = 0;
    node.spawn("fragile", fragile, { supervision: { strategy: "restart", maxRestarts: 1, backoffMs: 10 } });
    const ref = node.ref(null, "fragile");
    ref.send({ type: "BOOM" });
    await waitFor(() => starts === 2, 2000, "the restart");
    ref.send({ type: "BOOM" });
    assert.equal(lines.length, 2);
    assert.equal(lines[0]!.obj.actor, "fragile");
    assert.equal((lines[0]!.obj.err as Error).message, "boom");
    assert.match(lines[0]!.msg, /fragile failed; restarting it in 10 ms/);
    assert.match(lines[1]!.msg, /fragile failed and is stopped/);
    stop();
  });

  it("an instance that ran resetAfterMs before failing starts the restart count and backoff over", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    const failures: ActorFailure[] = [];
    node.on("actorFailure", (f) => failures.push(f));
    starts = 0;
    const resetAfterMs = 150;
    node.spawn("longLived", fragile, { supervision: { strategy: "restart", maxRestarts: 1, backoffMs: 5, resetAfterMs } });
    const ref = node.ref(null, "longLived");
    ref.send({ type: "BOOM" });
    await waitFor(() => starts === 2, 2000, "first restart");
    const restartedAt = performance.now();
    // the instance recovers: it runs past resetAfterMs, so its failure is the first of a new run
    await waitFor(() => performance.now() - restartedAt > resetAfterMs + 20, 2000, "instance ran resetAfterMs");
    ref.send({ type: "BOOM" });
    assert.deepEqual(
      failures.map((f) => [f.action, f.backoffMs]),
      [
        ["restart", 5],
        ["restart", 5],
      ],
      "restarted with the first backoff again, not stopped as the second of maxRestarts 1",
    );
    await waitFor(() => starts === 3, 2000, "second restart");
    // failing again at once is the second failure of this run: maxRestarts 1 stops it
    ref.send({ type: "BOOM" });
    assert.equal(failures.at(-1)!.action, "stop");
    await assert.rejects(ref.ask({ type: "GET" }), (e) => isMQError(e, "SYSTEM_ERROR"));
  });

  it("strategy stop stops at the first failure", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    const failures: ActorFailure[] = [];
    node.on("actorFailure", (f) => failures.push(f));
    node.spawn("once", fragile, { supervision: { strategy: "stop" } });
    node.ref(null, "once").send({ type: "BOOM" });
    assert.deepEqual(
      failures.map((f) => f.action),
      ["stop"],
    );
    assert.equal((failures[0]!.error as Error).message, "boom");
    await assert.rejects(node.ref(null, "once").ask({ type: "GET" }), (e) => isMQError(e, "SYSTEM_ERROR"));
  });

  it("spawn refuses supervision it cannot follow and logic that is not actor logic (ILLEGAL_ARGUMENT, nothing hosted)", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    const failures: ActorFailure[] = [];
    node.on("actorFailure", (f) => failures.push(f));
    const badSupervision: unknown[] = [
      null,
      "stop",
      { strategy: "Stop" },
      {},
      { strategy: "restart", maxRestarts: Number.NaN },
      { strategy: "restart", maxRestarts: -1 },
      { strategy: "restart", maxRestarts: 1.5 },
      { strategy: "restart", maxRestarts: "3" },
      { strategy: "restart", backoffMs: "fast" },
      { strategy: "restart", backoffMs: -1 },
      { strategy: "restart", backoffMs: 2 ** 31 },
      { strategy: "restart", resetAfterMs: 0 },
      { strategy: "restart", resetAfterMs: "1m" },
    ];
    for (const supervision of badSupervision) {
      assert.throws(
        () => node.spawn("x", fragile, { supervision: supervision as Supervision }),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /supervision/.test((e as Error).message),
        JSON.stringify(supervision),
      );
    }
    for (const logic of [undefined, null, {}, "machine", { transition: () => {} }]) {
      assert.throws(
        () => node.spawn("x", logic as unknown as typeof fragile),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /actor logic/.test((e as Error).message),
        JSON.stringify(logic),
      );
    }
    assert.throws(
      () => node.spawn("x", fragile, null as unknown as SpawnOptions),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT"),
    );
    assert.equal(node.actorOf("x"), undefined, "nothing hosted");
    assert.equal(failures.length, 0);
    node.spawn("x", fragile, { supervision: { strategy: "restart", maxRestarts: 0, backoffMs: 0 } });
    node.ref(null, "x").send({ type: "BOOM" });
    assert.deepEqual(
      failures.map((f) => f.action),
      ["stop"],
      "no restart allowed: stopped at once",
    );
  });
});
