/**
 * The runtime's per-actor inspection budget: a busy actor emits at most its budget of detailed
 * records a second, then one `@inspect.dropped` count and its latest snapshot per flush; a quiet
 * actor keeps every record; nothing is observed while nobody listens.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { assign, setup } from "xstate";
import { ActorNode, type InspectionRecord } from "../../../actors/runtime/index.ts";
import { DEFAULT_INSPECTION_RECORDS_PER_SECOND, INSPECTION_DROPPED_EVENT } from "../../../actors/runtime/inspection.ts";
import { waitFor } from "../../helpers.ts";

const counter = setup({ types: {} as { context: { n: number }; events: { type: "INC" } } }).createMachine({
  id: "counter",
  context: { n: 0 },
  initial: "odd",
  states: {
    odd: { on: { INC: { target: "even", actions: assign({ n: ({ context }) => context.n + 1 }) } } },
    even: { on: { INC: { target: "odd", actions: assign({ n: ({ context }) => context.n + 1 }) } } },
  },
});

test("a busy actor is bounded by its budget; dropped events are counted and the latest snapshot still arrives", async () => {
  const node = await ActorNode.start({ listen: null });
  try {
    node.spawn("busy", counter);
    node.spawn("quiet", counter);
    const busy = node.ref(null, "busy");
    const quiet = node.ref(null, "quiet");
    for (let i = 0; i < 10; i++) busy.send({ type: "INC" }); // before anyone listens: nothing observed
    const records: InspectionRecord[] = [];
    const stop = node.inspect((r) => records.push(r));
    const N = 2000;
    for (let i = 0; i < N; i++) busy.send({ type: "INC" });
    for (let i = 0; i < 3; i++) quiet.send({ type: "INC" });
    const mine = (name: string) => records.filter((r) => r.actorName === name);
    const dropped = await waitFor(
      () => mine("busy").find((r) => r.kind === "event" && r.type === INSPECTION_DROPPED_EVENT),
      3000,
      "a dropped count",
    );
    const last = await waitFor(
      () => mine("busy").find((r) => r.kind === "snapshot" && (r.context as { n?: number })?.n === N + 10),
      3000,
      "the latest snapshot",
    );
    assert.equal(last.kind === "snapshot" && last.value, (N + 10) % 2 === 0 ? "odd" : "even");
    const detailed = mine("busy").filter((r) => r.kind === "event" && r.type === "INC").length;
    // the attach snapshot is outside the per-second budget, so events + snapshots within one window
    assert.ok(detailed <= DEFAULT_INSPECTION_RECORDS_PER_SECOND, `${detailed} detailed events`);
    const counted = (dropped.kind === "event" && (dropped.payload as { events: number }).events) || 0;
    assert.ok(counted > 0 && detailed + counted <= N, `${detailed} detailed + ${counted} counted of ${N}`);
    // the quiet actor keeps every event and snapshot
    assert.equal(mine("quiet").filter((r) => r.kind === "event" && r.type === "INC").length, 3);
    assert.equal(mine("quiet").filter((r) => r.kind === "snapshot" && r.eventType === "INC").length, 3);
    stop();
  } finally {
    await node.close();
  }
});
