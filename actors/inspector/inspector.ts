/**
 * Inspector: the visual debugger. Collects the inspection streams of the processes of a cluster
 * (over the wire through an {@link InspectionCollector}, or directly from nodes of this process),
 * keeps them in a bounded buffer, tracks which processes are alive, and serves a local page that
 * draws every actor's statechart and an event timeline.
 */
import { monotonicNow } from "../../transport/clock.ts";
import { checkOptionNames } from "../../transport/optionNames.ts";
import { checkBoolean, MQError, shownValue } from "../../transport/protocol.ts";
import {
  ActorNode,
  INSPECTION_HEARTBEAT_INTERVAL_MS,
  InspectionCollector,
  type InspectionRecord,
  resolveCurveLink,
} from "../runtime/index.ts";
import { type ClusterSource, type ClusterView, wireClusterSource } from "./clusterView.ts";
import {
  checkCollectAddress,
  DEFAULT_HEARTBEATS_MISSED_BEFORE_GONE,
  DEFAULT_PROBE_FAILURES_BEFORE_GONE,
  DEFAULT_PUSH_INTERVAL_MS,
  defaultInspectorOptions,
  INSPECTOR_OPTION_NAMES,
  type InspectorOptions,
  MIN_PROBE_INTERVAL_MS,
  parseListen,
} from "./inspectorOptions.ts";
import { type InspectorStats, PageServer, type RefusedView, type UnreachableView } from "./pageServer.ts";
import { ProcessTree } from "./processTree.ts";
import { checkRecord, estimateSize } from "./recordCheck.ts";
import { definitionToGraph } from "./statechartGraph.ts";
import { type RenderedChart, renderStatechart } from "./statechartSvg.ts";
import { TimelineBuffer } from "./timelineBuffer.ts";

/** Format tag of exported timelines. */
export const TIMELINE_FORMAT = "actormq-timeline";
export const TIMELINE_FORMAT_VERSION = 1;

/** Silence after which a process that sends heartbeats is shown as gone. */
const SILENT_GONE_MS = DEFAULT_HEARTBEATS_MISSED_BEFORE_GONE * INSPECTION_HEARTBEAT_INTERVAL_MS;

/** The lease a probe asks for: a node keeps publishing through a few missed probes, not longer. */
function inspectionLeaseMs(probeIntervalMs: number): number {
  return Math.max(5 * probeIntervalMs, 1000);
}

/** Probe errors that mean no answer came: anything else is the node's answer. */
const NO_ANSWER = new Set(["TIMEOUT", "CLOSED"]);

interface Probe {
  address: string;
  nodeId?: string;
  failures: number;
  busy: boolean;
  /** the node's answer to the last probe when it refused to publish here; cleared by any other outcome */
  refusal?: { code: string; message: string };
}

export class Inspector {
  private readonly buffer: TimelineBuffer;
  private readonly tree = new ProcessTree();
  private readonly probes = new Map<string, Probe>();
  /** nodes of this process inspected directly; the listener's removal while collecting */
  private readonly localNodes = new Map<ActorNode, (() => void) | null>();
  private readonly charts = new Map<string, Promise<RenderedChart | null>>();
  private readonly chartsByDefinition = new WeakMap<object, Promise<RenderedChart | null>>();
  private received = 0;
  private malformed = 0;
  private oversized = 0;
  private probeTimer: NodeJS.Timeout | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  /** when the page or its API was last requested */
  private lastViewed = 0;
  /** when collecting last started: publishers heard nothing to send before */
  private activatedAt = 0;
  /** counts deactivations, so an activation that was stopped meanwhile starts no timers */
  private generation = 0;
  private closing: Promise<void> | null = null;
  private activation: Promise<void> | null = null;
  private server!: PageServer;
  private readonly clusterSource: ClusterSource;
  private clusterBuilding: Promise<ClusterView> | null = null;

  private constructor(
    private readonly opts: Required<Omit<InspectorOptions, "cluster" | "collectorAdvertise" | "curveServerKey" | "curveClient">> &
      Pick<InspectorOptions, "cluster" | "collectorAdvertise">,
    private readonly collector: InspectionCollector,
    private readonly client: ActorNode,
    private readonly host: string,
  ) {
    this.buffer = new TimelineBuffer(opts.capacity, opts.capacityBytes);
    this.clusterSource =
      opts.cluster ??
      wireClusterSource({
        node: client,
        nameservers: () => this.addressesOf("nameserver"),
        assignments: () => this.tree.assignments(),
      });
  }

  /**
   * Starts collecting and serving. Resolves once the page is served at {@link url} and every
   * `collect` address has been asked once (unreachable ones are retried: listed as unreachable
   * until they first answer, shown as gone when they stop answering). Throws ILLEGAL_ARGUMENT for
   * a `collect` address or a `collectorAdvertise` that is not `tcp://host:port` and a `nodes` entry
   * that is not an ActorNode; a start that fails closes what it opened.
   */
  static async start(options: InspectorOptions = {}): Promise<Inspector> {
    checkOptionNames("Inspector.start", options, INSPECTOR_OPTION_NAMES);
    const opts = { ...defaultInspectorOptions(), ...options };
    const { host, port } = parseListen(opts.listen, opts.allowRemote);
    checkBoolean("collectOnFirstView", opts.collectOnFirstView);
    // a lone string would be read character by character
    if (!Array.isArray(opts.collect))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `collect must be an array of tcp://host:port addresses, got ${shownValue(opts.collect)}: write collect: [address].`,
      );
    for (const a of opts.collect) checkCollectAddress(a);
    // checked here: they are first used once the collector, client node and page server are open
    if (!Array.isArray(opts.nodes) || !opts.nodes.every((n) => n instanceof ActorNode))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        "Inspector nodes must be an array of ActorNodes of this process (as ActorNode.start returns them); use collect for other processes.",
      );
    // 0 or NaN would probe in a tight loop; a bound below 1 byte would drop every record
    if (!Number.isFinite(opts.probeIntervalMs) || opts.probeIntervalMs < MIN_PROBE_INTERVAL_MS)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Inspector probeIntervalMs must be a number of milliseconds of at least ${MIN_PROBE_INTERVAL_MS}, got ${opts.probeIntervalMs}.`,
      );
    if (!Number.isFinite(opts.maxRecordBytes) || opts.maxRecordBytes < 1)
      throw new MQError("ILLEGAL_ARGUMENT", `Inspector maxRecordBytes must be a positive number of bytes, got ${opts.maxRecordBytes}.`);
    if (!Number.isInteger(opts.capacity) || opts.capacity < 1)
      throw new MQError("ILLEGAL_ARGUMENT", `Inspector capacity must be a positive integer, got ${opts.capacity}.`);
    if (!Number.isFinite(opts.capacityBytes) || opts.capacityBytes < opts.maxRecordBytes)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Inspector capacityBytes must be a number of bytes at least maxRecordBytes (${opts.maxRecordBytes}), got ${opts.capacityBytes}.`,
      );
    if (!Number.isFinite(opts.collectIdleMs) || opts.collectIdleMs <= 0)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Inspector collectIdleMs must be a positive number of milliseconds, got ${opts.collectIdleMs}.`,
      );
    // CURVE (docs/security.md): the probes and cluster-view asks go over CURVE links, and the nodes
    // asked to publish (collect) publish to a collector that is a CURVE server of its own; without
    // them (nodes of this process only) it stays plaintext for clients that publish themselves
    const curveClient = resolveCurveLink(opts);
    const collector = await InspectionCollector.start({
      bind: opts.collectorBind,
      advertise: opts.collectorAdvertise,
      capacity: 0,
      curve: curveClient !== undefined && opts.collect.length > 0,
    });
    let client: ActorNode | undefined;
    let insp: Inspector | undefined;
    try {
      client = await ActorNode.start({
        listen: null,
        nodeId: `inspector:${process.pid}:${Math.random().toString(36).slice(2, 8)}`,
        curveClient,
      });
      insp = new Inspector(opts, collector, client, host);
      collector.onRecord((r) => insp!.ingest(r));
      insp.server = await PageServer.start(host, port, insp.pageData(), DEFAULT_PUSH_INTERVAL_MS);
    } catch (e) {
      await collector.close();
      await client?.close();
      throw e instanceof MQError
        ? e
        : new MQError("ILLEGAL_ARGUMENT", `Cannot serve the inspector on ${opts.listen}: ${(e as Error).message}.`, { cause: e });
    }
    // nobody looks yet: processes that publish here on their own (ACTORMQ_INSPECTOR) stay detached
    if (opts.collectOnFirstView) collector.pause();
    else {
      try {
        await insp.activate();
      } catch (e) {
        // the sockets, node and server would keep the process alive
        await insp.close();
        throw e;
      }
    }
    return insp;
  }

  /** True once collecting (at start, or at the first page view with `collectOnFirstView`). */
  get collecting(): boolean {
    return this.activation !== null;
  }

  /** Starts collecting from the configured nodes and addresses (once; again after {@link deactivate}). */
  activate(): Promise<void> {
    if (!this.activation) {
      this.lastViewed = monotonicNow();
      this.activatedAt = this.lastViewed;
      this.collector.resume();
      const generation = this.generation;
      this.activation = (async () => {
        for (const n of this.opts.nodes) this.attach(n);
        for (const [n, stop] of this.localNodes) if (stop === null) this.listen(n);
        await Promise.all([...new Set([...this.opts.collect, ...this.probes.keys()])].map((a) => this.collect(a)));
        // closed, or stopped (and maybe started again) meanwhile
        if (this.closing || this.generation !== generation) return;
        this.probeTimer = setInterval(() => this.probeAll(), this.opts.probeIntervalMs);
        this.probeTimer.unref();
        if (this.opts.collectOnFirstView) this.armIdle(this.opts.collectIdleMs);
      })();
    }
    return this.activation;
  }

  /**
   * Stops collecting, keeping what was collected: probes stop (the nodes' publishers lapse with
   * their leases), the collector unsubscribes (publishers stop feeding on their actors at once)
   * and local nodes are no longer listened to. {@link activate} starts again.
   */
  deactivate(): void {
    if (!this.activation) return;
    this.activation = null;
    this.generation++;
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = null;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    for (const [n, stop] of this.localNodes) {
      stop?.();
      this.localNodes.set(n, null);
    }
    this.collector.pause();
  }

  /** The page's address, e.g. `http://127.0.0.1:43121/`. */
  get url(): string {
    const h = this.host.includes(":") ? `[${this.host}]` : this.host;
    return `http://${h}:${this.server.port}/`;
  }

  /** The SUB endpoint processes publish to: `node.publishInspection(inspector.collectorEndpoint)`. */
  get collectorEndpoint(): string {
    return this.collector.endpoint;
  }

  /**
   * The collector's CURVE public key when it is a CURVE server (an inspector of CURVE nodes over
   * the wire), else undefined. Processes that publish themselves need it:
   * `node.publishInspection(inspector.collectorEndpoint, { curveServerKey: inspector.collectorPublicKey })`,
   * or `ACTORMQ_INSPECTOR_KEY` for clients.
   */
  get collectorPublicKey(): string | undefined {
    return this.collector.curvePublicKey ?? undefined;
  }

  /** Inspects a node of this process directly. */
  attach(node: ActorNode): void {
    if (this.localNodes.has(node) || this.closing) return;
    this.listen(node);
    if (node.address) this.tree.setAddress(node.nodeId, node.address);
  }

  private listen(node: ActorNode): void {
    this.localNodes.set(
      node,
      node.inspect((r) => this.ingest(r)),
    );
  }

  /** With collectOnFirstView: stops collecting once no page is open and the API is not requested for `ms`. */
  private armIdle(ms: number): void {
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.closing || !this.activation) return;
      const idle = monotonicNow() - this.lastViewed;
      if ((this.server?.pages ?? 0) > 0) this.armIdle(this.opts.collectIdleMs);
      else if (idle < this.opts.collectIdleMs) this.armIdle(this.opts.collectIdleMs - idle);
      else this.deactivate();
    }, ms);
    this.idleTimer.unref();
  }

  /**
   * Asks the node at `address` (`tcp://host:port`, else ILLEGAL_ARGUMENT) to publish here, and
   * keeps probing it for liveness.
   */
  async collect(address: string): Promise<void> {
    checkCollectAddress(address);
    if (this.closing) return;
    for (const n of this.localNodes.keys()) if (n.address === address) return;
    let p = this.probes.get(address);
    if (!p) this.probes.set(address, (p = { address, failures: 0, busy: false }));
    await this.probe(p);
  }

  /** Counters: records received, kept, dropped (malformed, oversized), evicted. */
  stats(): InspectorStats {
    return {
      received: this.received + this.collector.malformed,
      kept: this.buffer.size,
      malformedDropped: this.malformed + this.collector.malformed,
      oversizedDropped: this.oversized,
      evicted: this.buffer.evicted,
      pages: this.server?.pages ?? 0,
      refusedPublishers: this.collector.refusedPublishers,
    };
  }

  /**
   * The cluster view (brokers, topics, groups) as the page shows it. Asks made while one is being
   * built share it: each build asks every broker, and pages polling a slow or large cluster (or
   * several pages) would otherwise pile builds up.
   */
  cluster(): Promise<ClusterView> {
    this.clusterBuilding ??= this.clusterSource().finally(() => {
      this.clusterBuilding = null;
    });
    return this.clusterBuilding;
  }

  /** Stops collecting and serving; releases every socket and timer. */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    if (this.probeTimer) clearInterval(this.probeTimer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    for (const stop of this.localNodes.values()) stop?.();
    this.localNodes.clear();
    await this.server?.close();
    await this.collector.close();
    await this.client.close();
  }

  /** Takes one record in (from a local node or the wire); never throws. */
  private ingest(raw: unknown): void {
    this.received++;
    const c = checkRecord(raw, this.opts.maxRecordBytes);
    if (!c.ok) {
      if (c.reason === "oversized") this.oversized++;
      else this.malformed++;
      return;
    }
    const r: InspectionRecord = c.record;
    // a definition travels once per machine: keep it in the tree, not in every timeline entry
    let kept = r;
    let bytes = c.bytes;
    if (r.kind === "actor" && r.definition !== undefined) {
      const { definition: _definition, ...rest } = r;
      kept = rest;
      bytes = estimateSize(kept, this.opts.maxRecordBytes);
    }
    let forTimeline: boolean;
    try {
      forTimeline = this.tree.apply(r);
    } catch {
      this.malformed++;
      return;
    }
    // a heartbeat is liveness only: kept out of the timeline
    if (!forTimeline) return;
    this.server?.publish(this.buffer.push(kept, bytes));
  }

  private probeAll(): void {
    for (const [node] of this.localNodes) {
      if (node.transport.isClosed) this.tree.markGone(node.nodeId);
    }
    // processes that publish on their own have no probe: their heartbeats stopping is the sign
    const now = monotonicNow();
    if (now - this.activatedAt >= SILENT_GONE_MS) this.tree.markSilentGone(now - SILENT_GONE_MS);
    for (const p of this.probes.values()) if (!p.busy) void this.probe(p);
  }

  private async probe(p: Probe): Promise<void> {
    p.busy = true;
    try {
      const nodeId = await this.collector.requestFrom(
        this.client.ref(p.address, "inspector"),
        this.opts.probeIntervalMs,
        inspectionLeaseMs(this.opts.probeIntervalMs),
      );
      if (this.closing) return;
      if (p.nodeId !== undefined && p.nodeId !== nodeId) this.tree.markGone(p.nodeId);
      p.nodeId = nodeId;
      p.failures = 0;
      p.refusal = undefined;
      this.tree.markAlive(nodeId);
      this.tree.setAddress(nodeId, p.address);
    } catch (e) {
      if (this.closing) return;
      // it answered, so it is alive: shown with its reason (SYSTEM_BUSY: it publishes to as many
      // inspectors as it may), not as unreachable or gone
      if (e instanceof MQError && !NO_ANSWER.has(e.code)) {
        p.refusal = { code: e.code, message: e.message };
        p.failures = 0;
        if (p.nodeId !== undefined) this.tree.markAlive(p.nodeId);
        return;
      }
      p.refusal = undefined;
      p.failures++;
      if (p.nodeId !== undefined && p.failures >= DEFAULT_PROBE_FAILURES_BEFORE_GONE) this.tree.markGone(p.nodeId);
    } finally {
      p.busy = false;
    }
  }

  /** Probed addresses that never answered (after as many failures as make a process gone). */
  private unreachable(): UnreachableView[] {
    const out: UnreachableView[] = [];
    for (const p of this.probes.values())
      if (p.nodeId === undefined && p.failures >= DEFAULT_PROBE_FAILURES_BEFORE_GONE)
        out.push({ address: p.address, failures: p.failures });
    return out;
  }

  /** Probed addresses whose node refused the last probe. */
  private refused(): RefusedView[] {
    const out: RefusedView[] = [];
    for (const p of this.probes.values())
      if (p.refusal)
        out.push({ address: p.address, nodeId: p.nodeId, status: p.refusal.code === "SYSTEM_BUSY" ? "busy" : "refused", ...p.refusal });
    return out;
  }

  private addressesOf(role: "nameserver" | "broker"): string[] {
    return this.tree
      .view()
      .filter((n) => n.role === role && n.status === "alive" && n.address)
      .map((n) => n.address!);
  }

  private chart(nodeId: string, machineId: string): Promise<RenderedChart | null> {
    const def = this.tree.definition(nodeId, machineId);
    if (def === undefined || def === null || typeof def !== "object") return Promise.resolve(null);
    let c = this.chartsByDefinition.get(def);
    if (!c) {
      const key = JSON.stringify(def);
      c = this.charts.get(key);
      if (!c) {
        const g = definitionToGraph(def);
        c = g ? renderStatechart(g).catch(() => null) : Promise.resolve(null);
        if (this.charts.size > 500) this.charts.clear();
        this.charts.set(key, c);
      }
      this.chartsByDefinition.set(def, c);
    }
    return c;
  }

  private pageData() {
    return {
      stats: () => {
        this.lastViewed = monotonicNow();
        if (!this.activation) void this.activate();
        return this.stats();
      },
      nodes: () => this.tree.view(),
      unreachable: () => this.unreachable(),
      refused: () => this.refused(),
      timeline: (after: number, limit: number) => this.buffer.since(after, limit),
      lastSeq: () => this.buffer.lastSeq,
      chart: (nodeId: string, machineId: string) => this.chart(nodeId, machineId),
      cluster: () => this.cluster(),
      exportTimeline: async () => {
        const charts: Record<string, RenderedChart> = {};
        for (const [machineId, def] of this.tree.allDefinitions()) {
          const g = definitionToGraph(def);
          if (g) charts[machineId] = (await this.chart("", machineId)) ?? (await renderStatechart(g));
        }
        return {
          format: TIMELINE_FORMAT,
          version: TIMELINE_FORMAT_VERSION,
          exportedAt: Date.now(),
          stats: this.stats(),
          nodes: this.tree.view(),
          charts,
          entries: this.buffer.since(0),
        };
      },
    };
  }
}
