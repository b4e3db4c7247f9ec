import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createActor, type InspectionEvent } from "xstate";
import { type PullResultEvent, type PullService, pullServiceMachine } from "../../../actors/client/pullService.ts";

/** A stand-in for the loop: the machine only sets its onPullResult and calls suspend/resume/stop. */
function fakeService(): PullService {
  return { onPullResult: null, suspend() {}, resume() {}, stop() {} } as unknown as PullService;
}

function result(count: number): PullResultEvent {
  return { type: "PULL_RESULT", topic: "t", brokerName: "b", queueId: 0, status: count > 0 ? "FOUND" : "NO_NEW_MSG", count, nextOffset: 0 };
}

function start(inspecting: boolean) {
  const service = fakeService();
  const seen: string[] = [];
  const actor = createActor(pullServiceMachine, {
    input: { service, inspecting: () => inspecting },
    inspect: (ev: InspectionEvent) => {
      if (ev.type === "@xstate.event" && ev.event.type === "PULL_RESULT") seen.push(String(ev.event.count));
    },
  }).start();
  const report = (count: number) => service.onPullResult!(result(count));
  const state = () => (actor.getSnapshot().value as { running: string }).running;
  return { actor, report, state, seen };
}

describe("pull service actor: PULL_RESULT events", () => {
  it("without an inspector, only results that change the state reach the machine", () => {
    const { report, state, seen } = start(false);
    assert.equal(state(), "waiting");
    report(0); // still waiting: skipped
    report(3);
    assert.equal(state(), "found");
    report(5); // still found: skipped
    report(2);
    report(0);
    assert.equal(state(), "waiting");
    report(0);
    report(1);
    assert.equal(state(), "found");
    assert.deepEqual(seen, ["3", "0", "1"]);
  });

  it("with an inspector, every result is an event (the timeline shows each pull)", () => {
    const { report, state, seen } = start(true);
    for (const n of [0, 3, 5, 0, 0]) report(n);
    assert.equal(state(), "waiting");
    assert.deepEqual(seen, ["0", "3", "5", "0", "0"]);
  });

  it("while suspended, results change nothing and resuming starts from waiting", () => {
    const { actor, report, state, seen } = start(false);
    report(4);
    actor.send({ type: "SUSPEND" });
    report(0);
    report(7);
    assert.deepEqual(actor.getSnapshot().value, "suspended");
    actor.send({ type: "RESUME" });
    assert.equal(state(), "waiting");
    report(2);
    assert.equal(state(), "found");
    assert.deepEqual(seen, ["4", "2"]);
  });
});
