/**
 * A real broker (real store in a temp dir) and a client-side ActorNode that asks it directly:
 * what the consumption tests of the broker share.
 */
import { Broker } from "../../../actors/broker/broker.ts";
import type { BrokerOptions } from "../../../actors/broker/brokerConfig.ts";
import { ActorNode } from "../../../actors/runtime/index.ts";
import { encodeMessageBatch, encodeProperties } from "../../../transport/messageRecord.ts";
import {
  BrokerActor,
  ConsumptionActorFor,
  type PullMessageReply,
  type PullMessageRequest,
  PullSysFlag,
  type SendMessageReply,
} from "../../../transport/protocol.ts";
import { EPHEMERAL, tempDir } from "../../helpers.ts";

export interface Fixture {
  broker: Broker;
  client: ActorNode;
  dir: string;
  /** stores messages in one queue (one batch); returns the first queue offset */
  send(
    topic: string,
    queueId: number,
    msgs: Array<{ body?: string; tags?: string; properties?: Record<string, string> }>,
  ): Promise<SendMessageReply>;
  /** asks the broker actor that serves `type` */
  ask<T = Record<string, unknown>>(
    type: keyof typeof ConsumptionActorFor,
    fields: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<{ fields: T; body?: Buffer }>;
  /** a pull with a subscription, no suspend unless sysFlag says so */
  pull(fields: Partial<PullMessageRequest>, timeoutMs?: number): Promise<{ fields: PullMessageReply; body?: Buffer }>;
  /** stops the broker (keeps the store dir) and starts it again on the same dir */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** Extra broker options read by the consumption actors (tuning for fast tests). */
export type TestBrokerOptions = Partial<BrokerOptions> & Record<string, unknown>;

export async function startFixture(opts: TestBrokerOptions = {}): Promise<Fixture> {
  const { dir, cleanup } = await tempDir("actormq-consume-");
  const brokerOpts = {
    brokerName: "a",
    listen: EPHEMERAL,
    nameservers: [],
    storeDir: dir,
    flush: "async",
    logLevel: "silent",
    ...opts,
  } as BrokerOptions;
  const client = await ActorNode.start({ listen: null });
  const f: Fixture = {
    broker: await Broker.start(brokerOpts),
    client,
    dir,
    async send(topic, queueId, msgs) {
      const body = encodeMessageBatch(
        msgs.map((m, i) => ({
          body: Buffer.from(m.body ?? `m${i}`),
          properties: encodeProperties({ ...(m.tags ? { TAGS: m.tags } : {}), ...(m.properties ?? {}) }),
        })),
      );
      const r = await client
        .ref(f.broker.address, BrokerActor.BROKER)
        .ask<SendMessageReply>(
          { type: "SEND_BATCH_MESSAGE", producerGroup: "pg", topic, queueId, sysFlag: 0, bornTimestamp: Date.now() },
          { body, timeoutMs: 5000 },
        );
      return r.fields;
    },
    ask(type, fields, timeoutMs = 5000) {
      return client.ref(f.broker.address, ConsumptionActorFor[type]).ask({ type, ...fields }, { timeoutMs });
    },
    pull(fields, timeoutMs = 5000) {
      const req: PullMessageRequest = {
        consumerGroup: "G",
        topic: "T",
        queueId: 0,
        queueOffset: 0,
        maxMsgNums: 32,
        sysFlag: PullSysFlag.SUBSCRIPTION,
        commitOffset: 0,
        suspendTimeoutMillis: 0,
        subscription: "*",
        subVersion: 0,
        ...fields,
      };
      return client.ref(f.broker.address, BrokerActor.PULL).ask<PullMessageReply>({ type: "PULL_MESSAGE", ...req }, { timeoutMs });
    },
    async restart() {
      await f.broker.close();
      f.broker = await Broker.start(brokerOpts);
    },
    async close() {
      await client.close();
      await f.broker.close();
      await cleanup();
    },
  };
  return f;
}
