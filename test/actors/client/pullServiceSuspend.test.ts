/**
 * A suspended push consumer parks its pull requests; their queues must not look pull-expired
 * (120 s without a pull) to the rebalancer, which would drop them with their cached messages.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ProcessQueue, PULL_MAX_IDLE_TIME_MS } from "../../../actors/client/processQueue.ts";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import { defaultPullSettings, PullService, type PullServiceDeps } from "../../../actors/client/pullService.ts";
import type { MessageExt } from "../../../transport/messageRecord.ts";
import { MASTER_ID } from "../../../transport/protocol.ts";
import { monotonicFollowsDate } from "../../helpers.ts";

test("queues parked while suspended are not pull-expired, however long the suspension", (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout", "Date"], now: 1_000_000 });
  monotonicFollowsDate(t);
  // a suspended service parks requests without pulling: nothing but the settings is used
  const service = new PullService({ settings: defaultPullSettings() } as unknown as PullServiceDeps);
  const pq = new ProcessQueue<MessageExt>();
  const request: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 0 },
    pq,
    nextOffset: 0,
    brokerId: MASTER_ID,
  };
  t.mock.timers.tick(60_000);
  service.suspend();
  service.executeNow(request);
  for (let i = 0; i < 5; i++) {
    t.mock.timers.tick(PULL_MAX_IDLE_TIME_MS / 2);
    assert.equal(pq.isPullExpired(), false, `still parked after ${((i + 1) * PULL_MAX_IDLE_TIME_MS) / 2} ms`);
  }
  service.stop();
  t.mock.timers.tick(PULL_MAX_IDLE_TIME_MS + 1_000);
  assert.equal(pq.isPullExpired(), true, "a stopped service looks at nothing");
});
