import assert from "node:assert/strict";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ConfigFile } from "../../../actors/broker/configFile.ts";
import { TopicConfigManager } from "../../../actors/broker/topicConfigManager.ts";
import { tempDir } from "../../helpers.ts";

// A file where the config directory should be makes every write fail (like EACCES or ENOSPC)
// until it is removed: a transient disk problem. The files already written go with the directory.
function blockConfigDir(dir: string): () => void {
  const p = path.join(dir, "config");
  rmSync(p, { recursive: true, force: true });
  writeFileSync(p, "not a directory");
  return () => rmSync(p);
}

test("ConfigFile: a failed write does not wedge later writes", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  let state = { v: 1 };
  const f = new ConfigFile(dir, "topics.json", () => state);
  const unblock = blockConfigDir(dir);
  await assert.rejects(f.persist(), /writing/);
  unblock();
  state = { v: 2 };
  await f.persist();
  assert.deepEqual(JSON.parse(readFileSync(f.path, "utf8")), { v: 2 });
});

test("TopicConfigManager: topics created during a failed write are written by the next change and by close", async (t) => {
  const { dir, cleanup } = await tempDir("cfgfile-");
  t.after(cleanup);
  const opts = { storeDir: dir, autoCreateTopic: true, defaultQueueNums: 4 };
  const m = await TopicConfigManager.load(opts);
  const unblock = blockConfigDir(dir);
  m.getOrAutoCreate("AutoCreatedDuringFailure"); // its background write fails
  await assert.rejects(m.createOrUpdate({ topicName: "CreatedDuringFailure", readQueueNums: 1, writeQueueNums: 1, perm: 6, order: false }));
  unblock();
  await m.createOrUpdate({ topicName: "CreatedLater", readQueueNums: 4, writeQueueNums: 4, perm: 6, order: false });
  const onDisk = Object.keys((await TopicConfigManager.load(opts)).all());
  for (const t of ["AutoCreatedDuringFailure", "CreatedDuringFailure", "CreatedLater"]) assert.ok(onDisk.includes(t), `${t} in ${onDisk}`);

  // a background write that fails while nothing else changes: close writes the table
  const unblock2 = blockConfigDir(dir);
  m.getOrAutoCreate("AutoCreatedBeforeClose");
  unblock2();
  await m.close();
  const again = Object.keys((await TopicConfigManager.load(opts)).all());
  assert.ok(again.includes("AutoCreatedBeforeClose"), `${again}`);
});
