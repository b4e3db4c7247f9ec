/** What the hand-over tests ask the broker as a consumer would: heartbeats, committing pulls, offset queries. */
import { PullSysFlag } from "../../../transport/protocol.ts";
import type { Fixture } from "./consumptionFixture.ts";

/** Calls on topic `topic` of the fixture `fixture()` returns (set in a `before` hook). */
export function handOverCalls(fixture: () => Fixture, topic = "H") {
  return {
    /** A clustering member's heartbeat. */
    heartbeat(clientID: string, group: string) {
      return fixture().ask("HEART_BEAT", {
        clientID,
        producerDataSet: [],
        consumerDataSet: [
          {
            groupName: group,
            consumeType: "CONSUME_PASSIVELY",
            messageModel: "CLUSTERING",
            consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
            subscriptionDataSet: [],
          },
        ],
      });
    },
    /** A pull of `clientId` that commits `commitOffset`. */
    pullAs(clientId: string, group: string, queueId: number, commitOffset: number) {
      return fixture().pull({
        consumerGroup: group,
        topic,
        queueId,
        queueOffset: commitOffset,
        sysFlag: PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET,
        commitOffset,
        clientId,
      });
    },
    /** The group's committed offset of a queue. */
    async committed(group: string, queueId: number): Promise<number> {
      return (await fixture().ask<{ offset: number }>("QUERY_CONSUMER_OFFSET", { consumerGroup: group, topic, queueId })).fields.offset;
    },
  };
}
