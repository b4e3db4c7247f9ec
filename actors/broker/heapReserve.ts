/**
 * A heap reserve for broker processes started without `--initial-old-space-size`: one flat string
 * of N MiB kept alive while a broker of the process is open.
 *
 * Why: V8 sizes the old generation's limit from the live heap (a broker's is ~12 MB) and starts a
 * full mark-compact when the headroom left, minus the external memory registered since the last one
 * (zeromq.js registers every received frame over 128 bytes until a GC frees it), falls below the
 * young generation's capacity. Under load that is a mark-compact about every 50 ms. A reserve
 * raises the live size the limit grows from, where the flag raises the limit itself: in peer-bench
 * runs 32 MiB took the broker from 24-53 mark-compacts per run to 5, as the flag does; 16 MiB left
 * 38-43 (bench/RESULTS.md, round 11). A string costs V8 nothing to mark (no pointers) or to move
 * (large-object space); it costs its size in RSS. Taken before the broker serves and held until it
 * closes: allocating it under load costs a mark-compact of its own. `heapReserveMb: 0` turns it off.
 */
import { missingBrokerNodeFlags, OLD_SPACE_FLAG } from "./nodeFlags.ts";

/** MiB a broker process without `--initial-old-space-size` holds in reserve. */
export const DEFAULT_HEAP_RESERVE_MB = 32;
const MIB = 1_048_576;

/** One-byte characters, so its length is its size in bytes. */
let reserve = "";
let holders = 0;

/** MiB of reserve this process holds now (0 when none). */
export function heapReserveMb(): number {
  return reserve.length / MIB;
}

/**
 * Holds a reserve of `mb` MiB (the largest any holder asked for) until the returned release is
 * called; the process drops it when its last holder releases. Holds nothing, and returns 0 MiB,
 * when `mb` is 0 or the process was started with `--initial-old-space-size`.
 */
export function holdHeapReserve(mb: number, missing = missingBrokerNodeFlags()): { mb: number; release: () => void } {
  if (mb <= 0 || !missing.some((f) => f.startsWith(OLD_SPACE_FLAG))) return { mb: 0, release: () => {} };
  if (reserve.length < mb * MIB) {
    // repeat() builds a rope; reading a character flattens it into one sequential string
    const s = "0123456789abcdef".repeat((mb * MIB) / 16);
    if (s.charCodeAt(s.length - 1) !== 102) throw new Error("heap reserve not built");
    reserve = s;
  }
  holders++;
  let released = false;
  return {
    mb: heapReserveMb(),
    release: () => {
      if (released) return;
      released = true;
      if (--holders === 0) reserve = "";
    },
  };
}
