/**
 * The inspector page in Chromium against demo actors on a node collected over the wire: tree,
 * lit state, last transition, timeline with payload and snapshot, pause/step, SVG and timeline
 * export, loading a timeline back, a stopped process shown as gone, a page that stays bounded
 * while actors come and go; nothing leaves 127.0.0.1.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, test } from "node:test";
import { assign, fromPromise, setup } from "xstate";
import { MAX_INSPECTION_PUBLISHERS } from "../../actors/runtime/index.ts";
import { ActorNode, Inspector } from "../../index.ts";
import { foreignRequests, openBrowser, type TestBrowser } from "../actors/inspector/browser.ts";
import { EPHEMERAL, tempDir } from "../helpers.ts";

const workerMachine = setup({
  types: {} as { context: { jobs: number }; events: { type: "WORK"; job: string } | { type: "FINISH" } },
}).createMachine({
  id: "worker",
  initial: "idle",
  context: { jobs: 0 },
  states: {
    idle: { on: { WORK: { target: "busy", actions: assign({ jobs: ({ context }) => context.jobs + 1 }) } } },
    busy: { initial: "working", states: { working: { on: { FINISH: "#worker.idle" } } } },
  },
});

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

test("the page draws a live statechart and timeline of actors on another node", async () => {
  const tmp = await tempDir("actormq-inspector-page-");
  cleanups.push(tmp.cleanup);
  const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "demo-node" });
  cleanups.push(() => node.close());
  node.spawn("worker", workerMachine);
  const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 300 });
  cleanups.push(() => insp.close());
  let b: TestBrowser | undefined = await openBrowser();
  cleanups.push(() => b!.close());
  const { page } = b;

  await page.goto(insp.url);
  await page.click('li.actor[data-actor-name="worker"]');
  await page.waitForSelector('#chart svg g.state.active[data-state="worker.idle"]');
  assert.equal(await page.locator("#chart svg g.state.active").count(), 1);

  node.ref(null, "worker").send({ type: "WORK", job: "j1" }, { body: Buffer.from("TOP-SECRET-BODY") });
  await page.waitForSelector('#chart svg g.state.active[data-state="worker.busy.working"]');
  assert.equal(await page.locator('#chart svg g.state.active[data-state="worker.idle"]').count(), 0);
  assert.equal(await page.locator('#chart svg g.transition.last[data-event="WORK"]').count(), 1);
  const entry = page.locator('#timeline li.entry[data-type="WORK"]');
  await entry.first().waitFor();
  await entry.first().click();
  const snapshotText = await page.locator("#timeline pre.snapshot").first().textContent();
  assert.match(snapshotText ?? "", /"working"/);
  assert.match(snapshotText ?? "", /"jobs": 1/);
  assert.doesNotMatch(await page.content(), /TOP-SECRET-BODY/);

  node.ref(null, "worker").send({ type: "FINISH" });
  await page.waitForSelector('#chart svg g.state.active[data-state="worker.idle"]');

  // filter: only FINISH events are listed
  await page.fill("#filter-type", "finish");
  await page.waitForFunction(() =>
    [...document.querySelectorAll("#timeline li.entry")].every((li) => li.getAttribute("data-type") === "FINISH"),
  );
  await page.fill("#filter-type", "");

  // pause and step back: the chart shows the state after WORK again
  await page.click("#pause");
  await page.click("#step-back");
  await page.waitForSelector('#chart svg g.state.active[data-state="worker.busy.working"]');
  assert.equal(await page.locator("#mode").textContent(), "paused");
  await page.click("#step-forward");
  await page.waitForSelector('#chart svg g.state.active[data-state="worker.idle"]');
  await page.click("#live");

  await page.screenshot({ path: path.join(tmp.dir, "inspector-page.png"), fullPage: true });

  const [svgDownload] = await Promise.all([page.waitForEvent("download"), page.click("#export-svg")]);
  const svgFile = path.join(tmp.dir, "chart.svg");
  await svgDownload.saveAs(svgFile);
  const svg = await readFile(svgFile, "utf8");
  assert.match(svg, /data-state="worker\.busy\.working"/);
  assert.match(svg, /class="state atomic[^"]*active"[^>]*data-state="worker\.idle"/);

  const [jsonDownload] = await Promise.all([page.waitForEvent("download"), page.click("#export-json")]);
  const jsonFile = path.join(tmp.dir, "timeline.json");
  await jsonDownload.saveAs(jsonFile);
  const exported = JSON.parse(await readFile(jsonFile, "utf8")) as { entries: { record: { type?: string } }[] };
  assert.ok(exported.entries.some((e) => e.record.type === "WORK"));

  // the process stops: shown as gone, last state kept
  await node.close();
  await page.waitForSelector('li.proc.gone[data-node-id="demo-node"] li.actor[data-actor-name="worker"]', { timeout: 10_000 });

  // post-mortem: a fresh page loads the exported timeline without any live data
  const pageErrors = b.errors.slice();
  const requests = b.requests.slice();
  await b.close();
  b = await openBrowser();
  await b.page.goto(insp.url);
  await insp.close();
  await b.page.setInputFiles("#load-json", jsonFile);
  await b.page.waitForSelector("#mode.file");
  await b.page.click('li.actor[data-actor-name="worker"]');
  await b.page.waitForSelector('#chart svg g.state.active[data-state="worker.idle"]');
  await b.page.click("#step-back");
  await b.page.waitForSelector('#chart svg g.state.active[data-state="worker.busy.working"]');

  assert.deepEqual(foreignRequests([...requests, ...b.requests]), []);
  assert.ok(
    requests.some((u) => u.endsWith("/app.js")),
    "the request log is recorded",
  );
  assert.deepEqual([...pageErrors, ...b.errors], []);
});

const pollerMachine = setup({ types: {} as { events: { type: "GO" } }, actors: { fetchRound: fromPromise(async () => 1) } }).createMachine({
  id: "poller",
  initial: "ready",
  states: {
    ready: { on: { GO: "waiting" } },
    waiting: { after: { 40: "fetching" } },
    fetching: { invoke: { src: "fetchRound", onDone: "done" } },
    done: { type: "final" },
  },
});

test("xstate's internal names read as words: delays, invoked actors and their done events", async () => {
  const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "poller-node" });
  cleanups.push(() => node.close());
  const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 300 });
  cleanups.push(() => insp.close());
  const b = await openBrowser();
  cleanups.push(() => b.close());
  const { page } = b;
  await page.goto(insp.url);
  node.spawn("poller2", pollerMachine);
  await page.click('li.actor[data-actor-name="poller2"]');
  await page.waitForSelector('#chart svg g.state.active[data-state="poller.ready"]');
  node.ref(null, "poller2").send({ type: "GO" });
  await page.waitForSelector('#chart svg g.state.active[data-state="poller.done"]');
  // the invoke xstate named `0.poller.fetching` is drawn, labelled and listed by its src and state
  const svg = (await page.locator("#chart svg").innerHTML()) ?? "";
  assert.match(svg, /invoke fetchRound/);
  assert.match(svg, />done: fetchRound</);
  assert.match(svg, />after 40ms</);
  assert.doesNotMatch((await page.locator("#chart svg").textContent()) ?? "", /0\.poller\.fetching/);
  assert.match((await page.locator("#chart-state").textContent()) ?? "", /after done: fetchRound$/);
  const delay = page.locator('#timeline li.entry[data-type^="xstate.after.40."] .type');
  await delay.first().waitFor();
  assert.equal(await delay.first().textContent(), "after 40ms");
  const done = page.locator('#timeline li.entry[data-type="xstate.done.actor.0.poller.fetching"] .type');
  assert.equal(await done.first().textContent(), "done: fetching");
  assert.deepEqual(b.errors, []);
});

const gateMachine = setup({
  types: {} as { context: { ticks: number }; events: { type: "GO" } | { type: "TICK" } },
  guards: { enough: ({ context }) => context.ticks >= 2 },
}).createMachine({
  id: "gate",
  initial: "idle",
  context: { ticks: 0 },
  states: {
    idle: { on: { GO: "checking" } },
    checking: { always: "waiting" },
    waiting: {
      always: { guard: "enough", target: "open" },
      on: { TICK: { actions: assign({ ticks: ({ context }) => context.ticks + 1 }) } },
    },
    open: {},
  },
});

test("eventless (always) transitions are drawn and marked as the last transition when taken", async () => {
  const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "gate-node" });
  cleanups.push(() => node.close());
  const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 300 });
  cleanups.push(() => insp.close());
  const b = await openBrowser();
  cleanups.push(() => b.close());
  const { page } = b;
  await page.goto(insp.url);
  node.spawn("gate", gateMachine);
  await page.click('li.actor[data-actor-name="gate"]');
  await page.waitForSelector('#chart svg g.state.active[data-state="gate.idle"]');
  const always = (source: string) => `#chart svg g.transition[data-event=""][data-source="${source}"]`;
  assert.equal(await page.locator(always("gate.checking")).count(), 1);
  assert.equal(await page.locator(always("gate.waiting")).count(), 1);
  assert.match((await page.locator(always("gate.waiting")).textContent()) ?? "", /always/);

  // GO, then at once checking -> waiting without an event: both marked
  node.ref(null, "gate").send({ type: "GO" });
  await page.waitForSelector('#chart svg g.state.active[data-state="gate.waiting"]');
  await page.waitForSelector(`${always("gate.checking")}.last`);
  assert.equal(await page.locator('#chart svg g.transition.last[data-event="GO"]').count(), 1);

  // TICKs change only the context, until the guard lets waiting -> open go
  node.ref(null, "gate").send({ type: "TICK" });
  node.ref(null, "gate").send({ type: "TICK" });
  await page.waitForSelector('#chart svg g.state.active[data-state="gate.open"]');
  await page.waitForSelector(`${always("gate.waiting")}.last`);
  assert.equal(await page.locator("#chart svg g.transition.last").count(), 1);
  assert.deepEqual(b.errors, []);
});

test("a collect address that never answered is listed as unreachable", async () => {
  const gone = await ActorNode.start({ listen: EPHEMERAL, nodeId: "never-node" });
  const address = gone.address!;
  await gone.close();
  const insp = await Inspector.start({ collect: [address], probeIntervalMs: 100 });
  cleanups.push(() => insp.close());
  const b = await openBrowser();
  cleanups.push(() => b.close());
  const { page } = b;
  await page.goto(insp.url);
  const row = page.locator(`li.proc.unreachable[data-address="${address}"]`);
  await row.waitFor();
  assert.match((await row.textContent()) ?? "", new RegExp(`${address.replace(/[.]/g, "\\.")}.*unreachable`));
  assert.deepEqual(b.errors, []);
});

test("a node that refuses to publish to one more inspector is listed as busy with its reason, not unreachable", async () => {
  const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "busy-node" });
  cleanups.push(() => node.close());
  for (let i = 0; i < MAX_INSPECTION_PUBLISHERS; i++) await node.publishInspection(`tcp://127.0.0.1:${1 + i}`);
  const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 100 });
  cleanups.push(() => insp.close());
  const b = await openBrowser();
  cleanups.push(() => b.close());
  const { page } = b;
  await page.goto(insp.url);
  const row = page.locator(`li.proc.refused[data-address="${node.address}"]`);
  await row.waitFor();
  const text = (await row.textContent()) ?? "";
  assert.match(text, /busy/);
  assert.match(text, /SYSTEM_BUSY: The node busy-node already publishes its inspection stream to 8 endpoints/);
  assert.equal(await page.locator("li.proc.unreachable").count(), 0);
  assert.deepEqual(b.errors, []);
});

const shortMachine = setup({ types: {} as { events: { type: "GO" } } }).createMachine({
  id: "short",
  initial: "idle",
  states: { idle: { on: { GO: "done" } }, done: {} },
});

test("the page forgets the last event of actor sessions whose records left its timeline: actors coming and going do not grow it", async () => {
  const node = await ActorNode.start({ listen: null, nodeId: "churn-node" });
  cleanups.push(() => node.close());
  const insp = await Inspector.start({ nodes: [node] });
  cleanups.push(() => insp.close());
  const b = await openBrowser();
  cleanups.push(() => b.close());
  const { page } = b;
  await page.goto(insp.url);
  await page.waitForFunction(() => (window as unknown as { inspectorApp: { app: { epoch: unknown } } }).inspectorApp.app.epoch !== null);
  // a few records each: well past the page's 20 000 entries
  for (let i = 0; i < 3500; i++) {
    node.spawn(`a${i}`, shortMachine);
    node.ref(null, `a${i}`).send({ type: "GO" });
    node.stopActor(`a${i}`);
    if (i % 200 === 0) await new Promise((r) => setImmediate(r));
  }
  node.spawn("marker", shortMachine);
  node.ref(null, "marker").send({ type: "GO" });
  type PageApp = {
    entries: { seq: number; record: { actorName: string; kind: string } }[];
    bySeq: Map<number, unknown>;
    lastEventBySession: Map<string, { seq: number }>;
  };
  await page.waitForFunction(
    () => {
      const a = (window as unknown as { inspectorApp: { app: PageApp } }).inspectorApp.app;
      return a.entries.some((e) => e.record.actorName === "marker" && e.record.kind === "event");
    },
    undefined,
    { timeout: 60_000 },
  );
  const held = await page.evaluate(() => {
    const a = (window as unknown as { inspectorApp: { app: PageApp } }).inspectorApp.app;
    let stale = 0;
    for (const e of a.lastEventBySession.values()) if (!a.bySeq.has(e.seq)) stale++;
    return { entries: a.entries.length, sessions: a.lastEventBySession.size, stale };
  });
  assert.equal(held.entries, 20_000, "the timeline is full");
  assert.equal(held.stale, 0, `sessions kept for events no longer on the page: ${JSON.stringify(held)}`);
  assert.deepEqual(b.errors, []);
});
