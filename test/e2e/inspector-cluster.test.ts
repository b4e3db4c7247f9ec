/**
 * The inspector on a real local cluster: a consumer's pull-service actor lights its state
 * (waiting -> found) and grows its timeline (PULL_RESULT) when a message is sent, and follows the
 * consumer being suspended and resumed; the
 * rebalancer's chart shows its states; the cluster view lists the group's queues with lag.
 * Brokers and the name server are collected over the wire; the client node directly.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, test } from "node:test";
import { ClientInstance } from "../../actors/client/clientInstance.ts";
import { Admin, Inspector, type MessageExt, Producer, PushConsumer, startLocalCluster } from "../../index.ts";
import { foreignRequests, openBrowser } from "../actors/inspector/browser.ts";
import { tempDir, waitFor } from "../helpers.ts";

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

test("pull service and rebalancer of a consumer, live, on a local cluster", async () => {
  const tmp = await tempDir("actormq-inspector-cluster-");
  cleanups.push(tmp.cleanup);
  const cluster = await startLocalCluster({ dir: tmp.dir, broker: { flush: "async" } });
  cleanups.push(() => cluster.close());
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  await admin.createTopic({ topic: "InspectT", readQueueNums: 2, writeQueueNums: 2 });
  await admin.close();
  // the consumer's node: the process's shared client instance, inspected from before the consumer starts
  // (the queues it pulls are learnt from its pull actor's events)
  const client = await ClientInstance.acquire({ nameservers: cluster.nameservers });
  cleanups.push(() => client.release());
  const insp = await Inspector.start({ collect: [...cluster.nameservers, ...cluster.brokers.map((b) => b.address)], nodes: [client.node] });
  cleanups.push(() => insp.close());
  const received: string[] = [];
  const consumer = await PushConsumer.start({
    group: "cgInspect",
    nameservers: cluster.nameservers,
    subscriptions: { InspectT: "*" },
    consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
    listener: async (msgs: MessageExt[]) => {
      for (const m of msgs) received.push(m.body.toString());
      return "CONSUME_SUCCESS";
    },
  });
  cleanups.push(() => consumer.close());
  const producer = await Producer.start({ group: "pgInspect", nameservers: cluster.nameservers });
  cleanups.push(() => producer.close());

  const b = await openBrowser();
  cleanups.push(() => b.close());
  const { page } = b;
  await page.goto(insp.url);

  // the consumer's pull-service actor: idle, it waits on long polls
  await page.click('li.actor[data-actor-name="cgInspect/pull"]');
  await waitFor(() => consumer.assignment().filter((q) => q.topic === "InspectT").length === 2, 15_000, "both queues assigned");
  await page.waitForSelector('#chart svg g.state.active[data-state="pullService.running.waiting"]');
  await page.check("#filter-selected");
  const pullResultsBefore = await page.locator('#timeline li.entry[data-type="PULL_RESULT"]').count();

  // send a message: the pull that brings it lights the pull service's "found" state and adds a PULL_RESULT to its timeline
  const sent = await producer.send({ topic: "InspectT", body: "hello inspector" });
  await page.waitForSelector('#chart svg g.state.active[data-state="pullService.running.found"]', { timeout: 15_000 });
  assert.equal(await page.locator('#chart svg g.state.active[data-state="pullService.running.waiting"]').count(), 0);
  assert.ok(
    (await page.locator('#chart svg g.transition.last[data-event="PULL_RESULT"]').count()) >= 1,
    "the PULL_RESULT transition is marked last",
  );
  await waitFor(
    async () => (await page.locator('#timeline li.entry[data-type="PULL_RESULT"]').count()) > pullResultsBefore,
    10_000,
    "a PULL_RESULT entry in the pull service's timeline",
  );
  await waitFor(() => received.includes("hello inspector"), 15_000, "message consumed");
  await page.uncheck("#filter-selected");

  // its send and the pulls that carry it show in the timeline, filtered by topic and queue
  await page.fill("#filter-topic", "InspectT");
  await page.fill("#filter-queue", String(sent.queue.queueId));
  await page.waitForSelector('#timeline li.entry[data-type="SEND_MESSAGE"]', { timeout: 10_000 });
  await page.waitForSelector('#timeline li.entry[data-type="PULL_MESSAGE"]', { timeout: 10_000 });
  const where = await page.locator("#timeline li.entry .where").allTextContents();
  assert.ok(where.length > 0 && where.every((w) => w === `InspectT@${sent.queue.queueId}`), where.join(" "));
  await page.locator('#timeline li.entry[data-type="SEND_MESSAGE"]').first().click();
  assert.doesNotMatch((await page.locator("#timeline").textContent()) ?? "", /hello inspector/, "bodies never shown");
  await page.fill("#filter-topic", "");
  await page.fill("#filter-queue", "");

  // the pull service's own timeline and lit state follow suspend/resume
  await page.check("#filter-selected");
  await consumer.suspend();
  await page.waitForSelector('#chart svg g.state.active[data-state="pullService.suspended"]');
  await page.waitForSelector('#timeline li.entry[data-type="SUSPEND"]');
  assert.deepEqual([...new Set(await page.locator("#timeline li.entry .actor").allTextContents())], ["cgInspect/pull"]);
  assert.equal(await page.locator('#chart svg g.state.active[data-state="pullService.running"]').count(), 0);
  assert.equal(await page.locator('#chart svg g.transition.last[data-event="SUSPEND"]').count(), 1);
  await consumer.resume();
  await page.waitForSelector('#chart svg g.state.active[data-state="pullService.running"]');

  await page.click('li.actor[data-actor-name="cgInspect/rebalancer"]');
  await page.waitForSelector('#chart svg[data-machine="rebalancer"]');
  for (const s of ["rebalancer.idle", "rebalancer.balancing", "rebalancer.stopped"]) {
    assert.equal(await page.locator(`#chart svg g.state[data-state="${s}"]`).count(), 1, s);
  }
  assert.equal(await page.locator("#chart svg g.state.active").count(), 1);

  // cluster view: the group's queues with offsets and lag
  await page.click("#cluster-section summary");
  await page.waitForSelector("#cluster table.groups td:text-is('cgInspect')", { timeout: 10_000 });
  assert.ok((await page.locator("#cluster table.topics td:text-is('InspectT')").count()) >= 2);
  // queues are assigned to the consumer's process (seen pulling them), never to the broker
  await page.waitForSelector(`#cluster table.groups td:text-is('${client.node.nodeId}')`, { timeout: 10_000 });
  assert.ok(
    (await page.locator("#cluster table.brokers td:text-is('broker-a')").count()) >= 1 ||
      (await page.locator("#cluster table.brokers tr").count()) >= 2,
  );

  await page.screenshot({ path: path.join(tmp.dir, "inspector-cluster.png"), fullPage: true });
  if (process.env.INSPECTOR_SHOT) await page.screenshot({ path: process.env.INSPECTOR_SHOT, fullPage: true });
  assert.deepEqual(foreignRequests(b.requests), []);
  assert.deepEqual(b.errors, []);
});
