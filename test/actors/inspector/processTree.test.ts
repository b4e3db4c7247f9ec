import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { ProcessTree } from "../../../actors/inspector/processTree.ts";
import { INSPECTION_HEARTBEAT_EVENT, INSPECTION_NODE_CLOSED_EVENT, type InspectionRecord } from "../../../actors/runtime/index.ts";

/** A short-lived client process: a rebalancer holding a queue, then its farewell. */
function clientRun(tree: ProcessTree, i: number): void {
  const base = { nodeId: `client:${i}`, sessionId: `s${i}`, time: Date.now() };
  const records: InspectionRecord[] = [
    { ...base, actorName: "rebalancer", kind: "actor", machineId: "rebalancer", definition: { id: "rebalancer", states: {} } },
    {
      ...base,
      actorName: "rebalancer",
      kind: "snapshot",
      status: "active",
      value: "idle",
      context: { group: "g", assigned: [{ topic: "T", queueId: i % 4, brokerName: "b" }] },
    },
    { ...base, actorName: "(node)", sessionId: "", kind: "event", type: INSPECTION_NODE_CLOSED_EVENT, payload: {} },
  ];
  for (const r of records) tree.apply(r);
}

describe("process tree", () => {
  it("forgets the longest-gone processes past its bound, with their contexts and definitions", () => {
    const tree = new ProcessTree(2000, 5);
    for (let i = 0; i < 50; i++) clientRun(tree, i);
    const ids = tree.view().map((n) => n.nodeId);
    assert.deepEqual(ids.sort(), ["client:45", "client:46", "client:47", "client:48", "client:49"]);
    const inner = tree as unknown as { rebalancerContexts: Map<string, unknown>; definitions: Map<string, unknown> };
    assert.equal(inner.rebalancerContexts.size, 5);
    assert.equal([...inner.definitions.keys()].filter((k) => k.startsWith("client:0\u0000")).length, 0);
    assert.ok(tree.definition("client:49", "rebalancer"), "the machine's definition is still known");
  });

  it("keeps alive processes whatever their number, and a process that came back is not forgotten", () => {
    const tree = new ProcessTree(2000, 2);
    for (let i = 0; i < 10; i++) tree.markAlive(`alive:${i}`);
    clientRun(tree, 1);
    tree.markAlive("client:1");
    for (let i = 2; i < 6; i++) clientRun(tree, i);
    const ids = tree.view().map((n) => n.nodeId);
    assert.equal(ids.filter((id) => id.startsWith("alive:")).length, 10);
    assert.ok(ids.includes("client:1"), "back again, so not among the gone");
    assert.deepEqual(ids.filter((id) => id.startsWith("client:") && id !== "client:1").sort(), ["client:4", "client:5"]);
  });

  it("shows processes whose heartbeats stopped as gone, within its bound, and leaves those that send none", () => {
    mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
    const tree = new ProcessTree(2000, 3, () => Date.now());
    const heartbeat = (nodeId: string): InspectionRecord => ({
      nodeId,
      actorName: "(node)",
      sessionId: "",
      time: Date.now(),
      kind: "event",
      type: INSPECTION_HEARTBEAT_EVENT,
      payload: {},
    });
    for (let i = 0; i < 10; i++) {
      tree.apply({ nodeId: `killed:${i}`, actorName: "toggle", sessionId: `s${i}`, time: Date.now(), kind: "actor", machineId: "toggle" });
      tree.apply(heartbeat(`killed:${i}`));
    }
    mock.timers.tick(6000);
    tree.markAlive("probed");
    tree.apply(heartbeat("late"));
    tree.markSilentGone(Date.now() - 1000);
    mock.timers.reset();
    const view = tree.view();
    const late = view.find((n) => n.nodeId === "late")!;
    assert.equal(view.find((n) => n.nodeId === "probed")?.status, "alive", "no heartbeats: left to its probes");
    assert.equal(late.status, "alive", "heard from since");
    const gone = view.filter((n) => n.status === "gone");
    assert.equal(gone.length, 3, "the bound of gone processes holds");
    assert.ok(
      gone.every((n) => n.nodeId.startsWith("killed:") && n.actors.length === 1),
      "last state kept",
    );
    assert.equal(late.records, 0, "a heartbeat is not a record of the process's actors");
  });

  it("keeps who pulled a queue per group: two groups pulling one queue are both assigned", () => {
    const tree = new ProcessTree();
    const time = Date.now();
    // a push consumer's pull actor, and a pull consumer's
    for (const [i, [group, actor]] of [
      ["cgOrders", "pull"],
      ["cgAudit", "pull-loop"],
    ].entries()) {
      const base = { nodeId: `client:${i}`, actorName: `${group}/${actor}`, sessionId: `s${i}`, time };
      tree.apply({ ...base, kind: "actor", machineId: "pull" });
      tree.apply({ ...base, kind: "event", type: "PULL", payload: { mq: { topic: "Shared", brokerName: "b", queueId: 0 } } });
    }
    const held = tree
      .assignments()
      .map((a) => `${a.group} ${a.topic}@${a.brokerName}@${a.queueId} ${a.nodeId}`)
      .sort();
    assert.deepEqual(held, ["cgAudit Shared@b@0 client:1", "cgOrders Shared@b@0 client:0"]);
  });
});
