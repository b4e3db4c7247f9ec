/** `actormq send`: sends the given bodies, or one message per stdin line, and prints each result. */
import readline from "node:readline";
import type { Command } from "commander";
import { Producer } from "../../actors/client/index.ts";
import { DEFAULT_MESSAGE_DELAY_LEVEL } from "../../store/index.ts";
import { clientCommand, clientOptions, intArg, listArg, positiveIntArg, runClient } from "../common.ts";

/**
 * What `--delay-level` does, with the levels of the brokers' default messageDelayLevel spelled out
 * (`1=1s 2=5s ... 18=2h`).
 */
export const DELAY_LEVEL_HELP =
  "deliver each message only after its level's delay; 0 = no delay (the default). With the brokers' default " +
  `messageDelayLevel the levels 1 to ${DEFAULT_MESSAGE_DELAY_LEVEL.split(" ").length} are ` +
  DEFAULT_MESSAGE_DELAY_LEVEL.split(" ")
    .map((d, i) => `${i + 1}=${d}`)
    .join(" ") +
  "; a broker started with another messageDelayLevel uses its own list, and a level past its last waits as long as the last";

interface SendFlags {
  namesrv: string[];
  topic: string;
  tags?: string;
  keys?: string[];
  count: number;
  delayLevel?: number;
  group: string;
  quiet?: boolean;
}

export function addSendCommand(program: Command): void {
  clientCommand(
    program
      .command("send")
      .description("Send messages: each [body] argument (repeated --count times), or one message per line of stdin when no body is given.")
      .argument("[bodies...]", "message bodies")
      .requiredOption("--topic <topic>", "topic to send to")
      .option("--tags <tag>", "message tag")
      .option("--keys <keys>", "comma-separated message keys", listArg)
      .option("--count <n>", "send each body this many times", positiveIntArg, 1)
      .option("--delay-level <level>", DELAY_LEVEL_HELP, intArg)
      .option("--group <group>", "producer group", "actormq-cli-producer")
      .option("-q, --quiet", "print only a summary line"),
  ).action((bodies: string[], f: SendFlags) =>
    runClient(async (onExit) => {
      const producer = await Producer.start({ group: f.group, ...clientOptions(f) });
      onExit(() => producer.close());
      let sent = 0;
      const sendOne = async (body: string) => {
        const r = await producer.send({ topic: f.topic, body, tags: f.tags, keys: f.keys, delayLevel: f.delayLevel });
        sent++;
        if (!f.quiet) process.stdout.write(`${r.status} ${r.msgId} ${r.queue.brokerName}:${r.queue.queueId}@${r.queueOffset}\n`);
      };
      if (bodies.length > 0) {
        for (let i = 0; i < f.count; i++) for (const b of bodies) await sendOne(b);
      } else {
        const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
        for await (const line of rl) {
          if (line.length === 0) continue;
          for (let i = 0; i < f.count; i++) await sendOne(line);
        }
      }
      if (f.quiet || sent === 0) process.stdout.write(`sent ${sent} message(s) to ${f.topic}\n`);
    }),
  );
}
