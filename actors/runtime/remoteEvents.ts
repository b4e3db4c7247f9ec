/**
 * Which event types a hosted actor takes from other processes. The network may send an actor
 * anything its decoder accepts, but some types are only meant to come from inside the process:
 * xstate's own (`xstate.stop` stops an actor for good; `xstate.error.*`, `xstate.done.*`,
 * `xstate.after.*` fake failures, completions and timers) and the wildcard `*` are refused for every
 * actor; the types an actor declares local-only (SHUTDOWN for every actor, plus
 * `SpawnOptions.localOnly`: its timer ticks, the completions it sends itself) are refused too; an
 * actor spawned with `localOnly: "all"` (a consumer's pull, consume, lock and rebalance workers, which
 * only their own process drives) takes nothing from the network. Local refs deliver all of them.
 */

import { MQError, shownValue } from "../../transport/protocol.ts";

/** Types no actor takes from another process unless it is spawned with its own list. */
export const DEFAULT_LOCAL_ONLY_EVENTS: readonly string[] = ["SHUTDOWN"];

/** True for xstate's internal event types and the wildcard: never accepted from the network. */
export function isReservedEventType(type: string): boolean {
  return type.startsWith("xstate.") || type.startsWith("@xstate.") || type === "*";
}

/** What an actor declares local-only: some types, or every type ("all"). */
export type LocalOnlyEvents = readonly string[] | "all";

/** The event types of one actor that the network may not send. */
export interface LocalOnlyTypes {
  has(type: string): boolean;
}

const EVERY_TYPE: LocalOnlyTypes = { has: () => true };

/**
 * The local-only types of one actor: the defaults plus what it declares. Throws MQError
 * ILLEGAL_ARGUMENT unless `declared` is "all" or an array of types: a string would be spread into
 * its letters, and the type it names taken from the network.
 */
export function localOnlySet(declared: LocalOnlyEvents | undefined): LocalOnlyTypes {
  if (declared === "all") return EVERY_TYPE;
  if (declared === undefined) return new Set(DEFAULT_LOCAL_ONLY_EVENTS);
  if (!Array.isArray(declared) || declared.some((t) => typeof t !== "string"))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `localOnly must be "all" or an array of event types such as ["TICK"], got ${Array.isArray(declared) ? "an array holding a non-string" : declared !== null && typeof declared === "object" ? "an object" : shownValue(declared)}.`,
    );
  return new Set([...DEFAULT_LOCAL_ONLY_EVENTS, ...declared]);
}

/** The event types one actor handles (see {@link handledTypes}). */
export interface HandledTypes {
  has(type: string): boolean;
}

/** A state node of an xstate machine, as far as {@link handledTypes} reads it. */
interface StateNodeLike {
  transitions?: Map<string, unknown>;
  states?: Record<string, StateNodeLike>;
}

/**
 * The event types an xstate machine has a transition for in any state (plus `extra`, its direct
 * handlers'), so that an ask of another type is answered at once rather than dropped by the machine
 * and left to time out. Null, meaning "any type", for logic that is no machine and for a machine
 * with a wildcard transition (`*`: it answers the rest itself); xstate's partial wildcards
 * (`error.*`) match by prefix.
 */
export function handledTypes(logic: unknown, extra: Iterable<string> = []): HandledTypes | null {
  const root = (logic as { root?: StateNodeLike } | null)?.root;
  if (!root || !(root.transitions instanceof Map)) return null;
  const exact = new Set<string>(extra);
  const prefixes: string[] = [];
  const walk = (node: StateNodeLike): boolean => {
    for (const descriptor of node.transitions?.keys() ?? []) {
      if (descriptor === "*") return false;
      if (descriptor.endsWith(".*")) prefixes.push(descriptor.slice(0, -1));
      else exact.add(descriptor);
    }
    for (const child of Object.values(node.states ?? {})) if (!walk(child)) return false;
    return true;
  };
  if (!walk(root)) return null;
  return { has: (type) => exact.has(type) || prefixes.some((p) => type.startsWith(p)) };
}
