/** actors/inspector: the visual debugger (collects inspection streams, serves a local page). */

export type { ClusterBroker, ClusterGroup, ClusterSource, ClusterTopic, ClusterView, GroupQueue } from "./clusterView.ts";
export { Inspector, TIMELINE_FORMAT, TIMELINE_FORMAT_VERSION } from "./inspector.ts";
export type { InspectorOptions } from "./inspectorOptions.ts";
export { DEFAULT_INSPECTOR_LISTEN, DEFAULT_PROBE_INTERVAL_MS, defaultInspectorOptions } from "./inspectorOptions.ts";
export type { InspectorStats, RefusedView, UnreachableView } from "./pageServer.ts";
export type { ActorView, NodeView } from "./processTree.ts";
export type { ChartState, ChartTransition, StatechartGraph } from "./statechartGraph.ts";
export { activeStateIds, definitionToGraph } from "./statechartGraph.ts";
export type { RenderedChart } from "./statechartSvg.ts";
export { renderStatechart } from "./statechartSvg.ts";
