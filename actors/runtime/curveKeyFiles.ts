/**
 * CURVE key files (`actormq keygen --out` writes `<prefix>.key` and `<prefix>.pub`): one Z85 key a
 * line; blank lines and lines starting with `#` are skipped. Read for the CLI's key flags
 * (bin/curveFlags.ts) and for `ACTORMQ_INSPECTOR_KEY` of client processes. No error quotes a
 * secret key.
 */
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { curvePublicKeyOf } from "../../transport/curve.ts";
import { MQError } from "../../transport/protocol.ts";
import { CURVE_KEY_LENGTH, checkCurveKeyOption } from "./curveOptions.ts";

/** True for a string that is a well-formed CURVE key. */
export function isCurveKey(v: string): boolean {
  try {
    checkCurveKeyOption(v, "key", true);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when `value` names an existing file. A path can be 40 Z85 characters too (letters, digits,
 * "/", ".", "-"): such a value is the file, not a key, or the path's text would be used as the key.
 */
export function isExistingFile(value: string): boolean {
  try {
    return statSync(value).isFile();
  } catch {
    return false;
  }
}

/**
 * A key file's text and key lines (blank and `#` lines skipped). An unreadable file throws
 * `err(message)`, naming `option` and ending with `advice` (what to give instead).
 */
export function readCurveKeyFile(
  file: string,
  option: string,
  err: (message: string) => Error,
  advice: string,
): { text: string; lines: { line: number; key: string }[] } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw err(`${option}: cannot read the key file ${file} (${code ?? (e as Error).message}); ${advice}.`);
  }
  const lines = text
    .split(/\r?\n/)
    .map((l, i) => ({ line: i + 1, key: l.trim() }))
    .filter((l) => l.key.length > 0 && !l.key.startsWith("#"));
  return { text, lines };
}

/**
 * True when the key file `text` (holding `key` as its one key line) is a secret key file: its
 * comments say so as keygen's and cluster up's `.key` files do, or name the public key of `key`,
 * which only the file of a secret key can (keygen's and cluster up's name it; a `.pub` file does not).
 */
export function isSecretKeyFile(text: string, key: string): boolean {
  const comments = text.split(/\r?\n/).filter((l) => l.trim().startsWith("#"));
  if (comments.some((l) => /^#\s*actormq CURVE secret key\b/i.test(l.trim()))) return true;
  let derived: string;
  try {
    derived = curvePublicKeyOf(key);
  } catch {
    return false;
  }
  return comments.some((l) => l.includes(derived));
}

/** Where a public key is given, as {@link curvePublicKeyOrFile}'s errors name it. */
export interface PublicKeyOption {
  /** the flag or environment variable, first in every error */
  option: string;
  /** whose public key it is: "the servers'" */
  whose: string;
  /** makes the error of an unreadable or malformed file (a secret key file is always MQError ILLEGAL_ARGUMENT) */
  err: (message: string) => Error;
  /** what to give instead of a file that cannot be read */
  unreadable: string;
  /** how the file holding the key alone is known: "as the .pub file of `actormq keygen --out`" */
  file: string;
  /** what to give instead of the secret key file `file` */
  notSecret: (file: string) => string;
}

/**
 * A public key given as the key itself (40 Z85 characters) or as a file holding it alone (a .pub
 * file; an existing file wins over the same text read as a key). A file of a secret key (a .key file) is refused with MQError ILLEGAL_ARGUMENT, which never
 * quotes the key: passed on, the secret key would be used as the public key, and every handshake fail.
 */
export function curvePublicKeyOrFile(value: string, o: PublicKeyOption): string {
  const v = value.trim();
  if (isCurveKey(v) && !isExistingFile(v)) return v;
  const file = path.resolve(v);
  const { text, lines } = readCurveKeyFile(file, o.option, o.err, o.unreadable);
  if (lines.length !== 1 || !isCurveKey(lines[0]!.key))
    throw o.err(
      `${o.option}: ${file} does not hold one key alone (it has ${lines.length} key line(s)${lines.length === 1 ? " that is not a key" : ""}): give ${o.whose} public key (${CURVE_KEY_LENGTH} Z85 characters) or a file holding it alone, ${o.file}.`,
    );
  const key = lines[0]!.key;
  if (isSecretKeyFile(text, key))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${o.option}: ${file} holds a secret key (public key ${curvePublicKeyOf(key)}), not ${o.whose} public key: ${o.notSecret(file)}.`,
    );
  return key;
}
