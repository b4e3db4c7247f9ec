import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { createLogger, LogThrottle } from "../../actors/logger.ts";
import { MQError } from "../../transport/protocol.ts";
import { fakeWallClock, waitFor } from "../helpers.ts";

test("createLogger takes pino's levels and silent; other names, Object.prototype's included, are ILLEGAL_ARGUMENT", () => {
  for (const level of ["trace", "debug", "info", "warn", "error", "fatal", "silent"]) assert.equal(createLogger("t", level).level, level);
  for (const level of ["verbose", "toString", "constructor", "__proto__", "hasOwnProperty", ""])
    assert.throws(
      () => createLogger("t", level),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /Unknown log level/.test(e.message),
      level,
    );
});

test("servers log on stdout, clients on stderr (a client program's stdout is its data)", () => {
  const script = `
    import { createLogger, lazyClientLogger } from ${JSON.stringify(new URL("../../actors/logger.ts", import.meta.url).href)};
    createLogger("broker:t", "info").info("server line");
    lazyClientLogger("client:t")().warn("client line");
    process.stdout.write("data\\n");
  `;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "info", NODE_TEST_CONTEXT: "" },
  });
  assert.equal(r.status, 0, r.stderr);
  // the server logger writes asynchronously: its line and the program's own may come in either order
  const out = r.stdout.trim().split("\n").sort();
  assert.equal(out.length, 2, r.stdout);
  assert.equal(out[0], "data");
  assert.equal(JSON.parse(out[1]!).msg, "server line");
  const err = r.stderr.trim().split("\n");
  assert.equal(err.length, 1, r.stderr);
  assert.equal(JSON.parse(err[0]!).msg, "client line");
});

test("a throttled log line goes out again after its interval of real time, though the wall clock stepped back 1 h", async () => {
  const clock = fakeWallClock();
  try {
    const t = new LogThrottle(200);
    assert.equal(t.pass("pull-failed"), 0);
    clock.jump(-3_600_000);
    const held = await waitFor(() => t.pass("pull-failed"), 2_000, "the next line let through");
    assert.ok(held > 0);
  } finally {
    clock.restore();
  }
});
