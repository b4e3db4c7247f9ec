/**
 * The table of asks waiting for a reply. One promise per ask and no per-ask timer: asks are kept
 * in buckets by timeout value, so within a bucket deadlines are in insertion order and one sweep
 * timer only looks at the expired heads.
 */
import { MQError } from "./protocol.ts";

/** A received reply: fields, optional body, or a remote error. */
export interface ReplyMessage<T = Record<string, unknown>> {
  fields: T;
  body?: Buffer;
}

/** How often expired asks are looked for, in ms. */
export const DEFAULT_SWEEP_INTERVAL_MS = 10;

class Pending {
  constructor(
    readonly resolve: (r: ReplyMessage<any>) => void,
    readonly reject: (e: MQError) => void,
    readonly deadline: number,
    readonly type: string,
    readonly target: string,
    readonly bucket: Map<number, Pending>,
  ) {}
}

export class PendingRequests {
  private nextId = 1;
  private readonly byId = new Map<number, Pending>();
  private readonly buckets = new Map<number, Map<number, Pending>>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly sweepIntervalMs = DEFAULT_SWEEP_INTERVAL_MS) {}

  get size(): number {
    return this.byId.size;
  }

  /** True while an ask with this id waits (lets senders skip asks that already timed out). */
  has(id: number): boolean {
    return this.byId.has(id);
  }

  /** Registers an ask; returns its correlation id and the promise of its reply. */
  add<T>(timeoutMs: number, type: string, target: string): { id: number; promise: Promise<ReplyMessage<T>> } {
    const id = this.nextId;
    this.nextId = id >= 0x7fffffff ? 1 : id + 1;
    let bucket = this.buckets.get(timeoutMs);
    if (!bucket) {
      bucket = new Map();
      this.buckets.set(timeoutMs, bucket);
    }
    const b = bucket;
    const promise = new Promise<ReplyMessage<T>>((resolve, reject) => {
      const p = new Pending(resolve, reject, Date.now() + timeoutMs, type, target, b);
      this.byId.set(id, p);
      b.set(id, p);
    });
    if (this.timer === null) this.timer = setInterval(() => this.sweep(), this.sweepIntervalMs);
    return { id, promise };
  }

  /** Completes an ask with a reply; false when it had already timed out or never existed. */
  resolve(id: number, reply: ReplyMessage<any>): boolean {
    const p = this.take(id);
    if (!p) return false;
    p.resolve(reply);
    return true;
  }

  /** Fails an ask; false when it was no longer pending. */
  reject(id: number, err: MQError): boolean {
    const p = this.take(id);
    if (!p) return false;
    p.reject(err);
    return true;
  }

  /** Fails every pending ask (node closing). */
  rejectAll(err: MQError): void {
    for (const id of [...this.byId.keys()]) this.reject(id, err);
    this.stopTimer();
  }

  private take(id: number): Pending | undefined {
    const p = this.byId.get(id);
    if (!p) return undefined;
    this.byId.delete(id);
    p.bucket.delete(id);
    // the sweep timer is stopped by the sweep that finds nothing pending: one ask after another
    // (a steady trickle of requests) then costs no timer start and stop each
    return p;
  }

  private stopTimer(): void {
    if (this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private sweep(): void {
    if (this.byId.size === 0) {
      this.stopTimer();
      return;
    }
    const now = Date.now();
    for (const [timeoutMs, bucket] of this.buckets) {
      for (const [id, p] of bucket) {
        if (p.deadline > now) break;
        this.take(id);
        p.reject(
          new MQError(
            "TIMEOUT",
            `No reply to ${p.type} from actor ${p.target} within ${timeoutMs} ms: the peer may be down or overloaded; retry later or raise timeoutMs.`,
          ),
        );
      }
      if (bucket.size === 0) this.buckets.delete(timeoutMs);
    }
  }
}
