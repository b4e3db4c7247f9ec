/** The store's public surface: the broker's store actor uses only what is exported here. */

export { FILLER_HEADER_BYTES, FILLER_MAGIC } from "./commitLog.ts";
export { DEFAULT_MESSAGE_DELAY_LEVEL, parseDelayLevels } from "./delayLevels.ts";
export type { ArrivalNotice } from "./dispatcher.ts";
export { JsonFile, type JsonFileDamage } from "./jsonFile.ts";
export type {
  DamageStats,
  DiskSpaceChange,
  FlushError,
  GetMessageResult,
  GetMessageStatus,
  MessageFilter,
  MessageStoreOptions,
  PutBatch,
  PutResult,
  RecoveryReport,
} from "./messageStore.ts";
export {
  DEFAULT_CHECKPOINT_INTERVAL_MS,
  DEFAULT_COMMIT_LOG_SEGMENT_BYTES,
  DEFAULT_CONSUME_QUEUE_ENTRIES,
  DEFAULT_FILE_RESERVED_TIME_HOURS,
  DEFAULT_STORE_HOST,
  defaultMessageStoreOptions,
  MessageStore,
  recordProperties,
  recordTopic,
} from "./messageStore.ts";
export { type OpenFileUse, openFileUse } from "./openFiles.ts";
