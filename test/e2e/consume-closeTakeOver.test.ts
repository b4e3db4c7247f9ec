/**
 * A push consumer closed while a rebalance round waits in a queue take-over (the broker holds it
 * until the queue's holder releases it, up to its hand-over timeout): close does not wait for it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { consumerOffsetsOf } from "../../actors/broker/consumerOffsetManager.ts";
import { ActorNode } from "../../actors/runtime/index.ts";
import { Admin, Broker, NameServer, PushConsumer } from "../../index.ts";
import { ConsumptionActorFor, PullSysFlag } from "../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../helpers.ts";

const GROUP = "cgCloseTakeOver";
const TOPIC = "CloseTakeOver";

test("close of a push consumer whose rebalance waits for a take-over resolves at once, and the broker forgets the wait", async () => {
  const { dir, cleanup } = await tempDir("actormq-close-takeover-");
  const ns = await NameServer.start({ listen: EPHEMERAL });
  const broker = await Broker.start({
    brokerName: "broker-a",
    listen: EPHEMERAL,
    nameservers: [ns.address!],
    storeDir: dir,
    flush: "async",
  });
  const admin = await Admin.start({ nameservers: [ns.address!] });
  const fake = await ActorNode.start({ listen: null });
  let consumer: PushConsumer | undefined;
  const ask = (type: keyof typeof ConsumptionActorFor, fields: Record<string, unknown>) =>
    fake.ref(broker.address!, ConsumptionActorFor[type]).ask({ type, ...fields });
  // members that are not consumers: their ids sort before ("!") and after ("~") any client id
  const heartbeat = (clientID: string) =>
    ask("HEART_BEAT", {
      clientID,
      producerDataSet: [],
      consumerDataSet: [
        {
          groupName: GROUP,
          consumeType: "CONSUME_PASSIVELY",
          messageModel: "CLUSTERING",
          consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
          subscriptionDataSet: [],
        },
      ],
    });
  try {
    await admin.createTopic({ topic: TOPIC, readQueueNums: 1, writeQueueNums: 1 });
    await heartbeat("!first");
    await heartbeat("~holder");
    // the holder pulls the queue (and so holds it) and never lets it go
    await ask("PULL_MESSAGE", {
      consumerGroup: GROUP,
      topic: TOPIC,
      queueId: 0,
      queueOffset: 0,
      maxMsgNums: 1,
      sysFlag: PullSysFlag.SUBSCRIPTION,
      commitOffset: 0,
      subscription: "*",
      subVersion: 0,
      expressionType: "TAG",
      clientId: "~holder",
    });
    consumer = await PushConsumer.start({
      group: GROUP,
      nameservers: [ns.address!],
      subscriptions: { [TOPIC]: "*" },
      listener: async () => "CONSUME_SUCCESS",
    });
    assert.deepEqual(
      consumer.assignment().filter((q) => q.topic === TOPIC),
      [],
      "the first member ('!first') is given the queue",
    );
    // the first member leaves: the consumer is given the queue and takes it over from its holder
    await ask("UNREGISTER_CLIENT", { clientID: "!first", consumerGroup: GROUP });
    const offsets = consumerOffsetsOf(broker.ctx);
    await waitFor(() => offsets.waitingTakeOvers === 1, 10_000, "the consumer's take-over waits for the holder");
    const t0 = performance.now();
    await consumer.close();
    const took = performance.now() - t0;
    assert.ok(took < 2_000, `close took ${Math.round(took)} ms: it waited for the take-over (hand-over timeout 5 s)`);
    await waitFor(() => offsets.waitingTakeOvers === 0, 5_000, "the broker forgot the closed consumer's take-over");
  } finally {
    await consumer?.close().catch(() => {});
    await fake.close();
    await admin.close();
    await broker.close();
    await ns.close();
    await cleanup();
  }
});
