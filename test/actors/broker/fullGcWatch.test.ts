import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { EventRate, FULL_GC_WARN_COUNT } from "../../../actors/broker/fullGcWatch.ts";
import { runFixture } from "../../helpers.ts";

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "fullGcs.ts");

const runGcs = (nodeFlags: string[], fullGcs: number) => runFixture(fixture, [...nodeFlags, "--expose-gc"], { FULL_GCS: String(fullGcs) });

test("EventRate: true once `count` events fall within the window; older ones slide out", () => {
  const burst = new EventRate(3, 100);
  assert.deepEqual([burst.add(0), burst.add(1), burst.add(2)], [false, false, true]);
  const spread = new EventRate(3, 100);
  assert.equal(spread.add(0), false);
  assert.equal(spread.add(50), false);
  assert.equal(spread.add(150), false, "0 is more than 100 ms before 150");
  assert.equal(spread.add(160), false, "50 is more than 100 ms before 160");
  assert.equal(spread.add(170), true, "150, 160 and 170 are within 100 ms");
});

test("a broker process without the node flags warns once when full GCs come many a second; with them, or with few, it does not", async () => {
  const flags = ["--max-semi-space-size=8", "--initial-old-space-size=64"];
  const storm = await runGcs([], FULL_GC_WARN_COUNT + 5);
  const warnings = storm.split("\n").filter((l) => l.startsWith("{"));
  assert.equal(warnings.length, 1, storm);
  const w = JSON.parse(warnings[0]!) as { msg: string; missingNodeFlags: string[] };
  assert.deepEqual(w.missingNodeFlags, flags);
  assert.match(w.msg, /start this process with node --max-semi-space-size=8 --initial-old-space-size=64/);

  const few = await runGcs([], FULL_GC_WARN_COUNT - 5);
  assert.doesNotMatch(few, /full GCs/, "below the count: no warning");
  const flagged = await runGcs(flags, FULL_GC_WARN_COUNT + 5);
  assert.doesNotMatch(flagged, /full GCs/, "with the flags the advice would not help: no warning");
  assert.match(flagged, /done/);
});
