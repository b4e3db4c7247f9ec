import assert from "node:assert/strict";
import { test } from "node:test";
import { checkTopic, compareMessageQueue, isMQError, MQError, topicCreateCommand } from "../transport/protocol.ts";

test("checkTopic accepts RocketMQ's legal names and rejects the rest with MESSAGE_ILLEGAL", () => {
  for (const ok of ["TopicTest", "%RETRY%group", "a|b", "x_y-z", "a".repeat(127)]) checkTopic(ok);
  for (const bad of ["", "has space", "dot.topic", "a".repeat(128), 42]) {
    assert.throws(
      () => checkTopic(bad),
      (e) => isMQError(e, "MESSAGE_ILLEGAL"),
    );
  }
});

test("checkTopic says what the topic was for, and that a non-string is not a name", () => {
  assert.throws(
    () => checkTopic(""),
    (e) => isMQError(e, "MESSAGE_ILLEGAL") && /topic is empty: give every message a topic name/.test(e.message),
  );
  assert.throws(
    () => checkTopic(5, "createTopic"),
    (e) => isMQError(e, "MESSAGE_ILLEGAL") && /^createTopic: the topic must be a topic name \(a string\), got 5\.$/.test(e.message),
  );
  assert.throws(
    () => checkTopic("", "subscribe"),
    (e) => isMQError(e, "MESSAGE_ILLEGAL") && /^subscribe: the topic is empty/.test(e.message) && !/message/.test(e.message),
  );
  assert.throws(
    () => checkTopic("a b", "subscribe"),
    (e) => isMQError(e, "MESSAGE_ILLEGAL") && /^subscribe: the topic "a b" has illegal characters/.test(e.message),
  );
});

test("topicCreateCommand names the command that creates a topic, quoted for the shell when the name needs it", () => {
  assert.equal(topicCreateCommand("Orders"), "actormq topic create Orders");
  assert.equal(topicCreateCommand("%RETRY%cg_1"), "actormq topic create %RETRY%cg_1");
  assert.equal(topicCreateCommand("a|b"), "actormq topic create 'a|b'");
  assert.equal(topicCreateCommand("-x"), "actormq topic create -- -x");
  assert.equal(topicCreateCommand("it's"), "actormq topic create 'it'\\''s'");
});

test("MQError round-trips over the wire shape and keeps retriable from the code table", () => {
  const e = MQError.fromWire(new MQError("SYSTEM_BUSY", "busy").toWire());
  assert.equal(e.code, "SYSTEM_BUSY");
  assert.equal(e.retriable, true);
  assert.equal(MQError.fromWire({ code: "nonsense", message: 1 }).code, "SYSTEM_ERROR");
  for (const code of ["toString", "constructor", "__proto__", "hasOwnProperty"])
    assert.equal(MQError.fromWire({ code, message: "x" }).code, "SYSTEM_ERROR", code);
});

test("message queues sort by topic, broker, queue id", () => {
  const qs = [
    { topic: "b", brokerName: "a", queueId: 0 },
    { topic: "a", brokerName: "b", queueId: 1 },
    { topic: "a", brokerName: "b", queueId: 0 },
    { topic: "a", brokerName: "a", queueId: 3 },
  ].sort(compareMessageQueue);
  assert.deepEqual(
    qs.map((q) => `${q.topic}${q.brokerName}${q.queueId}`),
    ["aa3", "ab0", "ab1", "ba0"],
  );
});
