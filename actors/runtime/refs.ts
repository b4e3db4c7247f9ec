/**
 * Handles to actors (local or remote), the once-only replier an asked actor answers with, and
 * the origin of a remote request. A local and a remote handle behave the same: same replier,
 * same timeout, same errors; only local delivery skips msgpack.
 */
import { bodyLength, notBytes } from "../../transport/codec.ts";
import type { BodyParts, Link, ReplyMessage, ZmqNode } from "../../transport/index.ts";
import { checkRange, MAX_TIMER_MS, MQError, shownValue } from "../../transport/protocol.ts";

/** An event on the wire: `type` is the RocketMQ request name where one exists. */
export type WireEvent = { type: string; [field: string]: unknown };

/** What an ask resolves to. Rejections are MQError (TIMEOUT, CLOSED, SYSTEM_BUSY, remote code). */
export type Reply<T = Record<string, unknown>> = ReplyMessage<T>;

export interface SendOptions {
  body?: Uint8Array | Uint8Array[];
}
export interface AskOptions extends SendOptions {
  /** an integer from 1 to 2^31-1 ms. @default the node's requestTimeoutMs */
  timeoutMs?: number;
  /**
   * Have the receiver serve the ask however long it waited there. By default a listening node drops
   * unserved an ask that waited its whole timeout (its asker has given up); an ask whose effect
   * matters after its asker stops waiting (a goodbye at close, an offset persisted at close) sets this.
   * @default false
   */
  serveLate?: boolean;
}

/** A handle to a named actor. */
export interface Ref {
  readonly name: string;
  /** The actor's node address, null for a local actor. */
  readonly address: string | null;
  /** One-way; throws MQError SYSTEM_BUSY past the send bound, CLOSED after close. */
  send(event: WireEvent, opts?: SendOptions): void;
  ask<T = Record<string, unknown>>(event: WireEvent, opts?: AskOptions): Promise<Reply<T>>;
}

/** Given to an asked actor as `event.reply`; the first answer wins, later ones are ignored. */
export interface Replier {
  ok(fields?: object, body?: Uint8Array | Uint8Array[]): void;
  fail(err: MQError): void;
  /**
   * When ({@link monotonicNow}, this process's clock) the asker gives up waiting for the answer:
   * its timeout less how long the ask took to be served, estimated. Absent for local asks and for
   * asks that carry no timeout.
   */
  readonly answerBy?: number;
}

/** Given to an actor as `event.origin` for remote senders: reach actors of the sender's node. */
export interface Origin {
  readonly nodeId: string;
  ref(name: string): Ref;
}

/** What the node offers refs and repliers (kept narrow so refs do not see the node's insides). */
export interface RefHost {
  readonly transport: ZmqNode;
  deliverLocal(name: string, event: WireEvent, body: Buffer | undefined, replier: Replier | undefined): void;
}

/**
 * The one Buffer a receiver gets for a body given as bytes or a list of bytes. Throws MQError
 * ILLEGAL_ARGUMENT for a body that is not bytes, as a remote send does.
 */
export function toBodyBuffer(body: BodyParts): Buffer | undefined {
  if (body === undefined) return undefined;
  if (Buffer.isBuffer(body)) return body;
  if (Array.isArray(body)) {
    const n = bodyLength(body);
    return body.length === 1 ? toBodyBuffer(body[0]) : Buffer.concat(body, n);
  }
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw notBytes(body);
}

/**
 * Refuses an event without a string type (ILLEGAL_ARGUMENT): a local actor would fail inside xstate
 * (restarted, its context lost), a remote one answer MALFORMED as if the versions differed.
 */
function checkEvent(event: WireEvent, target: string): void {
  if (typeof event?.type === "string") return;
  const got = event !== null && typeof event === "object" ? `type ${shownValue(event.type)}` : shownValue(event);
  throw new MQError("ILLEGAL_ARGUMENT", `An event to actor ${target} needs a string type, such as { type: "PING" }; got ${got}.`);
}

/** An ask's timeout: `timeoutMs` when given (ILLEGAL_ARGUMENT unless an integer from 1 to 2^31-1), else the node's. */
function askTimeout(t: ZmqNode, opts: AskOptions | undefined): number {
  const ms = opts?.timeoutMs;
  if (ms === undefined) return t.requestTimeoutMs;
  // a string would make a local ask's deadline a string (it never times out) and a remote one MALFORMED
  checkRange("timeoutMs", ms, 1, MAX_TIMER_MS);
  return ms;
}

/** Replier for a request that came over the wire. */
export class WireReplier implements Replier {
  private done = false;
  readonly answerBy: number | undefined;
  constructor(
    private readonly transport: ZmqNode,
    private readonly link: Link,
    private readonly corrId: number,
    answerBy = Number.POSITIVE_INFINITY,
  ) {
    this.answerBy = Number.isFinite(answerBy) ? answerBy : undefined;
  }
  ok(fields?: object, body?: Uint8Array | Uint8Array[]): void {
    if (this.done) return;
    this.done = true;
    try {
      this.transport.reply(this.link, this.corrId, fields, body);
    } catch (e) {
      // a body that is not bytes, fields msgpack cannot encode: the asker learns why (ok may be
      // called from a promise callback, where a throw would go unhandled)
      this.transport.replyError(this.link, this.corrId, e instanceof MQError ? e : new MQError("SYSTEM_ERROR", String(e)));
    }
  }
  fail(err: MQError): void {
    if (this.done) return;
    this.done = true;
    this.transport.replyError(this.link, this.corrId, err instanceof MQError ? err : new MQError("SYSTEM_ERROR", String(err)));
  }
}

/** Replier for a local ask: completes the pending entry directly. */
export class LocalReplier implements Replier {
  private done = false;
  constructor(
    private readonly transport: ZmqNode,
    private readonly corrId: number,
  ) {}
  ok(fields?: object, body?: Uint8Array | Uint8Array[]): void {
    if (this.done) return;
    this.done = true;
    let b: Buffer | undefined;
    try {
      b = toBodyBuffer(body);
    } catch (e) {
      // as a remote reply: the asker gets ILLEGAL_ARGUMENT, the actor carries on
      this.transport.pending.reject(this.corrId, null, e as MQError);
      return;
    }
    this.transport.pending.resolve(this.corrId, null, b === undefined ? { fields: fields ?? {} } : { fields: fields ?? {}, body: b });
  }
  fail(err: MQError): void {
    if (this.done) return;
    this.done = true;
    this.transport.pending.reject(this.corrId, null, err instanceof MQError ? err : new MQError("SYSTEM_ERROR", String(err)));
  }
}

/** Handle to an actor on another node, over a DEALER link or back over a client's connection. */
export class RemoteRef implements Ref {
  constructor(
    private readonly host: RefHost,
    private readonly link: Link,
    readonly name: string,
    readonly address: string | null,
  ) {}
  send(event: WireEvent, opts?: SendOptions): void {
    checkEvent(event, this.name);
    this.host.transport.post(this.link, this.name, event, opts?.body);
  }
  ask<T = Record<string, unknown>>(event: WireEvent, opts?: AskOptions): Promise<Reply<T>> {
    const t = this.host.transport;
    let timeoutMs: number;
    try {
      checkEvent(event, this.name);
      timeoutMs = askTimeout(t, opts);
    } catch (e) {
      return Promise.reject(e);
    }
    return t.request<T>(this.link, this.name, event, opts?.body, timeoutMs, opts?.serveLate === true);
  }
}

/** Handle to an actor hosted by this node. */
export class LocalRef implements Ref {
  readonly address = null;
  constructor(
    private readonly host: RefHost,
    readonly name: string,
  ) {}
  send(event: WireEvent, opts?: SendOptions): void {
    if (this.host.transport.isClosed) throw new MQError("CLOSED", `The node is closed; cannot send to ${this.name}.`);
    checkEvent(event, this.name);
    this.host.deliverLocal(this.name, event, toBodyBuffer(opts?.body), undefined);
  }
  ask<T = Record<string, unknown>>(event: WireEvent, opts?: AskOptions): Promise<Reply<T>> {
    const t = this.host.transport;
    if (t.isClosed) return Promise.reject(new MQError("CLOSED", `The node is closed; cannot ask ${this.name}.`));
    let body: Buffer | undefined;
    let timeoutMs: number;
    try {
      // before the ask is registered: one refused here must not be left to time out unhandled
      checkEvent(event, this.name);
      body = toBodyBuffer(opts?.body);
      timeoutMs = askTimeout(t, opts);
    } catch (e) {
      return Promise.reject(e);
    }
    const { id, promise } = t.pending.add<T>(timeoutMs, event.type, this.name, null);
    this.host.deliverLocal(this.name, event, body, new LocalReplier(t, id));
    return promise;
  }
}

/** Origin of requests that came in on one link; refs go back over that same link. */
export class LinkOrigin implements Origin {
  private readonly refs = new Map<string, RemoteRef>();
  constructor(
    private readonly host: RefHost,
    private readonly link: Link,
    readonly nodeId: string,
  ) {}
  ref(name: string): Ref {
    let r = this.refs.get(name);
    if (!r) {
      r = new RemoteRef(this.host, this.link, name, null);
      this.refs.set(name, r);
    }
    return r;
  }
}
