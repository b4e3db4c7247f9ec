/**
 * Which event types a hosted actor takes from other processes. The network may send an actor
 * anything its decoder accepts, but some types are only meant to come from inside the process:
 * xstate's own (`xstate.stop` stops an actor for good; `xstate.error.*`, `xstate.done.*`,
 * `xstate.after.*` fake failures, completions and timers) and the wildcard `*` are refused for every
 * actor; the types an actor declares local-only (SHUTDOWN for every actor, plus
 * `SpawnOptions.localOnly`: its timer ticks, the completions it sends itself) are refused too.
 * Local refs deliver all of them.
 */

/** Types no actor takes from another process unless it is spawned with its own list. */
export const DEFAULT_LOCAL_ONLY_EVENTS: readonly string[] = ["SHUTDOWN"];

/** True for xstate's internal event types and the wildcard: never accepted from the network. */
export function isReservedEventType(type: string): boolean {
  return type.startsWith("xstate.") || type.startsWith("@xstate.") || type === "*";
}

/** The local-only set of one actor: the defaults plus what it declares. */
export function localOnlySet(declared: readonly string[] | undefined): ReadonlySet<string> {
  return new Set(declared === undefined ? DEFAULT_LOCAL_ONLY_EVENTS : [...DEFAULT_LOCAL_ONLY_EVENTS, ...declared]);
}
