import assert from "node:assert/strict";
import { test } from "node:test";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import {
  PULL_FAILURE_LOG_INTERVAL_MS,
  PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL,
  PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION,
  PULL_TIME_DELAY_MILLS_WHEN_NO_PERMISSION,
  pullFailureLogger,
  pullLog,
  pullRetryDelayFor,
} from "../../../actors/client/pullService.ts";
import { MQError } from "../../../transport/protocol.ts";
import { monotonicFollowsDate } from "../../helpers.ts";

function request(topic: string, queueId: number): PullRequest {
  return { consumerGroup: "g", mq: { topic, brokerName: "b", queueId }, brokerId: 0, nextOffset: 0 } as PullRequest;
}

test("failed pulls: one warning per queue per interval, none for FLOW_CONTROL or retry topics", (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(pullLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  const onError = pullFailureLogger({ brokerAddress: (name, id) => (name === "b" && id === 0 ? "tcp://10.0.0.1:10911" : undefined) }, "g");
  const err = new MQError("SYSTEM_ERROR", "The broker b does not support SQL92 filtering.");
  const q0 = request("T", 0);

  onError(q0, err);
  assert.equal(lines.length, 1);
  assert.deepEqual(lines[0]!.fields, {
    group: "g",
    topic: "T",
    brokerName: "b",
    brokerId: 0,
    broker: "tcp://10.0.0.1:10911",
    queueId: 0,
    code: "SYSTEM_ERROR",
    error: err.message,
  });
  assert.match(lines[0]!.msg, /T@b@0/);
  assert.match(lines[0]!.msg, /SYSTEM_ERROR/);
  assert.match(lines[0]!.msg, /does not support SQL92/);

  // the same queue again within the interval: quiet; another queue: its own line
  t.mock.timers.tick(PULL_FAILURE_LOG_INTERVAL_MS - 1);
  onError(q0, err);
  assert.equal(lines.length, 1);
  onError(request("T", 1), new Error("socket hang up"));
  assert.equal(lines.length, 2);
  assert.equal(lines[1]!.fields.queueId, 1);
  assert.match(lines[1]!.msg, /socket hang up/);
  t.mock.timers.tick(1);
  onError(q0, err);
  assert.equal(lines.length, 3, "logged again once the interval has passed");

  // back-pressure and the group's retry topic (RocketMQ logs neither)
  onError(request("U", 0), new MQError("FLOW_CONTROL", "busy"));
  onError(request("%RETRY%g", 0), new MQError("TOPIC_NOT_EXIST", "no retry topic yet"));
  assert.equal(lines.length, 3);
});

test("pulls refused with NO_PERMISSION (a disabled group): one line for all the group's queues per interval, retried every 3 s", (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  t.mock.method(pullLog(), "warn", (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }));
  const onError = pullFailureLogger({ brokerAddress: () => "tcp://10.0.0.1:10911" }, "g");
  const refused = new MQError("NO_PERMISSION", "subscription group no permission, g: consumption is disabled for this group.");
  for (let q = 0; q < 8; q++) onError(request(q < 4 ? "T" : "U", q % 4), refused);
  assert.equal(lines.length, 1, "eight queues refused at once: one line");
  assert.match(lines[0]!.msg, /Pulls of group g are refused with NO_PERMISSION by broker b/);
  assert.match(lines[0]!.msg, /consumption is disabled/);
  assert.match(lines[0]!.msg, /retried every 3 s/);
  t.mock.timers.tick(PULL_FAILURE_LOG_INTERVAL_MS - 1);
  for (let q = 0; q < 4; q++) onError(request("T", q), refused);
  assert.equal(lines.length, 1);
  t.mock.timers.tick(1);
  onError(request("T", 2), refused);
  assert.equal(lines.length, 2, "logged again once the interval has passed");
  // other failures keep their own per-queue lines
  onError(request("T", 0), new MQError("SYSTEM_ERROR", "disk"));
  assert.equal(lines.length, 3);

  assert.equal(pullRetryDelayFor(refused), PULL_TIME_DELAY_MILLS_WHEN_NO_PERMISSION);
  assert.equal(PULL_TIME_DELAY_MILLS_WHEN_NO_PERMISSION, 3000);
  assert.equal(pullRetryDelayFor(new MQError("FLOW_CONTROL", "busy")), PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL);
  assert.equal(pullRetryDelayFor(new Error("x")), PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION);
});
