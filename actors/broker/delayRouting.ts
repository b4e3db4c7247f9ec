/**
 * Where a message with a delay level is stored (RocketMQ's `transformDelayLevelMessage`,
 * reference §13): under `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, with its real topic and queue in
 * REAL_TOPIC / REAL_QID. The store's dispatcher then writes the delivery time into the consume
 * queue's tag slot, and the `scheduler` actor moves the message back when it is due.
 */
import { isInt32, MessageConst, MQError, SCHEDULE_TOPIC } from "../../transport/protocol.ts";
import { DEFAULT_MESSAGE_DELAY_LEVEL, delayLevelToQueueId, parseDelayLevels } from "./delayLevels.ts";

/** Marks a DELAY property inside an encoded property string (`DELAY\u0001n\u0002`). */
const DELAY_MARK = `${MessageConst.DELAY}\u0001`;

const levelsBySpec = new Map<string, number[]>();

/** The broker's delay levels in ms (index level - 1), parsed once per spec. */
export function brokerDelayLevels(spec: string | undefined): number[] {
  const s = spec ?? DEFAULT_MESSAGE_DELAY_LEVEL;
  let levels = levelsBySpec.get(s);
  if (!levels) {
    levels = parseDelayLevels(s);
    levelsBySpec.set(s, levels);
  }
  return levels;
}

/** Where a put goes after the delay transformation. */
export interface ScheduledTarget {
  topic: string;
  queueId: number;
  /** properties with REAL_TOPIC, REAL_QID and the (clamped) DELAY */
  properties: Record<string, string>;
}

/** Cheap pre-check on an encoded property string, so sends without a delay decode nothing. */
export function mayCarryDelay(encodedProperties: string): boolean {
  return encodedProperties.includes(DELAY_MARK);
}

/** A DELAY property as Java's Integer.parseInt reads it: optional sign, decimal digits, an int. */
const DELAY_LEVEL_TEXT = /^[+-]?\d{1,10}$/;

/**
 * The schedule-topic target of a message bound for `topic`/`queueId` with these properties, or
 * null when it has no positive delay level (it is stored as it is). Levels above the highest are
 * clamped to it. The message's own properties object is not changed. A DELAY that is not an int is
 * MQError MESSAGE_ILLEGAL: RocketMQ's put fails on it (Integer.parseInt), rather than reading "5abc"
 * as level 5.
 */
export function scheduleTarget(
  topic: string,
  queueId: number,
  properties: Record<string, string>,
  maxLevel: number,
): ScheduledTarget | null {
  const raw = properties[MessageConst.DELAY];
  if (raw === undefined || topic === SCHEDULE_TOPIC) return null;
  const requested = Number(raw);
  if (!DELAY_LEVEL_TEXT.test(raw) || !isInt32(requested))
    throw new MQError(
      "MESSAGE_ILLEGAL",
      `The message's DELAY property is ${JSON.stringify(raw.slice(0, 40))}, not a delay level: send an integer from 0 to 2147483647 (1..18 with the default levels).`,
    );
  if (!(requested > 0) || maxLevel < 1) return null;
  const level = Math.min(requested, maxLevel);
  return {
    topic: SCHEDULE_TOPIC,
    queueId: delayLevelToQueueId(level),
    properties: {
      ...properties,
      [MessageConst.DELAY]: String(level),
      [MessageConst.REAL_TOPIC]: topic,
      [MessageConst.REAL_QUEUE_ID]: String(queueId),
    },
  };
}
