// A key file whose path is itself 40 Z85 characters (letters, digits, "/", ".", "-" are all Z85):
// the file is what was meant, not the path's text as a key.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { INSPECTOR_ENV, INSPECTOR_KEY_ENV, inspectorKeyFromEnv } from "../../actors/client/clientInstance.ts";
import { CURVE_KEY_LENGTH } from "../../actors/runtime/curveOptions.ts";
import { writePair } from "../../bin/commands/keygen.ts";
import { curveSecretOf, curveServerArg } from "../../bin/curveFlags.ts";
import { curveKeyPair } from "../../transport/curve.ts";

const dir = mkdtempSync("/tmp/k");
after(() => rmSync(dir, { recursive: true, force: true }));

/** `<dir>/<c…c>` such that `<prefix><ext>` is exactly a key's length. */
function prefixFor(ext: string, c: string): string {
  const name = c.repeat(CURVE_KEY_LENGTH - dir.length - 1 - ext.length);
  assert.ok(name.length > 0, `temp dir ${dir} too long for the test`);
  return path.join(dir, name);
}

test("a .pub or .key file whose path is 40 Z85 characters is read as the file, not taken as the key", () => {
  const pub = curveKeyPair();
  const pubPrefix = prefixFor(".pub", "a");
  writePair(pubPrefix, pub.publicKey, pub.secretKey, false);
  const pubFile = `${pubPrefix}.pub`;
  assert.equal(pubFile.length, CURVE_KEY_LENGTH);
  assert.equal(curveServerArg(pubFile), pub.publicKey);
  assert.equal(inspectorKeyFromEnv({ [INSPECTOR_ENV]: "tcp://127.0.0.1:2", [INSPECTOR_KEY_ENV]: pubFile }), pub.publicKey);

  const sec = curveKeyPair();
  const secPrefix = prefixFor(".key", "b");
  writePair(secPrefix, sec.publicKey, sec.secretKey, false);
  const keyFile = `${secPrefix}.key`;
  chmodSync(keyFile, 0o600);
  assert.equal(keyFile.length, CURVE_KEY_LENGTH);
  assert.deepEqual(curveSecretOf({ curveSecret: keyFile }), { secretKey: sec.secretKey, publicKey: sec.publicKey, file: keyFile });
});
