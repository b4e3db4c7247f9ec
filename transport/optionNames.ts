/**
 * The names an options object may hold, and the check that refuses any other: a misspelt option
 * (`nameServer` for `nameservers`) is an error naming it, not a setting silently left at its default.
 */
import { MQError, shownValue } from "./protocol.ts";

/** What {@link optionNamesOf} asks for when a list leaves out some of the options' names. */
type CompleteList<T, L extends readonly PropertyKey[]> = [Exclude<keyof T, L[number]>] extends [never]
  ? unknown
  : { missingOptionNames: Exclude<keyof T, L[number]> };

/**
 * The option names of `T`, listed once next to `T`: `optionNamesOf<ProducerOptions>()(["group", ...])`.
 * tsc refuses a list that names an option `T` lacks, or leaves out one of its options.
 */
export function optionNamesOf<T>() {
  return <const L extends readonly (keyof T & string)[]>(names: L & CompleteList<T, L>): L => names;
}

/** Edit distance of two short strings (option names). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/** The allowed name `name` is most likely a misspelling of, if any is close. */
function closest(name: string, allowed: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 4)) + 1;
  for (const a of allowed) {
    const d = distance(lower, a.toLowerCase());
    if (d < bestDistance) {
      best = a;
      bestDistance = d;
    }
  }
  // else one that begins the other: clusterName for cluster, autoCommitInterval for autoCommitIntervalMs
  return (
    best ??
    allowed.find((a) => {
      const al = a.toLowerCase();
      return Math.min(al.length, lower.length) >= 4 && (al.startsWith(lower) || lower.startsWith(al));
    })
  );
}

/**
 * Refuses `opts` unless it is an options object (not null, not an array) whose every option set
 * (its own keys with a value other than undefined) is among `allowed`: ILLEGAL_ARGUMENT naming
 * `what` (`Producer.start`), the unknown option, the allowed option it is closest to, and every
 * allowed name. `notBuilt`: RocketMQ options of this call that are not built here, each with what
 * to use instead (a closest name could mislead: pullThresholdForTopic is no per-queue limit).
 */
export function checkOptionNames(
  what: string,
  opts: unknown,
  allowed: readonly string[],
  notBuilt: Readonly<Record<string, string>> = {},
): void {
  if (typeof opts !== "object" || opts === null || Array.isArray(opts))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${what} takes an options object { ${allowed.join(", ")} }, got ${Array.isArray(opts) ? "an array" : shownValue(opts)}.`,
    );
  for (const name of Object.keys(opts)) {
    if (allowed.includes(name) || (opts as Record<string, unknown>)[name] === undefined) continue;
    if (Object.hasOwn(notBuilt, name))
      throw new MQError("ILLEGAL_ARGUMENT", `${what}: RocketMQ's option ${JSON.stringify(name)} is not built here; ${notBuilt[name]}.`);
    const near = closest(name, allowed);
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${what} has no option ${JSON.stringify(name)}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ""}. Its options are: ${allowed.join(", ")}.`,
    );
  }
}
