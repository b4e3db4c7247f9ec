/**
 * InspectionPublisher: one node's inspection stream sent to one inspector's SUB endpoint over an
 * XPUB socket. The publisher feeds on the node's {@link InspectionHub} only while its subscriber
 * is there: the XPUB reports the subscription (attach, replay every actor's definition and latest
 * snapshot) and its end (`immediate` makes a lost connection an unsubscription too), so a node
 * whose inspector has gone keeps no xstate observer and encodes nothing. A publisher asked for
 * over the wire (INSPECT_SUBSCRIBE) also holds a lease its requester renews by asking again (the
 * inspector does with every probe); an unrenewed lease closes the socket. While subscribed it
 * also sends a small heartbeat record every {@link INSPECTION_HEARTBEAT_INTERVAL_MS}, so the
 * inspector notices a process that died without saying so.
 */
import * as zmq from "zeromq";
import { monotonicNow } from "../../transport/clock.ts";
import { curveKeyPair, encode } from "../../transport/index.ts";
import { MQError } from "../../transport/protocol.ts";
import {
  INSPECTION_HEARTBEAT_EVENT,
  INSPECTION_HEARTBEAT_INTERVAL_MS,
  INSPECTION_NODE_CLOSED_EVENT,
  type InspectionHub,
  type InspectionRecord,
  NODE_ACTOR_NAME,
} from "./inspection.ts";

/** How long a closing node waits for its last inspection records to leave. */
const FINAL_INSPECTION_FLUSH_MS = 200;

/** Frames an inspection publisher may queue before it drops records (never back-pressures). */
export const INSPECTION_QUEUE_LIMIT = 10_000;

/** XPUB notification bytes: first byte 1 subscribes, 0 unsubscribes. */
const SUBSCRIBE = 1;
const UNSUBSCRIBE = 0;

export class InspectionPublisher {
  private readonly pub: zmq.XPublisher;
  /** the hub listener's removal while a subscriber is there */
  private detach: (() => void) | null = null;
  private queue: Buffer[] = [];
  private sending = false;
  /** settles when the queue is empty */
  private pumping: Promise<void> = Promise.resolve();
  private leaseTimer: NodeJS.Timeout | null = null;
  /** runs only while a subscriber is there */
  private heartbeatTimer: NodeJS.Timeout | null = null;
  /** null: no lease, publishes until stopped */
  private leaseUntil: number | null = null;
  private closed = false;

  /**
   * Connects to `endpoint`; `onClosed` runs once when the publisher closes (stopped, or its lease
   * ran out). Throws ILLEGAL_ARGUMENT for an endpoint ZeroMQ cannot connect to.
   */
  constructor(
    private readonly nodeId: string,
    private readonly hub: InspectionHub,
    readonly endpoint: string,
    private readonly onClosed: () => void,
    /** the collector's CURVE public key: the stream is encrypted, with a key pair of its own */
    readonly curveServerKey?: string,
  ) {
    // immediate: a connection that drops ends the subscription (the XPUB reports it) instead of
    // queueing records for a peer that may never come back
    this.pub = new zmq.XPublisher({ linger: 0, sendHighWaterMark: INSPECTION_QUEUE_LIMIT, sendTimeout: 0, immediate: true });
    if (curveServerKey !== undefined) {
      const keys = curveKeyPair();
      this.pub.curveServerKey = curveServerKey;
      this.pub.curvePublicKey = keys.publicKey;
      this.pub.curveSecretKey = keys.secretKey;
    }
    try {
      this.pub.connect(endpoint);
    } catch (e) {
      this.pub.close();
      throw new MQError("ILLEGAL_ARGUMENT", `Cannot connect the inspection stream to "${endpoint}": ${(e as Error).message}.`, {
        cause: e,
      });
    }
    void this.watch();
  }

  /** True while a subscriber is there (the hub feeds this publisher). */
  get subscribed(): boolean {
    return this.detach !== null;
  }

  /** Whether the publisher runs on a lease (asked for over the wire) rather than until stopped. */
  get leased(): boolean {
    return this.leaseUntil !== null;
  }

  /** Extends the lease to `ms` from now; `null` drops the lease (publishes until stopped). */
  renew(ms: number | null): void {
    if (this.closed) return;
    if (ms === null) {
      this.leaseUntil = null;
      if (this.leaseTimer) clearTimeout(this.leaseTimer);
      this.leaseTimer = null;
      return;
    }
    this.leaseUntil = monotonicNow() + ms;
    if (this.leaseTimer === null) this.armLease(ms);
  }

  /** Stops publishing and closes the socket; `final` first says the node is closing (bounded wait). */
  async stop(final = false): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.leaseTimer) clearTimeout(this.leaseTimer);
    this.leaseTimer = null;
    this.stopHeartbeat();
    const subscribed = this.subscribed;
    // the queue keeps the last records (the actors' final snapshots) for the bounded flush below
    this.detach?.();
    this.detach = null;
    this.onClosed();
    if (final && subscribed && !this.pub.closed) {
      // the node is closing: say so, and give the last records a moment to leave (bounded)
      this.pushNodeEvent(INSPECTION_NODE_CLOSED_EVENT);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.pumping, new Promise((r) => (timer = setTimeout(r, FINAL_INSPECTION_FLUSH_MS)))]);
      clearTimeout(timer);
      this.pub.linger = FINAL_INSPECTION_FLUSH_MS;
    }
    this.pub.close();
  }

  private armLease(ms: number): void {
    this.leaseTimer = setTimeout(() => {
      this.leaseTimer = null;
      if (this.leaseUntil === null) return;
      const left = this.leaseUntil - monotonicNow();
      if (left > 0) this.armLease(left);
      else void this.stop();
    }, ms);
    this.leaseTimer.unref();
  }

  /** Follows the XPUB's subscription notifications. */
  private async watch(): Promise<void> {
    for (;;) {
      let msg: Buffer[];
      try {
        msg = await this.pub.receive();
      } catch {
        return;
      }
      if (this.closed) return;
      const kind = msg[0]?.[0];
      if (kind === SUBSCRIBE) {
        // the first subscription attaches (the hub announces every actor to a new listener);
        // a repeated one only replays
        if (this.detach === null) {
          this.detach = this.hub.add(this.push);
          this.startHeartbeat();
        } else this.hub.replay(this.push);
      } else if (kind === UNSUBSCRIBE) this.unsubscribe();
    }
  }

  private unsubscribe(): void {
    const d = this.detach;
    this.detach = null;
    this.stopHeartbeat();
    this.queue = [];
    d?.();
  }

  /** Beats at once (the inspector learns this process beats, even if it dies before the next), then every interval. */
  private startHeartbeat(): void {
    if (this.heartbeatTimer !== null) return;
    this.heartbeat();
    this.heartbeatTimer = setInterval(this.heartbeat, INSPECTION_HEARTBEAT_INTERVAL_MS);
    this.heartbeatTimer.unref();
  }

  private readonly heartbeat = (): void => this.pushNodeEvent(INSPECTION_HEARTBEAT_EVENT);

  /** An event of the process itself (not of one of its actors): closed, heartbeat. */
  private pushNodeEvent(type: string): void {
    this.push({ kind: "event", nodeId: this.nodeId, actorName: NODE_ACTOR_NAME, sessionId: "", time: Date.now(), type, payload: {} });
  }

  private stopHeartbeat(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
  }

  private readonly push = (r: InspectionRecord): void => {
    if (this.queue.length >= INSPECTION_QUEUE_LIMIT) return;
    let buf: Buffer;
    try {
      buf = encode(r);
    } catch {
      return;
    }
    this.queue.push(buf);
    if (!this.sending) this.pumping = this.pump();
  };

  private async pump(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    while (this.queue.length > 0 && !this.pub.closed) {
      const batch = this.queue;
      this.queue = [];
      for (const m of batch) {
        try {
          await this.pub.send(m);
        } catch {
          // dropped: inspection never slows the node
        }
      }
    }
    this.sending = false;
  }
}
