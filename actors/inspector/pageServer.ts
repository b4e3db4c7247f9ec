/**
 * The inspector's HTTP side (node:http only): the page's static files, a JSON API and a
 * Server-Sent-Events stream of new records. Requests whose Host is not the bound loopback name
 * are refused, so a web page elsewhere cannot read the inspector through DNS rebinding.
 */

import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { ClusterView } from "./clusterView.ts";
import { isLoopbackHost } from "./inspectorOptions.ts";
import type { NodeView } from "./processTree.ts";
import type { RenderedChart } from "./statechartSvg.ts";
import type { TimelineEntry } from "./timelineBuffer.ts";

const PAGE_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "page");
const STATIC: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/index.html": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};
/** A page whose stream falls this far behind is disconnected (it reconnects and catches up). */
const MAX_STREAM_BACKLOG_BYTES = 8 * 1024 * 1024;
/** Records sent per timeline request at most. */
const MAX_TIMELINE_PAGE = 20_000;

/** Counters shown on the page and returned by `Inspector.stats()`. */
export interface InspectorStats {
  received: number;
  kept: number;
  malformedDropped: number;
  oversizedDropped: number;
  evicted: number;
  pages: number;
  /** publishers whose handshake the collector refused (CURVE key missing, unexpected or wrong) */
  refusedPublishers: number;
}

/** A `collect` address that has not answered a probe yet. */
export interface UnreachableView {
  address: string;
  /** failed probes so far */
  failures: number;
}

/** A `collect` address whose node answered its last probe with a refusal: alive, but publishing nothing here. */
export interface RefusedView {
  address: string;
  /** the node answering there, once it has been collected from */
  nodeId?: string;
  /** `busy` for SYSTEM_BUSY (it already publishes to as many inspectors as it may), else `refused` */
  status: "busy" | "refused";
  /** the node's answer */
  code: string;
  message: string;
}

/** What the server reads from the inspector. */
export interface PageData {
  stats(): InspectorStats;
  nodes(): NodeView[];
  unreachable(): UnreachableView[];
  refused(): RefusedView[];
  timeline(after: number, limit: number): TimelineEntry[];
  lastSeq(): number;
  chart(nodeId: string, machineId: string): Promise<RenderedChart | null>;
  cluster(): Promise<ClusterView>;
  exportTimeline(): Promise<unknown>;
}

/** The HTTP server of an inspector. */
export class PageServer {
  /**
   * Names this run of the server in event ids (`<epoch>-<seq>`): seqs start at 1 again when the
   * inspector restarts, so a page reconnecting from an earlier run must start over, not skip.
   */
  readonly epoch = randomBytes(6).toString("hex");
  private readonly streams = new Set<http.ServerResponse>();
  private pending: TimelineEntry[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly files = new Map<string, Buffer>();

  private constructor(
    private readonly server: http.Server,
    private readonly data: PageData,
    private readonly pushIntervalMs: number,
    private readonly checkHost: boolean,
  ) {}

  /** Binds `host:port` and serves. */
  static async start(host: string, port: number, data: PageData, pushIntervalMs: number): Promise<PageServer> {
    let self: PageServer | undefined;
    const server = http.createServer((req, res) => {
      self!.handle(req, res).catch((e) => {
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end(`inspector error: ${(e as Error).message}`);
      });
    });
    self = new PageServer(server, data, pushIntervalMs, isLoopbackHost(host));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    return self;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Number of pages streaming right now. */
  get pages(): number {
    return this.streams.size;
  }

  /** Queues a new record for the open pages; no work at all when none is open. */
  publish(entry: TimelineEntry): void {
    if (this.streams.size === 0) return;
    this.pending.push(entry);
    if (this.timer === null) this.timer = setTimeout(() => this.flush(), this.pushIntervalMs);
  }

  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const s of this.streams) s.end();
    this.streams.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private flush(): void {
    this.timer = null;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    let chunk = "";
    for (const e of batch) chunk += `id: ${this.epoch}-${e.seq}\ndata: ${JSON.stringify(e)}\n\n`;
    for (const s of this.streams) {
      if (s.writableLength > MAX_STREAM_BACKLOG_BYTES) {
        s.end();
        this.streams.delete(s);
      } else s.write(chunk);
    }
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (this.checkHost) {
      const host = (req.headers.host ?? "").replace(/:\d+$/, "");
      if (!isLoopbackHost(host)) return this.send(res, 403, "text/plain", "The inspector answers only to loopback host names.");
    }
    if (req.method !== "GET" && req.method !== "HEAD") return this.send(res, 405, "text/plain", "Only GET.");
    const url = new URL(req.url ?? "/", "http://localhost");
    const st = STATIC[url.pathname];
    if (st) return this.send(res, 200, st.type, await this.file(st.file));
    switch (url.pathname) {
      case "/api/state":
        return this.json(res, {
          epoch: this.epoch,
          stats: this.data.stats(),
          lastSeq: this.data.lastSeq(),
          nodes: this.data.nodes(),
          unreachable: this.data.unreachable(),
          refused: this.data.refused(),
        });
      case "/api/timeline": {
        const after = Number(url.searchParams.get("after") ?? 0) || 0;
        const limit = Math.min(MAX_TIMELINE_PAGE, Number(url.searchParams.get("limit") ?? MAX_TIMELINE_PAGE) || MAX_TIMELINE_PAGE);
        return this.json(res, { lastSeq: this.data.lastSeq(), entries: this.data.timeline(after, limit) });
      }
      case "/api/chart":
      case "/api/chart.svg": {
        const chart = await this.data.chart(url.searchParams.get("node") ?? "", url.searchParams.get("machine") ?? "");
        if (!chart)
          return this.send(res, 404, "text/plain", "No machine definition for this actor (not a state machine, or not announced yet).");
        if (url.pathname === "/api/chart.svg") {
          res.setHeader("content-disposition", `attachment; filename="${chart.machineId.replace(/[^\w.-]/g, "_")}.svg"`);
          return this.send(res, 200, "image/svg+xml", chart.svg);
        }
        return this.json(res, chart);
      }
      case "/api/cluster":
        return this.json(res, await this.data.cluster());
      case "/api/export": {
        res.setHeader(
          "content-disposition",
          `attachment; filename="actormq-timeline-${new Date().toISOString().replace(/[:.]/g, "-")}.json"`,
        );
        return this.json(res, await this.data.exportTimeline());
      }
      case "/api/stream":
        return this.stream(req, res, url);
      default:
        return this.send(res, 404, "text/plain", "Not found.");
    }
  }

  private stream(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", connection: "keep-alive" });
    const last = req.headers["last-event-id"];
    let after: number;
    if (typeof last === "string") {
      // an id from another run of the server numbers other records: everything is new to that page
      const m = /^([0-9a-f]+)-(\d+)$/.exec(last);
      after = m && m[1] === this.epoch ? Number(m[2]) : 0;
    } else after = Number(url.searchParams.get("after") ?? this.data.lastSeq()) || 0;
    // the epoch first (an event without id: the page's Last-Event-ID stays), so a page from
    // another run drops what it shows before the records of this one arrive
    let chunk = `retry: 1000\n\nevent: epoch\ndata: ${this.epoch}\n\n`;
    for (const e of this.data.timeline(after, MAX_TIMELINE_PAGE)) chunk += `id: ${this.epoch}-${e.seq}\ndata: ${JSON.stringify(e)}\n\n`;
    res.write(chunk);
    this.streams.add(res);
    req.on("close", () => this.streams.delete(res));
  }

  private async file(name: string): Promise<Buffer> {
    let b = this.files.get(name);
    if (!b) this.files.set(name, (b = await readFile(path.join(PAGE_DIR, name))));
    return b;
  }

  private json(res: http.ServerResponse, body: unknown): void {
    this.send(res, 200, "application/json", JSON.stringify(body));
  }

  private send(res: http.ServerResponse, status: number, type: string, body: string | Buffer): void {
    res.writeHead(status, {
      "content-type": type,
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:",
    });
    res.end(body);
  }
}
