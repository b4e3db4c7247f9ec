/**
 * `actormq consume --tag / --sql`: a filter that cannot be used is refused before any name server
 * is asked (one line, SUBSCRIPTION_PARSE_FAILED), and an empty --sql is refused, not taken as "all".
 * The name server given is a closed port: reaching it would fail with another error.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { cli, oneLine } from "./cliRun.ts";

const env = { ACTORMQ_NAMESRV: "tcp://127.0.0.1:1" };

test("consume refuses a bad --sql or --tag before asking a name server, and an empty --sql", async () => {
  const bad = await cli(["consume", "--topic", "T", "--sql", "a >"], { env });
  assert.equal(bad.code, 1);
  assert.match(oneLine(bad.err), /^actormq: error SUBSCRIPTION_PARSE_FAILED: Invalid SQL92 selector "a >"/);
  const empty = await cli(["consume", "--topic", "T", "--sql", ""], { env });
  assert.equal(empty.code, 1);
  assert.match(oneLine(empty.err), /^actormq: error SUBSCRIPTION_PARSE_FAILED: .*SQL92 subscription of topic "T" is empty/);
  const both = await cli(["consume", "--topic", "T", "--tag", "A", "--sql", ""], { env });
  assert.equal(both.code, 1);
  assert.match(oneLine(both.err), /either --tag or --sql/);
  const tag = await cli(["consume", "--topic", "T", "--tag", "||"], { env });
  assert.equal(tag.code, 1);
  assert.match(oneLine(tag.err), /^actormq: error SUBSCRIPTION_PARSE_FAILED: The tag expression "\|\|" of topic "T" names no tag/);
});
