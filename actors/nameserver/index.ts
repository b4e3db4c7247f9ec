/** actors/nameserver: the route registry. */

export type { NameServerOptions } from "./nameServer.ts";
export { clusterConflictMessage, DEFAULT_NAMESRV_LISTEN, NAMESERVER_OPTION_NAMES, NameServer } from "./nameServer.ts";
export type { NamesrvContext, NamesrvEvent, NamesrvInput } from "./namesrvMachine.ts";
export { DEFAULT_SCAN_INTERVAL_MS, namesrvMachine } from "./namesrvMachine.ts";
export type { ClusterConflict, RouteTableOptions } from "./routeTable.ts";
export { CLUSTER_CONFLICT_REPORT_MS, DEFAULT_BROKER_EXPIRED_MS, RouteTable } from "./routeTable.ts";
