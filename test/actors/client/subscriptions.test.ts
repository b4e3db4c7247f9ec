import assert from "node:assert/strict";
import { test } from "node:test";
import { retryTopicOf, SubscriptionTable } from "../../../actors/client/subscriptions.ts";
import { MQError } from "../../../transport/protocol.ts";

test("clustering subscribes the group's retry topic, broadcasting does not", () => {
  const c = SubscriptionTable.build("g1", { T: "TagA || TagB" }, "CLUSTERING");
  assert.deepEqual(c.topics().sort(), ["%RETRY%g1", "T"]);
  assert.equal(c.get(retryTopicOf("g1"))!.subString, "*");
  assert.deepEqual(c.get("T")!.tagsSet, ["TagA", "TagB"]);
  const b = SubscriptionTable.build("g1", { T: "*" }, "BROADCASTING");
  assert.deepEqual(b.topics(), ["T"]);
});

test("bad expressions and topic names fail at build time", () => {
  assert.throws(
    () => SubscriptionTable.build("g", { T: "||" }, "CLUSTERING"),
    (e) => e instanceof MQError && e.code === "SUBSCRIPTION_PARSE_FAILED",
  );
  assert.throws(
    () => SubscriptionTable.build("g", { T: { sql92: "a >" } }, "CLUSTERING"),
    (e) => e instanceof MQError && e.code === "SUBSCRIPTION_PARSE_FAILED",
  );
  assert.throws(
    () => SubscriptionTable.build("g", { "bad topic": "*" }, "CLUSTERING"),
    (e) => e instanceof MQError && e.code === "MESSAGE_ILLEGAL",
  );
});

test("the client re-check keeps only subscribed tags; touch bumps subVersion", () => {
  const t = SubscriptionTable.build("g", { T: "TagA" }, "CLUSTERING");
  const sd = t.get("T")!;
  assert.equal(SubscriptionTable.matches(sd, "TagA"), true);
  assert.equal(SubscriptionTable.matches(sd, "TagB"), false);
  assert.equal(SubscriptionTable.matches(sd, undefined), false);
  assert.equal(SubscriptionTable.matches(t.get("%RETRY%g"), undefined), true);
  const v = sd.subVersion;
  t.touch("T");
  assert.ok(t.get("T")!.subVersion > v);
});
