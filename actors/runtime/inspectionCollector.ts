/**
 * InspectionCollector: the receiving end of inspection streams. A SUB socket bound to an
 * (ephemeral) port; nodes connect their publishers to it (`node.publishInspection(endpoint)` or
 * an INSPECT_SUBSCRIBE request naming `collector.endpoint`).
 */
import * as zmq from "zeromq";
import { decode } from "../../transport/codec.ts";
import { curveKeyPair } from "../../transport/curve.ts";
import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import { isTcpAddress, MQError } from "../../transport/protocol.ts";
import type { InspectionListener, InspectionRecord } from "./inspection.ts";
import type { Ref } from "./refs.ts";

/** Records kept in memory for late readers. @default 10000 */
export const DEFAULT_COLLECTOR_CAPACITY = 10_000;

/** Options of {@link InspectionCollector.start}. */
export interface InspectionCollectorOptions {
  /** where the SUB socket binds. @default "tcp://127.0.0.1:*" */
  bind?: string;
  /** the endpoint nodes are asked to publish to when it is not the bound one: tcp://host:port, port * for the bound port */
  advertise?: string;
  /** records kept in memory for late readers. @default 10000 */
  capacity?: number;
  /** a CURVE server with a key pair of its own: the streams are encrypted. @default false */
  curve?: boolean;
}

/** The names of {@link InspectionCollectorOptions}. */
export const INSPECTION_COLLECTOR_OPTION_NAMES = optionNamesOf<InspectionCollectorOptions>()(["bind", "advertise", "capacity", "curve"]);

export class InspectionCollector {
  /** Most recent records, oldest first, at most `capacity`. */
  readonly records: InspectionRecord[] = [];
  /** Messages that were not inspection records. */
  malformed = 0;
  /**
   * Publisher handshakes refused: a plaintext publisher on a CURVE collector (a client without
   * ACTORMQ_INSPECTOR_KEY), one with a key on a plaintext collector, or one with the wrong key.
   */
  refusedPublishers = 0;
  private readonly listeners = new Set<InspectionListener>();
  private paused = false;

  private constructor(
    private readonly sub: zmq.Subscriber,
    /** What nodes are asked to publish to (INSPECT_SUBSCRIBE): the advertised endpoint, else the bound one. */
    readonly endpoint: string,
    private readonly capacity: number,
    /** the SUB's CURVE public key, sent with INSPECT_SUBSCRIBE; null: plaintext */
    readonly curvePublicKey: string | null,
  ) {}

  /**
   * Binds the SUB socket (`tcp://127.0.0.1:*` by default) and starts collecting. `advertise` is the
   * {@link endpoint} nodes are asked to publish to when it is not the bound one (a bind on
   * loopback or 0.0.0.0 names no address a node on another host can reach): `tcp://host:port`,
   * port `*` for the bound port; anything else is refused (ILLEGAL_ARGUMENT). With `curve` the SUB is
   * a CURVE server with a key pair of its own, whose public key {@link requestFrom} sends the nodes:
   * the streams are encrypted, and publishers that do not have the key cannot connect.
   */
  static async start(opts: InspectionCollectorOptions = {}): Promise<InspectionCollector> {
    checkOptionNames("InspectionCollector.start", opts, INSPECTION_COLLECTOR_OPTION_NAMES);
    const { advertise } = opts;
    if (advertise !== undefined && (typeof advertise !== "string" || !isTcpAddress(advertise.replace(/:\*$/, ":1"))))
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `Bad collector advertise endpoint "${advertise}": use tcp://host:port, the address nodes reach this collector at (port * for the bound port), e.g. tcp://10.0.0.5:7777.`,
      );
    const sub = new zmq.Subscriber({ linger: 0 });
    const keys = opts.curve === true ? curveKeyPair() : null;
    if (keys) {
      sub.curveServer = true;
      sub.curvePublicKey = keys.publicKey;
      sub.curveSecretKey = keys.secretKey;
    }
    sub.subscribe();
    try {
      await sub.bind(opts.bind ?? "tcp://127.0.0.1:*");
    } catch (e) {
      sub.close();
      throw new MQError("ILLEGAL_ARGUMENT", `Cannot bind the inspection collector to ${opts.bind}: ${(e as Error).message}.`, { cause: e });
    }
    const bound = sub.lastEndpoint ?? opts.bind ?? "";
    let endpoint = bound;
    if (advertise !== undefined) {
      const port = /:(\d+)$/.exec(bound)?.[1];
      if (advertise.endsWith(":*") && port === undefined) {
        sub.close();
        throw new MQError("ILLEGAL_ARGUMENT", `The collector bound ${bound}, which has no port for "${advertise}": advertise a port.`);
      }
      endpoint = advertise.endsWith(":*") ? `${advertise.slice(0, -1)}${port}` : advertise;
    }
    const c = new InspectionCollector(sub, endpoint, opts.capacity ?? DEFAULT_COLLECTOR_CAPACITY, keys?.publicKey ?? null);
    // a publisher whose mechanism or key does not match never gets a record through: counted, so
    // the inspector can tell a stream that cannot connect from one that sends nothing
    const refused = () => c.refusedPublishers++;
    for (const e of ["handshake:error:protocol", "handshake:error:auth", "handshake:error:other"] as const) sub.events.on(e, refused);
    void c.loop();
    return c;
  }

  /**
   * Asks the node behind `ref` (any actor name on it) to publish its stream here for `leaseMs`
   * (the node's default lease when omitted); ask again before it runs out to keep the stream.
   */
  async requestFrom(ref: Ref, timeoutMs?: number, leaseMs?: number): Promise<string> {
    const ev = {
      type: "INSPECT_SUBSCRIBE",
      endpoint: this.endpoint,
      ...(leaseMs === undefined ? {} : { leaseMs }),
      ...(this.curvePublicKey === null ? {} : { curveServerKey: this.curvePublicKey }),
    };
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
