import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fromPromise, setup } from "xstate";
import {
  activeStateIds,
  definitionToGraph,
  eventLabel,
  MAX_CHART_STATES,
  MAX_CHART_TRANSITIONS,
} from "../../../actors/inspector/statechartGraph.ts";
import { renderStatechart } from "../../../actors/inspector/statechartSvg.ts";
import { machineDefinition } from "../../../actors/runtime/index.ts";

const demo = setup({
  types: {} as { events: { type: "GO" } | { type: "STOP" } | { type: "TICK" } },
  actors: { fetcher: fromPromise(async () => 1) },
}).createMachine({
  id: "demo",
  initial: "idle",
  on: { TICK: ".idle" },
  states: {
    idle: { on: { GO: "running" } },
    running: {
      initial: "a",
      invoke: { id: "fetcher", src: "fetcher" },
      states: { a: { after: { 100: "b" } }, b: { type: "parallel", states: { x: {}, y: {} } } },
      on: { STOP: { target: "idle" } },
    },
    done: { type: "final" },
  },
});

describe("definition -> statechart graph", () => {
  const g = definitionToGraph(machineDefinition(demo))!;

  it("lists every state with its id, dot path, type, parent and initial flag", () => {
    const byId = new Map(g.states.map((s) => [s.id, s]));
    assert.equal(g.machineId, "demo");
    assert.deepEqual([...byId.keys()].sort(), [
      "demo.done",
      "demo.idle",
      "demo.running",
      "demo.running.a",
      "demo.running.b",
      "demo.running.b.x",
      "demo.running.b.y",
    ]);
    assert.equal(byId.get("demo.running.b.x")!.path, "running.b.x");
    assert.equal(byId.get("demo.running.b.x")!.parent, "demo.running.b");
    assert.equal(byId.get("demo.running.b")!.type, "parallel");
    assert.equal(byId.get("demo.done")!.type, "final");
    assert.equal(byId.get("demo.idle")!.initial, true);
    assert.equal(byId.get("demo.running")!.initial, false);
    assert.equal(byId.get("demo.running.a")!.initial, true);
    assert.deepEqual(byId.get("demo.running")!.invokes, ["fetcher"]);
  });

  it("turns transitions into source -> targets edges with readable labels", () => {
    const edges = g.transitions.map((t) => `${t.source}-${t.label}->${t.targets.join(",")}`).sort();
    assert.ok(edges.includes("demo.idle-GO->demo.running"));
    assert.ok(edges.includes("demo.running-STOP->demo.idle"));
    assert.ok(edges.includes("demo.running.a-after 100ms->demo.running.b"));
    // a machine-level `on` applies from every top-level state
    assert.ok(edges.includes("demo.done-TICK->demo.idle"));
    assert.ok(edges.includes("demo.running-TICK->demo.idle"));
  });

  it("labels xstate's internal events", () => {
    assert.equal(eventLabel("xstate.after.250.m.s"), "after 250ms");
    assert.equal(eventLabel("xstate.done.actor.fetch"), "done: fetch");
    assert.equal(eventLabel("xstate.error.actor.fetch"), "error: fetch");
    assert.equal(eventLabel("PULL"), "PULL");
    // xstate's generated invoke ids (`<index>.<state id>`) read as the invoked src, or the state's key
    assert.equal(eventLabel("xstate.done.actor.0.m.busy", new Map([["0.m.busy", "round"]])), "done: round");
    assert.equal(eventLabel("xstate.error.actor.0.m.running.busy"), "error: busy");
  });

  it("names an invoke without an explicit id by its src, on the state and on its done/error edges", () => {
    const g3 = definitionToGraph({
      id: "m",
      states: {
        idle: { id: "m.idle", transitions: [{ eventType: "GO", target: ["#m.busy"] }] },
        busy: {
          id: "m.busy",
          invoke: [
            { src: "round", type: "xstate.invoke", id: "0.m.busy" },
            { src: "other", id: "named" },
          ],
          transitions: [
            { eventType: "xstate.done.actor.0.m.busy", target: ["#m.idle"] },
            { eventType: "xstate.error.actor.named", target: ["#m.idle"] },
          ],
        },
      },
    })!;
    assert.deepEqual(g3.states.find((s) => s.key === "busy")!.invokes, ["round", "named"]);
    assert.deepEqual(
      g3.transitions.map((t) => t.label),
      ["GO", "done: round", "error: named"],
    );
  });

  it("draws eventless (always) transitions, guarded or not, at every level", () => {
    const m = setup({ guards: { ready: () => false } }).createMachine({
      id: "ev",
      initial: "idle",
      states: {
        idle: { always: { guard: "ready", target: "registering" }, on: { GO: "registering" } },
        registering: { initial: "a", states: { a: { always: "b" }, b: { always: [{ guard: "ready", target: "#ev.idle" }] } } },
      },
    });
    const edges = definitionToGraph(machineDefinition(m))!.transitions.map((t) => `${t.source}-${t.label}->${t.targets.join(",")}`);
    assert.deepEqual(edges.sort(), [
      "ev.idle-GO->ev.registering",
      "ev.idle-always->ev.registering",
      "ev.registering.a-always->ev.registering.b",
      "ev.registering.b-always->ev.idle",
    ]);
  });

  it("refuses what is not a definition and drops edges to unknown states", () => {
    assert.equal(definitionToGraph(null), null);
    assert.equal(definitionToGraph({ id: 3 }), null);
    assert.equal(definitionToGraph({ id: "m" }), null);
    const g2 = definitionToGraph({
      id: "m",
      states: {
        s: { id: "m.s", transitions: [{ eventType: "E", target: ["#m.nowhere"] }, { eventType: "F", target: ["#m.s"] }, "junk"] },
        t: 5,
      },
    })!;
    assert.deepEqual(
      g2.states.map((s) => s.id),
      ["m.s"],
    );
    assert.deepEqual(
      g2.transitions.map((t) => t.event),
      ["F"],
    );
  });

  it("maps snapshot values to active state ids at every level", () => {
    assert.deepEqual(activeStateIds(g, "idle"), ["demo.idle"]);
    assert.deepEqual(activeStateIds(g, { running: "a" }), ["demo.running", "demo.running.a"]);
    assert.deepEqual(activeStateIds(g, { running: { b: { x: {}, y: {} } } }).sort(), [
      "demo.running",
      "demo.running.b",
      "demo.running.b.x",
      "demo.running.b.y",
    ]);
  });

  it("lays the chart out with elkjs into an SVG with a box per state and a path per transition", async () => {
    const c = await renderStatechart(g);
    assert.match(c.svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    for (const s of g.states) assert.ok(c.svg.includes(`data-state="${s.id}"`), s.id);
    for (const t of g.transitions) assert.match(c.svg, new RegExp(`data-transition="${t.id}"[^>]*><path d="M[-\\d.]+,[-\\d.]+ L`));
    // nested boxes sit inside their parent's box
    const box = (id: string) => {
      const m = new RegExp(
        `data-state="${id.replace(/\./g, "\\.")}"><title>[^<]*</title><rect x="([\\d.]+)" y="([\\d.]+)" width="([\\d.]+)" height="([\\d.]+)"`,
      ).exec(c.svg)!;
      return m.slice(1).map(Number) as [number, number, number, number];
    };
    const [px, py, pw, ph] = box("demo.running");
    const [cx, cy, cw, ch] = box("demo.running.b.x");
    assert.ok(cx >= px && cy >= py && cx + cw <= px + pw && cy + ch <= py + ph, "child inside parent");
    assert.deepEqual(
      c.states.find((s) => s.id === "demo.running.b.y"),
      { id: "demo.running.b.y", path: "running.b.y" },
    );
  });

  /** A flat machine of `n` states, each with `t` transitions to others. */
  function wideMachine(n: number, t: number) {
    const states: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) {
      const transitions = [];
      for (let j = 0; j < t; j++) transitions.push({ eventType: `E${j}`, target: [`#m.s${(i + j + 1) % n}`] });
      states[`s${i}`] = { id: `m.s${i}`, transitions };
    }
    return { id: "m", initial: { target: ["#m.s0"] }, states };
  }

  it("lays out machines up to its bounds and draws a note, without laying out, for larger ones", async () => {
    assert.equal(definitionToGraph(wideMachine(MAX_CHART_STATES, 1))!.tooLarge, undefined);
    assert.equal(definitionToGraph(wideMachine(MAX_CHART_TRANSITIONS / 2, 2))!.tooLarge, undefined);
    for (const def of [wideMachine(MAX_CHART_STATES + 1, 0), wideMachine(40, 3), wideMachine(400, 20)]) {
      const g = definitionToGraph(def)!;
      assert.ok(g.tooLarge, "too large");
      assert.ok(
        g.states.length <= MAX_CHART_STATES + 1 && g.transitions.length <= MAX_CHART_TRANSITIONS + 1,
        "counting stops at the bounds",
      );
      const t0 = Date.now();
      const chart = await renderStatechart(g);
      assert.ok(Date.now() - t0 < 100, "no layout");
      assert.match(chart.svg, /too large to draw/);
      assert.deepEqual(chart.states, []);
    }
  });
});
