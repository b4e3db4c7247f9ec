/**
 * The inspector page against records it cannot trust: a loaded timeline file may hold anything
 * (the server checks what arrives over the wire; a file is read by the page alone).
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Inspector } from "../../index.ts";
import { openBrowser } from "../actors/inspector/browser.ts";

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

async function pageWithFile(file: unknown) {
  const insp = await Inspector.start({});
  cleanups.push(() => insp.close());
  const b = await openBrowser();
  cleanups.push(() => b.close());
  await b.page.goto(insp.url);
  await b.page.evaluate(
    (t) => (window as unknown as { inspectorApp: { loadTimeline(t: string, n: string): void } }).inspectorApp.loadTimeline(t, "f.json"),
    JSON.stringify(file),
  );
  return b;
}

const timeline = (entries: unknown[], nodes: unknown[] = [], charts: unknown = {}) => ({
  format: "actormq-timeline",
  version: 1,
  nodes,
  charts,
  entries,
});
const event = (seq: number, type: string, time: number) => ({
  seq,
  record: { kind: "event", nodeId: "n", actorName: "a", sessionId: "s", time, type, payload: {} },
});

test("a record time a Date cannot hold neither breaks the timeline nor what follows it", async () => {
  const b = await pageWithFile(timeline([event(1, "GOOD", Date.now()), event(2, "BAD", 9e15), event(3, "AFTER", Date.now())]));
  await b.page.waitForSelector('#timeline li.entry[data-type="AFTER"]', { timeout: 3000 });
  assert.equal(await b.page.locator('#timeline li.entry[data-type="BAD"] .time').textContent(), "?");
  assert.deepEqual(b.errors, []);
});

test("markup in a loaded timeline's fields and charts stays text", async () => {
  const X = '"><b class="pwned">X</b><i x="';
  const actor = { key: "n|a", nodeId: "n", actorName: "a", sessionId: "s", machineId: "m", hasChart: true, lastTime: 0 };
  const b = await pageWithFile(
    timeline(
      [
        // dropped: a seq that is not a number, a kind that is not a record kind
        { seq: `1${X}`, record: { kind: "event", nodeId: "n", actorName: "a", sessionId: "s", time: 0, type: "E", payload: {} } },
        { seq: 2, record: { kind: `event${X}`, nodeId: "n", actorName: "a", sessionId: "s", time: 0, type: "E", payload: {} } },
        {
          seq: 3,
          topic: `t${X}`,
          record: { kind: "event", nodeId: "n", actorName: `a${X}`, sessionId: "s", time: 0, type: `F${X}`, payload: { x: X } },
        },
      ],
      [
        {
          nodeId: "n",
          role: "client",
          status: "alive",
          records: `1${X}`,
          actors: [{ ...actor, status: `active${X}`, events: `0${X}`, failures: `1${X}` }],
        },
      ],
      {
        m: {
          machineId: "m",
          svg: `<svg xmlns="http://www.w3.org/2000/svg"><g data-state="m.a" onclick="alert(1)"><rect/></g><foreignObject><b xmlns="http://www.w3.org/1999/xhtml" class="pwned">svg</b></foreignObject><a href="http://attacker.example/"><text>x</text></a></svg>`,
          states: [],
          transitions: [],
        },
      },
    ),
  );
  await b.page.click("#tree li.actor");
  await b.page.waitForSelector('#chart svg g[data-state="m.a"]', { state: "attached" });
  const where = await b.page.evaluate(() => [...document.querySelectorAll(".pwned, #chart a, #chart [onclick]")].map((e) => e.outerHTML));
  assert.deepEqual(where, []);
  assert.equal(await b.page.locator("#timeline li.entry").count(), 1, "only the entry with a seq that is a number and a known kind");
  await b.page.click("#timeline li.entry");
  await b.page.waitForSelector("#timeline pre.payload");
  assert.equal(await b.page.locator(".pwned").count(), 0, "nor in an expanded entry");
  assert.deepEqual(b.errors, []);
});

test("a chart in a loaded timeline that is not an SVG drawing is not shown", async () => {
  const actor = {
    key: "n|a",
    nodeId: "n",
    actorName: "a",
    sessionId: "s",
    machineId: "m",
    hasChart: true,
    status: "active",
    events: 0,
    failures: 0,
    lastTime: 0,
  };
  const b = await pageWithFile(
    timeline([], [{ nodeId: "n", role: "client", status: "alive", records: 0, actors: [actor] }], {
      m: { machineId: "m", svg: '<b class="pwned">svg</b>', states: [], transitions: [] },
    }),
  );
  await b.page.click("#tree li.actor");
  await b.page.waitForSelector("#chart p.nochart");
  assert.equal(await b.page.locator(".pwned").count(), 0);
  assert.deepEqual(b.errors, []);
});
