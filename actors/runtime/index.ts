/** actors/runtime: hosting xstate actors on a node, refs, supervision, inspection. */

export { curveKeyPair } from "../../transport/curve.ts";
export type { ActorNodeEvents, ActorNodeOptions, ActorNodeStats, SpawnOptions } from "./actorNode.ts";
export { ActorNode, DEFAULT_INSPECTION_LEASE_MS, MAX_INSPECTION_PUBLISHERS } from "./actorNode.ts";
export { askUnlessConnectionLost, unlessConnectionLost } from "./connectionLost.ts";
export type { PublicKeyOption } from "./curveKeyFiles.ts";
export { curvePublicKeyOrFile, isCurveKey, isExistingFile, isSecretKeyFile, readCurveKeyFile } from "./curveKeyFiles.ts";
export type { CurveClientKeys, CurveLinkOptions, CurveServerKey, CurveServerKeys } from "./curveOptions.ts";
export { CURVE_KEY_LENGTH, CURVE_LINK_OPTION_NAMES, checkCurveKeyOption, resolveCurveLink, resolveCurveServer } from "./curveOptions.ts";
export type { ActorRecord, EventRecord, FailureRecord, InspectionListener, InspectionRecord, SnapshotRecord } from "./inspection.ts";
export {
  INSPECTION_HEARTBEAT_EVENT,
  INSPECTION_HEARTBEAT_INTERVAL_MS,
  INSPECTION_NODE_CLOSED_EVENT,
  MAX_STATE_DEPTH,
  machineDefinition,
  summarize,
} from "./inspection.ts";
export type { InspectionCollectorOptions } from "./inspectionCollector.ts";
export { InspectionCollector } from "./inspectionCollector.ts";
export { INSPECTION_QUEUE_LIMIT } from "./inspectionPublisher.ts";
export type { AskOptions, Origin, Ref, Replier, Reply, SendOptions, WireEvent } from "./refs.ts";
export { DEFAULT_LOCAL_ONLY_EVENTS } from "./remoteEvents.ts";
export type { ActorFailure, DirectHandlers, Supervision } from "./supervision.ts";
export { DEFAULT_BACKOFF_MS, DEFAULT_MAX_RESTARTS, defaultSupervision, logActorFailures } from "./supervision.ts";
