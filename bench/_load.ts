/**
 * The load the client-side benches share: batches of 1 KiB messages sent with a window of
 * sendBatch calls, and a drain by push consumers of one group (both in the bench process).
 */
import { type MessageExt, type Producer, PushConsumer } from "../index.ts";

export const BODY_BYTES = 1024;
export const BATCH = 32;
/** sendBatch calls in flight: 8 x 32 = the peer benchmark's window of 256 messages */
export const CONCURRENT_BATCHES = 8;

/** `n` messages of `topic` sharing one 1 KiB body. */
export function messages(topic: string, n: number) {
  const body = Buffer.alloc(BODY_BYTES, 97);
  return Array.from({ length: n }, () => ({ topic, body }));
}

/** Sends exactly `total` messages to `topic` in batches of BATCH, CONCURRENT_BATCHES calls at a time; returns msg/s. */
export async function sendBatches(p: Producer, topic: string, total: number): Promise<number> {
  const batch = messages(topic, BATCH);
  let sent = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENT_BATCHES }, async () => {
      while (sent < total) {
        const k = Math.min(BATCH, total - sent);
        sent += k;
        const r = await p.sendBatch(k === BATCH ? batch : batch.slice(0, k));
        if (r.status !== "SEND_OK") throw new Error(`sendBatch: ${r.status}`);
      }
    }),
  );
  return sent / ((performance.now() - t0) / 1000);
}

export interface DrainOptions {
  /** members of the group, instance names `<group>-<i>` @default 1 */
  consumers?: number;
  orderly?: boolean;
  /** sees every batch the listener gets */
  onMessages?: (msgs: MessageExt[]) => void;
}

/** Starts the group's consumers at the first offset and waits for `total` messages; returns msg/s from the start. */
export async function drain(nameservers: string[], topic: string, group: string, total: number, opts: DrainOptions = {}): Promise<number> {
  const { consumers = 1, orderly = false, onMessages } = opts;
  let consumed = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const listener = async (msgs: MessageExt[]) => {
    onMessages?.(msgs);
    consumed += msgs.length;
    if (consumed >= total) done();
    return orderly ? ("SUCCESS" as const) : ("CONSUME_SUCCESS" as const);
  };
  const t0 = performance.now();
  const cs = await Promise.all(
    Array.from({ length: consumers }, (_, i) =>
      PushConsumer.start({
        group,
        nameservers,
        instanceName: `${group}-${i}`,
        subscriptions: { [topic]: "*" },
        consumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
        orderly,
        listener,
      }),
    ),
  );
  await finished;
  const secs = (performance.now() - t0) / 1000;
  await Promise.all(cs.map((c) => c.close()));
  return total / secs;
}
