/**
 * The ZeroMQ node: one ROUTER listening (optional), one DEALER per peer address, request/reply
 * with correlation ids and per-request deadlines, one-way sends, bounded send queues, and frames
 * queued in the same tick coalesced into one multipart send per socket.
 *
 * Requests flow both ways on every connection: a DEALER also receives requests (from the node it
 * connected to) and answers them on the same socket, so clients that never listen can still be
 * reached through the connection they opened.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import * as zmq from "zeromq";
import { monotonicNow } from "./clock.ts";
import {
  type BodyParts,
  bodyLength,
  decode,
  encode,
  FRAME_PREFIX_BYTES,
  framePrefix,
  isKnownRequestCode,
  KIND_REPLY,
  KIND_REQUEST,
  MAX_HEADER_BYTES,
  pushBody,
  requestCodeOf,
  responseCodeOf,
} from "./codec.ts";
import { type CurveClientOptions, type CurveServerOptions, checkCurveKey, zapHandler } from "./curve.ts";
import { optionNamesOf } from "./optionNames.ts";
import { PendingRequests, type ReplyMessage } from "./pendingRequests.ts";
import { checkRange, isPortText, MAX_TIMER_MS, MQError, RequestCode, ResponseCode, shownValue } from "./protocol.ts";

/** @default 3000 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 3000;
/** Frames a link may queue before sends fail with SYSTEM_BUSY. @default 10000 */
export const DEFAULT_SEND_HIGH_WATER_MARK = 10_000;
/** ZMTP heartbeat, so half-open connections are noticed. */
export const HEARTBEAT_INTERVAL_MS = 1000;
export const HEARTBEAT_TIMEOUT_MS = 5000;
/** Reconnect delay for DEALERs whose peer went away. */
export const RECONNECT_INTERVAL_MS = 100;
export const RECONNECT_INTERVAL_MAX_MS = 1000;
/** Router links remembered (clients that sent us something; 0.8 to 0.9 KiB of heap each); oldest forgotten first. */
export const MAX_ROUTER_LINKS = 65_536;
/** A ROUTER silent this long before a close has sent the replies of the work done before it (see flushReplies). */
const REPLY_QUIET_MS = 20;
/** How often {@link ZmqNode.drainPeers} looks whether the DEALERs' queues are empty. */
const DRAIN_POLL_MS = 2;

/**
 * A link whose queued frames reach this many bytes is sent at once instead of at the end of the
 * tick: one pass that answers many pulls (or sends 8 produce batches) would otherwise leave as one
 * send, and the two sides take turns instead of working at the same time.
 */
export const EAGER_FLUSH_BYTES = 128 * 1024;
/**
 * Most bytes of queued frames sent as one ZeroMQ message (a larger frame goes alone). A receiver
 * cuts off a peer whose message exceeds its maxInboundBytes even when every frame in it fits, and
 * frames pile up while a send waits (a burst of big sends, a backlog held while the peer was
 * unreachable). 4 MiB, RocketMQ's default maxMessageSize: a limit sized for the largest message is
 * never exceeded by a batch.
 */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/**
 * Bytes of requests served from one router link per round while requests of several links wait
 * (deficit round robin, see {@link ZmqNode.serveInbound}). libzmq's ROUTER fair-queues messages, and
 * one message is a batch of 1 to thousands of requests: a client whose sends leave in small batches
 * got a message's worth per round as well, fell behind its timeout and got nothing acknowledged.
 */
export const SERVE_QUANTUM_BYTES = 64 * 1024;
/** Most bytes of waiting requests served in one loop turn, so that reading keeps up. */
export const SERVE_TURN_BYTES = 1024 * 1024;
/**
 * Largest ZeroMQ message a listening node takes from a peer (libzmq's ZMQ_MAXMSGSIZE: a peer that
 * sends more is disconnected before the message is buffered whole). A peer sends queued frames in
 * messages of at most MAX_BATCH_BYTES, or one larger frame alone (a message batch, 4 MiB by default,
 * plus its header); RocketMQ caps frames at 16 MiB.
 */
export const DEFAULT_MAX_INBOUND_BYTES = 64 * 1024 * 1024;
const EMPTY = Buffer.alloc(0);
/** ZAP domains registered by this process so far: each node's is unique, also when node ids repeat. */
let zapDomainCount = 0;
/**
 * A DEALER whose peer has been unreachable this long, and that has sent nothing for as long, is
 * closed and forgotten, as RocketMQ's broker expires a silent channel after 120 s: a peer gone for
 * good (a broker restarted on another port or pod address) would otherwise keep a socket, its fds
 * and a reconnect attempt every second for the life of the node. A later send connects anew.
 */
export const PEER_EXPIRY_MS = 120_000;
/**
 * A router link's lag baseline (the least of receive time minus send stamp, see
 * {@link RouterLink.waitedMs}) is the least lag of this window and the one before: two clocks that
 * drift apart (100 ppm is 30 ms in 5 min) shift it within two windows, so requests do not come to
 * look old. An overload that delays every request of a link for a whole window raises it as well.
 */
export const LAG_WINDOW_MS = 5 * 60_000;
/**
 * A router link whose every ask has been dropped as given up for this long starts its lag baseline
 * over (see {@link RouterLink.expiredWait}): a sender's clock that stepped back while its connection
 * held (a VM paused a few seconds) makes every fresh ask look old, and the baseline would take up
 * to two windows to forget it. Under a real overload it only makes the check lenient sooner.
 */
export const EXPIRED_RUN_RESET_MS = 10_000;
/** How long a DEALER's TCP connect may take before it is retried (RocketMQ's connectTimeoutMillis). */
export const CONNECT_TIMEOUT_MS = 3000;
/**
 * A link whose handshake the peer refused (CURVE keys, or CURVE on one side only) is closed, its
 * asks failed with AUTH_FAILED; sends to the address within this long fail at once with the same
 * error, and the first one after it connects anew: at most one refused attempt a second, where
 * libzmq would retry every RECONNECT_INTERVAL_MS.
 */
export const REFUSED_RETRY_MS = 1000;
/**
 * Handshakes that end with the connection closed, one after the other, that read as the server
 * refusing this client, which libzmq reports as an unspecified handshake error (one alone may be a
 * server going down mid-handshake). On a CURVE link: a server given the wrong server key cannot
 * read the client's hello and drops the connection. On a plain link that has never completed a
 * handshake: a CURVE server that reads the client's greeting before it has sent the rest of its own
 * drops the connection before the client learns its mechanism (often many times in a row on a busy
 * machine), where it would otherwise be told of the mismatch.
 */
const CLOSED_HANDSHAKES_REFUSED = 2;
/** What a client without CURVE is told to do when its server requires it. */
const GIVE_SERVER_KEY = "Give this client curveServerKey (the server's public key; `actormq keygen` wrote it to the .pub file)";
/** How often links are checked against PEER_EXPIRY_MS. */
const PEER_EXPIRY_CHECK_MS = 10_000;
/** Longest a DEALER send waits for its peer in one go (ZeroMQ takes an int of ms). */
const MAX_SEND_WAIT_MS = 2_147_483_647;
/**
 * Ports whose listening socket a node of this process closed, and when ({@link monotonicNow} ms):
 * libzmq's I/O thread closes it a moment after close() returns, and a node started on the port
 * meanwhile (a broker restarted in its process) would be refused "Address already in use".
 */
const releasedPorts = new Map<string, number>();
/** How long after such a close a bind refused EADDRINUSE is tried again (it took up to ~5 ms). */
const RELEASED_PORT_WAIT_MS = 1000;
const RELEASED_PORT_RETRY_MS = 5;

/** Options of {@link ZmqNode.start}. */
export interface ZmqNodeOptions {
  /** @default `${hostname}:${pid}:${random}` */
  nodeId?: string;
  /** `tcp://host:port`; `tcp://127.0.0.1:*` binds an ephemeral port. null: no ROUTER. @default null */
  listen?: string | null;
  /** Address others should use when it differs from the bound one. */
  advertise?: string;
  curve?: CurveServerOptions;
  curveClient?: CurveClientOptions;
  /** An ask's timeout unless it gives its own: an integer from 1 to 2^31-1 ms. @default 3000 */
  requestTimeoutMs?: number;
  /** Frames a link may queue before sends fail with SYSTEM_BUSY: an integer from 1 to 2^31-1. @default 10000 */
  sendHighWaterMark?: number;
  /**
   * Largest message a peer may send to this node's ROUTER; a peer that sends a larger one is
   * disconnected (its request times out). Peers send queued requests in messages of at most 4 MiB
   * ({@link MAX_BATCH_BYTES}) unless one request is larger. Raise it with a broker's maxMessageBytes.
   * @default 64 MiB
   */
  maxInboundBytes?: number;
}

/** The names of {@link ZmqNodeOptions}, which `ActorNode.start` takes and refuses any other of. */
export const ZMQ_NODE_OPTION_NAMES = optionNamesOf<ZmqNodeOptions>()([
  "nodeId",
  "listen",
  "advertise",
  "curve",
  "curveClient",
  "requestTimeoutMs",
  "sendHighWaterMark",
  "maxInboundBytes",
]);

export function defaultZmqNodeOptions(): Required<
  Pick<ZmqNodeOptions, "nodeId" | "listen" | "requestTimeoutMs" | "sendHighWaterMark" | "maxInboundBytes">
> {
  return {
    nodeId: `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`,
    listen: null,
    requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
    sendHighWaterMark: DEFAULT_SEND_HIGH_WATER_MARK,
    maxInboundBytes: DEFAULT_MAX_INBOUND_BYTES,
  };
}

/** Counters of a node's transport. */
export interface TransportStats {
  requestsIn: number;
  repliesIn: number;
  /** frames that could not be decoded and had no readable reply address */
  malformedDropped: number;
  /** malformed requests answered with MALFORMED / REQUEST_CODE_NOT_SUPPORTED */
  malformedAnswered: number;
  /** frames dropped unsent because their deadline passed while the peer could not take them */
  staleDropped: number;
  /**
   * requests (of requestsIn) not served because they waited at least their ask's timeout since they
   * were sent: their asker has given up (TIMEOUT) and may have sent them again
   */
  expiredDropped: number;
  /** replies to asks that had already timed out */
  lateReplies: number;
  /** replies dropped because they came from another link than their ask went out on (a peer answering for another) */
  foreignReplies: number;
  /** socket sends that failed (peer gone, queue full) */
  sendFailures: number;
  /** connections the listening socket could not accept (out of file descriptors, most often) */
  acceptFailures: number;
  /** accepted connections whose ZMTP handshake failed (CURVE keys refused or mismatched, a plain client of a CURVE server) */
  handshakeFailures: number;
  /** connections to the listening socket open now (accepted and not yet closed) */
  connectionsOpen: number;
}

/** A connection frames can be sent on: an outgoing DEALER or a peer connected to our ROUTER. */
export abstract class Link {
  /** prefix/header/body parts waiting to be sent as one batch frame */
  parts: Uint8Array[] = [];
  /** bytes in `parts` */
  bytes = 0;
  /** logical frames queued */
  queued = 0;
  /** set by the runtime: the Origin object for requests that came in on this link */
  origin: unknown = undefined;
  /** node id of the peer, learnt from the requests it sent */
  peerNodeId = "";
  /** closed and forgotten after PEER_EXPIRY_MS: sends through a ref kept from before go to a new link */
  retired = false;
  abstract readonly description: string;
}

/** Outgoing link: one DEALER to one peer address. */
export class PeerLink extends Link {
  flushing = false;
  scheduled = false;
  /**
   * per queued frame: its deadline (the sender's {@link monotonicNow}), its number of parts (a DEALER's send can wait),
   * and `askSeq` when it was queued (the asks the socket has taken once it takes the frame)
   */
  frameMeta: number[] = [];
  /** the socket's sendTimeout as last set (set only when it changes) */
  sendTimeout = -1;
  /** asks queued on this link so far, and how many of them the socket has taken */
  askSeq = 0;
  sentSeq = 0;
  /** the connection closed or could not be made, and none has completed its handshake since */
  unreachable = false;
  /** when `unreachable` last turned true ({@link monotonicNow} ms) */
  unreachableSince = 0;
  /** when the connection last closed or an attempt to make it failed ({@link monotonicNow} ms) */
  lastFailureAt = 0;
  /** handshakes ended by the connection closing since the last completed one (see CLOSED_HANDSHAKES_REFUSED) */
  closedHandshakes = 0;
  /** a connection of this link has completed its handshake */
  handshaken = false;
  /** made after a refused link to the same address: its first handshake is told as the peer being back */
  afterRefusal = false;
  /** told at the next close or failed attempt (see {@link ZmqNode.onPeerFailure}) */
  readonly failureListeners = new Set<(reason?: MQError) => void>();
  /** deadline of the last frame queued ({@link monotonicNow} ms): the link is unused once it is long past */
  lastDeadline = 0;
  readonly flush: () => void;
  constructor(
    readonly address: string,
    readonly socket: zmq.Dealer,
    node: ZmqNode,
  ) {
    super();
    this.flush = () => node.pumpPeer(this);
  }
  get description(): string {
    return this.address;
  }
}

/** A peer connected to our ROUTER, addressed by its routing id. */
export class RouterLink extends Link {
  dirty = false;
  /** least lag (receive time − send stamp, ms) of the current and the previous {@link LAG_WINDOW_MS} window */
  lagBase = Number.POSITIVE_INFINITY;
  /** least lag of the current window */
  lagMin = Number.POSITIVE_INFINITY;
  /** when the current window ends ({@link monotonicNow} ms); 0: no request stamped yet */
  lagWindowEnd = 0;
  /** when the link's current run of asks dropped as given up began; 0 while its last ask was served */
  dropRunSince = 0;
  /** the wait {@link expiredWait} estimated for the last ask it let be served (ms) */
  servedWait = 0;
  /** batches received and not yet served (from inboxHead, the first from inboxOff); see ZmqNode.serveInbound */
  inbox: Buffer[] = [];
  inboxHead = 0;
  inboxOff = 0;
  /** in the node's list of links with requests waiting */
  waiting = false;
  /** bytes this link may still be served in the current round */
  deficit = 0;
  constructor(
    readonly rid: Buffer,
    readonly key: string,
  ) {
    super();
  }
  get description(): string {
    return `client ${this.key}`;
  }

  /**
   * How long a request stamped `sentAt` by the peer's clock and received at `now` (this node's
   * {@link monotonicNow}) waited beyond the quickest request of the link (ms). The two clocks are
   * never compared as they are: their offset, plus the time a request takes when it waits in no
   * queue, is the least lag seen (the baseline), and a request's wait is its lag above it. The
   * baseline forgets lags older than two windows, so clocks drifting apart move it.
   */
  waitedMs(sentAt: number, now: number): number {
    const lag = now - sentAt;
    if (now >= this.lagWindowEnd) {
      // a window without requests (the link was idle) leaves nothing to keep
      const prev = now < this.lagWindowEnd + LAG_WINDOW_MS ? this.lagMin : Number.POSITIVE_INFINITY;
      this.lagMin = lag;
      this.lagBase = Math.min(prev, lag);
      this.lagWindowEnd = now + LAG_WINDOW_MS;
    } else if (lag < this.lagMin) {
      this.lagMin = lag;
      if (lag < this.lagBase) this.lagBase = lag;
    }
    return lag - this.lagBase;
  }

  /**
   * How long an ask stamped `sentAt` waited when its asker has given up on it (waited at least
   * `timeoutMs`, see {@link waitedMs}), or -1 to serve it. After {@link EXPIRED_RUN_RESET_MS} of
   * nothing but dropped asks the baseline starts over from this one, which is served.
   */
  expiredWait(sentAt: number, now: number, timeoutMs: number): number {
    const waited = this.waitedMs(sentAt, now);
    if (waited < timeoutMs) {
      this.dropRunSince = 0;
      this.servedWait = waited;
      return -1;
    }
    if (this.dropRunSince === 0) this.dropRunSince = now;
    else if (now - this.dropRunSince >= EXPIRED_RUN_RESET_MS) {
      this.lagBase = this.lagMin = now - sentAt;
      this.dropRunSince = 0;
      this.servedWait = 0;
      return -1;
    }
    return waited;
  }
}

/**
 * The msgpack of a frame header: a request carrying event type `eventType` to `to`, or (null) a
 * reply to `to`. A field msgpack cannot take is ILLEGAL_ARGUMENT saying which frame it was in.
 */
function encodeHeader(parts: unknown[], eventType: string | null, to: string | Link): Buffer {
  try {
    return encode(parts);
  } catch (e) {
    const who = typeof to === "string" ? to : to.description;
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${eventType === null ? `The reply to ${who}` : `The event ${eventType} to ${who}`} cannot be encoded: ${(e as Error)?.message ?? e}. Give it msgpack-able fields (BigInts within 64 bits, no cycles).`,
      { cause: e },
    );
  }
}

/**
 * A tcp endpoint to bind needs a port from 0 to 65535 or `*`, an address to connect to (`connect`)
 * one from 1 to 65535: libzmq takes a larger number modulo 65536 and binds, or connects to, a port
 * nobody asked for. Throws MQError ILLEGAL_ARGUMENT naming `what` and the endpoint.
 */
export function checkTcpPort(endpoint: string, what: string, connect = false): void {
  if (!endpoint.startsWith("tcp://")) return;
  const port = endpoint.slice(endpoint.lastIndexOf(":") + 1);
  if (connect ? isPortText(port, 1) : port === "*" || isPortText(port, 0)) return;
  throw new MQError(
    "ILLEGAL_ARGUMENT",
    connect
      ? `${what} ${endpoint} has no valid port: use a port from 1 to 65535 (tcp://127.0.0.1:9876).`
      : `${what} endpoint ${endpoint} has no valid port: use a port from 0 to 65535, or * for any free port (tcp://127.0.0.1:*).`,
  );
}

/**
 * Called for each inbound request. `corrId` is 0 for one-way sends. `event` is the decoded
 * object (fresh, the handler may attach fields to it).
 */
export type RequestHandler = (
  link: Link,
  code: number,
  corrId: number,
  target: string,
  sender: string,
  event: Record<string, unknown> & { type: string },
  body: Buffer | undefined,
  /**
   * when ({@link monotonicNow}) the asker gives up on this ask, estimated from its timeout and how
   * long it waited to be served (see {@link RouterLink.waitedMs}); infinite when not known
   */
  answerBy: number,
) => void;

/**
 * Told of a request dropped unserved: its event type, how long it waited (estimated, ms) and its
 * ask's timeout.
 */
export type ExpiredRequestHandler = (link: Link, type: string, waitedMs: number, timeoutMs: number) => void;

/**
 * Told of a frame that could not be taken (counted in malformedDropped or malformedAnswered): the
 * link it came in on (null when not even the connection was readable) and why.
 */
export type MalformedFrameHandler = (link: Link | null, why: string) => void;
/**
 * Told of a connection the listening socket could not accept or whose handshake failed, with the
 * listening endpoint; `clientKey`: a CURVE client whose public key is not allowed, with the
 * client's IP address and key (ZAP tells them).
 */
export type RefusedConnectionHandler = (
  kind: "accept" | "handshake" | "clientKey",
  address: string,
  why: string,
  client?: { address: string; key: string },
) => void;

export class ZmqNode {
  readonly nodeId: string;
  /** Bound (or advertised) endpoint, null when not listening. */
  readonly address: string | null;
  readonly requestTimeoutMs: number;
  readonly sendHighWaterMark: number;
  readonly stats: TransportStats = {
    requestsIn: 0,
    repliesIn: 0,
    malformedDropped: 0,
    malformedAnswered: 0,
    staleDropped: 0,
    expiredDropped: 0,
    lateReplies: 0,
    foreignReplies: 0,
    sendFailures: 0,
    acceptFailures: 0,
    handshakeFailures: 0,
    connectionsOpen: 0,
  };
  readonly pending = new PendingRequests();
  private readonly peers = new Map<string, PeerLink>();
  /** per address, told when a lost connection to it is made again (kept while its link is forgotten and made anew) */
  private readonly reconnectListeners = new Map<string, Set<() => void>>();
  /**
   * addresses whose handshake was refused: when, why and the link retired (see {@link REFUSED_RETRY_MS}).
   * Kept until the next link to the address is made, which starts from the refusal's loss, or for
   * PEER_EXPIRY_MS, as an unreachable link unused for as long is (see {@link forgetIdlePeers})
   */
  private readonly refusals = new Map<string, { at: number; message: string; link: PeerLink }>();
  private readonly routerLinks = new Map<string, RouterLink>();
  private routerDirty: RouterLink[] = [];
  private routerScheduled = false;
  /** batches handed to the ROUTER so far: {@link flushReplies} waits for them to stop */
  private routerSends = 0;
  private readonly flushRouter = () => this.pumpRouter();
  /** router links with received requests waiting to be served, in round order */
  private waitingLinks: RouterLink[] = [];
  private serveScheduled = false;
  private closed = false;
  private zapDomain: string | null = null;
  /** the port the ROUTER bound (see {@link releasedPorts}) */
  private boundPort: string | null = null;
  private handler: RequestHandler = () => {};
  private peerForgotten: (address: string) => void = () => {};
  private requestExpired: ExpiredRequestHandler = () => {};
  private frameMalformed: MalformedFrameHandler = () => {};
  /** @internal told by the socket events and the ZAP handler; see {@link onConnectionRefused} */
  connectionRefused: RefusedConnectionHandler = () => {};
  private readonly expiryTimer: NodeJS.Timeout;

  private constructor(
    opts: Required<Pick<ZmqNodeOptions, "nodeId" | "requestTimeoutMs" | "sendHighWaterMark">>,
    private readonly router: zmq.Router | null,
    address: string | null,
    private readonly curveClient: CurveClientOptions | undefined,
  ) {
    this.nodeId = opts.nodeId;
    this.requestTimeoutMs = opts.requestTimeoutMs;
    this.sendHighWaterMark = opts.sendHighWaterMark;
    this.address = address;
    this.expiryTimer = setInterval(() => this.forgetIdlePeers(), PEER_EXPIRY_CHECK_MS);
    this.expiryTimer.unref();
  }

  /** Binds the ROUTER (when `listen` is set) and returns the running node. */
  static async start(options: ZmqNodeOptions = {}): Promise<ZmqNode> {
    const opts = { ...defaultZmqNodeOptions(), ...stripUndefined(options) };
    // every ask's deadline is now + it: a string would be concatenated, not added
    checkRange("requestTimeoutMs", opts.requestTimeoutMs, 1, MAX_TIMER_MS);
    // the sockets' high-water marks are C ints: libzmq refuses a fraction or more with EINVAL, and a
    // DEALER's only when the first ref() makes it
    if (!Number.isInteger(opts.sendHighWaterMark) || opts.sendHighWaterMark < 1 || opts.sendHighWaterMark > 2_147_483_647)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `sendHighWaterMark must be an integer count of frames from 1 to 2147483647 (default ${DEFAULT_SEND_HIGH_WATER_MARK}), got ${opts.sendHighWaterMark}.`,
      );
    if (!Number.isSafeInteger(opts.maxInboundBytes) || opts.maxInboundBytes < 1024)
      throw new MQError("ILLEGAL_ARGUMENT", `maxInboundBytes must be an integer number of bytes >= 1024, got ${opts.maxInboundBytes}.`);
    if (opts.listen != null && typeof opts.listen !== "string")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `listen must be an endpoint string such as tcp://127.0.0.1:10911, got ${shownValue(opts.listen)}.`,
      );
    if (opts.advertise !== undefined && typeof opts.advertise !== "string")
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `advertise must be an endpoint string such as tcp://10.0.0.2:10911, got ${shownValue(opts.advertise)}.`,
      );
    if (opts.listen) checkTcpPort(opts.listen, "listen");
    // peers connect to the advertised address: 0 or * would register an address no one can reach
    if (opts.advertise) checkTcpPort(opts.advertise, "The advertised address", true);
    if (opts.curveClient) {
      checkCurveKey(opts.curveClient.publicKey, "curveClient.publicKey");
      checkCurveKey(opts.curveClient.secretKey, "curveClient.secretKey");
    }
    if (opts.curve && !opts.listen)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        "curve (the server side of CURVE) needs a listening endpoint (listen): a node that does not listen has no server to secure. Use curveClient for its outgoing links.",
      );
    if (opts.listen && opts.curve) {
      // checked before the ROUTER exists: a socket left open would keep the process alive
      checkCurveKey(opts.curve.publicKey, "curve.publicKey");
      checkCurveKey(opts.curve.secretKey, "curve.secretKey");
      for (const k of opts.curve.allowedClientKeys ?? []) checkCurveKey(k, "curve.allowedClientKeys[]");
    }
    let router: zmq.Router | null = null;
    let address: string | null = null;
    let zapDomain: string | null = null;
    // the ZAP handler's refusals are told to the node once it exists
    let node: ZmqNode | undefined;
    if (opts.listen) {
      router = new zmq.Router({
        linger: 0,
        mandatory: true,
        sendTimeout: 0,
        sendHighWaterMark: opts.sendHighWaterMark,
        // No receive limit: libzmq 4.3.5 aborts the process (stream_engine_base.cpp:310,
        // `!_io_error`) when a peer whose input it stopped at the limit disconnects and a ZMTP
        // heartbeat then fires on the dead engine; a flooded broker died as its producers exited.
        // Reading everything moves a backlog from the kernel's socket buffers into this process,
        // as Netty's reads do in RocketMQ's broker.
        receiveHighWaterMark: 0,
        maxMessageSize: opts.maxInboundBytes,
        heartbeatInterval: HEARTBEAT_INTERVAL_MS,
        heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      });
      if (opts.curve) {
        router.curveServer = true;
        router.curvePublicKey = opts.curve.publicKey;
        router.curveSecretKey = opts.curve.secretKey;
        if (opts.curve.allowedClientKeys) {
          // not the node id, which need not be unique: two nodes sharing a domain would share (and
          // drop) one key set; nor long, since libzmq takes at most 255 bytes
          zapDomain = `actormq/${++zapDomainCount}`;
          try {
            await zapHandler.register(zapDomain, opts.curve.allowedClientKeys, (ip, key) =>
              node?.connectionRefused("clientKey", address ?? opts.listen!, "client key not allowed", { address: ip, key }),
            );
          } catch (e) {
            router.close();
            throw e;
          }
          router.zapDomain = zapDomain;
        }
      }
      try {
        await bindReleased(router, opts.listen);
      } catch (e) {
        router.close();
        if (zapDomain) zapHandler.unregister(zapDomain);
        throw new MQError(
          "ILLEGAL_ARGUMENT",
          `Cannot listen on ${opts.listen}: ${(e as Error).message}. Choose a free port or tcp://127.0.0.1:*.`,
          { cause: e },
        );
      }
      address = opts.advertise ?? router.lastEndpoint ?? opts.listen;
    }
    node = new ZmqNode(opts, router, address, opts.curveClient);
    node.zapDomain = zapDomain;
    if (router) node.boundPort = portOf(router.lastEndpoint ?? opts.listen!);
    if (router) {
      node.watchConnections(router);
      void node.receiveLoop(router, true);
    }
    return node;
  }

  /**
   * Counts and tells connections the listening socket refused: without this a broker out of file
   * descriptors, or one whose clients hold the wrong CURVE key, says nothing while its clients'
   * connects fail.
   */
  private watchConnections(router: zmq.Router): void {
    const refused = (kind: "accept" | "handshake", e: { address: string; error: Error }) => {
      if (kind === "accept") this.stats.acceptFailures++;
      else this.stats.handshakeFailures++;
      const errno = (e.error as { code?: string }).code;
      this.connectionRefused(kind, e.address, errno && !e.error.message.includes(errno) ? `${errno}: ${e.error.message}` : e.error.message);
    };
    router.events.on("accept:error", (e) => refused("accept", e));
    router.events.on("handshake:error:auth", (e) => {
      // refused by the client-key check, which tells the client's address and key itself
      if (this.zapDomain !== null) this.stats.handshakeFailures++;
      else refused("handshake", e);
    });
    router.events.on("handshake:error:protocol", (e) => refused("handshake", e));
    // a ROUTER does not say which peer a closed connection was, but its monitor counts them
    router.events.on("accept", () => this.stats.connectionsOpen++);
    router.events.on("disconnect", () => {
      if (this.stats.connectionsOpen > 0) this.stats.connectionsOpen--;
    });
    // not handshake:error:other: a connection closed before its handshake ended (a TCP health
    // check, a port scan) is not a configuration to fix, and would be logged every 30 s forever
  }

  /** Sets the function that receives inbound requests. */
  onRequest(handler: RequestHandler): void {
    this.handler = handler;
  }

  /**
   * Sets the function told of each request dropped unserved because it waited its timeout (counted
   * in `expiredDropped`): the servers log it, throttled.
   */
  onRequestExpired(handler: ExpiredRequestHandler): void {
    this.requestExpired = handler;
  }

  /**
   * Sets the function told of each malformed frame (counted in `malformedDropped` or
   * `malformedAnswered`): the servers log it, throttled.
   */
  onMalformedFrame(handler: MalformedFrameHandler): void {
    this.frameMalformed = handler;
  }

  /**
   * Sets the function told of each connection the listening socket could not accept (counted in
   * `acceptFailures`) or whose handshake failed (`handshakeFailures`): the servers log it, throttled.
   */
  onConnectionRefused(handler: RefusedConnectionHandler): void {
    this.connectionRefused = handler;
  }

  /** Sets the function told of each address whose link was closed and forgotten (see {@link PEER_EXPIRY_MS}). */
  onPeerForgotten(handler: (address: string) => void): void {
    this.peerForgotten = handler;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The outgoing link to `address` (one DEALER per address, created on first use). */
  peer(address: string): PeerLink {
    let link = this.peers.get(address);
    if (link) return link;
    if (this.closed) throw new MQError("CLOSED", `The node ${this.nodeId} is closed; start a new one to reach ${address}.`);
    const refusal = this.refusals.get(address);
    if (refusal !== undefined) {
      // refused a moment ago: the retired link, whose asks and sends fail at once (request, post)
      if (monotonicNow() - refusal.at < REFUSED_RETRY_MS) return refusal.link;
      this.refusals.delete(address);
    }
    checkTcpPort(address, "The address", true);
    const sock = new zmq.Dealer({
      linger: 0,
      immediate: true,
      sendHighWaterMark: this.sendHighWaterMark,
      // no receive limit, as on the ROUTER (libzmq's abort when a peer disconnects while reading
      // is stopped at the limit); what comes back is bounded by this node's own asks
      receiveHighWaterMark: 0,
      reconnectInterval: RECONNECT_INTERVAL_MS,
      reconnectMaxInterval: RECONNECT_INTERVAL_MAX_MS,
      // a host that does not answer a connect (powered off, cut off) is retried, and read as
      // failing (peerFailedSince), after this instead of the kernel's ~2 min
      connectTimeout: CONNECT_TIMEOUT_MS,
      heartbeatInterval: HEARTBEAT_INTERVAL_MS,
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
    });
    if (this.curveClient) {
      const sk = this.curveClient.serverKeys;
      const serverKey = typeof sk === "string" ? sk : sk?.[address];
      if (serverKey === undefined) {
        sock.close();
        throw new MQError(
          "AUTH_FAILED",
          `No CURVE server key for ${address}: add it to curveServerKey (the servers' public key, or an object of one per address).`,
        );
      }
      checkCurveKey(serverKey, `curveServerKey["${address}"]`);
      sock.curveServerKey = serverKey;
      sock.curvePublicKey = this.curveClient.publicKey;
      sock.curveSecretKey = this.curveClient.secretKey;
    }
    const peerLink = new PeerLink(address, sock, this);
    if (refusal !== undefined) {
      // lost since the refusal: its first handshake is told as the peer being back, and the loss
      // keeps its time (peerLostAt). Not marked unreachable: an ask on it waits for the handshake,
      // whose refusal it fails with (AUTH_FAILED), rather than failing at once as lost
      peerLink.afterRefusal = true;
      peerLink.unreachableSince = refusal.link.unreachableSince;
      peerLink.lastFailureAt = refusal.at;
    }
    // the events are watched before the connect: zeromq starts its socket monitor on first use of
    // `events`, and what happens before is not told (a refused handshake on a local connection
    // often is over by then, and its asks would wait out their timeouts)
    sock.events.on("disconnect", () => {
      markUnreachable(peerLink);
      this.onPeerDisconnect(peerLink);
    });
    sock.events.on("connect:retry", () => {
      markUnreachable(peerLink);
    });
    sock.events.on("handshake", () => {
      peerLink.closedHandshakes = 0;
      peerLink.handshaken = true;
      if (!peerLink.unreachable && !peerLink.afterRefusal) return;
      peerLink.unreachable = false;
      peerLink.afterRefusal = false;
      const back = this.reconnectListeners.get(address);
      if (back) for (const f of back) f();
    });
    this.watchHandshakes(peerLink, this.curveClient !== undefined);
    try {
      sock.connect(address);
    } catch (e) {
      sock.close();
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Cannot connect to "${address}": ${(e as Error).message}. Use a ZeroMQ endpoint like tcp://127.0.0.1:10911.`,
        { cause: e },
      );
    }
    link = peerLink;
    this.peers.set(address, link);
    void this.receiveLoop(sock, false, link);
    return link;
  }

  /**
   * Retires a link whose peer refuses its handshake, instead of letting libzmq retry it every
   * RECONNECT_INTERVAL_MS while its asks wait out their timeouts (see {@link refuse}).
   */
  private watchHandshakes(link: PeerLink, curve: boolean): void {
    const events = link.socket.events;
    const address = link.address;
    events.on("handshake:error:auth", () =>
      this.refuse(
        link,
        `The server at ${address} refused this client's CURVE key: it is not in the server's allowed client keys. ` +
          `Add this client's public key (${this.curveClient?.publicKey ?? "none"}) to the server's allow-list, or give the client an allowed key pair (curveClient).`,
      ),
    );
    events.on("handshake:error:protocol", () =>
      this.refuse(
        link,
        curve
          ? `The CURVE handshake with ${address} failed: the server does not use CURVE. Connect without curveServerKey, or start the server with curve.`
          : `The handshake with ${address} failed: the server requires CURVE (or is not an actormq server). ${GIVE_SERVER_KEY}.`,
      ),
    );
    events.on("handshake:error:other", () => {
      // a plain link that has completed a handshake reaches a plain server: one that closes
      // connections later is going down or restarting (perhaps behind a proxy)
      if (!curve && link.handshaken) return;
      if (++link.closedHandshakes < CLOSED_HANDSHAKES_REFUSED) return;
      this.refuse(
        link,
        curve
          ? `The CURVE handshake with ${address} failed: the server closed the connection at this client's hello, as a server does whose public key is not curveServerKey. ` +
              "Check curveServerKey (the server's public key, the .pub file of `actormq keygen`); a TCP proxy in front of a server that is down closes connections the same way."
          : `The handshake with ${address} failed: the server closed the connection at this client's greeting, as a server does that requires CURVE. ` +
              `${GIVE_SERVER_KEY}; a TCP proxy in front of a server that is down closes connections the same way.`,
      );
    });
  }

  /**
   * The peer refused the link's handshake: the link is closed and forgotten (libzmq would retry it
   * at once), its asks and queued sends fail now with AUTH_FAILED, its failure listeners are told,
   * and sends to the address fail with the same error for {@link REFUSED_RETRY_MS}.
   */
  private refuse(link: PeerLink, message: string): void {
    if (this.closed || link.retired) return;
    this.refusals.set(link.address, { at: monotonicNow(), message, link });
    if (this.peers.get(link.address) === link) this.peers.delete(link.address);
    link.retired = true;
    link.socket.close();
    takeQueue(link);
    // told with the refusal: an ask waiting on the connection (unlessConnectionLost) fails with it,
    // not as a lost connection
    markUnreachable(link, new MQError("AUTH_FAILED", message));
    this.pending.rejectSentOn(link, Number.POSITIVE_INFINITY, () => new MQError("AUTH_FAILED", message));
  }

  /** AUTH_FAILED for a link retired by {@link refuse}, with the refusal's message. */
  private refusedError(link: PeerLink): MQError {
    const r = this.refusals.get(link.address);
    return new MQError("AUTH_FAILED", r?.message ?? `The server at ${link.address} refused this client's handshake.`);
  }

  /**
   * True while the connection to `address` is lost: it closed (the peer exited or was killed, or
   * missed the ZMTP heartbeats) or could not be made, and no new one has completed its handshake
   * since. False while connected, and for an address this node never sent to or forgot (unreachable
   * and unused for {@link PEER_EXPIRY_MS}). ZeroMQ reconnects by itself, so this turns false as soon
   * as the peer is back. Also true while the address's last link was refused (see {@link refuse}) and
   * no new one has been made: the peer would not have this node. The link made after it reads false
   * until its own handshake fails (an ask on it waits for the handshake).
   */
  peerUnreachable(address: string): boolean {
    return this.linkFor(address)?.unreachable === true;
  }

  /**
   * The link whose state the peer reads are about: the address's link, else the one last refused
   * while no new one has been made ({@link refuse} marked it unreachable, failed at the refusal).
   */
  private linkFor(address: string): PeerLink | undefined {
    return this.peers.get(address) ?? this.refusals.get(address)?.link;
  }

  /**
   * AUTH_FAILED with the refusal's message while `address` reads unreachable because its last link
   * was refused and no new one has been made ({@link peerUnreachable}); undefined otherwise.
   */
  peerRefusal(address: string): MQError | undefined {
    const refusal = this.peers.has(address) ? undefined : this.refusals.get(address);
    return refusal && this.refusedError(refusal.link);
  }

  /**
   * Calls `listener` at the next close of the connection to `address` or failed attempt to make it
   * (an address this node never sent to: never); returns the function that stops it.
   */
  onPeerFailure(address: string, listener: (reason?: MQError) => void): () => void {
    const link = this.peers.get(address);
    if (!link) return () => {};
    link.failureListeners.add(listener);
    return () => link.failureListeners.delete(listener);
  }

  /**
   * Calls `listener` each time a connection to `address` completes its handshake after the last one
   * was lost or could not be made (the peer is back, perhaps restarted and with nothing of what it
   * was told before); returns the function that stops it. Also for an address this node has not
   * sent to yet: it counts from the first send.
   */
  onPeerReconnect(address: string, listener: () => void): () => void {
    let listeners = this.reconnectListeners.get(address);
    if (!listeners) {
      listeners = new Set();
      this.reconnectListeners.set(address, listeners);
    }
    listeners.add(listener);
    const set = listeners;
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.reconnectListeners.get(address) === set) this.reconnectListeners.delete(address);
    };
  }

  /**
   * When the connection to `address` was last lost ({@link monotonicNow} ms), kept after it is made
   * again: the peer may have restarted meanwhile and forgotten what it granted over the old one. 0
   * when it never was, and for an address this node never sent to or forgot. A refused link's loss
   * (or, if it was never lost before, the refusal's time) while no new link has been made, and the
   * link made after it keeps that time.
   */
  peerLostAt(address: string): number {
    return this.linkFor(address)?.unreachableSince ?? 0;
  }

  /**
   * True when the connection to `address` is lost and closed or failed to be made again at or after
   * `since` ({@link monotonicNow} ms): refused now, not just not yet made again. ZeroMQ reconnects on
   * its own timer (up to {@link RECONNECT_INTERVAL_MAX_MS} apart), so a peer that restarted reads
   * unreachable until the next attempt, and this tells the two apart within that interval. A refusal
   * is a failure: while no link has been made after it, true when it came at or after `since`.
   */
  peerFailedSince(address: string, since: number): boolean {
    const link = this.linkFor(address);
    return link?.unreachable === true && link.lastFailureAt >= since;
  }

  /**
   * @internal closes and forgets the DEALERs whose peer has been unreachable for PEER_EXPIRY_MS and
   * that have queued nothing for as long (so no ask on them still waits), and tells the runtime to
   * drop its refs to them. A peer still sent to (a consumer's heartbeats to a killed master that is
   * still in the route) keeps its link, so it keeps reading unreachable. Refusals older than
   * PEER_EXPIRY_MS are forgotten too: the next link to such an address starts afresh. Runs every
   * 10 s; tests pass a later `now` ({@link monotonicNow} ms).
   */
  forgetIdlePeers(now = monotonicNow()): void {
    const since = now - PEER_EXPIRY_MS;
    // not once REFUSED_RETRY_MS is over: the next link to the address would then start afresh, its
    // handshake not told as the peer being back and the loss's time gone, depending on whether this
    // check ran between the refusal's second and that link's first ask
    for (const [address, r] of this.refusals) if (r.at <= since) this.refusals.delete(address);
    for (const [address, link] of this.peers) {
      if (!link.unreachable || link.unreachableSince > since || link.lastDeadline > since || link.queued > 0 || link.flushing) continue;
      this.peers.delete(address);
      link.retired = true;
      link.socket.close();
      this.peerForgotten(address);
    }
  }

  /**
   * Sends an ask; resolves with the reply or rejects with MQError (TIMEOUT, SYSTEM_BUSY, CLOSED, remote
   * code). With `serveLate` the receiver serves it however long it waited (see onRequestFrame).
   */
  request<T = Record<string, unknown>>(
    link: Link,
    target: string,
    event: { type: string },
    body: BodyParts,
    timeoutMs: number,
    serveLate = false,
  ): Promise<ReplyMessage<T>> {
    if (this.closed) return Promise.reject(this.closedError());
    if (link.retired) {
      link = this.peer((link as PeerLink).address);
      // refused a moment ago: fails now, as the asks on the refused link did
      if (link.retired) return Promise.reject(this.refusedError(link as PeerLink));
    }
    if (link.queued >= this.sendHighWaterMark) return Promise.reject(this.busyError(link));
    const seq = link instanceof PeerLink ? ++link.askSeq : 0;
    const { id, deadline, promise } = this.pending.add<T>(timeoutMs, event.type, target, link, seq);
    try {
      this.enqueueRequest(link, id, target, event, body, timeoutMs, deadline, serveLate);
    } catch (e) {
      // nothing was queued: the ask fails now instead of timing out later
      this.pending.reject(id, link, e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `Sending ${event.type} failed: ${e}`));
    }
    return promise;
  }

  /** One-way send; throws MQError SYSTEM_BUSY past the queue bound, CLOSED after close. */
  post(link: Link, target: string, event: { type: string }, body: BodyParts): void {
    if (this.closed) throw this.closedError();
    if (link.retired) {
      link = this.peer((link as PeerLink).address);
      if (link.retired) throw this.refusedError(link as PeerLink);
    }
    if (link.queued >= this.sendHighWaterMark) throw this.busyError(link);
    this.enqueueRequest(link, 0, target, event, body, this.requestTimeoutMs, monotonicNow() + this.requestTimeoutMs);
  }

  /** Replies to request `corrId` that came in on `link`. */
  reply(link: Link, corrId: number, fields: object | undefined, body: BodyParts): void {
    this.enqueueReply(link, corrId, ResponseCode.SUCCESS, fields ?? {}, body);
  }

  /** Replies with an error to request `corrId` that came in on `link`. */
  replyError(link: Link, corrId: number, err: MQError): void {
    this.enqueueReply(link, corrId, responseCodeOf(err.code), err.toWire(), undefined);
  }

  /** Queues a request whose send-queue deadline ({@link monotonicNow}) is `deadline`: an ask's own. */
  private enqueueRequest(
    link: Link,
    corrId: number,
    target: string,
    event: { type: string },
    body: BodyParts,
    timeoutMs: number,
    deadline: number,
    serveLate = false,
  ): void {
    const bl = bodyLength(body);
    // the deadline is on this process's monotonic clock, and deadline − timeoutMs is the send stamp a
    // listening receiver estimates the request's wait from (see RouterLink.waitedMs); the receiver
    // never compares it with its own clock as it is
    const header = encodeHeader(
      // a timeout of 0 tells the receiver not to drop the request however late it is
      [KIND_REQUEST, requestCodeOf(event.type), corrId, target, this.nodeId, event, deadline, bl, serveLate ? 0 : timeoutMs],
      event.type,
      target,
    );
    this.enqueue(link, header, body, bl, deadline);
  }

  private enqueueReply(link: Link, corrId: number, code: number, payload: object, body: BodyParts): void {
    // a forgotten link's connection, which the request came in on, is gone
    if (this.closed || corrId <= 0 || link.retired) return;
    // replies get twice the bound: dropping them only turns a served request into a timeout
    if (link.queued >= 2 * this.sendHighWaterMark) {
      this.stats.sendFailures++;
      return;
    }
    const bl = bodyLength(body);
    const header = encodeHeader([KIND_REPLY, corrId, code, payload, bl], null, link);
    // a reply the asker's side cannot take within the request timeout is useless to it: the ask has
    // timed out (only a DEALER's send waits; a ROUTER's never does)
    this.enqueue(link, header, body, bl, link instanceof PeerLink ? monotonicNow() + this.requestTimeoutMs : 0);
  }

  /** Queues one frame on `link`; sends the link's batch at once past EAGER_FLUSH_BYTES, else at the end of the tick. */
  private enqueue(link: Link, header: Buffer, body: BodyParts, bodyBytes: number, deadline: number): void {
    const frameBytes = FRAME_PREFIX_BYTES + header.length + Math.max(bodyBytes, 0);
    // a ROUTER's queue is sent within the tick, so it never holds more than one frame over the
    // batch bound: sending what it holds before a frame that would take it past keeps it so
    if (link.bytes + frameBytes > MAX_BATCH_BYTES && link.queued > 0 && link instanceof RouterLink && this.router && !this.closed)
      this.sendRouterBatch(this.router, link);
    const before = link.parts.length;
    link.parts.push(framePrefix(header.length), header);
    pushBody(link.parts, body);
    if (link instanceof PeerLink) {
      link.frameMeta.push(deadline, link.parts.length - before, link.askSeq);
      link.lastDeadline = deadline;
    }
    link.bytes += frameBytes;
    link.queued++;
    if (link.bytes < EAGER_FLUSH_BYTES) this.schedule(link);
    else if (link instanceof PeerLink) {
      if (!link.flushing) void this.pumpPeer(link); // a DEALER already sending picks them up in its loop
    } else if (this.router && !this.closed) this.sendRouterBatch(this.router, link as RouterLink);
  }

  // Frames queued in one tick go out in a microtask as one multipart send per socket. Flushing
  // in the check phase (setImmediate) instead coalesced more per send but measured worse at
  // W3 (e2e p50 0.44-0.47 -> 0.50 ms): the held pull's answer then waits behind the loop turn.
  private schedule(link: Link): void {
    if (link instanceof PeerLink) {
      if (!link.flushing && !link.scheduled) {
        link.scheduled = true;
        queueMicrotask(link.flush);
      }
    } else {
      const rl = link as RouterLink;
      if (!rl.dirty) {
        rl.dirty = true;
        this.routerDirty.push(rl);
      }
      if (!this.routerScheduled) {
        this.routerScheduled = true;
        queueMicrotask(this.flushRouter);
      }
    }
  }

  /**
   * @internal sends everything queued on a DEALER link, batch after batch. A DEALER holds a batch
   * while its peer is unreachable (`immediate`): the send waits at most until the batch's earliest
   * deadline; then the frames whose deadline passed are dropped (their asks time out on this side)
   * and the rest wait again. Staleness is judged here, on the sender's clock; a listening receiver
   * judges only the wait beyond its link's quickest request (RouterLink.waitedMs), never its clock
   * against the sender's: hosts whose clocks differ by more than a timeout must not drop each
   * other's requests.
   */
  async pumpPeer(link: PeerLink): Promise<void> {
    link.scheduled = false;
    if (link.flushing) return;
    link.flushing = true;
    try {
      while (link.queued > 0 && !this.closed) {
        const meta = link.frameMeta;
        let earliest = Infinity;
        for (let i = 0; i < meta.length; i += 3) if (meta[i]! < earliest) earliest = meta[i]!;
        const now = monotonicNow();
        if (earliest <= now) {
          // frames that expired while an earlier batch waited for the peer
          const parts = link.parts;
          takeQueue(link);
          this.requeueUnexpired(link, parts, meta, now);
          continue;
        }
        const wait = Math.min(MAX_SEND_WAIT_MS, Math.ceil(earliest - now));
        if (link.sendTimeout !== wait) {
          link.socket.sendTimeout = wait;
          link.sendTimeout = wait;
        }
        const parts = link.parts;
        const frame = takeBatch(link);
        // frames past MAX_BATCH_BYTES stay queued for the next round
        const taken = meta.length - link.frameMeta.length;
        const upTo = meta[taken - 1]!;
        try {
          await link.socket.send(frame);
          link.sentSeq = upTo;
        } catch (e) {
          // retired: refused at its handshake, its asks failed (see refuse)
          if (this.closed || link.retired) return;
          if ((e as { code?: string }).code === "EAGAIN") this.requeueUnexpired(link, parts, meta, monotonicNow(), taken);
          else this.stats.sendFailures++;
        }
      }
    } finally {
      link.flushing = false;
    }
  }

  /**
   * A DEALER's connection closed (the peer exited or restarted): the asks the socket had taken went
   * with it, and their replies cannot come, so they fail now rather than at their timeout (a held
   * pull waits up to 30 s), as RocketMQ fails a closed channel's requests. Asks the socket has not
   * taken yet go out once it reconnects: failing those could send a request twice.
   */
  private onPeerDisconnect(link: PeerLink): void {
    if (this.closed) return;
    this.pending.rejectSentOn(
      link,
      link.sentSeq,
      (type, target) =>
        new MQError(
          "TIMEOUT",
          `The connection to ${link.address} closed before the reply to ${type} from actor ${target} came (the peer exited or restarted): retry.`,
        ),
    );
  }

  /**
   * Puts the frames of an unsent batch (the first `metaEnd` entries of `meta`) whose deadline has
   * not passed back in front of the link's queue.
   */
  private requeueUnexpired(link: PeerLink, parts: Uint8Array[], meta: number[], now: number, metaEnd = meta.length): void {
    const keptParts: Uint8Array[] = [];
    const keptMeta: number[] = [];
    let p = 0;
    for (let i = 0; i < metaEnd; i += 3) {
      const n = meta[i + 1]!;
      if (meta[i]! > now) {
        for (let k = 0; k < n; k++) {
          keptParts.push(parts[p + k]!);
          link.bytes += parts[p + k]!.byteLength;
        }
        keptMeta.push(meta[i]!, n, meta[i + 2]!);
      } else {
        this.stats.staleDropped++;
      }
      p += n;
    }
    link.parts = keptParts.concat(link.parts);
    link.frameMeta = keptMeta.concat(link.frameMeta);
    link.queued += keptMeta.length / 3;
  }

  /**
   * Sends every dirty router link's batch. The ROUTER has sendTimeout 0, so zeromq sends
   * synchronously (the returned promise is already settled): no await per link, one pass.
   */
  private pumpRouter(): void {
    this.routerScheduled = false;
    const router = this.router;
    if (!router) return;
    const links = this.routerDirty;
    this.routerDirty = [];
    for (let i = 0; i < links.length && !this.closed; i++) {
      const link = links[i]!;
      link.dirty = false;
      if (link.queued > 0) this.sendRouterBatch(router, link); // 0: sent early by enqueue
    }
  }

  /** Sends everything queued on a router link as one frame (sendTimeout 0: synchronous; see enqueue for its size). */
  private sendRouterBatch(router: zmq.Router, link: RouterLink): void {
    this.routerSends++;
    try {
      router.send([link.rid, takeBatch(link)]).then(undefined, this.onRouterSendError);
    } catch {
      // what could not be sent is dropped (its asks time out): left queued, it would fail every later send to this client
      takeQueue(link);
      this.onRouterSendError();
    }
  }

  // peer gone (EHOSTUNREACH) or its pipe full (EAGAIN): its asks time out
  private readonly onRouterSendError = (): void => {
    if (!this.closed) this.stats.sendFailures++;
  };

  private async receiveLoop(sock: zmq.Router | zmq.Dealer, isRouter: boolean, peerLink?: PeerLink): Promise<void> {
    for (;;) {
      let msg: Buffer[];
      try {
        msg = await sock.receive();
      } catch {
        if (this.closed || sock.closed) return;
        continue;
      }
      if (isRouter) {
        const rid = msg[0];
        if (rid === undefined || msg.length < 2) {
          this.dropMalformed(null, "a message without a routing id and a frame");
          continue;
        }
        const link = this.routerLink(rid);
        // one clock read per message: its requests were all received now
        const now = monotonicNow();
        for (let i = 1; i < msg.length; i++) this.receiveBatch(link, msg[i]!, now);
      } else {
        for (let i = 0; i < msg.length; i++) this.onBatch(peerLink!, msg[i]!, 0);
      }
    }
  }

  /**
   * A batch from a ROUTER peer: served at once (up to SERVE_QUANTUM_BYTES) when no other waits, else
   * queued on its link and served by {@link serveInbound}.
   */
  private receiveBatch(link: RouterLink, buf: Buffer, now: number): void {
    if (this.waitingLinks.length === 0) {
      const end = this.onBatch(link, buf, now, 0, SERVE_QUANTUM_BYTES);
      if (end >= buf.length) return;
      link.inboxOff = end;
    }
    link.inbox.push(buf);
    if (!link.waiting) {
      link.waiting = true;
      link.deficit = 0;
      this.waitingLinks.push(link);
    }
    if (!this.serveScheduled) {
      this.serveScheduled = true;
      setImmediate(this.serveInbound);
    }
  }

  /**
   * Serves waiting requests in rounds, SERVE_QUANTUM_BYTES per link per round (deficit round robin:
   * each link gets the same bytes of service whatever the size of its batches), at most
   * SERVE_TURN_BYTES per loop turn; then yields, so that reads move the backlog out of libzmq's
   * pipes (served one message per pipe in turn) into the links' inboxes.
   */
  private readonly serveInbound = (): void => {
    this.serveScheduled = false;
    if (this.closed) return;
    const now = monotonicNow();
    let budget = SERVE_TURN_BYTES;
    while (budget > 0 && this.waitingLinks.length > 0) {
      const round = this.waitingLinks;
      this.waitingLinks = [];
      for (const link of round) {
        link.deficit += SERVE_QUANTUM_BYTES;
        while (link.inboxHead < link.inbox.length && link.deficit > 0) {
          const buf = link.inbox[link.inboxHead]!;
          const start = link.inboxOff;
          const end = this.onBatch(link, buf, now, start, start + link.deficit);
          link.deficit -= end - start;
          budget -= end - start;
          if (end < buf.length) link.inboxOff = end;
          else {
            link.inbox[link.inboxHead++] = EMPTY;
            link.inboxOff = 0;
          }
        }
        if (link.inboxHead < link.inbox.length) this.waitingLinks.push(link);
        else {
          link.inbox = [];
          link.inboxHead = 0;
          link.waiting = false;
          link.deficit = 0;
        }
      }
    }
    if (this.waitingLinks.length > 0 && !this.closed) {
      this.serveScheduled = true;
      setImmediate(this.serveInbound);
    }
  };

  private routerLink(rid: Buffer): RouterLink {
    const key = rid.toString("hex");
    let link = this.routerLinks.get(key);
    if (!link) {
      if (this.routerLinks.size >= MAX_ROUTER_LINKS) {
        const oldest = this.routerLinks.keys().next().value;
        if (oldest !== undefined) this.routerLinks.delete(oldest);
      }
      link = new RouterLink(Buffer.from(rid), key);
      this.routerLinks.set(key, link);
    }
    return link;
  }

  /**
   * Handles the frames of `buf` from offset `from`, starting frames while the offset is below
   * `limit`; returns the offset reached (`buf.length` when done or the rest was dropped as malformed).
   * `now`: when a ROUTER received or served the batch ({@link monotonicNow}); 0 on a DEALER, whose
   * requests are not judged by age.
   */
  private onBatch(link: Link, buf: Buffer, now: number, from = 0, limit = Number.POSITIVE_INFINITY): number {
    const n = buf.length;
    let off = from;
    while (off < n && off < limit) {
      if (off + FRAME_PREFIX_BYTES > n) {
        this.dropMalformed(link, "a frame shorter than its 4-byte header length");
        return n;
      }
      const hl = buf.readUInt32LE(off);
      const hs = off + FRAME_PREFIX_BYTES;
      if (hl === 0 || hl > MAX_HEADER_BYTES || hs + hl > n) {
        // frame boundaries are lost: drop the rest of the batch
        this.dropMalformed(link, "a header length of 0, over 16 MiB or past the end of the message");
        return n;
      }
      let h: unknown;
      try {
        h = decode(buf.subarray(hs, hs + hl));
      } catch {
        h = undefined;
      }
      off = hs + hl;
      if (!Array.isArray(h)) {
        this.dropMalformed(link, "a header that is not a msgpack array");
        return n;
      }
      const kind = h[0];
      const bl = kind === KIND_REQUEST ? h[7] : h[4];
      const replyable = kind === KIND_REQUEST && Number.isSafeInteger(h[2]) && h[2] > 0;
      if (!Number.isSafeInteger(bl) || bl < -1 || off + Math.max(bl, 0) > n) {
        this.malformed(link, replyable ? h[2] : 0, "body length is missing or exceeds the bytes received");
        return n;
      }
      const body = bl >= 0 ? buf.subarray(off, off + bl) : undefined;
      if (bl > 0) off += bl;
      if (kind === KIND_REQUEST) this.onRequestFrame(link, h, body, now);
      else if (kind === KIND_REPLY) this.onReplyFrame(link, h, body);
      else this.dropMalformed(link, "a header of unknown kind");
    }
    return off;
  }

  private onRequestFrame(link: Link, h: unknown[], body: Buffer | undefined, now: number): void {
    const code = h[1];
    const corrId = h[2];
    const target = h[3];
    const sender = h[4];
    const event = h[5];
    const deadline = h[6];
    if (!Number.isSafeInteger(corrId) || (corrId as number) < 0) {
      this.dropMalformed(link, "a request whose correlation id is not an integer >= 0");
      return;
    }
    const id = corrId as number;
    if (
      typeof code !== "number" ||
      typeof target !== "string" ||
      typeof sender !== "string" ||
      typeof deadline !== "number" ||
      event === null ||
      typeof event !== "object" ||
      Array.isArray(event) ||
      Buffer.isBuffer(event) ||
      typeof (event as { type?: unknown }).type !== "string"
    ) {
      this.malformed(
        link,
        id,
        "header fields have wrong types (want code:number, target:string, sender:string, event:{type:string}, deadline:number)",
      );
      return;
    }
    const type = (event as { type: string }).type;
    if (!isKnownRequestCode(code) || (code !== RequestCode.ACTOR_EVENT && requestCodeOf(type) !== code)) {
      this.stats.malformedAnswered++;
      this.frameMalformed(link, "a request code this node does not support (answered REQUEST_CODE_NOT_SUPPORTED)");
      if (id > 0)
        this.replyError(
          link,
          id,
          new MQError("REQUEST_CODE_NOT_SUPPORTED", `Request code ${code} (${type.slice(0, 64)}) is not supported by node ${this.nodeId}.`),
        );
      return;
    }
    this.stats.requestsIn++;
    if (link.peerNodeId !== sender) link.peerNodeId = sender;
    // An ask that waited (in the network, the socket buffers, this node's backlog) as long as its
    // timeout has been given up by its asker, which has failed it with TIMEOUT and may have sent it
    // again: serving it is work for nobody, and under overload such work is what keeps the backlog
    // growing (RocketMQ's broker drops requests that waited in its queue, [TIMEOUT_CLEAN_QUEUE]).
    // It is not answered: the asker would throw the late reply away. A peer that sends no timeout
    // (h[8]: older versions, or 0 for an ask sent with serveLate) is served however late; one-way
    // sends have no asker to give up.
    const timeoutMs = h[8];
    // when the asker gives up, on this node's clock: its wait so far taken from its timeout
    let answerBy = Number.POSITIVE_INFINITY;
    if (typeof timeoutMs === "number" && timeoutMs > 0 && link instanceof RouterLink) {
      if (id === 0) link.waitedMs(deadline - timeoutMs, now);
      else {
        const waited = link.expiredWait(deadline - timeoutMs, now, timeoutMs);
        if (waited >= 0) {
          this.stats.expiredDropped++;
          this.requestExpired(link, type, waited, timeoutMs);
          return;
        }
        answerBy = now - link.servedWait + timeoutMs;
      }
    }
    try {
      this.handler(link, code, id, target, sender, event as Record<string, unknown> & { type: string }, body, answerBy);
    } catch (e) {
      if (id > 0)
        this.replyError(
          link,
          id,
          e instanceof MQError ? e : new MQError("SYSTEM_ERROR", `Delivering ${type} to ${target} failed: ${(e as Error)?.message ?? e}`),
        );
    }
  }

  private onReplyFrame(link: Link, h: unknown[], body: Buffer | undefined): void {
    const corrId = h[1];
    const rcode = h[2];
    const payload = h[3];
    if (typeof corrId !== "number" || typeof rcode !== "number" || payload === null || typeof payload !== "object") {
      this.dropMalformed(link, "a reply whose header fields have wrong types");
      return;
    }
    this.stats.repliesIn++;
    // only the link the ask went out on may answer it: ids are sequential, any peer could guess them
    const outcome =
      rcode === ResponseCode.SUCCESS
        ? this.pending.resolve(corrId, link, body === undefined ? { fields: payload } : { fields: payload, body })
        : this.pending.reject(corrId, link, MQError.fromWire(payload as { code?: unknown; message?: unknown }));
    if (outcome === "late") this.stats.lateReplies++;
    else if (outcome === "foreign") this.stats.foreignReplies++;
  }

  private malformed(link: Link, corrId: number, why: string): void {
    if (corrId > 0) {
      this.stats.malformedAnswered++;
      this.frameMalformed(link, `a frame whose ${why} (answered MALFORMED)`);
      this.replyError(link, corrId, new MQError("MALFORMED", `Malformed request frame: ${why}. Check the sender's actormq version.`));
    } else {
      this.dropMalformed(link, `a frame whose ${why}`);
    }
  }

  /** Counts a malformed frame nobody is answered for, and tells the hook (the servers log it). */
  private dropMalformed(link: Link | null, why: string): void {
    this.stats.malformedDropped++;
    this.frameMalformed(link, why);
  }

  private closedError(): MQError {
    return new MQError("CLOSED", `The node ${this.nodeId} is closed; start a new node to send.`);
  }

  private busyError(link: Link): MQError {
    return new MQError(
      "SYSTEM_BUSY",
      `The send queue to ${link.description} holds ${link.queued} frames (sendHighWaterMark ${this.sendHighWaterMark}); slow down or retry later.`,
    );
  }

  /**
   * Lets the replies to work already done reach their clients before {@link close}, which would
   * drop them: a ROUTER closed with linger 0 drops what its pipes hold, and a client's DEALER
   * (`immediate`) drops the replies it received but had not read when the connection closes. Waits
   * until the ROUTER has sent nothing for REPLY_QUIET_MS (the replies of finished work are queued
   * within a loop turn; the clients read what was sent meanwhile), at most `graceMs`, then gives
   * the ROUTER a linger of `graceMs` for what it still holds.
   */
  async flushReplies(graceMs: number): Promise<void> {
    const until = monotonicNow() + graceMs;
    for (;;) {
      const router = this.router;
      if (this.closed || !router || router.closed) return;
      const sent = this.routerSends;
      await new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, Math.min(REPLY_QUIET_MS, until - monotonicNow()))));
      if (this.closed || router.closed) return;
      this.pumpRouter();
      if (this.routerSends === sent || monotonicNow() >= until) {
        router.linger = graceMs;
        return;
      }
    }
  }

  /**
   * Before a {@link close} that must not drop the one-way sends it queued (a producer's
   * `sendOneway` resolves once its frame is queued): waits, at most `timeoutMs`, until every DEALER
   * that is not known unreachable has handed its queue to its socket (a connection still being
   * made included) or dropped the frames past their deadline, then gives the sockets that sent something meanwhile a linger of
   * what is left of `timeoutMs`, as a DEALER closed with linger 0 drops what it took but has not
   * written yet.
   */
  async drainPeers(timeoutMs: number): Promise<void> {
    const until = monotonicNow() + timeoutMs;
    const sending = new Set<PeerLink>();
    for (;;) {
      let busy = false;
      // a link whose connection is lost or refused holds its frames until the peer is back: not waited for
      for (const link of this.peers.values())
        if ((link.queued > 0 || link.flushing) && !link.unreachable) {
          busy = true;
          sending.add(link);
        }
      const left = until - monotonicNow();
      if (!busy || left <= 0 || this.closed) break;
      await new Promise<void>((resolve) => setTimeout(resolve, Math.min(DRAIN_POLL_MS, left)));
    }
    const linger = Math.max(0, Math.ceil(until - monotonicNow()));
    if (this.closed || linger === 0) return;
    for (const link of sending) if (!link.socket.closed) link.socket.linger = linger;
  }

  /** Closes every socket (linger 0 unless {@link flushReplies} set one), fails pending asks with CLOSED, stops timers. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.expiryTimer);
    this.pending.rejectAll(new MQError("CLOSED", `The node ${this.nodeId} was closed while the request was waiting for its reply.`));
    for (const link of this.peers.values()) link.socket.close();
    this.peers.clear();
    // no unbind before close: libzmq 4.3.5 can abort (pipe.cpp:355) when a peer's pipe is torn down
    // by an unbind racing its disconnect; the port is free shortly after close
    if (this.router) {
      this.router.close();
      if (this.boundPort !== null) {
        const now = monotonicNow();
        for (const [port, at] of releasedPorts) if (now - at >= RELEASED_PORT_WAIT_MS) releasedPorts.delete(port);
        releasedPorts.set(this.boundPort, now);
      }
    }
    this.routerLinks.clear();
    this.waitingLinks = [];
    if (this.zapDomain) zapHandler.unregister(this.zapDomain);
  }
}

/**
 * Takes what is queued on a link as one batch frame: everything, or on a DEALER holding more than
 * MAX_BATCH_BYTES the whole frames that fit in it (at least one), leaving the rest queued.
 */
function takeBatch(link: Link): Buffer {
  if (link.bytes > MAX_BATCH_BYTES && link.queued > 1 && link instanceof PeerLink) return takeBatchPrefix(link);
  const frame = Buffer.concat(link.parts, link.bytes);
  takeQueue(link);
  return frame;
}

/** The leading frames of a DEALER's queue that fit in MAX_BATCH_BYTES (at least one), as one batch frame. */
function takeBatchPrefix(link: PeerLink): Buffer {
  const parts = link.parts;
  const meta = link.frameMeta;
  let bytes = 0;
  let p = 0;
  let m = 0;
  while (m < meta.length) {
    const n = meta[m + 1]!;
    let frameBytes = 0;
    for (let k = 0; k < n; k++) frameBytes += parts[p + k]!.byteLength;
    if (m > 0 && bytes + frameBytes > MAX_BATCH_BYTES) break;
    bytes += frameBytes;
    p += n;
    m += 3;
  }
  // new arrays for the rest: the caller keeps the taken ones to requeue them if the send times out
  const frame = Buffer.concat(parts.slice(0, p), bytes);
  link.parts = parts.slice(p);
  link.frameMeta = meta.slice(m);
  link.bytes -= bytes;
  link.queued -= m / 3;
  return frame;
}

/** The port of a tcp endpoint: what follows its last ':'. */
function portOf(endpoint: string): string {
  return endpoint.slice(endpoint.lastIndexOf(":") + 1);
}

/**
 * Binds `endpoint`, trying again for a moment when it is refused EADDRINUSE and its port was
 * released by a node of this process less than RELEASED_PORT_WAIT_MS ago (see {@link releasedPorts}):
 * a port another socket holds is refused at once.
 */
async function bindReleased(router: zmq.Router, endpoint: string): Promise<void> {
  for (;;) {
    try {
      await router.bind(endpoint);
      return;
    } catch (e) {
      const releasedAt = releasedPorts.get(portOf(endpoint));
      if (
        (e as { code?: string }).code !== "EADDRINUSE" ||
        releasedAt === undefined ||
        monotonicNow() - releasedAt >= RELEASED_PORT_WAIT_MS
      )
        throw e;
      await new Promise((resolve) => setTimeout(resolve, RELEASED_PORT_RETRY_MS));
    }
  }
}

/** Marks a link unreachable; `unreachableSince` keeps the first of a loss's disconnect and retries. */
function markUnreachable(link: PeerLink, reason?: MQError): void {
  link.lastFailureAt = monotonicNow();
  for (const f of link.failureListeners) f(reason);
  if (link.unreachable) return;
  link.unreachable = true;
  // a link made after a refusal that has not completed a handshake goes on with that loss: a peer
  // refusing every new link stays lost since the first refusal
  if (!link.afterRefusal || link.unreachableSince === 0) link.unreachableSince = monotonicNow();
}

/** Empties a link's queue (the caller holds on to what it needs of it). */
function takeQueue(link: Link): void {
  link.parts = [];
  if (link instanceof PeerLink) link.frameMeta = [];
  link.bytes = 0;
  link.queued = 0;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
