/**
 * `actormq inspect`: serves the visual debugger for processes running elsewhere, typically a
 * cluster started by `actormq cluster up` (every process listed in its cluster file is asked to
 * publish its inspection stream here). Prints the page's URL and the collector endpoint that
 * client processes publish to (`ACTORMQ_INSPECTOR=<endpoint>`, with `ACTORMQ_INSPECTOR_KEY=<public
 * key>` when the collector is a CURVE server; a client may give the path of a file holding the key
 * instead), then runs until Ctrl-C.
 */
import { statSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { INSPECTOR_ENV, INSPECTOR_KEY_ENV } from "../../actors/client/clientInstance.ts";
import { readClusterFile } from "../../actors/cluster/index.ts";
import { Inspector } from "../../actors/inspector/index.ts";
import { collectorReachWarning, DEFAULT_INSPECTOR_LISTEN } from "../../actors/inspector/inspectorOptions.ts";
import type { CurveLinkOptions } from "../../actors/runtime/index.ts";
import { MQError } from "../../transport/protocol.ts";
import { fail, listArg, runUntilSignal } from "../common.ts";
import { addClientCurveFlags, type CurveFlags, clientCurveOf, ownLinkCurveOf } from "../curveFlags.ts";

interface InspectFlags extends CurveFlags {
  cluster?: string;
  collect?: string[];
  listen: string;
  allowRemote: boolean;
  collectorBind: string;
  collectorAdvertise?: string;
}

/** What `inspect` needs of the cluster file at `where` (the file, or its directory). */
export interface ClusterTargets {
  /** node addresses of every process */
  addresses: string[];
  /** the key file every process of a CURVE cluster was given (--curve-secret of `cluster up`) */
  curveSecretFile?: string;
}

/** The processes of the cluster file at `where` (the file, or its directory), and its CURVE key file. */
export function clusterTargets(where: string): ClusterTargets {
  let dir = where;
  try {
    if (statSync(where).isFile()) dir = path.dirname(where);
  } catch {
    // missing: a name ending in .json meant the file (readClusterFile reports it with what to do)
    if (path.basename(where).endsWith(".json")) dir = path.dirname(where);
  }
  const cf = readClusterFile(dir, "--cluster");
  // a process that never came up (an interrupted `cluster up`) has no address yet
  const addresses = [...new Set([...cf.nameservers, ...cf.processes.map((p) => p.address)])].filter((a) => a !== "");
  return { addresses, ...(cf.up?.curveSecretFile !== undefined ? { curveSecretFile: cf.up.curveSecretFile } : {}) };
}

/**
 * The inspector's CURVE links: the flags when given; else, for a CURVE cluster file, the cluster's
 * own key pair (its servers' public key, and the pair as the client's, which they admit whatever
 * their --curve-allow lists), so `inspect --cluster` needs no key flags for a cluster it can read.
 */
function inspectCurveOf(f: InspectFlags, cluster: ClusterTargets | undefined): CurveLinkOptions {
  if (f.curveServer === undefined && f.curveSecret === undefined && cluster?.curveSecretFile !== undefined)
    return ownLinkCurveOf({ curveSecret: cluster.curveSecretFile });
  return clientCurveOf(f);
}

/**
 * The environment a client process needs to publish to `insp`'s collector: its endpoint, and its
 * public key when it is a CURVE server (a stream without it is refused).
 */
export function inspectorClientEnv(insp: Pick<Inspector, "collectorEndpoint" | "collectorPublicKey">): string {
  const key = insp.collectorPublicKey;
  return `${INSPECTOR_ENV}=${insp.collectorEndpoint}${key === undefined ? "" : ` ${INSPECTOR_KEY_ENV}=${key}`}`;
}

/** Adds `inspect` to the program. */
export function addInspectCommand(program: Command): void {
  addClientCurveFlags(program.command("inspect"))
    .description("Serve the visual debugger (statecharts, timeline, cluster view) for a running cluster until Ctrl-C.")
    .option(
      "--cluster <file>",
      "cluster file written by `actormq cluster up` (<dir>/cluster.json, or the directory); a CURVE cluster's key file is read from it",
    )
    .option(
      "--collect <addresses>",
      "more node endpoints to collect from, comma-separated (name servers, brokers, listening clients)",
      listArg,
    )
    .option("--listen <host:port>", "address of the web page (port 0 = any free port)", DEFAULT_INSPECTOR_LISTEN)
    .option("--allow-remote", "serve the page on a non-loopback --listen address (anyone reaching it sees actor states)", false)
    .option("--collector-bind <endpoint>", "ZeroMQ endpoint processes publish their inspection to", "tcp://127.0.0.1:*")
    .option(
      "--collector-advertise <endpoint>",
      "address processes are told to publish to, when not the bound one: tcp://<this host's address>:port (* = the bound port), for processes on other hosts",
    )
    .action(async (f: InspectFlags) => {
      try {
        const cluster = f.cluster ? clusterTargets(f.cluster) : undefined;
        const collect = [...(cluster?.addresses ?? []), ...(f.collect ?? [])];
        if (collect.length === 0)
          throw new MQError(
            "ILLEGAL_ARGUMENT",
            "Nothing to inspect: pass --cluster <dir>/cluster.json (from `actormq cluster up`) or --collect <endpoints>.",
          );
        const insp = await Inspector.start({
          listen: f.listen,
          allowRemote: f.allowRemote,
          collect,
          collectorBind: f.collectorBind,
          collectorAdvertise: f.collectorAdvertise,
          // a CURVE cluster: its nodes are asked over CURVE, and publish to a CURVE collector
          ...inspectCurveOf(f, cluster),
        });
        runUntilSignal(() => insp.close());
        // they would answer probes (listed alive) but publish to their own host: no actors, no records
        const warning = collectorReachWarning(collect, insp.collectorEndpoint);
        if (warning) process.stderr.write(`actormq: warning: ${warning}\n`);
        process.stdout.write(
          `actormq inspector ${insp.url}\n  collecting   ${collect.join(", ")}\n  collector    ${insp.collectorEndpoint} (clients: ${inspectorClientEnv(insp)})\nPress Ctrl-C to stop.\n`,
        );
      } catch (e) {
        fail(e);
      }
    });
}
