/**
 * What every broker actor is given: configuration, its node, the store, the topic and group
 * managers, a logger and the hooks between actors. One object, built once by `Broker.start`,
 * passed as `input.ctx` to every machine of the broker's actor list (brokerActors.ts).
 */

import type { ArrivalNotice, MessageStore, PutBatch, PutResult } from "../../store/index.ts";
import { BrokerActor } from "../../transport/protocol.ts";
import type { Logger } from "../logger.ts";
import type { ActorNode, Ref } from "../runtime/index.ts";
import type { BrokerConfig } from "./brokerConfig.ts";
import type { SubscriptionGroupManager } from "./subscriptionGroupManager.ts";
import type { TopicConfigManager } from "./topicConfigManager.ts";

/** A put through the store actor can wait for a sync flush (5 s) and then some. */
export const STORE_ASK_TIMEOUT_MS = 15_000;

/** What the store reports after each dispatched batch (see MessageStore.onArrival). */
export type ArrivalEvent = ArrivalNotice;

/** The shared state and services of one broker. */
export interface BrokerContext {
  readonly config: BrokerConfig;
  readonly node: ActorNode;
  readonly store: MessageStore;
  readonly topics: TopicConfigManager;
  readonly groups: SubscriptionGroupManager;
  readonly logger: Logger;
  /** the address clients and name servers use for this broker */
  readonly brokerAddr: string;
  /** "ip:port" written as store host into records and offset message ids */
  readonly storeHost: string;
  /** a handle to another actor of this broker */
  ref(name: string): Ref;
  /** appends one batch through the `store` actor (serialised, bounded, group-committed) */
  put(batch: PutBatch): Promise<PutResult>;
  /** listens to message arrivals (after the consume queues have them); returns the unsubscribe function */
  onArrival(listener: (a: ArrivalEvent) => void): () => void;
  /** asks the registrar to register with every name server now; resolves when they answered */
  registerNow(): Promise<void>;
}

/** Builds the context; the store and managers are already open. */
export function createBrokerContext(parts: {
  config: BrokerConfig;
  node: ActorNode;
  store: MessageStore;
  topics: TopicConfigManager;
  groups: SubscriptionGroupManager;
  logger: Logger;
  brokerAddr: string;
  storeHost: string;
}): BrokerContext {
  const { node } = parts;
  const storeRef = node.ref(null, BrokerActor.STORE);
  const registrarRef = node.ref(null, BrokerActor.REGISTRAR);
  const arrivalListeners = new Set<(a: ArrivalEvent) => void>();
  parts.store.onArrival((a) => {
    for (const l of arrivalListeners) {
      try {
        l(a);
      } catch (e) {
        parts.logger.error({ err: e }, "arrival listener failed");
      }
    }
  });
  return {
    ...parts,
    ref: (name) => node.ref(null, name),
    async put(batch) {
      const r = await storeRef.ask<{ result: PutResult }>({ type: "PUT_MESSAGES", batch }, { timeoutMs: STORE_ASK_TIMEOUT_MS });
      return r.fields.result;
    },
    onArrival(listener) {
      arrivalListeners.add(listener);
      return () => arrivalListeners.delete(listener);
    },
    async registerNow() {
      await registrarRef.ask({ type: "REGISTER_NOW" }, { timeoutMs: STORE_ASK_TIMEOUT_MS });
    },
  };
}

/** The process's pino logger for one server component (see actors/logger.ts). */
export { createLogger } from "../logger.ts";
