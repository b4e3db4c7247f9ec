/**
 * The name server's registry (RocketMQ's `RouteInfoManager`): which brokers are alive, which
 * topics each master serves with how many queues, and the routes clients ask for. Plain data and
 * functions, no I/O: the `namesrv` machine owns one and drives it with events and a timer.
 */
import {
  type BrokerData,
  type ClusterInfo,
  MASTER_ID,
  MQError,
  Perm,
  type QueueData,
  type RegisterBrokerReply,
  type RegisterBrokerRequest,
  type TopicRouteData,
  topicCreateCommand,
  type UnregisterBrokerRequest,
} from "../../transport/protocol.ts";

/** A broker silent for this long is dropped from every route (RocketMQ's default). */
export const DEFAULT_BROKER_EXPIRED_MS = 120_000;

interface LiveBroker {
  brokerName: string;
  brokerId: number;
  /** the cluster this address registered in (its broker name is listed under one cluster only) */
  clusterName: string;
  /** the name server's monotonic clock, never shown or sent */
  lastUpdateMs: number;
  timeoutMs: number;
  haServerAddr?: string;
}

/** How often one broker name's cluster conflict is reported at most (it recurs at each registration, every 30 s). */
export const CLUSTER_CONFLICT_REPORT_MS = 60_000;

/**
 * Brokers of one name registering in different clusters. `slave`: a slave names another cluster
 * than its registered master; it is listed under the master's (`listedUnder`). `name`: two masters
 * (or, with no master, two slaves) of one broker name in two clusters, two brokers sharing a name:
 * the name is listed under the last one to register, so its routes and cluster flip between them.
 */
export interface ClusterConflict {
  kind: "slave" | "name";
  brokerName: string;
  brokerAddr: string;
  brokerId: number;
  /** the cluster this registration names */
  clusterName: string;
  /** the live addresses of the name registered in another cluster, with theirs */
  others: { brokerAddr: string; brokerId: number; clusterName: string }[];
  /** the cluster the broker name is listed under after this registration */
  listedUnder: string;
}

export interface RouteTableOptions {
  /** called at most every {@link CLUSTER_CONFLICT_REPORT_MS} per broker name and kind */
  onClusterConflict?: (c: ClusterConflict) => void;
}

/** The route registry of one name server. */
export class RouteTable {
  /** brokerName -> addresses by id */
  private readonly brokerAddrTable = new Map<string, BrokerData>();
  /** cluster -> broker names */
  private readonly clusterAddrTable = new Map<string, Set<string>>();
  /** topic -> brokerName -> queue data */
  private readonly topicQueueTable = new Map<string, Map<string, QueueData>>();
  /** broker address -> liveness */
  private readonly brokerLiveTable = new Map<string, LiveBroker>();
  /** `kind:brokerName` -> when its conflict was last reported */
  private readonly conflictReported = new Map<string, number>();

  constructor(private readonly opts: RouteTableOptions = {}) {}

  /**
   * Records a broker registration. A master's topic list replaces what it registered before
   * (a topic it no longer lists loses that broker's queues). Returns the master's address for
   * slaves.
   */
  register(req: RegisterBrokerRequest, nowMs: number): RegisterBrokerReply {
    const { clusterName, brokerName, brokerAddr, brokerId } = req;
    // liveness is kept by address: a broker that died without unregistering, and whose address
    // another broker name now registers on, would otherwise never expire (the same name under
    // another id is handled below, keeping its queues)
    const prev = this.brokerLiveTable.get(brokerAddr);
    if (prev !== undefined && prev.brokerName !== brokerName) this.removeAddress(brokerAddr, prev.brokerName, prev.brokerId);
    let bd = this.brokerAddrTable.get(brokerName);
    if (!bd) {
      bd = { cluster: clusterName, brokerName, brokerAddrs: {} };
      this.brokerAddrTable.set(brokerName, bd);
    } else if (bd.cluster !== clusterName) {
      const others = this.liveElsewhere(bd, brokerAddr, clusterName);
      const master = bd.brokerAddrs[String(MASTER_ID)];
      if (brokerId !== MASTER_ID && master !== undefined && master !== brokerAddr) {
        // a slave is shown where its master is: moved, the name flipped at each of their registrations
        this.reportConflict(nowMs, { kind: "slave", brokerName, brokerAddr, brokerId, clusterName, others, listedUnder: bd.cluster });
      } else {
        // restarted under another cluster: listed under the old one too, it would stay there for good
        this.removeFromClusters(brokerName);
        bd.cluster = clusterName;
        // another broker of the same role and name, live in another cluster: the name flips between them
        const rivals = others.filter((o) => (o.brokerId === MASTER_ID) === (brokerId === MASTER_ID));
        if (rivals.length > 0)
          this.reportConflict(nowMs, {
            kind: "name",
            brokerName,
            brokerAddr,
            brokerId,
            clusterName,
            others: rivals,
            listedUnder: clusterName,
          });
      }
    }
    let names = this.clusterAddrTable.get(bd.cluster);
    if (!names) {
      names = new Set();
      this.clusterAddrTable.set(bd.cluster, names);
    }
    names.add(brokerName);
    // an address re-registering under another id (a slave promoted, a port reused) replaces its old entry
    for (const [id, addr] of Object.entries(bd.brokerAddrs)) {
      if (addr === brokerAddr && Number(id) !== brokerId) delete bd.brokerAddrs[id];
    }
    bd.brokerAddrs[String(brokerId)] = brokerAddr;

    this.brokerLiveTable.set(brokerAddr, {
      brokerName,
      brokerId,
      clusterName,
      lastUpdateMs: nowMs,
      timeoutMs: req.heartbeatTimeoutMillis && req.heartbeatTimeoutMillis > 0 ? req.heartbeatTimeoutMillis : DEFAULT_BROKER_EXPIRED_MS,
      haServerAddr: req.haServerAddr,
    });

    if (brokerId === MASTER_ID) {
      // without a table the master's topics stay as they were (RocketMQ updates them only from a
      // topicConfigWrapper): dropping them would take every route of a live broker away
      if (req.topicConfigTable === undefined) return {};
      const listed = req.topicConfigTable;
      // own keys only: the table came off the wire, and `in` finds Object.prototype's names (constructor, ...)
      for (const [topic, byBroker] of this.topicQueueTable) {
        if (!Object.hasOwn(listed, topic) && byBroker.delete(brokerName) && byBroker.size === 0) this.topicQueueTable.delete(topic);
      }
      for (const tc of Object.values(listed)) {
        let byBroker = this.topicQueueTable.get(tc.topicName);
        if (!byBroker) {
          byBroker = new Map();
          this.topicQueueTable.set(tc.topicName, byBroker);
        }
        byBroker.set(brokerName, { brokerName, readQueueNums: tc.readQueueNums, writeQueueNums: tc.writeQueueNums, perm: tc.perm });
      }
      return {};
    }
    const masterAddr = bd.brokerAddrs[String(MASTER_ID)];
    return masterAddr ? { masterAddr, haServerAddr: this.brokerLiveTable.get(masterAddr)?.haServerAddr } : {};
  }

  /**
   * Removes one broker address (clean shutdown); a broker name with no address left leaves every
   * route. An address live under another broker name or id is left alone: dropping its liveness
   * would keep that broker's routes for good, with nothing left to expire them.
   */
  unregister(req: UnregisterBrokerRequest): void {
    const live = this.brokerLiveTable.get(req.brokerAddr);
    if (live !== undefined && (live.brokerName !== req.brokerName || live.brokerId !== req.brokerId)) return;
    this.removeAddress(req.brokerAddr, req.brokerName, req.brokerId);
  }

  /** Drops brokers whose last registration is older than their timeout; returns the dropped addresses. */
  scanNotActiveBrokers(nowMs: number): string[] {
    const dropped: string[] = [];
    for (const [addr, live] of this.brokerLiveTable) {
      if (nowMs - live.lastUpdateMs > live.timeoutMs) {
        dropped.push(addr);
        this.removeAddress(addr, live.brokerName, live.brokerId);
      }
    }
    return dropped;
  }

  /**
   * A topic's route; throws MQError TOPIC_NOT_EXIST when no live broker serves it. A broker name
   * whose master is gone but whose slave is alive stays in it with the slave's address, its queues
   * read-only (perm without WRITE): consumers go on reading from the slave, producers send elsewhere.
   */
  getRoute(topic: string): TopicRouteData {
    const byBroker = this.topicQueueTable.get(topic);
    if (!byBroker || byBroker.size === 0) {
      throw new MQError(
        "TOPIC_NOT_EXIST",
        `No route info of topic "${topic}": create it with \`${topicCreateCommand(topic)}\` (Admin.createTopic in code), or enable autoCreateTopic on a broker.`,
      );
    }
    const queueDatas: QueueData[] = [];
    const brokerDatas: BrokerData[] = [];
    for (const qd of byBroker.values()) {
      const bd = this.brokerAddrTable.get(qd.brokerName);
      const masterless = bd !== undefined && bd.brokerAddrs[String(MASTER_ID)] === undefined;
      queueDatas.push(masterless ? { ...qd, perm: qd.perm & ~Perm.WRITE } : { ...qd });
      if (bd) brokerDatas.push({ cluster: bd.cluster, brokerName: bd.brokerName, brokerAddrs: { ...bd.brokerAddrs } });
    }
    queueDatas.sort((a, b) => (a.brokerName < b.brokerName ? -1 : a.brokerName > b.brokerName ? 1 : 0));
    return { queueDatas, brokerDatas };
  }

  /** Every broker and cluster the name server knows. */
  clusterInfo(): ClusterInfo {
    // fromEntries defines own properties: assigned, a "__proto__" key would set the prototype (the
    // table then encodes as an array) instead of being an entry
    const brokerAddrTable: Record<string, BrokerData> = Object.fromEntries(
      [...this.brokerAddrTable].map(([name, bd]) => [name, { ...bd, brokerAddrs: { ...bd.brokerAddrs } }]),
    );
    const clusterAddrTable: Record<string, string[]> = Object.fromEntries(
      [...this.clusterAddrTable].map(([cluster, names]) => [cluster, [...names].sort()]),
    );
    return { brokerAddrTable, clusterAddrTable };
  }

  /**
   * Removes a topic's route (RocketMQ's `deleteTopic`): from every broker, or only from the
   * brokers of `clusterName`. A broker that still has the topic puts it back at its next
   * registration. Returns whether the topic had a route.
   */
  deleteTopic(topic: string, clusterName?: string): boolean {
    const byBroker = this.topicQueueTable.get(topic);
    if (!byBroker) return false;
    if (clusterName === undefined) {
      this.topicQueueTable.delete(topic);
      return true;
    }
    const names = this.clusterAddrTable.get(clusterName);
    let removed = false;
    for (const name of [...byBroker.keys()]) if (names?.has(name)) removed = byBroker.delete(name) || removed;
    if (byBroker.size === 0) this.topicQueueTable.delete(topic);
    return removed;
  }

  /** Names of every topic some live broker serves. */
  topicList(): string[] {
    return [...this.topicQueueTable.keys()].sort();
  }

  /** Number of live broker addresses. */
  get liveBrokerCount(): number {
    return this.brokerLiveTable.size;
  }

  /** The live addresses of `bd` other than `brokerAddr` that registered in another cluster than `clusterName`. */
  private liveElsewhere(bd: BrokerData, brokerAddr: string, clusterName: string): ClusterConflict["others"] {
    const out: ClusterConflict["others"] = [];
    for (const [id, addr] of Object.entries(bd.brokerAddrs)) {
      const live = addr === brokerAddr ? undefined : this.brokerLiveTable.get(addr);
      if (live && live.brokerName === bd.brokerName && live.clusterName !== clusterName)
        out.push({ brokerAddr: addr, brokerId: Number(id), clusterName: live.clusterName });
    }
    return out;
  }

  private reportConflict(nowMs: number, c: ClusterConflict): void {
    const key = `${c.kind}:${c.brokerName}`;
    const last = this.conflictReported.get(key);
    if (last !== undefined && nowMs - last < CLUSTER_CONFLICT_REPORT_MS) return;
    this.conflictReported.set(key, nowMs);
    this.opts.onClusterConflict?.(c);
  }

  private removeAddress(brokerAddr: string, brokerName: string, brokerId: number): void {
    this.brokerLiveTable.delete(brokerAddr);
    const bd = this.brokerAddrTable.get(brokerName);
    if (bd && bd.brokerAddrs[String(brokerId)] === brokerAddr) delete bd.brokerAddrs[String(brokerId)];
    // queues stay while any address of the broker name is alive: consumers may read from a slave,
    // and clients only publish to broker names that still have a master
    if (bd && Object.keys(bd.brokerAddrs).length > 0) return;
    this.brokerAddrTable.delete(brokerName);
    this.removeFromClusters(brokerName);
    this.conflictReported.delete(`slave:${brokerName}`);
    this.conflictReported.delete(`name:${brokerName}`);
    for (const [topic, byBroker] of this.topicQueueTable) {
      if (byBroker.delete(brokerName) && byBroker.size === 0) this.topicQueueTable.delete(topic);
    }
  }

  /** Takes a broker name out of every cluster (RocketMQ's onChannelDestroy), dropping clusters left empty. */
  private removeFromClusters(brokerName: string): void {
    for (const [cluster, names] of this.clusterAddrTable) {
      if (names.delete(brokerName) && names.size === 0) this.clusterAddrTable.delete(cluster);
    }
  }
}
