/**
 * The node flags a broker process should run with, and which of them this process lacks. They
 * size V8's heap, so they must be on node's command line: `npm start`, `actormq cluster up` and
 * the benches put them there; `start` and `broker` name the missing ones in their banner.
 */

/** The flag that sizes the old generation (heapReserve.ts stands in for it where it is missing). */
export const OLD_SPACE_FLAG = "--initial-old-space-size";

/**
 * V8 flags of broker processes, as RocketMQ's runbroker.sh sizes the JVM (-Xms, -Xmn). A broker's
 * JS heap is small (~12 MB: metadata; messages live in files), V8 sizes the old generation's limit
 * from it and counts the external memory registered since the last mark-compact (every received
 * ZeroMQ frame) against it: under load it then runs a full mark-compact about every 50 ms (24-53
 * per peer-bench run). With `--initial-old-space-size=64` (the generation starts at 64 MiB) 4-5
 * per run; W2 consume +39 %, W1 consume +18 %. 8 MiB semi-spaces keep the young generation below
 * the old one's headroom at steady load (W3 p99 3.2-4.5 ms instead of 4.4-10.2). bench/RESULTS.md,
 * rounds 9 and 10.
 */
export const BROKER_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=8", `${OLD_SPACE_FLAG}=64`];

/** A node flag's name, as V8 spells it either way (`--max_semi_space_size=8` is `--max-semi-space-size`). */
function flagName(arg: string): string {
  const eq = arg.indexOf("=");
  return (eq < 0 ? arg : arg.slice(0, eq)).replaceAll("_", "-");
}

/**
 * The flags of {@link BROKER_NODE_FLAGS} this process was started without (by name: another
 * value chosen on purpose counts as set), looking at node's arguments and `NODE_OPTIONS`.
 */
export function missingBrokerNodeFlags(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions = process.env.NODE_OPTIONS ?? "",
): string[] {
  const given = new Set([...execArgv, ...nodeOptions.split(/\s+/)].map(flagName));
  return BROKER_NODE_FLAGS.filter((f) => !given.has(flagName(f)));
}
