import assert from "node:assert/strict";
import { test } from "node:test";
import { createLogger } from "../../actors/logger.ts";
import { MQError } from "../../transport/protocol.ts";

test("createLogger takes pino's levels and silent; other names, Object.prototype's included, are ILLEGAL_ARGUMENT", () => {
  for (const level of ["trace", "debug", "info", "warn", "error", "fatal", "silent"]) assert.equal(createLogger("t", level).level, level);
  for (const level of ["verbose", "toString", "constructor", "__proto__", "hasOwnProperty", ""])
    assert.throws(
      () => createLogger("t", level),
      (e: unknown) => e instanceof MQError && e.code === "ILLEGAL_ARGUMENT" && /Unknown log level/.test(e.message),
      level,
    );
});
