// A key file whose path is itself 40 Z85 characters (letters, digits, "/", ".", "-" are all Z85):
// the file is what was meant, not the path's text as a key.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { INSPECTOR_ENV, INSPECTOR_KEY_ENV, inspectorKeyFromEnv } from "../../actors/client/clientInstance.ts";
import { CURVE_KEY_LENGTH } from "../../actors/runtime/curveOptions.ts";
import { writePair } from "../../bin/commands/keygen.ts";
import { curveAllowArg, curveSecretOf, curveServerArg } from "../../bin/curveFlags.ts";
import { curveKeyPair } from "../../transport/curve.ts";
import { isMQError } from "../../transport/protocol.ts";

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

test("--curve-allow takes .pub files' keys and refuses keygen's .key file (a secret key put in an allow-list), naming its public key", () => {
  const pair = curveKeyPair();
  const prefix = path.join(dir, "allow");
  writePair(prefix, pair.publicKey, pair.secretKey, false);
  assert.deepEqual(curveAllowArg(`${prefix}.pub`).keys, [pair.publicKey]);
  assert.throws(
    () => curveAllowArg(`${prefix}.key`),
    (e: unknown) =>
      isMQError(e, "ILLEGAL_ARGUMENT") &&
      /--curve-allow: .*allow\.key holds a secret key/.test((e as Error).message) &&
      (e as Error).message.includes(pair.publicKey) &&
      !(e as Error).message.includes(pair.secretKey),
  );
});
