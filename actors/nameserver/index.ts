/** actors/nameserver: the route registry. */
export { NameServer, DEFAULT_NAMESRV_LISTEN } from "./nameServer.ts";
export type { NameServerOptions } from "./nameServer.ts";
export { namesrvMachine, DEFAULT_SCAN_INTERVAL_MS } from "./namesrvMachine.ts";
export type { NamesrvEvent, NamesrvContext, NamesrvInput } from "./namesrvMachine.ts";
export { RouteTable, DEFAULT_BROKER_EXPIRED_MS } from "./routeTable.ts";
