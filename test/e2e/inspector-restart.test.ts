/**
 * An open page when its inspector restarts on the same port (e.g. `actormq start
 * --inspector-listen 127.0.0.1:P` run again): the new run numbers its records from 1, and the
 * page shows the new run's records instead of keeping the old timeline.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Inspector } from "../../index.ts";
import { openBrowser } from "../actors/inspector/browser.ts";
import { waitFor } from "../helpers.ts";

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

function ingest(insp: Inspector, r: unknown): void {
  (insp as unknown as { ingest(r: unknown): void }).ingest(r);
}
const ev = (type: string) => ({ nodeId: "n", actorName: "a", sessionId: "s", time: Date.now(), kind: "event", type, payload: {} });

test("a page open across an inspector restart on the same port shows the new run's records", async () => {
  let insp = await Inspector.start({});
  const port = new URL(insp.url).port;
  for (let i = 0; i < 20; i++) ingest(insp, ev("OLD"));
  const b = await openBrowser();
  cleanups.push(() => b.close());
  await b.page.goto(insp.url);
  await b.page.waitForSelector('#timeline li.entry[data-type="OLD"]');
  await insp.close();
  // the port is free once the old server has closed; retry the bind meanwhile
  insp = await waitFor(() => Inspector.start({ listen: `127.0.0.1:${port}` }).catch(() => null), 5000, "the same port bound again");
  cleanups.push(() => insp.close());
  await waitFor(() => insp.stats().pages > 0, 10_000, "page reconnected");
  for (let i = 0; i < 5; i++) ingest(insp, ev("NEW"));
  await b.page.waitForFunction(() => document.querySelectorAll('#timeline li.entry[data-type="NEW"]').length === 5, undefined, {
    timeout: 5000,
  });
  assert.equal(await b.page.locator('#timeline li.entry[data-type="OLD"]').count(), 0, "the old run's records are gone");
  assert.deepEqual(b.errors, []);
});
