/**
 * A push consumer's close waits for the send-backs it has in flight, and nothing of them happens
 * after it resolved. Here the send-back's broker is frozen (SIGSTOP), so the send-back hangs until
 * its timeout: close resolves once it has failed (no retry copy is started while closing), logs that
 * before it resolves and nothing after, and leaves the message unacknowledged. When the broker
 * resumes, it drops the timed-out request unserved, the retry topic holds nothing, and a new member
 * of the group gets the message from its queue: the group's offset was committed up to it, not past.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { SEND_BACK_TIMEOUT_MS, sendBackLog } from "../../actors/client/sendBack.ts";
import { Admin, type MessageExt, NameServer, Producer, PushConsumer } from "../../index.ts";
import { MessageConst } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";
import { spawnServer, stopServer } from "./fixtures/children.ts";

const TOPIC = "SendBackClose";
const GROUP = "sendback-close-cg";
/** The send-back's own timeout, then the last offsets and the goodbye to the frozen broker (3 s, together), and some slack. */
const CLOSE_BOUND_MS = SEND_BACK_TIMEOUT_MS + 3_000 + 2_000;
/** Far beyond every wait below: a failed message is not consumed again locally within the test. */
const LOCAL_RETRY_MS = 600_000;

for (const orderly of [false, true]) {
  test(`${orderly ? "orderly" : "concurrent"}: close with a send-back hanging on a frozen broker waits for it, logs nothing after it resolves, and the message is consumed again`, async (t) => {
    const { dir, cleanup } = await tempDir("actormq-sendback-close-");
    const ns = await NameServer.start({ listen: EPHEMERAL });
    const broker = await spawnServer("broker", { brokerName: "broker-a", listen: EPHEMERAL, nameservers: [ns.address], storeDir: dir });
    const closers: (() => Promise<void>)[] = [];
    t.after(async () => {
      broker.child.kill("SIGCONT");
      for (const c of closers.reverse()) await c();
      await stopServer(broker);
      await ns.close();
      await cleanup();
    });
    const admin = await Admin.start({ nameservers: [ns.address] });
    closers.push(() => admin.close());
    const producer = await Producer.start({ group: "sendback-close-pg", nameservers: [ns.address] });
    closers.push(() => producer.close());
    await admin.createTopic({ topic: TOPIC, readQueueNums: 1, writeQueueNums: 1 });
    for (let i = 0; i < 3; i++) await producer.send({ topic: TOPIC, body: `m${i}` });

    const lines: { at: number; fields: Record<string, unknown>; msg: string }[] = [];
    t.mock.method(sendBackLog(), "warn", (fields: Record<string, unknown>, msg: string) => {
      lines.push({ at: performance.now(), fields, msg });
    });

    // offsets 0 and 1 are consumed; offset 2 fails once the broker is frozen (orderly: with no retry
    // left, so it is sent back for the dead-letter queue)
    let frozen!: () => void;
    const brokerFrozen = new Promise<void>((resolve) => (frozen = resolve));
    const delivered: MessageExt[] = [];
    const consumer = await PushConsumer.start({
      group: GROUP,
      nameservers: [ns.address],
      subscriptions: { [TOPIC]: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      reconsumeLaterDelayMs: LOCAL_RETRY_MS,
      orderly,
      ...(orderly ? { maxReconsumeTimes: 0, suspendCurrentQueueTimeMillis: LOCAL_RETRY_MS } : {}),
      listener: async (msgs) => {
        delivered.push(...msgs);
        if (msgs.every((m) => m.queueOffset < 2)) return orderly ? "SUCCESS" : "CONSUME_SUCCESS";
        await brokerFrozen;
        return orderly ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "RECONSUME_LATER";
      },
    });
    let closed = false;
    closers.push(async () => {
      if (!closed) await consumer.close();
    });
    await waitFor(() => delivered.length === 3, 10_000, "the three deliveries");
    // the group's offset on the broker: up to the message in the listener
    await consumer.persistOffsets();
    await waitFor(
      async () => (await admin.consumerProgress(GROUP)).find((e) => e.topic === TOPIC)?.consumerOffset === 2,
      10_000,
      "the committed offset 2",
    );

    broker.child.kill("SIGSTOP");
    frozen();
    // the send-back of offset 2 is on its way to the frozen broker
    await waitFor(
      () => (orderly ? consumer.orderlyService!.stats.suspended : consumer.consumeService.stats.reconsumeLater) === 1,
      5_000,
      "the failed batch",
    );
    const closeStart = performance.now();
    await consumer.close();
    const closedAt = performance.now();
    closed = true;
    const closeMs = closedAt - closeStart;
    assert.ok(closeMs < CLOSE_BOUND_MS, `close took ${Math.round(closeMs)} ms`);

    // the send-back ended (its timeout) before close resolved, and no copy was started for it
    assert.equal(lines.length, 1, JSON.stringify(lines.map((l) => l.fields)));
    assert.equal(lines[0]!.fields.code, "TIMEOUT");
    assert.equal(lines[0]!.fields.retryCopyCode, undefined, "no copy was attempted");
    assert.equal(lines[0]!.fields.retryCopyBroker, undefined, "no copy was attempted");
    assert.equal(lines[0]!.fields.notCopied, "closing");
    assert.equal(lines[0]!.fields.msgId, delivered[2]!.msgId);
    assert.match(lines[0]!.msg, /not acknowledged/);

    broker.child.kill("SIGCONT");
    const again: MessageExt[] = [];
    const next = await PushConsumer.start({
      group: GROUP,
      nameservers: [ns.address],
      subscriptions: { [TOPIC]: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      orderly,
      listener: async (msgs) => {
        again.push(...msgs);
        return orderly ? "SUCCESS" : "CONSUME_SUCCESS";
      },
    });
    closers.push(() => next.close());
    const redelivered = await waitFor(() => again[0], 15_000, "the message again");
    assert.equal(redelivered.queueOffset, 2, "the group resumes at the failed message, neither before it nor past it");
    assert.equal(redelivered.msgId, delivered[2]!.msgId);
    assert.equal(redelivered.properties[MessageConst.RETRY_TOPIC], undefined, "from its queue, not from the retry topic");
    // neither the late send-back (dropped unserved) nor a copy reached the retry or dead-letter topic
    for (const topic of [`%RETRY%${GROUP}`, `%DLQ%${GROUP}`]) {
      const stats = await admin.examineTopicStats(topic).catch(() => []);
      assert.equal(
        stats.reduce((n, e) => n + e.maxOffset, 0),
        0,
        `${topic}: ${JSON.stringify(stats)}`,
      );
    }
    assert.equal(lines.filter((l) => l.at >= closedAt).length, 0, "nothing logged after close resolved");
  });
}
