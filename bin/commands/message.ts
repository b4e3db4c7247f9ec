/** `actormq message --key K --topic T | --id ID`: look messages up by key or by message id. */
import type { Command } from "commander";
import { Admin } from "../../actors/client/index.ts";
import type { MessageExt } from "../../transport/messageRecord.ts";
import { MQError } from "../../transport/protocol.ts";
import { clientCommand, clientOptions, type JsonFlag, jsonOption, runClient, show } from "../common.ts";
import { formatMessage, messageJson } from "../messageOutput.ts";

export function addMessageCommand(program: Command): void {
  clientCommand(
    program
      .command("message")
      .description("Show messages by key (--key with --topic) or one message by id (--id).")
      .option("--key <key>", "message key")
      .option("--topic <topic>", "topic (needed with --key; with --id, only a message of this topic is shown)")
      .option("--id <msgId>", "message id (as printed by send)")
      .addOption(
        jsonOption(
          "an array of the key's messages, or the message of --id as an object, with RocketMQ's MessageExt fields (topic, queueId, queueOffset, " +
            'msgId, offsetMsgId, keys, tags, properties, bornTimestamp, storeTimestamp, ...); body is UTF-8 text, or base64 when bodyEncoding is "base64"',
        ),
      ),
  ).action((f: { namesrv: string[]; key?: string; topic?: string; id?: string } & JsonFlag) =>
    runClient(async (onExit) => {
      if (!!f.key === !!f.id) throw new MQError("ILLEGAL_ARGUMENT", "Give either --key (with --topic) or --id.");
      if (f.key && !f.topic) throw new MQError("ILLEGAL_ARGUMENT", "--key needs --topic.");
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      let found: MessageExt[];
      if (f.key) {
        found = await admin.queryMessageByKey(f.topic!, f.key);
      } else {
        const m = await admin.viewMessage(f.id!, f.topic);
        found = m ? [m] : [];
      }
      if (found.length === 0)
        throw new MQError(
          "QUERY_NOT_FOUND",
          `No message found for ${f.key ? `key "${f.key}" in ${f.topic}` : `id ${f.id}${f.topic ? ` in ${f.topic}` : ""}`}: ` +
            "check it and the name servers given (a message of another cluster is not found there); a message is deleted with its commit-log file once that file is older than the brokers' fileReservedTimeHours (72 by default).",
        );
      const text = () => found.map((m) => `${formatMessage(m)}\n`).join("");
      show(f, f.key ? found.map(messageJson) : messageJson(found[0]!), text);
    }),
  );
}
