/**
 * A broker that keeps answering PULL_RETRY_IMMEDIATELY without moving the offset (a slave sending
 * a caught-up pull to a master this client's route has no address for) must not make the queue
 * spin: the second such answer in a row waits like an error.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ProcessQueue } from "../../../actors/client/processQueue.ts";
import type { PullRequest } from "../../../actors/client/pullRequest.ts";
import {
  defaultPullSettings,
  PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION,
  PullService,
  type PullServiceDeps,
} from "../../../actors/client/pullService.ts";
import { SubscriptionTable } from "../../../actors/client/subscriptions.ts";
import type { MessageExt } from "../../../transport/messageRecord.ts";
import { MASTER_ID } from "../../../transport/protocol.ts";

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
/** Turns of the event loop (timers are mocked here) until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await turns(1);
  assert.ok(cond(), what);
}

test("repeated redirects that do not move the offset back off instead of spinning", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
  let asks = 0;
  const subscriptions = new SubscriptionTable();
  subscriptions.subscribe("T", "*");
  const deps = {
    host: {
      brokerAddress: () => "tcp://127.0.0.1:1",
      node: {
        ref: () => ({
          ask: () => {
            asks++;
            // answered on a later turn of the loop, as a real reply would be
            return new Promise((resolve) =>
              setImmediate(() =>
                resolve({
                  fields: {
                    status: "PULL_RETRY_IMMEDIATELY",
                    nextBeginOffset: 5,
                    minOffset: 0,
                    maxOffset: 5,
                    suggestWhichBrokerId: MASTER_ID,
                  },
                }),
              ),
            );
          },
        }),
      },
    },
    group: "g",
    model: "CLUSTERING",
    subscriptions,
    offsetStore: { readOffsetFromMemory: () => -1, updateOffset: () => {} },
    settings: defaultPullSettings(),
    onFound: () => {},
    onOffsetIllegal: () => {},
  } as unknown as PullServiceDeps;
  const service = new PullService(deps);
  const request: PullRequest = {
    consumerGroup: "g",
    mq: { topic: "T", brokerName: "b", queueId: 0 },
    pq: new ProcessQueue<MessageExt>(),
    nextOffset: 5,
    brokerId: MASTER_ID,
  };
  try {
    service.executeNow(request);
    await until(() => asks >= 2, "the first redirect followed at once");
    await turns(50);
    assert.equal(asks, 2, "the second redirect in a row waits");
    t.mock.timers.tick(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION);
    await until(() => asks >= 3, "pulled again after the delay");
    await turns(50);
    assert.equal(asks, 3);
  } finally {
    service.stop();
  }
});

test("a suggested broker id that is not one (past 2^53-1, a fraction) is not followed: the next pull goes where the last did", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
  for (const suggested of [2 ** 53 + 2, 1.5, -1]) {
    const asked: string[] = [];
    const subscriptions = new SubscriptionTable();
    subscriptions.subscribe("T", "*");
    const deps = {
      host: {
        // every id has an address here: a bad one followed would be asked
        brokerAddress: (_name: string, id = MASTER_ID) => `tcp://h:${id}`,
        node: {
          ref: (addr: string) => ({
            ask: () => {
              asked.push(addr);
              return new Promise((resolve) =>
                setImmediate(() =>
                  resolve({
                    fields: {
                      status: "PULL_RETRY_IMMEDIATELY",
                      nextBeginOffset: 5 + asked.length,
                      minOffset: 0,
                      maxOffset: 10,
                      suggestWhichBrokerId: suggested,
                    },
                  }),
                ),
              );
            },
          }),
        },
      },
      group: "g",
      model: "CLUSTERING",
      subscriptions,
      offsetStore: { readOffsetFromMemory: () => -1, updateOffset: () => {} },
      settings: defaultPullSettings(),
      onFound: () => {},
      onOffsetIllegal: () => {},
    } as unknown as PullServiceDeps;
    const service = new PullService(deps);
    const request: PullRequest = {
      consumerGroup: "g",
      mq: { topic: "T", brokerName: "b", queueId: 0 },
      pq: new ProcessQueue<MessageExt>(),
      nextOffset: 5,
      brokerId: MASTER_ID,
    };
    try {
      service.executeNow(request);
      await until(() => asked.length >= 2, `pulled again after suggestWhichBrokerId ${suggested}`);
      assert.deepEqual(asked.slice(0, 2), ["tcp://h:0", "tcp://h:0"], `suggestWhichBrokerId ${suggested}`);
      assert.equal(request.brokerId, MASTER_ID);
    } finally {
      service.stop();
    }
  }
});
