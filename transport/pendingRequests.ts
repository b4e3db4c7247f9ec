/**
 * The table of asks waiting for a reply. One promise per ask and no per-ask timer: asks are kept
 * in buckets by timeout value, so within a bucket deadlines are in insertion order and one sweep
 * timer only looks at the expired heads. Each ask remembers the link it went out on (null for a
 * local ask): ids are sequential and shared by every peer, so a reply is taken only from that link.
 */
import { monotonicNow } from "./clock.ts";
import { MQError } from "./protocol.ts";

/** A received reply: fields, optional body, or a remote error. */
export interface ReplyMessage<T = Record<string, unknown>> {
  fields: T;
  body?: Buffer;
}

/**
 * What a reply did: completed its ask, found none waiting (timed out, already answered, never
 * sent), or came from another link than the ask went out on (the ask keeps waiting).
 */
export type ReplyOutcome = "done" | "late" | "foreign";

/** How often expired asks are looked for, in ms. */
export const DEFAULT_SWEEP_INTERVAL_MS = 10;

class Pending {
  constructor(
    readonly resolve: (r: ReplyMessage<any>) => void,
    readonly reject: (e: MQError) => void,
    /** monotonic ({@link monotonicNow}): a wall clock step must not fail or stretch asks in flight */
    readonly deadline: number,
    readonly type: string,
    readonly target: string,
    /** the link (any object the transport chooses) the ask went out on; null for a local ask */
    readonly link: object | null,
    readonly bucket: Map<number, Pending>,
    /** the ask's number among its link's asks (see {@link PendingRequests.rejectSentOn}) */
    readonly seq: number,
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

  /** Registers an ask sent on `link` (null: local); returns its correlation id, its deadline ({@link monotonicNow}) and the promise of its reply. */
  add<T>(
    timeoutMs: number,
    type: string,
    target: string,
    link: object | null,
    seq = 0,
  ): { id: number; deadline: number; promise: Promise<ReplyMessage<T>> } {
    const id = this.nextId;
    this.nextId = id >= 0x7fffffff ? 1 : id + 1;
    let bucket = this.buckets.get(timeoutMs);
    if (!bucket) {
      bucket = new Map();
      this.buckets.set(timeoutMs, bucket);
    }
    const b = bucket;
    const deadline = monotonicNow() + timeoutMs;
    const promise = new Promise<ReplyMessage<T>>((resolve, reject) => {
      const p = new Pending(resolve, reject, deadline, type, target, link, b, seq);
      this.byId.set(id, p);
      b.set(id, p);
    });
    if (this.timer === null) this.timer = setInterval(() => this.sweep(), this.sweepIntervalMs);
    return { id, deadline, promise };
  }

  /** Completes an ask with the reply that came in on `from` (null: a local replier). */
  resolve(id: number, from: object | null, reply: ReplyMessage<any>): ReplyOutcome {
    const p = this.take(id, from);
    if (p === undefined) return "late";
    if (p === null) return "foreign";
    p.resolve(reply);
    return "done";
  }

  /** Fails an ask with the error reply that came in on `from` (null: a local replier). */
  reject(id: number, from: object | null, err: MQError): ReplyOutcome {
    const p = this.take(id, from);
    if (p === undefined) return "late";
    if (p === null) return "foreign";
    p.reject(err);
    return "done";
  }

  /** Fails every pending ask (node closing). */
  rejectAll(err: MQError): void {
    const all = [...this.byId.values()];
    this.byId.clear();
    this.buckets.clear();
    for (const p of all) p.reject(err);
    this.stopTimer();
  }

  /**
   * Fails, with `err(type, target)`, the asks that went out on `link` numbered up to `seq` (those the
   * socket had taken when its connection closed: their replies cannot come back).
   */
  rejectSentOn(link: object, seq: number, err: (type: string, target: string) => MQError): void {
    const gone: Array<[number, Pending]> = [];
    for (const e of this.byId) if (e[1].link === link && e[1].seq <= seq) gone.push(e);
    for (const [id, p] of gone) {
      this.byId.delete(id);
      p.bucket.delete(id);
      p.reject(err(p.type, p.target));
    }
  }

  /** Removes and returns ask `id` if it went out on `from`; null (left waiting) if on another link. */
  private take(id: number, from: object | null): Pending | null | undefined {
    const p = this.byId.get(id);
    if (!p) return undefined;
    if (p.link !== from) return null;
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
    const now = monotonicNow();
    for (const [timeoutMs, bucket] of this.buckets) {
      for (const [id, p] of bucket) {
        if (p.deadline > now) break;
        this.byId.delete(id);
        bucket.delete(id);
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
