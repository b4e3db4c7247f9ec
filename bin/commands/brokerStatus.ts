/** `actormq broker-status <broker>`: a broker's runtime figures (RocketMQ's `mqadmin brokerStatus`). */
import type { Command } from "commander";
import type { BrokerStatus } from "../../actors/client/admin.ts";
import { Admin } from "../../actors/client/index.ts";
import { clientCommand, clientOptions, type JsonFlag, jsonOption, runClient, show } from "../common.ts";

const FIELDS_HELP = `
<broker> is a broker name (its master is asked, as the name servers list it) or an address
(tcp://host:port or host:port, asked as given: a slave, or a broker not registered).

Fields (RocketMQ's names where it has one; --json prints them all as one JSON object):
  role, flushDiskType, brokerPermission   ASYNC_MASTER / SYNC_MASTER / SLAVE; SYNC_FLUSH or ASYNC_FLUSH;
                                          6 read+write, 4 read only, 2 write only
  bootTimestamp, runtime                  when the broker started, and for how long it has run
  msgPutTotalTodayNow, msgGetTotalTodayNow messages stored by sends / served to pulls since the start
  putTps, getTransferedTps                the same per second over the last minute
  commitLogMinOffset, commitLogMaxOffset  the commit log's first and next byte offsets
  commitLogDiskRatio                      used share of the store's file system (0-1)
  earliestMessageTimeStamp                store time of the oldest message kept
  dispatchBehindBytes                     commit-log bytes not yet in the consume queues (0 when healthy)
  pullRequestsHeld                        consumer pulls waiting for messages (long polling)
  consumerGroupsOnline, consumersOnline   groups with a live member here, and their members
  producerGroupsOnline                    producer groups that sent here in the last 2 minutes
  clientConnections                       connections open to the broker (clients, slaves, tools)
  damagedRecordsSkipped, entriesRepaired, replicationBytesSkipped, flushErrors
                                          store damage met and failed flushes since the start (0 when healthy)
  haSlave <id>                            a master's slave: its acknowledged offset and bytes behind
  masterAddr, haConnected, slaveFallBehindBytes
                                          a slave's master, whether it replicates now, and bytes behind`;

/** The readable key/value lines of a status, in the order an operator reads them. */
export function statusLines(s: BrokerStatus): string {
  const time = (ms: number) => (ms > 0 ? `${ms} (${new Date(ms).toISOString()})` : String(ms));
  const rows: [string, string | number | boolean][] = [
    ["brokerName", s.brokerName],
    ["brokerId", s.brokerId],
    ["clusterName", s.clusterName],
    ["brokerAddr", s.brokerAddr],
    ["brokerVersionDesc", s.brokerVersionDesc],
    ["role", s.role],
    ["flushDiskType", s.flushDiskType],
    ["brokerPermission", s.brokerPermission],
    ["bootTimestamp", time(s.bootTimestamp)],
    ["runtime", s.runtime],
    ["msgPutTotalTodayNow", s.msgPutTotalTodayNow],
    ["msgGetTotalTodayNow", s.msgGetTotalTodayNow],
    ["putTps", s.putTps.toFixed(1)],
    ["getTransferedTps", s.getTransferedTps.toFixed(1)],
    ["commitLogMinOffset", s.commitLogMinOffset],
    ["commitLogMaxOffset", s.commitLogMaxOffset],
    ["commitLogDiskRatio", s.commitLogDiskRatio < 0 ? "unknown" : s.commitLogDiskRatio.toFixed(3)],
    ["earliestMessageTimeStamp", time(s.earliestMessageTimeStamp)],
    ["dispatchBehindBytes", s.dispatchBehindBytes],
    ["pullRequestsHeld", s.pullRequestsHeld],
    ["consumerGroupsOnline", s.consumerGroupsOnline],
    ["consumersOnline", s.consumersOnline],
    ["producerGroupsOnline", s.producerGroupsOnline],
    ["clientConnections", s.clientConnections],
    ["topicCount", s.topicCount],
    ["damagedRecordsSkipped", s.damagedRecordsSkipped],
    ["entriesRepaired", s.entriesRepaired],
    ["replicationBytesSkipped", s.replicationBytesSkipped],
    ["flushErrors", s.flushErrors],
  ];
  if (s.role === "SLAVE") {
    rows.push(
      ["masterAddr", s.masterAddr ?? "unknown"],
      ["haConnected", s.haConnected ?? false],
      ["masterCommitLogMaxOffset", s.masterCommitLogMaxOffset ?? -1],
      ["slaveFallBehindBytes", s.slaveFallBehindBytes ?? 0],
    );
  } else if (s.haSlaves.length === 0) rows.push(["haSlaves", "none connected"]);
  else
    for (const sl of s.haSlaves)
      rows.push([
        `haSlave ${sl.slaveId}`,
        `${sl.addr} ackOffset ${sl.slaveAckOffset}, ${sl.diff} bytes behind${sl.inSync ? "" : ", NOT in sync"}`,
      ]);
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)} : ${v}\n`).join("");
}

export function addBrokerStatusCommand(program: Command): void {
  clientCommand(
    program
      .command("broker-status")
      .description("Show a broker's runtime figures: counts, rates, offsets, disk, clients, replication (RocketMQ's brokerStatus).")
      .argument("<broker>", "broker name (its master) or address (tcp://host:port)")
      .addOption(jsonOption("the figures as an object"))
      .addHelpText("after", FIELDS_HELP),
  ).action((broker: string, f: { namesrv: string[] } & JsonFlag) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, await admin.brokerStatus(broker), statusLines);
    }),
  );
}
