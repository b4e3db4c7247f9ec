/**
 * InspectionCollector: the receiving end of inspection streams. A SUB socket bound to an
 * (ephemeral) port; nodes connect their publishers to it (`node.publishInspection(endpoint)` or
 * an INSPECT_SUBSCRIBE request naming `collector.endpoint`).
 */
import * as zmq from "zeromq";
import { decode } from "../../transport/codec.ts";
import { MQError } from "../../transport/protocol.ts";
import type { InspectionListener, InspectionRecord } from "./inspection.ts";
import type { Ref } from "./refs.ts";

/** Records kept in memory for late readers. @default 10000 */
export const DEFAULT_COLLECTOR_CAPACITY = 10_000;

export class InspectionCollector {
  /** Most recent records, oldest first, at most `capacity`. */
  readonly records: InspectionRecord[] = [];
  /** Messages that were not inspection records. */
  malformed = 0;
  private readonly listeners = new Set<InspectionListener>();
  private paused = false;

  private constructor(
    private readonly sub: zmq.Subscriber,
    readonly endpoint: string,
    private readonly capacity: number,
  ) {}

  /** Binds the SUB socket (`tcp://127.0.0.1:*` by default) and starts collecting. */
  static async start(opts: { bind?: string; capacity?: number } = {}): Promise<InspectionCollector> {
    const sub = new zmq.Subscriber({ linger: 0 });
    sub.subscribe();
    try {
      await sub.bind(opts.bind ?? "tcp://127.0.0.1:*");
    } catch (e) {
      sub.close();
      throw new MQError("ILLEGAL_ARGUMENT", `Cannot bind the inspection collector to ${opts.bind}: ${(e as Error).message}.`, { cause: e });
    }
    const c = new InspectionCollector(sub, sub.lastEndpoint ?? opts.bind ?? "", opts.capacity ?? DEFAULT_COLLECTOR_CAPACITY);
    void c.loop();
    return c;
  }

  /**
   * Asks the node behind `ref` (any actor name on it) to publish its stream here for `leaseMs`
   * (the node's default lease when omitted); ask again before it runs out to keep the stream.
   */
  async requestFrom(ref: Ref, timeoutMs?: number, leaseMs?: number): Promise<string> {
    const ev =
      leaseMs === undefined
        ? { type: "INSPECT_SUBSCRIBE", endpoint: this.endpoint }
        : { type: "INSPECT_SUBSCRIBE", endpoint: this.endpoint, leaseMs };
    const r = await ref.ask<{ nodeId: string }>(ev, { timeoutMs });
    return r.fields.nodeId;
  }

  /** Unsubscribes from every publisher: they stop feeding on their nodes' actors until {@link resume}. */
  pause(): void {
    if (!this.paused && !this.sub.closed) this.sub.unsubscribe();
    this.paused = true;
  }

  /** Subscribes again: every connected publisher replays its actors and streams on. */
  resume(): void {
    if (this.paused && !this.sub.closed) this.sub.subscribe();
    this.paused = false;
  }

  /** Listens to every record as it arrives; returns the removal. */
  onRecord(listener: InspectionListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.listeners.clear();
    this.sub.close();
  }

  private async loop(): Promise<void> {
    for (;;) {
      let msg: Buffer[];
      try {
        msg = await this.sub.receive();
      } catch {
        return;
      }
      let r: InspectionRecord;
      try {
        r = decode(msg[0]!) as InspectionRecord;
      } catch {
        this.malformed++;
        continue;
      }
      if (r === null || typeof r !== "object" || typeof (r as { kind?: unknown }).kind !== "string") {
        this.malformed++;
        continue;
      }
      this.records.push(r);
      if (this.records.length > this.capacity) this.records.splice(0, this.records.length - this.capacity);
      for (const l of this.listeners) {
        try {
          l(r);
        } catch {
          // listener bugs stay in the listener
        }
      }
    }
  }
}
