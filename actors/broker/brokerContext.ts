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
import type { PutOutcome } from "./storeActor.ts";
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
  /** appends one batch through the `store` actor (the puts of one tick as one PUT_GROUP: bounded, group-committed) */
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
  // the puts of one tick (the requests of one frame) go to the store actor as one PUT_GROUP
  let groupBatches: PutBatch[] = [];
  let groupWaiters: Array<{ resolve: (r: PutResult) => void; reject: (e: unknown) => void }> = [];
  const sendGroup = (): void => {
    const batches = groupBatches;
    const waiters = groupWaiters;
    groupBatches = [];
    groupWaiters = [];
    storeRef.ask<{ results: PutOutcome[] }>({ type: "PUT_GROUP", batches }, { timeoutMs: STORE_ASK_TIMEOUT_MS }).then(
      (r) => {
        const results = r.fields.results;
        for (let i = 0; i < waiters.length; i++) {
          const o = results[i]!;
          if (o.ok) waiters[i]!.resolve(o.result);
          else waiters[i]!.reject(o.error);
        }
      },
      (e: unknown) => {
        for (const w of waiters) w.reject(e);
      },
    );
  };
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
    put(batch) {
      return new Promise<PutResult>((resolve, reject) => {
        if (groupBatches.length === 0) queueMicrotask(sendGroup);
        groupBatches.push(batch);
        groupWaiters.push({ resolve, reject });
      });
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
