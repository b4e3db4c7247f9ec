/**
 * GET_BROKER_RUNTIME_INFO through Admin.brokerStatus: the put and get counters move by the messages
 * sent and consumed, the offsets and store figures match the store, held pulls, groups and
 * connections online are seen, a master shows its slave's acknowledged offset and a slave its
 * master; a broker is found by name (its master) or address, and an unknown name or a dead address
 * is a clear error.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import { Broker } from "../../../actors/broker/broker.ts";
import { BrokerStats, PRODUCER_EXPIRY_S } from "../../../actors/broker/brokerStats.ts";
import { RateWindow } from "../../../actors/broker/rateCounter.ts";
import { NameServer } from "../../../actors/nameserver/index.ts";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { Admin, type BrokerStatus, Producer, PushConsumer } from "../../../index.ts";
import { BrokerActor, isMQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir, waitFor } from "../../helpers.ts";

let ns: NameServer;
let master: Broker;
let slave: Broker;
let admin: Admin;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await tempDir("actormq-brokerstatus-");
  cleanup = t.cleanup;
  ns = await NameServer.start({ listen: EPHEMERAL });
  const common = { brokerName: "broker-st", listen: EPHEMERAL, nameservers: [ns.address], flush: "async" as const };
  master = await Broker.start({ ...common, storeDir: `${t.dir}/master` });
  slave = await Broker.start({ ...common, brokerId: 1, role: "SLAVE", masterAddress: master.address, storeDir: `${t.dir}/slave` });
  admin = await Admin.start({ nameservers: [ns.address] });
});

after(async () => {
  await admin?.close();
  await slave?.close();
  await master?.close();
  await ns?.close();
  await cleanup();
});

test("put and get totals, rates, offsets, held pulls and groups online move with what is sent and consumed", async () => {
  const t0 = Date.now();
  const fresh = await admin.brokerStatus("broker-st");
  assert.equal(fresh.brokerId, 0, "a broker name is its master");
  assert.equal(fresh.brokerAddr, master.address);
  assert.equal(fresh.role, "ASYNC_MASTER");
  assert.equal(fresh.flush, "async");
  assert.equal(fresh.flushDiskType, "ASYNC_FLUSH");
  assert.equal(fresh.brokerPermission, 6);
  assert.match(fresh.brokerVersionDesc, /^actormq \d+\.\d+\.\d+/);
  assert.ok(fresh.bootTimestamp <= t0 && fresh.bootTimestamp > t0 - 60_000, `bootTimestamp ${fresh.bootTimestamp}`);
  assert.match(fresh.runtime, /^\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]$/);
  assert.equal(fresh.msgPutTotalTodayNow, 0);
  assert.equal(fresh.msgGetTotalTodayNow, 0);
  assert.equal(fresh.putTps, 0);
  assert.equal(fresh.earliestMessageTimeStamp, -1, "no message yet");
  assert.ok(fresh.commitLogDiskRatio > 0 && fresh.commitLogDiskRatio <= 1, `disk ratio ${fresh.commitLogDiskRatio}`);
  assert.equal(fresh.dispatchBehindBytes, 0);
  assert.equal(fresh.consumerGroupsOnline, 0);
  assert.equal(fresh.producerGroupsOnline, 0);
  assert.equal(fresh.damagedRecordsSkipped + fresh.entriesRepaired + fresh.replicationBytesSkipped + fresh.flushErrors, 0);

  const producer = await Producer.start({ group: "pgStatus", nameservers: [ns.address] });
  const consumed: string[] = [];
  let consumer: PushConsumer | undefined;
  try {
    await admin.createTopic({ topic: "StatusT", readQueueNums: 2, writeQueueNums: 2 });
    for (let i = 0; i < 10; i++) await producer.send({ topic: "StatusT", body: `m${i}` });
    await producer.sendBatch(Array.from({ length: 5 }, (_, i) => ({ topic: "StatusT", body: `b${i}` })));
    const sent = await admin.brokerStatus(master.address);
    assert.equal(sent.msgPutTotalTodayNow, 15, "one count per message stored, batches included");
    assert.ok(sent.putTps > 0 && sent.putTps <= 15, `putTps ${sent.putTps}`);
    assert.equal(sent.producerGroupsOnline, 1);
    assert.equal(sent.commitLogMaxOffset, master.store.maxPhyOffset);
    assert.equal(sent.maxPhyOffset, sent.commitLogMaxOffset);
    assert.ok(sent.commitLogMaxOffset > fresh.commitLogMaxOffset);
    assert.equal(sent.commitLogMinOffset, 0);
    assert.ok(sent.earliestMessageTimeStamp >= t0 && sent.earliestMessageTimeStamp <= Date.now(), "the first message's store time");
    assert.equal(sent.msgGetTotalTodayNow, 0, "nothing pulled yet");

    consumer = await PushConsumer.start({
      group: "cgStatus",
      nameservers: [ns.address],
      subscriptions: { StatusT: "*" },
      consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
      listener: async (msgs) => {
        for (const m of msgs) consumed.push(m.body.toString());
        return "CONSUME_SUCCESS";
      },
    });
    await waitFor(() => consumed.length >= 15, 15_000, "15 consumed");
    // drained, its pulls wait on the broker for new messages
    const idle = await waitFor(
      async () => {
        const s = await admin.brokerStatus("broker-st");
        return s.pullRequestsHeld >= 2 ? s : null;
      },
      15_000,
      "both queues' pulls held",
    );
    assert.equal(consumed.length, 15);
    assert.equal(idle.msgGetTotalTodayNow, 15, "one count per message served");
    assert.ok(idle.getTransferedTps > 0 && idle.getTransferedTps <= 15, `getTransferedTps ${idle.getTransferedTps}`);
    assert.equal(idle.msgPutTotalTodayNow, 15, "pulls store nothing");
    assert.equal(idle.consumerGroupsOnline, 1);
    assert.equal(idle.consumersOnline, 1);
  } finally {
    await consumer?.close();
    await producer.close();
  }
});

test("a master lists its slave's acknowledged offset; a slave, asked by address, its master and how far behind it is", async () => {
  const m = await waitFor(
    async () => {
      const s = await admin.brokerStatus("broker-st");
      return s.haSlaves.length === 1 && s.haSlaves[0]!.diff === 0 ? s : null;
    },
    15_000,
    "the slave caught up",
  );
  const [sl] = m.haSlaves;
  assert.equal(sl!.slaveId, 1);
  assert.equal(sl!.addr, slave.address);
  assert.equal(sl!.slaveAckOffset, master.store.maxPhyOffset);
  assert.equal(sl!.inSync, true);
  assert.equal(m.masterAddr, undefined, "a master has no master");

  const s: BrokerStatus = await waitFor(
    async () => {
      const r = await admin.brokerStatus(slave.address.replace(/^tcp:\/\//, ""));
      return r.slaveFallBehindBytes === 0 && r.masterCommitLogMaxOffset === master.store.maxPhyOffset ? r : null;
    },
    15_000,
    "the slave's status caught up",
  );
  assert.equal(s.brokerId, 1);
  assert.equal(s.role, "SLAVE");
  assert.equal(s.masterAddr, master.address);
  assert.equal(s.haConnected, true);
  assert.equal(s.commitLogMaxOffset, master.store.maxPhyOffset, "the slave holds the master's log");
  assert.deepEqual(s.haSlaves, []);
  assert.equal(s.msgPutTotalTodayNow, 0, "replicated bytes are no sends");
});

test("client connections count the connections open to the broker", async () => {
  const before = (await admin.brokerStatus(master.address)).clientConnections;
  assert.ok(before >= 2, `the admin's and the slave's connections (${before})`);
  const raw = await ActorNode.start({ listen: null });
  try {
    await raw.ref(master.address, BrokerActor.BROKER).ask({ type: "GET_BROKER_RUNTIME_INFO" });
    await waitFor(async () => (await admin.brokerStatus(master.address)).clientConnections === before + 1, 10_000, "one more");
  } finally {
    await raw.close();
  }
  await waitFor(async () => (await admin.brokerStatus(master.address)).clientConnections === before, 10_000, "back to before");
});

test("an unknown broker name names the known ones; an address nobody listens on fails at once, naming it", async () => {
  await assert.rejects(admin.brokerStatus("broker-zz"), (e: unknown) => {
    assert.ok(isMQError(e, "ILLEGAL_ARGUMENT"), String(e));
    assert.match((e as Error).message, /No broker named broker-zz .*broker-st \(master tcp:\/\/\S+, slave 1 tcp:\/\/\S+\)/);
    return true;
  });
  await assert.rejects(admin.brokerStatus("tcp://127.0.0.1:99999"), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"));
  await assert.rejects(admin.brokerStatus(""), (e: unknown) => isMQError(e, "ILLEGAL_ARGUMENT"));
  // a port just freed: nothing listens there
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const t0 = performance.now();
  await assert.rejects(admin.brokerStatus(`127.0.0.1:${port}`), (e: unknown) => {
    assert.ok(isMQError(e, "TIMEOUT"), String(e));
    assert.match((e as Error).message, new RegExp(`broker at tcp://127\\.0\\.0\\.1:${port} did not answer`));
    return true;
  });
  assert.ok(performance.now() - t0 < 2500, "a refused connection fails before the ask's timeout");
});

test("RateWindow: a young window's rate is over its age, an old one's over the last minute", () => {
  let now = 5_000_000;
  const w = new RateWindow(() => now);
  assert.equal(w.perSecond(), 0);
  w.add(10);
  now += 1000;
  w.add(10);
  assert.equal(w.perSecond(), 10, "20 over 2 seconds");
  now += 120_000;
  assert.equal(w.perSecond(), 0, "rolled out");
  for (let i = 0; i < 60; i++) {
    w.add(3);
    now += 1000;
  }
  now -= 1000;
  assert.equal(w.perSecond(), 3);
});

test("BrokerStats: totals add per request; a producer group is online until it has not sent for two minutes", () => {
  let now = 7_000_000;
  const st = new BrokerStats(() => now);
  st.notePut("pgA", 32);
  st.notePut("pgB", 1);
  st.notePut(undefined, 2);
  st.noteGet(5);
  assert.equal(st.putTotal, 35);
  assert.equal(st.getTotal, 5);
  assert.equal(st.putTps(), 35, "all in the first second");
  assert.equal(st.producerGroupsOnline(), 2, "a request without a group counts no group");
  now += (PRODUCER_EXPIRY_S - 1) * 1000;
  st.notePut("pgB", 1);
  assert.equal(st.producerGroupsOnline(), 2);
  now += 1000;
  assert.equal(st.producerGroupsOnline(), 1, "pgA silent for two minutes");
  assert.equal(st.uptimeMs(), PRODUCER_EXPIRY_S * 1000);
});

test("a broker name whose master left is NO_ROUTE naming its slave (run last: it stops the master)", async () => {
  await master.close();
  await waitFor(async () => !(await admin.clusterInfo()).brokerAddrTable["broker-st"]?.brokerAddrs["0"], 10_000, "the master unregistered");
  await assert.rejects(admin.brokerStatus("broker-st"), (e: unknown) => {
    assert.ok(isMQError(e, "NO_ROUTE"), String(e));
    assert.ok((e as Error).message.includes(`broker-st (slave 1 ${slave.address}) has no master`), (e as Error).message);
    return true;
  });
});
