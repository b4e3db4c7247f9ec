/** actors/runtime: hosting xstate actors on a node, refs, supervision, inspection. */
export { ActorNode, INSPECTION_QUEUE_LIMIT } from "./actorNode.ts";
export type { ActorNodeOptions, ActorNodeStats, ActorNodeEvents, SpawnOptions } from "./actorNode.ts";
export type { Ref, Reply, Replier, Origin, WireEvent, SendOptions, AskOptions } from "./refs.ts";
export { summarize, machineDefinition } from "./inspection.ts";
export type { InspectionRecord, InspectionListener, ActorRecord, EventRecord, SnapshotRecord, FailureRecord } from "./inspection.ts";
export { defaultSupervision, DEFAULT_MAX_RESTARTS, DEFAULT_BACKOFF_MS } from "./supervision.ts";
export type { Supervision, ActorFailure } from "./supervision.ts";
export { InspectionCollector } from "./inspectionCollector.ts";
export { curveKeyPair } from "../../transport/curve.ts";
