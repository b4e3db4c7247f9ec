/**
 * CurveZMQ support: option shapes, Z85 key decoding and the ZAP handler that restricts a
 * listening node to a set of allowed client public keys.
 *
 * zeromq v6 ships no ZAP handler, and libzmq accepts every CURVE client that knows the server key
 * unless a handler bound at `inproc://zeromq.zap.01` in the same context says otherwise. One
 * handler serves the whole process (only one socket can bind that endpoint); each listening node
 * registers its own ZAP domain with its allowed keys. While the handler is bound, libzmq asks it
 * about every CURVE handshake of the process, also on sockets without a domain (nodes that allow
 * any client knowing the server key).
 */
import { createPrivateKey, createPublicKey } from "node:crypto";
import * as zmq from "zeromq";
import { MQError } from "./protocol.ts";

/** Server side of CURVE (the listening ROUTER). Keys are Z85 strings as `zmq.curveKeyPair()` gives them. */
export interface CurveServerOptions {
  publicKey: string;
  secretKey: string;
  /** When given, only clients presenting one of these public keys may connect. */
  allowedClientKeys?: string[];
}

/** Client side of CURVE (outgoing DEALERs). */
export interface CurveClientOptions {
  publicKey: string;
  secretKey: string;
  /** The server public key for every address, or one key per address. */
  serverKeys?: Record<string, string> | string;
}

/** A fresh CURVE key pair (Z85). */
export function curveKeyPair(): { publicKey: string; secretKey: string } {
  return zmq.curveKeyPair();
}

const Z85_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
const Z85_INDEX = new Map<string, number>([...Z85_CHARS].map((c, i) => [c, i]));

/**
 * Decodes a Z85 string (length a multiple of 5) to bytes. The errors never quote the string: it may
 * be a secret key.
 */
export function z85Decode(s: string): Buffer {
  if (s.length % 5 !== 0)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `A ${s.length}-character string is not a Z85 key: its length must be a multiple of 5 (CURVE keys are 40 characters).`,
    );
  const out = Buffer.alloc((s.length / 5) * 4);
  for (let i = 0, o = 0; i < s.length; i += 5, o += 4) {
    let v = 0;
    for (let j = 0; j < 5; j++) {
      const d = Z85_INDEX.get(s[i + j]!);
      if (d === undefined) throw new MQError("ILLEGAL_ARGUMENT", `Not a Z85 key: its character ${i + j + 1} is not in the Z85 alphabet.`);
      v = v * 85 + d;
    }
    // "#####" is 85^5 - 1, past 32 bits: no encoder writes a group above 0xffffffff
    if (v > 0xffffffff)
      throw new MQError("ILLEGAL_ARGUMENT", `Not a Z85 key: its characters ${i + 1} to ${i + 5} encode more than 32 bits.`);
    out.writeUInt32BE(v, o);
  }
  return out;
}

/** Encodes bytes (length a multiple of 4) as Z85, as ZeroMQ prints keys. */
export function z85Encode(b: Uint8Array): string {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  let s = "";
  for (let i = 0; i + 4 <= buf.length; i += 4) {
    let v = buf.readUInt32BE(i);
    const group: string[] = [];
    for (let j = 0; j < 5; j++) {
      group.push(Z85_CHARS[v % 85]!);
      v = Math.floor(v / 85);
    }
    s += group.reverse().join("");
  }
  return s;
}

/** DER (PKCS#8) prefix of a raw 32-byte X25519 private key. */
const X25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b656e04220420", "hex");

/**
 * The CURVE public key of a Z85 secret key (libzmq's zmq_curve_public, which zeromq v6 does not
 * expose): CurveZMQ keys are X25519 keys, so node's crypto derives it.
 */
export function curvePublicKeyOf(secretKey: string): string {
  const raw = z85Decode(secretKey);
  if (raw.length !== 32) throw new MQError("ILLEGAL_ARGUMENT", "A CURVE secret key is 40 Z85 characters (32 bytes).");
  const priv = createPrivateKey({ key: Buffer.concat([X25519_PKCS8_PREFIX, raw]), format: "der", type: "pkcs8" });
  const spki = createPublicKey(priv).export({ format: "der", type: "spki" });
  return z85Encode(spki.subarray(spki.length - 32));
}

/** Checks a Z85 CURVE key and throws ILLEGAL_ARGUMENT when it is not one. */
export function checkCurveKey(key: unknown, what: string): asserts key is string {
  if (typeof key !== "string" || key.length !== 40) {
    throw new MQError("ILLEGAL_ARGUMENT", `${what} must be a 40-character Z85 CURVE key (use curveKeyPair()).`);
  }
  try {
    z85Decode(key);
  } catch (e) {
    throw new MQError("ILLEGAL_ARGUMENT", `${what}: ${(e as Error).message} Use a key as curveKeyPair() or \`actormq keygen\` make them.`);
  }
}

const ZAP_ENDPOINT = "inproc://zeromq.zap.01";
/** Binds of the ZAP endpoint tried while it is in use, and the pause between them. */
const ZAP_BIND_ATTEMPTS = 20;
const ZAP_BIND_RETRY_MS = 10;

/** Told of a client a ZAP domain refused: its IP address and its public key (Z85). */
export type ZapRefusalListener = (clientAddress: string, clientKey: string) => void;

interface ZapDomain {
  /** allowed client keys, hex of the 32 raw bytes */
  keys: Set<string>;
  onRefused: ZapRefusalListener | undefined;
}

/** The process-wide ZAP handler: domain -> allowed client keys. */
class ZapHandler {
  private readonly domains = new Map<string, ZapDomain>();
  private socket: zmq.Reply | null = null;
  /** the bind in progress or done: nodes starting at the same time share it (one socket can bind) */
  private bound: Promise<void> | null = null;
  /** Handshakes refused, for tests and stats. */
  rejected = 0;

  /**
   * Adds a domain and its allowed keys, binding the handler's socket on first use. Throws
   * MQError SYSTEM_ERROR, with the domain removed again, when the endpoint cannot be bound.
   */
  async register(domain: string, allowedKeys: string[], onRefused?: ZapRefusalListener): Promise<void> {
    const entry: ZapDomain = { keys: new Set(allowedKeys.map((k) => z85Decode(k).toString("hex"))), onRefused };
    this.domains.set(domain, entry);
    if (this.bound === null) this.bound = this.bind();
    try {
      await this.bound;
    } catch (e) {
      if (this.domains.get(domain) === entry) this.domains.delete(domain);
      throw new MQError(
        "SYSTEM_ERROR",
        `Cannot start the CURVE client-key check: binding ${ZAP_ENDPOINT} failed (${(e as Error).message}); another ZAP handler in this process may hold it.`,
        { cause: e },
      );
    }
  }

  unregister(domain: string): void {
    this.domains.delete(domain);
    this.closeIfUnused();
  }

  private closeIfUnused(): void {
    if (this.domains.size === 0 && this.socket !== null) {
      this.socket.close();
      this.socket = null;
      this.bound = null;
    }
  }

  private async bind(): Promise<void> {
    const sock = new zmq.Reply({ linger: 0 });
    for (let attempt = 1; ; attempt++) {
      try {
        await sock.bind(ZAP_ENDPOINT);
        break;
      } catch (e) {
        // the socket closed when the last listening node closed frees the endpoint a moment later
        if ((e as { code?: string }).code === "EADDRINUSE" && attempt < ZAP_BIND_ATTEMPTS) {
          await new Promise((r) => setTimeout(r, ZAP_BIND_RETRY_MS));
          continue;
        }
        sock.close();
        this.bound = null; // a later start tries again
        throw e;
      }
    }
    this.socket = sock;
    void this.serve(sock);
    // every node that registered gave up while the bind was under way
    this.closeIfUnused();
  }

  private async serve(sock: zmq.Reply): Promise<void> {
    for (;;) {
      let req: Buffer[];
      try {
        req = await sock.receive();
      } catch {
        return;
      }
      // ZAP request: version, request id, domain, address, identity, mechanism, credentials...
      const requestId = req[1] ?? Buffer.alloc(0);
      const domain = req[2]?.toString() ?? "";
      const mechanism = req[5]?.toString() ?? "";
      const entry = this.domains.get(domain);
      let ok = true;
      if (entry !== undefined) {
        ok = mechanism === "CURVE" && req[6] !== undefined && entry.keys.has(req[6].toString("hex"));
      } else if (domain !== "" && mechanism === "CURVE") {
        // a socket that restricts its clients but whose keys are gone (its node closed or failed to
        // start): refuse rather than let everyone in
        ok = false;
      }
      if (!ok) {
        this.rejected++;
        const key = req[6]?.length === 32 ? z85Encode(req[6]) : `(${mechanism || "no"} mechanism)`;
        try {
          entry?.onRefused?.(req[3]?.toString() ?? "", key);
        } catch {
          // a listener's failure must not stop the handler, which every handshake of the process waits on
        }
      }
      try {
        await sock.send(["1.0", requestId, ok ? "200" : "400", ok ? "OK" : "client key not allowed", "", ""]);
      } catch {
        return;
      }
    }
  }
}

/** The one ZAP handler of this process. */
export const zapHandler = new ZapHandler();
