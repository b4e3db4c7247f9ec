/** How the CLI shows a message: one text line (`consume`, `message`), or one JSON object (their `--json`). */
import { isUtf8 } from "node:buffer";
import type { MessageExt } from "../transport/messageRecord.ts";

/** One printed line per message; bodies are shown as UTF-8 with newlines escaped. */
export function formatMessage(m: MessageExt): string {
  const body = m.body.toString("utf8").replace(/\n/g, "\\n");
  return `${m.topic} ${m.brokerName}:${m.queueId}@${m.queueOffset} ${m.msgId} tags=${m.tags ?? ""} keys=${m.keys ?? ""} reconsume=${m.reconsumeTimes} ${body}`;
}

/** A message as `--json` prints it (`message --json`, and each line of `consume --json`): MessageExt's fields, the body as a string. */
export type MessageJson = Omit<MessageExt, "body" | "tags" | "keys"> & {
  body: string;
  bodyEncoding: "utf8" | "base64";
  /** null when the message has none: every line has the same fields */
  tags: string | null;
  keys: string | null;
};

/** A body that is not UTF-8 (protobuf, still compressed) in base64: a script gets every byte back, not replacement characters. */
export function messageJson(m: MessageExt): MessageJson {
  const utf8 = isUtf8(m.body);
  return {
    ...m,
    tags: m.tags ?? null,
    keys: m.keys ?? null,
    body: m.body.toString(utf8 ? "utf8" : "base64"),
    bodyEncoding: utf8 ? "utf8" : "base64",
  };
}
