/** The store's public surface: the broker's store actor uses only what is exported here. */
export {
  MessageStore, defaultMessageStoreOptions, recordProperties, recordTopic,
  DEFAULT_COMMIT_LOG_SEGMENT_BYTES, DEFAULT_CONSUME_QUEUE_ENTRIES, DEFAULT_MESSAGE_DELAY_LEVEL, DEFAULT_STORE_HOST, DEFAULT_CHECKPOINT_INTERVAL_MS,
} from "./messageStore.ts";
export type { MessageStoreOptions, PutBatch, PutResult, GetMessageResult, GetMessageStatus, MessageFilter, RecoveryReport, DamageStats } from "./messageStore.ts";
export { FILLER_MAGIC, FILLER_HEADER_BYTES } from "./commitLog.ts";
export type { ArrivalNotice } from "./dispatcher.ts";
export { parseDelayLevels } from "./dispatcher.ts";
export { JsonFile } from "./jsonFile.ts";
