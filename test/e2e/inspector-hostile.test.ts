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
