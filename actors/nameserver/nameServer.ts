/**
 * `NameServer.start(...)`: an ActorNode hosting the `namesrv` actor. Stateless: brokers register
 * with every name server; any number may run.
 */

import { checkOptionNames, optionNamesOf } from "../../transport/optionNames.ts";
import { checkRange, MAX_TIMER_MS, NAMESRV_ACTOR } from "../../transport/protocol.ts";
import { createLogger, defaultLogLevel, type Logger, logTransportDrops } from "../logger.ts";
import { ActorNode, type CurveServerKeys, logActorFailures, resolveCurveServer } from "../runtime/index.ts";
import { DEFAULT_SCAN_INTERVAL_MS, namesrvMachine } from "./namesrvMachine.ts";
import type { ClusterConflict } from "./routeTable.ts";

export const DEFAULT_NAMESRV_LISTEN = "tcp://127.0.0.1:9876";

/** Options of `NameServer.start`. */
export interface NameServerOptions {
  /** @default "tcp://127.0.0.1:9876" */
  listen?: string;
  /** address others should use, when it differs from the bound one */
  advertise?: string;
  /** how often silent brokers are looked for. @default 5000 */
  scanIntervalMs?: number;
  /** pino level. @default ACTORMQ_LOG_LEVEL, else "info" ("warn" under the test runner) */
  logLevel?: string;
  /** CURVE: encrypt every connection and authenticate clients (docs/security.md). @default none (plaintext) */
  curve?: CurveServerKeys;
}

/** The names {@link NameServerOptions} may hold; NameServer.start refuses any other. */
export const NAMESERVER_OPTION_NAMES = optionNamesOf<NameServerOptions>()(["listen", "advertise", "scanIntervalMs", "logLevel", "curve"]);

/** The warning of a {@link ClusterConflict}: what is shown, and what to change. */
export function clusterConflictMessage(c: ClusterConflict): string {
  const others = c.others.map((o) => `${o.brokerAddr} (id ${o.brokerId}, cluster ${o.clusterName})`).join(", ");
  if (c.kind === "slave")
    return `slave ${c.brokerId} of ${c.brokerName} (${c.brokerAddr}) registers in cluster ${c.clusterName}, its master in ${c.listedUnder}: it is listed under ${c.listedUnder}; start it with its master's clusterName`;
  return `two brokers named ${c.brokerName} register in different clusters: ${c.brokerAddr} (id ${c.brokerId}, cluster ${c.clusterName}) and ${others}; the name is listed under the last to register, so its routes flip between them: give each broker a unique brokerName`;
}

/** A running name server. */
export class NameServer {
  private closing: Promise<void> | null = null;

  private constructor(
    readonly node: ActorNode,
    private readonly logger: Logger,
  ) {}

  static async start(opts: NameServerOptions = {}): Promise<NameServer> {
    checkOptionNames("NameServer.start", opts, NAMESERVER_OPTION_NAMES);
    // 0, NaN or a negative delay scans every timer tick; a longer one than a timer holds fires at once
    const scanIntervalMs = opts.scanIntervalMs ?? DEFAULT_SCAN_INTERVAL_MS;
    checkRange("scanIntervalMs", scanIntervalMs, 1, MAX_TIMER_MS);
    const logger = createLogger("namesrv", opts.logLevel ?? defaultLogLevel());
    const curve = resolveCurveServer(opts.curve);
    const node = await ActorNode.start({ listen: opts.listen ?? DEFAULT_NAMESRV_LISTEN, advertise: opts.advertise, curve });
    logActorFailures(node, () => logger);
    logTransportDrops(node.transport, logger, "name server");
    node.spawn(NAMESRV_ACTOR, namesrvMachine, {
      input: {
        scanIntervalMs,
        onExpired: (addrs: string[]) => logger.warn({ brokers: addrs }, "brokers expired: no registration within their timeout"),
        onClusterConflict: (c: ClusterConflict) => logger.warn(c, clusterConflictMessage(c)),
      },
    });
    logger.info(
      curve
        ? { address: node.address, curve: { publicKey: curve.publicKey, allowedClientKeys: curve.allowedClientKeys?.length ?? "any" } }
        : { address: node.address },
      "name server started",
    );
    return new NameServer(node, logger);
  }

  /** The address brokers and clients use. */
  get address(): string {
    return this.node.address!;
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.closing = this.node.close().then(() => this.logger.info("name server closed"));
    }
    return this.closing;
  }
}
