/** `actormq send --help` explains --delay-level: what 0 means and the delay of each default level 1..18. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { cli } from "./cliRun.ts";

test("send --help lists the delay of every default level and says 0 is no delay", async () => {
  const r = await cli(["send", "--help"]);
  assert.equal(r.code, 0, r.err);
  // the option's description, its wrapped lines joined
  const start = r.out.indexOf("--delay-level <level>");
  assert.ok(start >= 0, r.out);
  const end = r.out.indexOf("\n  -", start + 1);
  const help = r.out.slice(start, end).replace(/\s+/g, " ");
  assert.match(help, /0 = no delay/);
  const defaults = ["1s", "5s", "10s", "30s", "1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m", "9m", "10m", "20m", "30m", "1h", "2h"];
  assert.match(help, new RegExp(defaults.map((d, i) => `${i + 1}=${d}`).join(" ")), help);
  assert.match(help, /levels 1 to 18/);
  assert.match(help, /messageDelayLevel/, "says the brokers' messageDelayLevel decides");
});
