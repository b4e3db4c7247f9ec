/**
 * The broker's composition: every actor a broker node hosts, in start order. Each entry's logic
 * receives `{ ctx: BrokerContext }` as input. To add a part of the broker (pull processor, hold
 * service, consumer manager, offsets, locks, scheduler, send-back, replication), add an entry here.
 */
import type { AnyActorLogic } from "xstate";
import { BrokerActor, QUERY_MESSAGE_ACTOR } from "../../transport/protocol.ts";
import type { DirectHandlers, Supervision } from "../runtime/index.ts";
import { brokerDirect, brokerMachine } from "./brokerActor.ts";
import type { BrokerContext } from "./brokerContext.ts";
import { consumersMachine } from "./consumerManager.ts";
import { offsetsMachine } from "./consumerOffsetManager.ts";
import { haClientMachine } from "./haClient.ts";
import { haMachine } from "./haService.ts";
import { holdDirect, holdMachine } from "./holdService.ts";
import { locksMachine } from "./lockManager.ts";
import { pullDirect, pullMachine } from "./pullProcessor.ts";
import { queryMessageMachine } from "./queryMessageProcessor.ts";
import { registrarMachine } from "./registrar.ts";
import { schedulerMachine } from "./scheduler.ts";
import { sendbackMachine } from "./sendback.ts";
import { storeDirect, storeMachine } from "./storeActor.ts";

/** One actor of the broker node. */
export interface BrokerActorEntry {
  /** name it is hosted under (see `BrokerActor` in transport/protocol.ts) */
  name: string;
  /** xstate logic; its input is `{ ctx }` */
  logic: AnyActorLogic;
  /** when false the entry is skipped (e.g. a part only a slave or a master runs) */
  enabled?: (ctx: BrokerContext) => boolean;
  /**
   * asked `{ type: "SHUTDOWN" }` at close, in reverse start order, before the node closes; the
   * actor answers once it let go of what it holds (unregistered, drained, persisted)
   */
  shutdown?: boolean;
  supervision?: Supervision;
  /** hot events the node hands to their handler without a macrostep (see DirectHandlers) */
  direct?: DirectHandlers;
  /**
   * event types only the broker's own process sends (timer ticks, self-sent completions, hand-offs
   * between its actors): refused when they come from the network, as SHUTDOWN always is
   */
  localOnly?: string[];
}

/** The broker's actors in start order; the registrar comes last so a broker registers only when ready. */
export const brokerActors: BrokerActorEntry[] = [
  { name: BrokerActor.STORE, logic: storeMachine, shutdown: true, direct: storeDirect, localOnly: ["PUT_GROUP", "PUT_DONE"] },
  { name: BrokerActor.BROKER, logic: brokerMachine, direct: brokerDirect },
  // consumption: offsets first so it persists last at close, after held pulls were answered
  { name: BrokerActor.OFFSETS, logic: offsetsMachine, shutdown: true, localOnly: ["PERSIST"] },
  { name: BrokerActor.CONSUMERS, logic: consumersMachine, localOnly: ["SCAN"] },
  { name: BrokerActor.PULL, logic: pullMachine, direct: pullDirect },
  {
    name: BrokerActor.HOLD,
    logic: holdMachine,
    shutdown: true,
    direct: holdDirect,
    localOnly: ["HOLD_PULL", "ARRIVAL", "CHECK", "EXPIRE"],
  },
  { name: BrokerActor.LOCKS, logic: locksMachine },
  // delay levels and retries: the scheduler stops (and persists its progress) before the store drains
  {
    name: BrokerActor.SCHEDULER,
    logic: schedulerMachine,
    enabled: (ctx) => ctx.config.role !== "SLAVE",
    shutdown: true,
    localOnly: ["TICK"],
  },
  { name: BrokerActor.SENDBACK, logic: sendbackMachine },
  // replication: a master serves its slaves, a slave replicates from its master
  {
    name: BrokerActor.HA,
    logic: haMachine,
    enabled: (ctx) => ctx.config.role !== "SLAVE",
    shutdown: true,
    localOnly: ["HA_WAKE", "HA_TICK"],
  },
  { name: BrokerActor.HA, logic: haClientMachine, enabled: (ctx) => ctx.config.role === "SLAVE", shutdown: true },
  // message lookup by key and by id (reads the store only)
  { name: QUERY_MESSAGE_ACTOR, logic: queryMessageMachine },
  // NAMESRV_BACK names the address to register with: from the network it would send the topic table
  // anywhere, and open a connection per address given
  {
    name: BrokerActor.REGISTRAR,
    logic: registrarMachine,
    shutdown: true,
    localOnly: ["REGISTER_NOW", "TOPIC_CHANGED", "NAMESRV_BACK"],
  },
];
