/** actors/inspector: the visual debugger (collects inspection streams, serves a local page). */
export { Inspector, TIMELINE_FORMAT, TIMELINE_FORMAT_VERSION } from "./inspector.ts";
export { defaultInspectorOptions, DEFAULT_INSPECTOR_LISTEN, DEFAULT_PROBE_INTERVAL_MS } from "./inspectorOptions.ts";
export type { InspectorOptions } from "./inspectorOptions.ts";
export type { InspectorStats } from "./pageServer.ts";
export type { ClusterView, ClusterSource, ClusterBroker, ClusterTopic, ClusterGroup, GroupQueue } from "./clusterView.ts";
export type { NodeView, ActorView } from "./processTree.ts";
export { definitionToGraph, activeStateIds } from "./statechartGraph.ts";
export type { StatechartGraph, ChartState, ChartTransition } from "./statechartGraph.ts";
export { renderStatechart } from "./statechartSvg.ts";
export type { RenderedChart } from "./statechartSvg.ts";
