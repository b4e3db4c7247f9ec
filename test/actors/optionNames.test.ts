/**
 * Every public start function, and the Admin calls that take options, refuse an option name they
 * do not know with ILLEGAL_ARGUMENT naming it, the option it is closest to, and every name they
 * take: a misspelt option is an error, not a setting silently left at its default.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { createMachine } from "xstate";
import { BROKER_START_OPTION_NAMES } from "../../actors/broker/broker.ts";
import { ADMIN_OPTION_NAMES } from "../../actors/client/admin.ts";
import { PRODUCER_OPTION_NAMES } from "../../actors/client/producer.ts";
import { PULL_CONSUMER_OPTION_NAMES } from "../../actors/client/pullConsumer.ts";
import { PUSH_CONSUMER_OPTION_NAMES } from "../../actors/client/pushConsumer.ts";
import { INSPECTOR_OPTION_NAMES } from "../../actors/inspector/inspectorOptions.ts";
import { LOCAL_CLUSTER_OPTION_NAMES } from "../../actors/localCluster.ts";
import { NAMESERVER_OPTION_NAMES } from "../../actors/nameserver/index.ts";
import { SPAWN_OPTION_NAMES } from "../../actors/runtime/actorNode.ts";
import { INSPECTION_COLLECTOR_OPTION_NAMES } from "../../actors/runtime/inspectionCollector.ts";
import {
  ActorNode,
  Admin,
  Broker,
  InspectionCollector,
  Inspector,
  isMQError,
  type LocalCluster,
  MessageStore,
  NameServer,
  Producer,
  PullConsumer,
  PushConsumer,
  startLocalCluster,
} from "../../index.ts";
import { MESSAGE_STORE_OPTION_NAMES } from "../../store/messageStore.ts";
import { ZMQ_NODE_OPTION_NAMES } from "../../transport/zmqNode.ts";
import { EPHEMERAL, refusal, tempDir } from "../helpers.ts";

/** Nothing listens there: clients start without asking it anything. */
const nameservers = ["tcp://127.0.0.1:1"];
const listener = async () => "CONSUME_SUCCESS" as const;

/** Checks an unknown-option error: its code, `what`, the option, the suggestion and every allowed name. */
function assertUnknown(e: unknown, what: string, option: string, suggestion: string | null, allowed: readonly string[]): void {
  assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"), `${what} ${option}: ${String(e)}`);
  const m = (e as Error).message;
  assert.ok(m.startsWith(`${what} has no option "${option}"`), m);
  if (suggestion) assert.ok(m.includes(`did you mean "${suggestion}"?`), m);
  else assert.ok(!m.includes("did you mean"), m);
  for (const name of allowed) assert.ok(m.includes(name), `${name} listed: ${m}`);
}

let dir: string;
let cleanup: () => Promise<void>;
before(async () => {
  ({ dir, cleanup } = await tempDir("actormq-optnames-"));
});
after(async () => {
  await cleanup();
});

test("NameServer.start and Broker.start refuse unknown option names", async () => {
  assertUnknown(
    await refusal(() => NameServer.start({ listen: EPHEMERAL, scanInterval: 100 } as never)),
    "NameServer.start",
    "scanInterval",
    "scanIntervalMs",
    NAMESERVER_OPTION_NAMES,
  );
  // nameservers is missing too: the unknown name is what the error is about
  assertUnknown(
    await refusal(() =>
      Broker.start({ brokerName: "on", listen: EPHEMERAL, nameServers: [], storeDir: path.join(dir, "b"), flush: "async" } as never),
    ),
    "Broker.start",
    "nameServers",
    "nameservers",
    BROKER_START_OPTION_NAMES,
  );
  // its parts' tuning options and metricsListen are Broker.start options too
  for (const name of ["lockMaxLiveTimeMs", "slaveSyncIntervalMs", "metricsListen", "heapReserveMb"])
    assert.ok(BROKER_START_OPTION_NAMES.includes(name as never), name);
});

test("Producer.start refuses unknown option names; retryAnotherBrokerWhenNotStoreOK is one of its options", async () => {
  assertUnknown(
    await refusal(() => Producer.start({ group: "pgNames", nameServer: "tcp://127.0.0.1:1" } as never)),
    "Producer.start",
    "nameServer",
    "nameservers",
    PRODUCER_OPTION_NAMES,
  );
  assertUnknown(
    await refusal(() => Producer.start({ group: "pgNames", nameservers, sendTimeout: 1000 } as never)),
    "Producer.start",
    "sendTimeout",
    "sendTimeoutMs",
    PRODUCER_OPTION_NAMES,
  );
  // nothing like any option: no suggestion
  assertUnknown(
    await refusal(() => Producer.start({ group: "pgNames", nameservers, compression: "zstd" } as never)),
    "Producer.start",
    "compression",
    null,
    PRODUCER_OPTION_NAMES,
  );
  const p = await Producer.start({ group: "pgNames", nameservers, retryAnotherBrokerWhenNotStoreOK: false, instanceName: "names" });
  await p.close();
  // an option left undefined (a spread of optional fields) is no option given
  const q = await Producer.start({ group: "pgNames", nameservers, instanceName: "names", nameServer: undefined } as never);
  await q.close();
});

test("PushConsumer.start and PullConsumer.start refuse unknown option names", async () => {
  assertUnknown(
    await refusal(() =>
      PushConsumer.start({ group: "cgNames", nameservers, subscriptions: { T: "*" }, listener, consumeThread: 4 } as never),
    ),
    "PushConsumer.start",
    "consumeThread",
    "consumeThreads",
    PUSH_CONSUMER_OPTION_NAMES,
  );
  assertUnknown(
    await refusal(() => PushConsumer.start({ group: "cgNames", nameservers, subscription: { T: "*" }, listener } as never)),
    "PushConsumer.start",
    "subscription",
    "subscriptions",
    PUSH_CONSUMER_OPTION_NAMES,
  );
  assertUnknown(
    await refusal(() => PullConsumer.start({ group: "cgNames", nameservers, autoCommitInterval: 1000 } as never)),
    "PullConsumer.start",
    "autoCommitInterval",
    "autoCommitIntervalMs",
    PULL_CONSUMER_OPTION_NAMES,
  );
  // RocketMQ's pull throttles that are not built say so and what to use, rather than a near name
  for (const [option, instead] of [
    ["pullInterval", /suspend\(\) and resume\(\)/],
    ["pullThresholdForTopic", /per queue: pullThresholdForQueue/],
    ["pullThresholdSizeForTopic", /per queue: pullThresholdSizeForQueue/],
  ] as const) {
    const e = await refusal(() =>
      PushConsumer.start({ group: "cgNames", nameservers, subscriptions: { T: "*" }, listener, [option]: 5 } as never),
    );
    assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"), `${option}: ${String(e)}`);
    const m = (e as Error).message;
    assert.ok(m.startsWith(`PushConsumer.start: RocketMQ's option "${option}" is not built here; `), m);
    assert.match(m, instead);
    assert.ok(!m.includes("did you mean"), m);
  }
  // a push consumer's option is not a pull consumer's
  assertUnknown(
    await refusal(() => PullConsumer.start({ group: "cgNames", nameservers, consumeThreads: 4 } as never)),
    "PullConsumer.start",
    "consumeThreads",
    null,
    PULL_CONSUMER_OPTION_NAMES,
  );
});

test("Admin.start, Inspector.start and startLocalCluster refuse unknown option names", async () => {
  assertUnknown(
    await refusal(() => Admin.start({ nameservers, requestTimeout: 1000 } as never)),
    "Admin.start",
    "requestTimeout",
    "requestTimeoutMs",
    ADMIN_OPTION_NAMES,
  );
  assertUnknown(
    await refusal(() => Inspector.start({ colect: [] } as never)),
    "Inspector.start",
    "colect",
    "collect",
    INSPECTOR_OPTION_NAMES,
  );
  assertUnknown(
    await refusal(() => startLocalCluster({ dir: path.join(dir, "lc"), nameServerListen: EPHEMERAL } as never)),
    "startLocalCluster",
    "nameServerListen",
    "nameserverListen",
    LOCAL_CLUSTER_OPTION_NAMES,
  );
});

test("ActorNode.start and ActorNode.spawn refuse unknown option names", async () => {
  assertUnknown(
    await refusal(() => ActorNode.start({ listen: null, requestTimeout: 1000 } as never)),
    "ActorNode.start",
    "requestTimeout",
    "requestTimeoutMs",
    ZMQ_NODE_OPTION_NAMES,
  );
  const node = await ActorNode.start({ listen: null });
  try {
    let e: unknown;
    try {
      node.spawn("probe", createMachine({}), { inputs: {} } as never);
    } catch (err) {
      e = err;
    }
    assertUnknown(e, 'ActorNode.spawn("probe")', "inputs", "input", SPAWN_OPTION_NAMES);
  } finally {
    await node.close();
  }
});

test("MessageStore.open refuses unknown option names before it creates its directory", async () => {
  const storeDir = path.join(dir, "store");
  assertUnknown(
    await refusal(() => MessageStore.open({ dir: storeDir, flushInterval: 100 } as never)),
    "MessageStore.open",
    "flushInterval",
    "flushIntervalMs",
    MESSAGE_STORE_OPTION_NAMES,
  );
  assert.ok(!existsSync(storeDir));
});

test("InspectionCollector.start refuses unknown option names", async () => {
  assertUnknown(
    await refusal(() => InspectionCollector.start({ advertize: "tcp://10.0.0.5:*" } as never)),
    "InspectionCollector.start",
    "advertize",
    "advertise",
    INSPECTION_COLLECTOR_OPTION_NAMES,
  );
});

test("every start function refuses options that are not an object with ILLEGAL_ARGUMENT listing its options", async () => {
  const starts: [string, (o: unknown) => Promise<unknown>, string][] = [
    ["NameServer.start", (o) => NameServer.start(o as never), "scanIntervalMs"],
    ["Broker.start", (o) => Broker.start(o as never), "brokerName"],
    ["Producer.start", (o) => Producer.start(o as never), "group"],
    ["PushConsumer.start", (o) => PushConsumer.start(o as never), "subscriptions"],
    ["PullConsumer.start", (o) => PullConsumer.start(o as never), "autoCommit"],
    ["Admin.start", (o) => Admin.start(o as never), "nameservers"],
    ["Inspector.start", (o) => Inspector.start(o as never), "collect"],
    ["startLocalCluster", (o) => startLocalCluster(o as never), "slavesPerBroker"],
    ["ActorNode.start", (o) => ActorNode.start(o as never), "requestTimeoutMs"],
    ["MessageStore.open", (o) => MessageStore.open(o as never), "storeHost"],
    ["InspectionCollector.start", (o) => InspectionCollector.start(o as never), "advertise"],
  ];
  for (const [what, start, listed] of starts)
    for (const bad of [null, "tcp://127.0.0.1:9876", ["tcp://127.0.0.1:9876"], 42]) {
      const e = await refusal(() => start(bad));
      assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"), `${what}(${JSON.stringify(bad)}): ${String(e)}`);
      assert.ok((e as Error).message.startsWith(`${what} takes an options object {`), (e as Error).message);
      assert.ok((e as Error).message.includes(listed), (e as Error).message);
    }
});

test("Admin's createTopic, deleteTopic, deleteSubscriptionGroup, updateSubscriptionGroup and queryMessageByKey refuse unknown option names", async () => {
  let cluster: LocalCluster | undefined;
  let admin: Admin | undefined;
  try {
    cluster = await startLocalCluster({ dir: path.join(dir, "admin"), broker: { flush: "async" } });
    admin = await Admin.start({ nameservers: cluster.nameservers });
    const a = admin;
    const calls: [string, () => Promise<unknown>, string, string | null][] = [
      ["Admin.createTopic", () => a.createTopic({ topic: "Names", readQueueNum: 2 } as never), "readQueueNum", "readQueueNums"],
      ["Admin.createTopic", () => a.createTopic({ topic: "Names", ordered: true } as never), "ordered", "order"],
      ["Admin.deleteTopic", () => a.deleteTopic("Names", { clusterName: "DefaultCluster" } as never), "clusterName", "cluster"],
      [
        "Admin.deleteSubscriptionGroup",
        () => a.deleteSubscriptionGroup("cgNames", { cleanOffsets: true } as never),
        "cleanOffsets",
        "cleanOffset",
      ],
      [
        "Admin.updateSubscriptionGroup",
        () => a.updateSubscriptionGroup({ groupName: "cgNames", consumeTimeoutMinutes: 5 } as never),
        "consumeTimeoutMinutes",
        "consumeTimeoutMinute",
      ],
      ["Admin.queryMessageByKey", () => a.queryMessageByKey("Names", "k", { maxNumber: 5 } as never), "maxNumber", "maxNum"],
    ];
    for (const [what, call, option, suggestion] of calls) {
      const e = await call().then(
        () => assert.fail(`${what} took ${option}`),
        (err: unknown) => err,
      );
      assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"), `${what} ${option}: ${String(e)}`);
      const m = (e as Error).message;
      assert.ok(m.startsWith(`${what} has no option "${option}" (did you mean "${suggestion}"?)`), m);
    }
    // refused before anything was asked: the topic was not created
    assert.ok(!(await a.topicList()).includes("Names"));
    // a config read back, messageModel included, is taken whole (copying a group's settings)
    const [created] = await a.updateSubscriptionGroup({ groupName: "cgCopy", retryMaxTimes: 3 });
    const copied = await a.updateSubscriptionGroup({ ...created!.config, messageModel: "CLUSTERING", groupName: "cgCopy2" });
    assert.equal(copied[0]!.config.retryMaxTimes, 3);
    for (const [what, call] of [
      ["Admin.createTopic", () => a.createTopic(null as never)],
      ["Admin.deleteTopic", () => a.deleteTopic("Names", "DefaultCluster" as never)],
      ["Admin.deleteSubscriptionGroup", () => a.deleteSubscriptionGroup("cgNames", null as never)],
      ["Admin.updateSubscriptionGroup", () => a.updateSubscriptionGroup(["cgNames"] as never)],
      ["Admin.queryMessageByKey", () => a.queryMessageByKey("Names", "k", 5 as never)],
    ] as const) {
      const e = await call().then(
        () => assert.fail(`${what} took it`),
        (err: unknown) => err,
      );
      assert.ok(isMQError(e, "ILLEGAL_ARGUMENT") && (e as Error).message.startsWith(`${what} takes an options object`), `${what}: ${e}`);
    }
  } finally {
    await admin?.close();
    await cluster?.close();
  }
});
