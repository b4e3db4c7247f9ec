/**
 * ActorNode: hosts named xstate actors in one process and exposes them at its ZeroMQ address.
 * Inbound events reach an actor with `body`, `reply` (for asks) and `origin` (remote senders)
 * attached; supervision restarts failing actors; inspection streams what happens inside.
 */
import { EventEmitter } from "node:events";
import type { AnyActorLogic } from "xstate";
import {
  checkCurveKey,
  type Link,
  type TransportStats,
  ZMQ_NODE_OPTION_NAMES,
  ZmqNode,
  type ZmqNodeOptions,
} from "../../transport/index.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import { MQError, RequestCode, shownValue } from "../../transport/protocol.ts";
import { InspectionHub, type InspectionListener } from "./inspection.ts";
import { InspectionPublisher } from "./inspectionPublisher.ts";
import { LinkOrigin, LocalRef, type Ref, type RefHost, RemoteRef, type Replier, type WireEvent, WireReplier } from "./refs.ts";
import { isReservedEventType, type LocalOnlyEvents, localOnlySet } from "./remoteEvents.ts";
import {
  type ActorFailure,
  checkSupervision,
  type DirectHandlers,
  defaultSupervision,
  HostedActor,
  type Supervision,
} from "./supervision.ts";

/** Options of {@link ActorNode.start}; see docs/internals.md §3. */
export type ActorNodeOptions = ZmqNodeOptions;

/** Options of {@link ActorNode.spawn}. */
export interface SpawnOptions {
  input?: unknown;
  /** @default restart, 5 restarts, 100 ms backoff doubling, count reset after 60 s running */
  supervision?: Supervision;
  /** hot events the node may hand to their handler without a macrostep (see {@link DirectHandlers}) */
  direct?: DirectHandlers;
  /**
   * event types the actor takes only from its own process (its timer ticks, the completions it
   * sends itself), on top of SHUTDOWN: refused with NO_PERMISSION when they come from the network;
   * "all" for an actor only its own process drives
   */
  localOnly?: LocalOnlyEvents;
}

/** The names of {@link SpawnOptions}. */
export const SPAWN_OPTION_NAMES = optionNamesOf<SpawnOptions>()(["input", "supervision", "direct", "localOnly"]);

/** Counters of a node. */
export interface ActorNodeStats extends TransportStats {
  /** events for names no actor is hosted under */
  noActor: number;
  /** hosted actor failures (each restart or stop) */
  actorFailures: number;
  /** events from the network refused: xstate's internal types, or types an actor takes only locally */
  refusedEvents: number;
}

/** Events a node emits: `actorFailure` with an {@link ActorFailure}. */
export interface ActorNodeEvents {
  actorFailure: [ActorFailure];
}

/** Inspection publishers (endpoints) a node feeds at most at a time. */
export const MAX_INSPECTION_PUBLISHERS = 8;
/** Lease of an INSPECT_SUBSCRIBE that names none. @default 30000 */
export const DEFAULT_INSPECTION_LEASE_MS = 30_000;
/** Bounds of the lease an INSPECT_SUBSCRIBE may ask for. */
const MIN_INSPECTION_LEASE_MS = 200;
const MAX_INSPECTION_LEASE_MS = 10 * 60_000;

export class ActorNode implements RefHost {
  readonly transport: ZmqNode;
  private readonly hosted = new Map<string, HostedActor>();
  private readonly hub: InspectionHub;
  private readonly events = new EventEmitter();
  private readonly localRefs = new Map<string, LocalRef>();
  private readonly remoteRefs = new Map<string, RemoteRef>();
  private readonly publishers = new Map<string, InspectionPublisher>();
  private noActor = 0;
  private actorFailures = 0;
  private refusedEvents = 0;
  private closing: Promise<void> | null = null;

  private constructor(transport: ZmqNode) {
    this.transport = transport;
    this.hub = new InspectionHub(transport.nodeId, () => this.roots());
    transport.onRequest((link, code, corrId, target, sender, event, body, answerBy) =>
      this.onRemote(link, code, corrId, target, sender, event, body, answerBy),
    );
    // refs made later connect anew; refs kept from before send on a new link by themselves
    transport.onPeerForgotten((address) => {
      for (const [key, r] of this.remoteRefs) if (r.address === address) this.remoteRefs.delete(key);
    });
  }

  /** Starts a node: binds its ROUTER when `listen` is set. */
  static async start(options: ActorNodeOptions = {}): Promise<ActorNode> {
    checkOptionNames("ActorNode.start", options, ZMQ_NODE_OPTION_NAMES);
    return new ActorNode(await ZmqNode.start(options));
  }

  get nodeId(): string {
    return this.transport.nodeId;
  }

  /** Bound (real port) or advertised endpoint; null when the node does not listen. */
  get address(): string | null {
    return this.transport.address;
  }

  /** Hosts an xstate actor under `name`, reachable at (node.address, name). */
  spawn(name: string, logic: AnyActorLogic, opts: SpawnOptions = {}): void {
    if (this.closing) throw new MQError("CLOSED", `The node ${this.nodeId} is closed; cannot spawn ${name}.`);
    if (typeof name !== "string" || name.length === 0) throw new MQError("ILLEGAL_ARGUMENT", "An actor needs a non-empty name.");
    // checked here, not at the first start: logic that is not an actor's would fail every start and
    // be restarted, its asks answered SYSTEM_BUSY
    const l = logic as Partial<AnyActorLogic> | null | undefined;
    if (typeof l?.transition !== "function" || typeof l.getInitialSnapshot !== "function")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `The actor ${name} needs actor logic (an xstate machine or fromPromise/fromCallback/... logic), got ${l === null || typeof l !== "object" ? shownValue(l) : "an object without transition and getInitialSnapshot"}.`,
      );
    checkOptionNames(`ActorNode.spawn(${JSON.stringify(name)})`, opts, SPAWN_OPTION_NAMES);
    if (opts.supervision !== undefined) checkSupervision(opts.supervision);
    const prev = this.hosted.get(name);
    if (prev && prev.status !== "stopped")
      throw new MQError("ILLEGAL_ARGUMENT", `An actor named ${name} already runs on ${this.nodeId}; stop it or choose another name.`);
    const h = new HostedActor(
      name,
      logic,
      opts.input,
      opts.supervision ?? defaultSupervision(),
      opts.direct,
      localOnlySet(opts.localOnly),
      (ha) => this.hub.attach(ha.name, ha.actor),
      (ha, error, action, backoffMs) => this.onFailure(ha, error, action, backoffMs),
    );
    this.hosted.set(name, h);
    h.start();
  }

  /** Stops the actor hosted under `name` (no restart). */
  stopActor(name: string): void {
    this.hosted.get(name)?.stop();
    this.hosted.delete(name);
  }

  /** The running xstate actor under `name` (for tests and tools), if any. */
  actorOf(name: string): import("xstate").AnyActorRef | undefined {
    const h = this.hosted.get(name);
    return h && h.status === "running" ? h.actor : undefined;
  }

  /** Waits until what this node queued to its peers is handed to their sockets, at most `timeoutMs` (see {@link ZmqNode.drainPeers}). */
  drainPeers(timeoutMs: number): Promise<void> {
    return this.transport.drainPeers(timeoutMs);
  }

  /** True while this node's connection to `address` is lost and not yet made again (see {@link ZmqNode.peerUnreachable}). */
  peerUnreachable(address: string): boolean {
    return this.transport.peerUnreachable(address);
  }

  /** True when the connection to `address` is lost and failed again at or after `since` (see {@link ZmqNode.peerFailedSince}). */
  peerFailedSince(address: string, since: number): boolean {
    return this.transport.peerFailedSince(address, since);
  }

  /** The AUTH_FAILED of the refusal that makes `address` read unreachable, if that is why (see {@link ZmqNode.peerRefusal}). */
  peerRefusal(address: string): MQError | undefined {
    return this.transport.peerRefusal(address);
  }

  /** Calls `listener` at the next loss of this node's connection to `address` (see {@link ZmqNode.onPeerFailure}). */
  onPeerFailure(address: string, listener: (reason?: MQError) => void): () => void {
    return this.transport.onPeerFailure(address, listener);
  }

  /** Calls `listener` each time this node's lost connection to `address` is made again (see {@link ZmqNode.onPeerReconnect}). */
  onPeerReconnect(address: string, listener: () => void): () => void {
    return this.transport.onPeerReconnect(address, listener);
  }

  /** When this node's connection to `address` was last lost, 0 if never (see {@link ZmqNode.peerLostAt}). */
  peerLostAt(address: string): number {
    return this.transport.peerLostAt(address);
  }

  /** A handle to actor `name` at `address`; null or this node's own address gives a local handle. */
  ref(address: string | null, name: string): Ref {
    if ((address !== null && typeof address !== "string") || typeof name !== "string")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `ref needs an address (a string such as tcp://127.0.0.1:10911, or null for this node) and an actor name (a string), got ${shownValue(address)} and ${shownValue(name)}.`,
      );
    if (address === null || address === this.address) {
      let r = this.localRefs.get(name);
      if (!r) this.localRefs.set(name, (r = new LocalRef(this, name)));
      return r;
    }
    const key = `${address}\u0000${name}`;
    let r = this.remoteRefs.get(key);
    if (!r) this.remoteRefs.set(key, (r = new RemoteRef(this, this.transport.peer(address), name, address)));
    return r;
  }

  /** Whether anything listens to this node's inspection stream (a listener or an inspector). */
  get inspecting(): boolean {
    return this.hub.active;
  }

  /** Listens to the inspection stream; returns the unsubscribe function. */
  inspect(listener: InspectionListener): () => void {
    return this.hub.add(listener);
  }

  /** Listens to node events (`actorFailure`). */
  on<K extends keyof ActorNodeEvents>(event: K, listener: (...args: ActorNodeEvents[K]) => void): () => void {
    this.events.on(event, listener as (...a: unknown[]) => void);
    return () => this.events.off(event, listener as (...a: unknown[]) => void);
  }

  /**
   * Publishes this node's inspection stream to an inspector's SUB endpoint over an XPUB socket.
   * Records are dropped at the high-water mark, never back-pressuring the node; the publisher
   * feeds on the node's actors only while the inspector is subscribed (when it subscribes, the
   * latest definition and snapshot of every actor are replayed). `leaseMs` (what INSPECT_SUBSCRIBE
   * asks for) closes the publisher unless the same endpoint is asked for again within that time;
   * without it the publisher runs until the returned function (or `close`) stops it. At most
   * {@link MAX_INSPECTION_PUBLISHERS} endpoints at a time.
   */
  async publishInspection(endpoint: string, opts: { leaseMs?: number; curveServerKey?: string } = {}): Promise<() => Promise<void>> {
    if (this.closing) throw new MQError("CLOSED", `The node ${this.nodeId} is closed.`);
    const leaseMs = opts.leaseMs ?? null;
    if (opts.curveServerKey !== undefined) checkCurveKey(opts.curveServerKey, "curveServerKey");
    let p = this.publishers.get(endpoint);
    // an inspector started again on the endpoint has a new key: the old stream could not connect
    if (p !== undefined && p.curveServerKey !== opts.curveServerKey) {
      await p.stop();
      p = this.publishers.get(endpoint);
    }
    if (p === undefined) {
      // a leased endpoint nobody is subscribed on (an inspector gone, or one no inspector listens on)
      // gives up its place: requests for endpoints that never subscribe cannot lock inspectors out
      const idle =
        this.publishers.size >= MAX_INSPECTION_PUBLISHERS
          ? [...this.publishers.values()].find((x) => x.leased && !x.subscribed)
          : undefined;
      if (idle) await idle.stop();
      if (this.publishers.size >= MAX_INSPECTION_PUBLISHERS)
        throw new MQError(
          "SYSTEM_BUSY",
          `The node ${this.nodeId} already publishes its inspection stream to ${MAX_INSPECTION_PUBLISHERS} endpoints; close an inspector (or wait for an unrenewed one to lapse) and retry.`,
        );
      // closed while a stop above was awaited: close() stopped the publishers there were, not this one
      if (this.closing) throw new MQError("CLOSED", `The node ${this.nodeId} is closed.`);
      const created = new InspectionPublisher(
        this.nodeId,
        this.hub,
        endpoint,
        () => {
          if (this.publishers.get(endpoint) === created) this.publishers.delete(endpoint);
        },
        opts.curveServerKey,
      );
      p = created;
      this.publishers.set(endpoint, p);
      p.renew(leaseMs);
    } else if (leaseMs === null) p.renew(null);
    else if (p.leased) p.renew(leaseMs);
    const pub = p;
    return (final?: boolean) => pub.stop(final);
  }

  /** Transport and runtime counters. */
  stats(): ActorNodeStats {
    return { ...this.transport.stats, noActor: this.noActor, actorFailures: this.actorFailures, refusedEvents: this.refusedEvents };
  }

  /** Stops every actor, inspection publisher, socket and timer. */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    // actors stop first, so an attached inspector sees their last snapshots, then the node's farewell
    for (const h of this.hosted.values()) h.stop();
    this.hosted.clear();
    await Promise.all([...this.publishers.values()].map((p) => p.stop(true)));
    await this.transport.close();
    this.events.removeAllListeners();
  }

  private *roots(): Iterable<{ name: string; actor: import("xstate").AnyActorRef }> {
    for (const h of this.hosted.values()) if (h.status === "running") yield { name: h.name, actor: h.actor };
  }

  private onFailure(h: HostedActor, error: unknown, action: "restart" | "stop", backoffMs: number): void {
    this.actorFailures++;
    this.hub.failure(h.name, h.actor.sessionId, action, error, h.restarts);
    const f: ActorFailure = { nodeId: this.nodeId, actorName: h.name, error, action, restarts: h.restarts, backoffMs };
    this.events.emit("actorFailure", f);
  }

  /** @internal delivery for local refs and for requests that came over the wire. */
  deliverLocal(name: string, event: WireEvent, body: Buffer | undefined, replier: Replier | undefined): void {
    if (event.type === "INSPECT_SUBSCRIBE") {
      this.inspectSubscribe(event, replier);
      return;
    }
    const ev: Record<string, unknown> = { ...event };
    ev.body = body;
    ev.reply = replier;
    ev.origin = undefined;
    this.dispatch(name, ev as WireEvent, replier, false);
  }

  private dispatch(name: string, ev: WireEvent, replier: Replier | undefined, remote: boolean): void {
    const h = this.hosted.get(name);
    if (h === undefined || h.status === "stopped") {
      this.noActor++;
      replier?.fail(new MQError("SYSTEM_ERROR", `no actor ${name} on ${this.nodeId}`));
      return;
    }
    if (remote && h.localOnly.has(ev.type)) {
      this.refusedEvents++;
      replier?.fail(
        new MQError(
          "NO_PERMISSION",
          `The actor ${name} on ${this.nodeId} takes ${ev.type} only from its own process; it cannot be sent from another node.`,
        ),
      );
      return;
    }
    if (remote && h.handled !== null && !h.handled.has(ev.type)) {
      replier?.fail(
        new MQError("REQUEST_CODE_NOT_SUPPORTED", `The actor ${name} on ${this.nodeId} does not handle ${ev.type.slice(0, 64)}.`),
      );
      return;
    }
    if (h.status === "restarting") {
      replier?.fail(new MQError("SYSTEM_BUSY", `The actor ${name} on ${this.nodeId} is restarting after a failure; retry shortly.`));
      return;
    }
    const snapshot = h.actor.getSnapshot();
    const status = snapshot.status;
    if (status === "active" && h.direct !== undefined) {
      // a hot event in the state whose transition for it only runs this handler: run it without
      // the macrostep (per-message cost on the send and pull paths); an inspector gets the records
      // the machine would have given
      const fn = h.direct.handlers.get(ev.type);
      if (fn !== undefined && snapshot.value === h.direct.state) {
        let handled: unknown;
        try {
          handled = fn(snapshot.context, ev, h.actor);
        } catch (e) {
          h.failDirect(e);
          return;
        }
        if (handled !== false) {
          if (this.hub.active) this.hub.directEvent(h.actor, ev);
          return;
        }
      }
    }
    if (status !== "active") {
      replier?.fail(
        new MQError(
          "SYSTEM_ERROR",
          `The actor ${name} on ${this.nodeId} has ${status === "done" ? "finished" : "stopped"}; no further events are processed.`,
        ),
      );
      return;
    }
    h.actor.send(ev);
  }

  private onRemote(
    link: Link,
    code: number,
    corrId: number,
    target: string,
    sender: string,
    event: WireEvent,
    body: Buffer | undefined,
    answerBy: number,
  ): void {
    const t = this.transport;
    const replier = corrId > 0 ? new WireReplier(t, link, corrId, answerBy) : undefined;
    if (code === RequestCode.INSPECT_SUBSCRIBE) {
      this.inspectSubscribe(event, replier);
      return;
    }
    if (isReservedEventType(event.type)) {
      // xstate.stop would stop the actor for good; xstate.error/done/after fake failures and timers
      this.refusedEvents++;
      replier?.fail(
        new MQError(
          "REQUEST_CODE_NOT_SUPPORTED",
          `The event type ${event.type.slice(0, 64)} is internal to xstate; remote senders cannot send it (to ${target} on ${this.nodeId}).`,
        ),
      );
      return;
    }
    let origin = link.origin as LinkOrigin | undefined;
    if (origin === undefined || origin.nodeId !== sender) link.origin = origin = new LinkOrigin(this, link, sender);
    // the decoded event is ours: attach in place rather than copy
    event.body = body;
    event.reply = replier;
    event.origin = origin;
    this.dispatch(target, event, replier, true);
  }

  private inspectSubscribe(event: WireEvent, replier: Replier | undefined): void {
    const endpoint = event.endpoint;
    if (typeof endpoint !== "string") {
      replier?.fail(new MQError("INVALID_PARAMETER", "INSPECT_SUBSCRIBE needs an endpoint field: the inspector's SUB address."));
      return;
    }
    const asked = event.leaseMs;
    const leaseMs =
      typeof asked === "number" && Number.isFinite(asked)
        ? Math.min(MAX_INSPECTION_LEASE_MS, Math.max(MIN_INSPECTION_LEASE_MS, asked))
        : DEFAULT_INSPECTION_LEASE_MS;
    const curveServerKey = event.curveServerKey;
    if (curveServerKey !== undefined && typeof curveServerKey !== "string") {
      replier?.fail(new MQError("INVALID_PARAMETER", "INSPECT_SUBSCRIBE's curveServerKey must be the collector's CURVE public key (Z85)."));
      return;
    }
    this.publishInspection(endpoint, { leaseMs, ...(curveServerKey === undefined ? {} : { curveServerKey }) }).then(
      () => replier?.ok({ nodeId: this.nodeId }),
      (e) => replier?.fail(e instanceof MQError ? e : new MQError("SYSTEM_ERROR", String(e))),
    );
  }
}
