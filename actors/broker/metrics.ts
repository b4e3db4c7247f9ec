/**
 * A broker's Prometheus endpoint: plain-text exposition format (version 0.0.4) over HTTP at
 * `GET /metrics`. Counters are fed by wrapping the two places every message passes — puts through
 * the `store` actor (messages in, put/flush latency) and reads of the store (messages out) — and
 * gauges are read from the store, the offset table and the `hold` actor's snapshot when scraped, so
 * nothing is computed on the hot path beyond an addition per batch.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { GetMessageResult, PutBatch, PutResult } from "../../store/index.ts";
import { MQError } from "../../transport/protocol.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { heldPulls } from "./brokerStats.ts";
import { consumerOffsetsOf, TOPIC_GROUP_SEPARATOR } from "./consumerOffsetManager.ts";

/** Upper bounds (seconds) of the put/flush latency histogram buckets. */
export const FLUSH_LATENCY_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** Counters of one broker; `render()` gives the exposition text. */
export class BrokerMetrics {
  private readonly inMsgs = new Map<string, number>();
  private readonly inBytes = new Map<string, number>();
  private readonly outMsgs = new Map<string, number>();
  private readonly outBytes = new Map<string, number>();
  private readonly latencyBuckets = new Array<number>(FLUSH_LATENCY_BUCKETS_S.length).fill(0);
  private latencyCount = 0;
  private latencySum = 0;

  constructor(private readonly ctx: BrokerContext) {}

  /** Called once per appended batch. */
  recordPut(topic: string, result: PutResult, seconds: number): void {
    this.inMsgs.set(topic, (this.inMsgs.get(topic) ?? 0) + result.count);
    this.inBytes.set(topic, (this.inBytes.get(topic) ?? 0) + result.wroteBytes);
    this.latencyCount++;
    this.latencySum += seconds;
    for (let i = 0; i < FLUSH_LATENCY_BUCKETS_S.length; i++) if (seconds <= FLUSH_LATENCY_BUCKETS_S[i]!) this.latencyBuckets[i]!++;
  }

  /** Called once per pull's store read that returned messages. */
  recordGet(topic: string, r: GetMessageResult): void {
    if (r.messageCount === 0) return;
    let bytes = 0;
    for (let i = 0; i < r.buffers.length; i++) bytes += r.buffers[i]!.byteLength;
    this.outMsgs.set(topic, (this.outMsgs.get(topic) ?? 0) + r.messageCount);
    this.outBytes.set(topic, (this.outBytes.get(topic) ?? 0) + bytes);
  }

  /** The exposition text. */
  render(): string {
    const { ctx } = this;
    const b = labels({ broker: ctx.config.brokerName, brokerId: String(ctx.config.brokerId) });
    const lines: string[] = [];
    const family = (name: string, type: string, help: string) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);

    family("actormq_messages_in_total", "counter", "Messages stored per topic.");
    for (const [t, v] of this.inMsgs) lines.push(`actormq_messages_in_total{${b},${labels({ topic: t })}} ${v}`);
    family("actormq_bytes_in_total", "counter", "Stored bytes per topic (commit-log records).");
    for (const [t, v] of this.inBytes) lines.push(`actormq_bytes_in_total{${b},${labels({ topic: t })}} ${v}`);
    family("actormq_messages_out_total", "counter", "Messages read out of the store for pulls, per topic.");
    for (const [t, v] of this.outMsgs) lines.push(`actormq_messages_out_total{${b},${labels({ topic: t })}} ${v}`);
    family("actormq_bytes_out_total", "counter", "Bytes read out of the store for pulls, per topic (commit-log records).");
    for (const [t, v] of this.outBytes) lines.push(`actormq_bytes_out_total{${b},${labels({ topic: t })}} ${v}`);

    family("actormq_consumer_lag", "gauge", "Messages stored but not yet committed by the group, per topic (sum over queues).");
    for (const [key, lag] of this.lagByGroup()) {
      const [topic, group] = key.split("\u0000") as [string, string];
      lines.push(`actormq_consumer_lag{${b},${labels({ group, topic })}} ${lag}`);
    }

    family("actormq_store_bytes", "gauge", "Bytes held by the commit log (max minus min physical offset).");
    lines.push(`actormq_store_bytes{${b}} ${Math.max(0, ctx.store.maxPhyOffset - ctx.store.minPhyOffset)}`);
    family("actormq_store_max_phy_offset", "gauge", "Commit-log write position.");
    lines.push(`actormq_store_max_phy_offset{${b}} ${ctx.store.maxPhyOffset}`);
    family(
      "actormq_store_flush_errors_total",
      "counter",
      "Failed store flushes (commit-log fdatasyncs and checkpoints) since the broker started.",
    );
    lines.push(`actormq_store_flush_errors_total{${b}} ${ctx.store.flushErrors}`);

    family("actormq_pull_suspended", "gauge", "Pull requests held by long polling right now.");
    lines.push(`actormq_pull_suspended{${b}} ${heldPulls(this.ctx)}`);

    family(
      "actormq_put_flush_latency_seconds",
      "histogram",
      "Time from a batch reaching the store actor to its acknowledgement (includes the fdatasync with flush=sync).",
    );
    for (let i = 0; i < FLUSH_LATENCY_BUCKETS_S.length; i++)
      lines.push(`actormq_put_flush_latency_seconds_bucket{${b},le="${FLUSH_LATENCY_BUCKETS_S[i]}"} ${this.latencyBuckets[i]}`);
    lines.push(`actormq_put_flush_latency_seconds_bucket{${b},le="+Inf"} ${this.latencyCount}`);
    lines.push(`actormq_put_flush_latency_seconds_sum{${b}} ${this.latencySum}`);
    lines.push(`actormq_put_flush_latency_seconds_count{${b}} ${this.latencyCount}`);
    return `${lines.join("\n")}\n`;
  }

  /** "topic\0group" → lag, from the `offsets` actor's table and the store's max offsets. */
  private lagByGroup(): Map<string, number> {
    const out = new Map<string, number>();
    const table = consumerOffsetsOf(this.ctx).toJSON().offsetTable;
    for (const [key, queues] of Object.entries(table)) {
      const at = key.lastIndexOf(TOPIC_GROUP_SEPARATOR);
      if (at < 0) continue;
      const topic = key.slice(0, at);
      const group = key.slice(at + 1);
      let lag = 0;
      for (const [qid, off] of Object.entries(queues))
        lag += Math.max(0, this.ctx.store.getMaxOffset(topic, Number(qid)) - Math.max(0, off));
      out.set(`${topic}\u0000${group}`, lag);
    }
    return out;
  }
}

/** Prometheus label pairs with escaped values. */
function labels(l: Record<string, string>): string {
  return Object.entries(l)
    .map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`)
    .join(",");
}

/**
 * Wires the counters into a broker: wraps `ctx.put` (one call per batch) and the store's
 * `getMessage` (one call per pull; the delay scheduler's scans, which read with no group, are not
 * pulls). Returns a function that removes the wrappers.
 */
export function instrumentBroker(ctx: BrokerContext, metrics: BrokerMetrics): () => void {
  const put = ctx.put;
  const store = ctx.store;
  const getMessage = store.getMessage;
  (ctx as { put: (b: PutBatch) => Promise<PutResult> }).put = async (batch: PutBatch) => {
    const t0 = process.hrtime.bigint();
    const r = await put.call(ctx, batch);
    metrics.recordPut(batch.topic, r, Number(process.hrtime.bigint() - t0) / 1e9);
    return r;
  };
  store.getMessage = function (this: typeof store, ...args: Parameters<typeof getMessage>): GetMessageResult {
    const r = getMessage.apply(store, args);
    if (args[0] !== "") metrics.recordGet(args[1], r);
    return r;
  };
  return () => {
    (ctx as { put: (b: PutBatch) => Promise<PutResult> }).put = put;
    store.getMessage = getMessage;
  };
}

/** A running metrics endpoint. */
export interface MetricsServer {
  /** "host:port" actually bound */
  readonly address: string;
  /** the URL to scrape */
  readonly url: string;
  close(): Promise<void>;
}

/** Parses "host:port" (port 0 = any free port); throws ILLEGAL_ARGUMENT with the expected form. */
export function parseHostPort(listen: string): { host: string; port: number } {
  const m = /^(?:tcp:\/\/|http:\/\/)?(\[[^\]]+\]|[^:/]+):(\d+)$/.exec(listen.trim());
  if (!m || Number(m[2]) > 65535)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `metrics address "${listen}" is not host:port; use e.g. 127.0.0.1:9100 (port 0 picks a free port).`,
    );
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port: Number(m[2]) };
}

/** Serves `render()` at `GET /metrics` on `listen` ("host:port"). Port in use → MQError ILLEGAL_ARGUMENT. */
export async function startMetricsServer(listen: string, render: () => string): Promise<MetricsServer> {
  const { host, port } = parseHostPort(listen);
  const server = http.createServer((req, res) => {
    if (req.method !== "GET" || (req.url !== "/metrics" && req.url !== "/")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("try GET /metrics\n");
      return;
    }
    let text: string;
    try {
      text = render();
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" }).end(`${(e as Error).message}\n`);
      return;
    }
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(text);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        new MQError(
          "ILLEGAL_ARGUMENT",
          e.code === "EADDRINUSE"
            ? `Cannot listen for metrics on ${listen}: address in use; choose another port.`
            : `Cannot listen for metrics on ${listen}: ${e.message}.`,
        ),
      ),
    );
    server.listen(port, host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  const address = `${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}`;
  return {
    address,
    url: `http://${address}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
