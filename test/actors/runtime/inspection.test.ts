import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { after, describe, it } from "node:test";
import { assign, fromCallback, fromPromise, setup } from "xstate";
import { activeStateIds, definitionToGraph } from "../../../actors/inspector/statechartGraph.ts";
import {
  ActorNode,
  InspectionCollector,
  type InspectionRecord,
  MAX_INSPECTION_PUBLISHERS,
  machineDefinition,
  type Replier,
} from "../../../actors/runtime/index.ts";
import { INSPECTION_DROPPED_EVENT } from "../../../actors/runtime/inspection.ts";
import { EPHEMERAL, fakeWallClock, waitFor } from "../../helpers.ts";

const counter = setup({
  types: { context: {} as { n: number }, events: {} as { type: "ADD"; body?: Buffer; reply?: Replier } },
}).createMachine({
  id: "counter",
  context: { n: 0 },
  initial: "idle",
  states: {
    idle: { on: { ADD: { target: "busy", actions: [assign({ n: ({ context }) => context.n + 1 }), ({ event }) => event.reply?.ok({})] } } },
    busy: { on: { ADD: { target: "idle", actions: ({ event }) => event.reply?.ok({}) } } },
  },
});

describe("inspection", () => {
  const closers: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of closers.reverse()) await c();
  });

  it("streams actor, event and snapshot records locally, bodies summarised, nothing when unsubscribed", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    node.spawn("counter", counter);
    const records: InspectionRecord[] = [];
    const stop = node.inspect((r) => records.push(r));
    const actorRec = records.find((r) => r.kind === "actor");
    assert.ok(actorRec && actorRec.kind === "actor");
    assert.equal(actorRec.actorName, "counter");
    assert.equal(actorRec.nodeId, node.nodeId);
    assert.equal((actorRec.definition as { id: string }).id, "counter");
    await node.ref(null, "counter").ask({ type: "ADD" }, { body: Buffer.alloc(300) });
    const ev = records.find((r) => r.kind === "event" && r.type === "ADD");
    assert.ok(ev && ev.kind === "event");
    assert.deepEqual((ev.payload as { body: unknown }).body, { bytes: 300 });
    assert.equal((ev.payload as { reply?: unknown }).reply, undefined);
    const snap = [...records].reverse().find((r) => r.kind === "snapshot");
    assert.ok(snap && snap.kind === "snapshot");
    assert.equal(snap.value, "busy");
    assert.deepEqual(snap.context, { n: 1 });
    stop();
    const n = records.length;
    await node.ref(null, "counter").ask({ type: "ADD" });
    assert.equal(records.length, n, "no records after the last listener left");
  });

  it("a listener that came after every actor of a machine stopped gets its definition with the next such actor", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    const first: InspectionRecord[] = [];
    const stopFirst = node.inspect((r) => first.push(r));
    closers.push(async () => stopFirst());
    node.spawn("c1", counter);
    node.stopActor("c1");
    assert.ok(first.some((r) => r.kind === "actor" && r.actorName === "c1" && r.definition !== undefined));
    // a second listener (another inspector) arrives while no actor of the machine runs
    const second: InspectionRecord[] = [];
    const stopSecond = node.inspect((r) => second.push(r));
    closers.push(async () => stopSecond());
    node.spawn("c2", counter);
    const c2 = second.find((r) => r.kind === "actor" && r.actorName === "c2");
    assert.ok(c2 && c2.kind === "actor");
    assert.equal((c2.definition as { id?: string } | undefined)?.id, "counter", "the second listener can draw the chart");
  });

  it("an actor that stops while its dropped records wait for the flush sends nothing after its final snapshot", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    const records: InspectionRecord[] = [];
    const stop = node.inspect((r) => records.push(r));
    closers.push(async () => stop());
    node.spawn("gone", counter);
    node.spawn("marker", counter);
    const gone = node.actorOf("gone")!;
    const goneId = gone.sessionId;
    // both go over the per-second budget, so both wait for the same flush
    for (let i = 0; i < 200; i++) gone.send({ type: "ADD" });
    for (let i = 0; i < 200; i++) node.actorOf("marker")!.send({ type: "ADD" });
    node.stopActor("gone");
    const final = records.findIndex((r) => r.sessionId === goneId && r.kind === "snapshot" && r.status === "stopped");
    assert.ok(final >= 0, "the final snapshot went out at once");
    await waitFor(
      () => records.some((r) => r.actorName === "marker" && r.kind === "event" && r.type === INSPECTION_DROPPED_EVENT),
      5_000,
      "the flush of the dropped counts",
    );
    assert.deepEqual(
      records.slice(final + 1).filter((r) => r.sessionId === goneId),
      [],
      "no record of the stopped actor, under its name or a made-up one",
    );
  });

  it("lists the child actors a hosted actor invoked as it started, whether the listener came before or after", async () => {
    const kid = setup({}).createMachine({ id: "kid", initial: "a", states: { a: { on: { PING: "b" } }, b: {} } });
    const parent = setup({ actors: { kid, ticker: fromCallback(() => () => {}) } }).createMachine({
      id: "parent",
      invoke: [
        { id: "kid", src: "kid" },
        { id: "tick", src: "ticker" },
      ],
      initial: "run",
      states: { run: {} },
    });
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    const before: InspectionRecord[] = [];
    const stopBefore = node.inspect((r) => before.push(r));
    node.spawn("p1", parent);
    stopBefore();
    node.spawn("p2", parent);
    const later: InspectionRecord[] = [];
    const stopLater = node.inspect((r) => later.push(r));
    closers.push(async () => stopLater());
    for (const [records, name] of [
      [before, "p1"],
      [later, "p2"],
    ] as const) {
      const p = records.find((r) => r.kind === "actor" && r.actorName === name);
      assert.ok(p, `${name} announced`);
      for (const child of ["kid", "tick"]) {
        const c = records.find((r) => r.kind === "actor" && r.actorName === `${name}/${child}`);
        assert.ok(c && c.kind === "actor", `${name}/${child} announced`);
        assert.equal(c.parentSessionId, p.sessionId);
        assert.ok(records.some((r) => r.kind === "snapshot" && r.sessionId === c.sessionId && r.status === "active"));
      }
      const kidDef = records.find((r) => r.kind === "actor" && r.actorName === `${name}/kid`);
      assert.equal(kidDef?.kind === "actor" && kidDef.machineId, "kid");
      assert.ok(records.some((r) => r.kind === "snapshot" && r.actorName === `${name}/kid` && r.value === "a"));
    }
  });

  it("sends a snapshot's state value as deep as charts are drawn, its context cut as before", async () => {
    // 13 levels of states, l0 ... l12: the deepest a chart draws
    let states: Record<string, unknown> = { l12: {} };
    for (let i = 11; i >= 0; i--) states = { [`l${i}`]: { initial: `l${i + 1}`, states } };
    const deep = setup({}).createMachine({ id: "deep", initial: "l0", states, context: { a: { b: { c: { d: { e: 1 } } } } } } as never);
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    const records: InspectionRecord[] = [];
    const stop = node.inspect((r) => records.push(r));
    closers.push(async () => stop());
    node.spawn("deep", deep);
    const snap = records.find((r) => r.kind === "snapshot" && r.actorName === "deep");
    assert.ok(snap && snap.kind === "snapshot");
    assert.deepEqual(snap.value, node.actorOf("deep")!.getSnapshot().value);
    assert.deepEqual(snap.context, { a: { b: { c: { d: "…" } } } });
    const graph = definitionToGraph(machineDefinition(deep))!;
    assert.equal(graph.states.at(-1)!.id, "deep.l0.l1.l2.l3.l4.l5.l6.l7.l8.l9.l10.l11.l12");
    assert.equal(activeStateIds(graph, snap.value).length, 13, "every level lit");
  });

  it("publishes the stream over the wire, replaying definition and latest snapshot on subscribe", async () => {
    const node = await ActorNode.start({ listen: EPHEMERAL });
    closers.push(() => node.close());
    node.spawn("counter", counter);
    await node.ref(null, "counter").ask({ type: "ADD" });
    const collector = await InspectionCollector.start();
    closers.push(() => collector.close());
    const asker = await ActorNode.start({ listen: null });
    closers.push(() => asker.close());
    const nodeId = await collector.requestFrom(asker.ref(node.address, "counter"));
    assert.equal(nodeId, node.nodeId);
    const replayed = await waitFor(
      () => collector.records.find((r) => r.kind === "snapshot" && r.actorName === "counter"),
      5000,
      "replayed snapshot",
    );
    assert.ok(replayed.kind === "snapshot" && replayed.value === "busy");
    assert.ok(collector.records.some((r) => r.kind === "actor" && (r.definition as { id?: string } | undefined)?.id === "counter"));
    await node.ref(null, "counter").ask({ type: "ADD" });
    await waitFor(() => collector.records.find((r) => r.kind === "snapshot" && r.value === "idle"), 5000, "live snapshot over the wire");
    assert.ok(collector.records.some((r) => r.kind === "event" && r.type === "ADD" && r.nodeId === node.nodeId));
  });

  const publishersOf = (node: ActorNode) => (node as unknown as { publishers: Map<string, unknown> }).publishers;

  it("stops feeding on its actors when the subscriber leaves, and closes when its lease is not renewed", async () => {
    const node = await ActorNode.start({ listen: EPHEMERAL });
    closers.push(() => node.close());
    node.spawn("counter", counter);
    const asker = await ActorNode.start({ listen: null });
    closers.push(() => asker.close());
    const collector = await InspectionCollector.start();
    await collector.requestFrom(asker.ref(node.address, "counter"), undefined, 600);
    await waitFor(() => node.inspecting, 5000, "the collector subscribed");
    await collector.close();
    // the XPUB reports the lost subscriber: no observer, nothing encoded, long before the lease ends
    await waitFor(() => !node.inspecting, 3000, "detached once the subscriber is gone");
    assert.equal(publishersOf(node).size, 1, "the socket waits for its lease");
    await waitFor(() => publishersOf(node).size === 0, 3000, "the unrenewed lease closed the publisher");
  });

  it("a lease ends on time when the wall clock steps back meanwhile", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    await node.publishInspection("tcp://127.0.0.1:1", { leaseMs: 300 });
    assert.equal(publishersOf(node).size, 1);
    const clock = fakeWallClock();
    try {
      clock.jump(-3_600_000);
      await waitFor(() => publishersOf(node).size === 0, 3000, "the lease ended 300 ms later, not an hour later");
    } finally {
      clock.restore();
    }
  });

  it("detaches while the collector pauses and replays every actor, definition included, when it resumes", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    node.spawn("counter", counter);
    const collector = await InspectionCollector.start();
    closers.push(() => collector.close());
    await node.publishInspection(collector.endpoint);
    await waitFor(() => collector.records.some((r) => r.kind === "snapshot"), 5000, "first snapshot");
    collector.pause();
    await waitFor(() => !node.inspecting, 3000, "detached while paused");
    const n = collector.records.length;
    collector.resume();
    await waitFor(() => node.inspecting, 3000, "attached again");
    const replay = await waitFor(
      () => collector.records.slice(n).find((r) => r.kind === "actor" && r.definition !== undefined),
      3000,
      "definition replayed",
    );
    assert.equal(replay.actorName, "counter");
  });

  it("publishes to a bounded number of endpoints", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    const stops: (() => Promise<void>)[] = [];
    // nothing listens there: connecting is asynchronous and never fails
    for (let i = 0; i < MAX_INSPECTION_PUBLISHERS; i++) stops.push(await node.publishInspection(`tcp://127.0.0.1:${1 + i}`));
    await assert.rejects(node.publishInspection("tcp://127.0.0.1:100"), (e: Error & { code?: string }) => e.code === "SYSTEM_BUSY");
    await stops[0]!();
    await node.publishInspection("tcp://127.0.0.1:100");
    assert.equal(publishersOf(node).size, MAX_INSPECTION_PUBLISHERS);
  });

  it("a leased endpoint nobody subscribes on gives up its place to a new one", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    // nothing listens there: never subscribed, as endpoints a hostile peer names would be
    for (let i = 0; i < MAX_INSPECTION_PUBLISHERS; i++) await node.publishInspection(`tcp://127.0.0.1:${1 + i}`, { leaseMs: 600_000 });
    await node.publishInspection("tcp://127.0.0.1:100", { leaseMs: 600_000 });
    assert.equal(publishersOf(node).size, MAX_INSPECTION_PUBLISHERS);
    assert.ok(publishersOf(node).has("tcp://127.0.0.1:100"));
  });

  it("a publisher asked for while the node closes, after waiting on a stop (new key, idle place given up), is refused with CLOSED: no XPUB is left open", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "fixtures", "publishWhileClosing.ts")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    closers.push(async () => {
      child.kill("SIGKILL");
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    let code: number | null | undefined;
    child.once("exit", (c) => (code = c));
    // a publisher left open kept the process alive (the unleased one for good)
    await waitFor(() => code !== undefined, 30_000, "the process to exit by itself");
    assert.equal(code, 0, out);
    assert.match(out, /^new key: CLOSED$/m);
    assert.match(out, /^evicting: CLOSED$/m);
  });

  it("forgets the child actors that are over, each invoked promise or callback a session of its own", async () => {
    const looper = setup({ actors: { work: fromPromise(async () => 1), listen: fromCallback(() => () => {}) } }).createMachine({
      id: "looper",
      initial: "idle",
      states: {
        idle: { on: { GO: "busy", WAIT: "waiting" } },
        busy: { invoke: { src: "work", onDone: "idle" } },
        waiting: { invoke: { src: "listen" }, on: { BACK: "idle" } },
      },
    });
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    node.spawn("looper", looper);
    let records = 0;
    const stop = node.inspect(() => records++);
    const ref = node.ref(null, "looper");
    for (let i = 0; i < 100; i++) {
      ref.send({ type: "GO" });
      await waitFor(() => node.actorOf("looper")?.getSnapshot().value === "idle", 1000, "promise done");
      ref.send({ type: "WAIT" });
      ref.send({ type: "BACK" });
    }
    const hub = (node as unknown as { hub: { names: Map<string, string>; latest: Map<string, unknown> } }).hub;
    assert.ok(records > 400, `records ${records}`);
    assert.ok(hub.names.size <= 3, `the hub still names ${hub.names.size} sessions`);
    assert.ok(hub.latest.size <= 3, `the hub still holds ${hub.latest.size} actors`);
    stop();
  });

  it("lets go of hosted actors that stopped, failed and were restarted, or finished, and still sends their last snapshot", async () => {
    const node = await ActorNode.start({ listen: null });
    closers.push(() => node.close());
    const records: InspectionRecord[] = [];
    const stop = node.inspect((r) => records.push(r));
    closers.push(async () => stop());
    const hub = (node as unknown as { hub: { attached: Map<unknown, unknown> } }).hub;
    node.spawn("keeper", counter);
    // a consumer of one group started and closed again and again on a long-lived client instance
    for (let i = 0; i < 200; i++) {
      node.spawn("pull:cg", counter);
      await node.ref(null, "pull:cg").ask({ type: "ADD" });
      node.stopActor("pull:cg");
    }
    await waitFor(() => hub.attached.size === 1, 2000, "the hub attached to the running actor only");
    const stopped = records.filter((r) => r.kind === "snapshot" && r.actorName === "pull:cg" && r.status === "stopped");
    assert.equal(stopped.length, 200, "each stopped instance's last snapshot went out");
    // an actor whose invoked work fails unhandled is restarted: the failed instances are let go of
    const failing = setup({
      actors: {
        work: fromPromise(async () => {
          throw new Error("boom");
        }),
      },
    }).createMachine({
      id: "failing",
      initial: "idle",
      states: { idle: { on: { BOOM: "working" } }, working: { invoke: { src: "work" } } },
    });
    node.spawn("failing", failing, { supervision: { strategy: "restart", maxRestarts: 100, backoffMs: 1 } });
    for (let i = 0; i < 5; i++) {
      const before = node.actorOf("failing");
      node.ref(null, "failing").send({ type: "BOOM" });
      await waitFor(() => node.actorOf("failing") !== undefined && node.actorOf("failing") !== before, 2000, "restarted");
    }
    await waitFor(() => hub.attached.size === 2, 2000, "the hub attached to the running actors only");
    const failed = records.filter((r) => r.kind === "snapshot" && r.actorName === "failing" && r.status === "error");
    assert.equal(failed.length, 5, "each failure's last snapshot went out");
    // an actor that reaches its final state
    const once = setup({}).createMachine({
      id: "once",
      initial: "idle",
      states: { idle: { on: { END: "over" } }, over: { type: "final" } },
    });
    node.spawn("once", once);
    node.ref(null, "once").send({ type: "END" });
    await waitFor(() => hub.attached.size === 2, 2000, "the hub attached to the running actors only");
    assert.ok(
      records.some((r) => r.kind === "snapshot" && r.actorName === "once" && r.status === "done"),
      "the done snapshot went out",
    );
  });
});
