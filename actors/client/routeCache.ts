/**
 * The client's view of routes (RocketMQ's `MQClientInstance.topicRouteTable` and
 * `topicRouteData2TopicPublishInfo` / `topicRouteData2TopicSubscribeInfo`): per topic the last
 * route from a name server, the queues a producer may write to, the queues a consumer may read,
 * and broker addresses by name.
 */
import { MASTER_ID, type MessageQueue, Perm, type QueueData, type TopicRouteData } from "../../transport/protocol.ts";

/** What a producer needs for a topic. */
export interface TopicPublishInfo {
  topic: string;
  orderTopic: boolean;
  /** writable queues on brokers that have a master, by broker name then queue id */
  queues: MessageQueue[];
  route: TopicRouteData;
}

/** Names of the route's brokers that list a master address (a master down leaves its slaves listed alone). */
export function brokersWithMaster(route: TopicRouteData): Set<string> {
  return new Set(route.brokerDatas.filter((b) => b.brokerAddrs[String(MASTER_ID)] !== undefined).map((b) => b.brokerName));
}

/** The queue data a producer may write to: WRITE permission, on a broker that has a master. */
export function writableQueueDatas(route: TopicRouteData): QueueData[] {
  const withMaster = brokersWithMaster(route);
  return route.queueDatas.filter((qd) => (qd.perm & Perm.WRITE) !== 0 && withMaster.has(qd.brokerName));
}

/** The writable queues of a route ({@link writableQueueDatas}), by broker name then queue id. */
export function publishQueuesOf(topic: string, route: TopicRouteData): MessageQueue[] {
  const out: MessageQueue[] = [];
  const qds = writableQueueDatas(route).sort((a, b) => (a.brokerName < b.brokerName ? -1 : a.brokerName > b.brokerName ? 1 : 0));
  for (const qd of qds) {
    // frozen: selectors are handed these cached objects, and a change would reroute later sends
    for (let i = 0; i < qd.writeQueueNums; i++) out.push(Object.freeze({ topic, brokerName: qd.brokerName, queueId: i }));
  }
  return out;
}

/** The readable queues of a route: readQueueNums per queue data with READ permission. */
export function subscribeQueuesOf(topic: string, route: TopicRouteData): MessageQueue[] {
  const out: MessageQueue[] = [];
  for (const qd of route.queueDatas) {
    if ((qd.perm & Perm.READ) === 0) continue;
    for (let i = 0; i < qd.readQueueNums; i++) out.push({ topic, brokerName: qd.brokerName, queueId: i });
  }
  return out;
}

/**
 * A route for an unknown topic built from the auto-create topic's route (TBW102), as RocketMQ's
 * producer does: the brokers that would create the topic on first send, with at most
 * `defaultQueueNums` queues each.
 */
export function routeFromDefaultTopic(defaultRoute: TopicRouteData, defaultQueueNums: number): TopicRouteData {
  return {
    queueDatas: defaultRoute.queueDatas.map((qd) => ({
      brokerName: qd.brokerName,
      readQueueNums: Math.min(defaultQueueNums, qd.readQueueNums),
      writeQueueNums: Math.min(defaultQueueNums, qd.writeQueueNums),
      perm: qd.perm & (Perm.READ | Perm.WRITE),
    })),
    brokerDatas: defaultRoute.brokerDatas,
  };
}

function routeKey(route: TopicRouteData): string {
  const q = route.queueDatas.map((d) => `${d.brokerName}:${d.readQueueNums}:${d.writeQueueNums}:${d.perm}`).sort();
  const b = route.brokerDatas.map((d) => `${d.brokerName}:${Object.entries(d.brokerAddrs).sort().join(",")}`).sort();
  return `${q.join("|")}#${b.join("|")}`;
}

interface Entry {
  route: TopicRouteData;
  key: string;
  publish: TopicPublishInfo;
  /** built from the TBW102 route; the real route replaces it as soon as a name server has one */
  provisional: boolean;
}

/** Routes by topic plus the broker address book derived from them. */
export class RouteCache {
  private readonly topics = new Map<string, Entry>();
  private readonly brokerAddrs = new Map<string, Record<string, string>>();

  /** Stores a route; returns true when it differs from the previous one. */
  put(topic: string, route: TopicRouteData, provisional = false): boolean {
    const key = routeKey(route);
    const prev = this.topics.get(topic);
    for (const bd of route.brokerDatas) this.brokerAddrs.set(bd.brokerName, { ...bd.brokerAddrs });
    if (prev && prev.key === key && prev.provisional === provisional) return false;
    this.topics.set(topic, {
      route,
      key,
      provisional,
      publish: { topic, orderTopic: !!route.orderTopicConf, queues: publishQueuesOf(topic, route), route },
    });
    return true;
  }

  /** Forgets a topic (a provisional route whose TBW102 route is gone, or a route never learned). */
  delete(topic: string): boolean {
    return this.topics.delete(topic);
  }

  route(topic: string): TopicRouteData | undefined {
    return this.topics.get(topic)?.route;
  }

  publishInfo(topic: string): TopicPublishInfo | undefined {
    return this.topics.get(topic)?.publish;
  }

  isProvisional(topic: string): boolean {
    return this.topics.get(topic)?.provisional ?? false;
  }

  subscribeQueues(topic: string): MessageQueue[] {
    const r = this.topics.get(topic)?.route;
    return r ? subscribeQueuesOf(topic, r) : [];
  }

  /** Topics with a cached route. */
  topicNames(): string[] {
    return [...this.topics.keys()];
  }

  /** Master address of a broker name, from the latest routes. */
  masterAddress(brokerName: string): string | undefined {
    return this.brokerAddrs.get(brokerName)?.[String(MASTER_ID)];
  }

  /** Address of a broker by name and id (master when `brokerId` is 0 or absent). */
  brokerAddress(brokerName: string, brokerId = MASTER_ID): string | undefined {
    return this.brokerAddrs.get(brokerName)?.[String(brokerId)];
  }

  /** Every known broker: name to addresses by id. */
  brokers(): Map<string, Record<string, string>> {
    return this.brokerAddrs;
  }

  /**
   * Drops from the address book the brokers no current route mentions, except
   * those in `keep`: a consumer still holds or lets go of queues there, and the final offsets it
   * commits as it lets them go must reach that broker (a route lists a broker only once it has
   * registered again with the name server asked, up to 30 s after that name server restarted).
   */
  pruneBrokers(keep: ReadonlySet<string> = new Set()): void {
    const named = new Map<string, Record<string, string>>();
    for (const e of this.topics.values()) for (const bd of e.route.brokerDatas) named.set(bd.brokerName, bd.brokerAddrs);
    // the book holds each broker's addresses from the latest route put: a route kept for a topic
    // that vanished (TOPIC_NOT_EXIST) still names its old ones (a port since changed, a master gone)
    for (const name of [...this.brokerAddrs.keys()]) if (!named.has(name) && !keep.has(name)) this.brokerAddrs.delete(name);
    for (const [name, addrs] of named) if (!this.brokerAddrs.has(name)) this.brokerAddrs.set(name, { ...addrs });
  }
}
