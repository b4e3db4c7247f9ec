import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { assign, setup } from "xstate";
import { ActorNode, InspectionCollector, type InspectionRecord, type Replier } from "../../../actors/runtime/index.ts";
import { EPHEMERAL, waitFor } from "../../helpers.ts";

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
});
