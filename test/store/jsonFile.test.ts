import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { JsonFile } from "../../store/index.ts";
import { tempDir } from "../helpers.ts";

test("JsonFile writes atomically and falls back to .bak when the main file is torn or missing", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const f = path.join(dir, "config", "consumerOffset.json");
  assert.equal(JsonFile.read(f), undefined);
  JsonFile.write(f, { offsetTable: { "T@g": { 0: 1 } } });
  JsonFile.write(f, { offsetTable: { "T@g": { 0: 2 } } });
  assert.deepEqual(JsonFile.read(f), { offsetTable: { "T@g": { 0: 2 } } });
  assert.ok(!fs.existsSync(`${f}.tmp`));
  fs.writeFileSync(f, '{"offsetTable": {"T@g": ');
  assert.deepEqual(JsonFile.read(f), { offsetTable: { "T@g": { 0: 1 } } });
  fs.rmSync(f);
  assert.deepEqual(JsonFile.read(f), { offsetTable: { "T@g": { 0: 1 } } });
  // crash after the temp file was complete but before the rename
  fs.rmSync(`${f}.bak`);
  fs.writeFileSync(`${f}.tmp`, JSON.stringify({ v: 3 }));
  assert.deepEqual(JsonFile.read(f), { v: 3 });
});
