import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { JsonFile, type JsonFileDamage } from "../../store/index.ts";
import { MQError } from "../../transport/protocol.ts";
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

test("JsonFile.read reports a file that is not JSON and keeps a copy of it before any write replaces it", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const f = path.join(dir, "topics.json");
  JsonFile.write(f, { v: 1 });
  JsonFile.write(f, { v: 2 }); // .bak holds v 1
  const edited = '{ "v": 3,, }';
  fs.writeFileSync(f, edited);
  const reports: JsonFileDamage[] = [];
  assert.deepEqual(
    JsonFile.read(f, (r) => reports.push(r)),
    { v: 1 },
  );
  assert.equal(reports.length, 1);
  const r = reports[0]!;
  assert.equal(r.file, f);
  assert.equal(r.usedInstead, `${f}.bak`);
  assert.match(r.error, /JSON/);
  assert.ok(r.keptAs?.startsWith(`${f}.corrupt-`), r.keptAs);
  assert.equal(fs.readFileSync(r.keptAs!, "utf8"), edited);
  // read again (a restart before any write): the same copy, not a second one
  JsonFile.read(f, () => {});
  assert.equal(fs.readdirSync(dir).filter((n) => n.includes(".corrupt-")).length, 1);
  JsonFile.write(f, { v: 4 });
  assert.equal(fs.readFileSync(r.keptAs!, "utf8"), edited, "the copy survives the next write");

  // nothing readable: undefined, still reported and kept
  const g = path.join(dir, "groups.json");
  fs.writeFileSync(g, "not json");
  const none: JsonFileDamage[] = [];
  assert.equal(
    JsonFile.read(g, (x) => none.push(x)),
    undefined,
  );
  assert.equal(none.length, 1);
  assert.equal(none[0]!.usedInstead, undefined);
  assert.equal(fs.readFileSync(none[0]!.keptAs!, "utf8"), "not json");
  // a missing file is no damage
  assert.equal(
    JsonFile.read(path.join(dir, "missing.json"), () => assert.fail("reported")),
    undefined,
  );
});

test("JsonFile.read treats a file holding the JSON literal null as damaged: its .bak is read, a copy kept, and the next write keeps the .bak", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const f = path.join(dir, "consumerOffset.json");
  JsonFile.write(f, { v: 1 });
  JsonFile.write(f, { v: 2 }); // .bak holds v 1
  fs.writeFileSync(f, "null");
  const reports: JsonFileDamage[] = [];
  assert.deepEqual(
    JsonFile.read(f, (r) => reports.push(r)),
    { v: 1 },
  );
  assert.equal(reports.length, 1);
  assert.equal(reports[0]!.usedInstead, `${f}.bak`);
  assert.match(reports[0]!.error, /holds null/);
  assert.equal(fs.readFileSync(reports[0]!.keptAs!, "utf8"), "null");
  // the null is not copied over the .bak by the next write
  JsonFile.write(f, { v: 3 });
  assert.deepEqual(JSON.parse(fs.readFileSync(`${f}.bak`, "utf8")), { v: 1 });

  // nothing else readable: undefined, and still reported
  const g = path.join(dir, "topics.json");
  fs.writeFileSync(g, "null");
  const none: JsonFileDamage[] = [];
  assert.equal(
    JsonFile.read(g, (x) => none.push(x)),
    undefined,
  );
  assert.equal(none.length, 1);
  assert.equal(none[0]!.usedInstead, undefined);
});

test("JsonFile.read reports a missing file whose .bak it read instead", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const f = path.join(dir, "topics.json");
  JsonFile.write(f, { v: 1 });
  JsonFile.write(f, { v: 2 }); // .bak holds v 1
  fs.rmSync(f);
  const reports: JsonFileDamage[] = [];
  assert.deepEqual(
    JsonFile.read(f, (r) => reports.push(r)),
    { v: 1 },
  );
  assert.equal(reports.length, 1);
  assert.equal(reports[0]!.missing, true);
  assert.equal(reports[0]!.usedInstead, `${f}.bak`);
  assert.equal(reports[0]!.keptAs, undefined);
  // a first write that stopped before its rename (no file, no .bak, a complete .tmp) is no damage
  const g = path.join(dir, "groups.json");
  fs.writeFileSync(`${g}.tmp`, JSON.stringify({ v: 9 }));
  assert.deepEqual(
    JsonFile.read(g, () => assert.fail("reported")),
    { v: 9 },
  );
});

test("a JsonFile.write that fails before its rename removes its temp file: a reopen does not take the failed write as done", async (t) => {
  const { dir, cleanup } = await tempDir();
  t.after(cleanup);
  const f = path.join(dir, "topics.json");
  // a non-empty directory in the file's place: the rename over it fails, also as root
  fs.mkdirSync(path.join(f, "obstacle"), { recursive: true });
  assert.throws(
    () => JsonFile.write(f, { v: 1 }),
    (e: unknown) => e instanceof MQError && e.code === "SYSTEM_ERROR" && e.message.includes(f),
  );
  assert.ok(!fs.existsSync(`${f}.tmp`));
  fs.rmSync(f, { recursive: true });
  assert.equal(JsonFile.read(f), undefined);
  JsonFile.write(f, { v: 2 });
  assert.deepEqual(JsonFile.read(f), { v: 2 });
});
