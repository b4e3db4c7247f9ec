/**
 * The CURVE options of servers (`curve` on NameServer and Broker) and of links to servers
 * (`curveClient` / `curveServerKey` on Producer, PushConsumer, PullConsumer, Admin, and on a
 * broker's links to its name servers and master), checked strictly and turned into the transport's
 * options (transport/curve.ts). Every error names the option; none quotes a secret key.
 */
import type { CurveClientOptions, CurveServerOptions } from "../../transport/curve.ts";
import { curveKeyPair, curvePublicKeyOf, z85Decode } from "../../transport/curve.ts";
import { optionNamesOf } from "../../transport/optionNames.ts";
import { MQError, shownValue } from "../../transport/protocol.ts";

/** Characters of a Z85 CURVE key (32 bytes). */
export const CURVE_KEY_LENGTH = 40;

/** A server's CURVE keys: `curve` of {@link NameServer} and {@link Broker}. */
export interface CurveServerKeys {
  /** the server's secret key (Z85, 40 characters; `actormq keygen` or `curveKeyPair()`) */
  secretKey: string;
  /** its public key: checked against the secret key when given, derived from it when not */
  publicKey?: string;
  /**
   * When given, only clients presenting one of these public keys (or the server's own, which every
   * process holding the server's secret key may use) complete their handshake; others are refused
   * and logged with their address and key. Without it any client that knows the server's public key connects.
   */
  allowedClientKeys?: string[];
}

/** A client's own CURVE key pair: `curveClient`. */
export interface CurveClientKeys {
  secretKey: string;
  /** checked against the secret key when given, derived from it when not */
  publicKey?: string;
}

/** The servers' public key: one for every server, or one per address (`tcp://host:port`). */
export type CurveServerKey = string | Record<string, string>;

/** The options of a node's links to CURVE servers. */
export interface CurveLinkOptions {
  /**
   * This client's key pair, which servers with an allow-list check. Needs `curveServerKey`.
   * @default a fresh key pair per process when `curveServerKey` is given
   */
  curveClient?: CurveClientKeys;
  /** The servers' public key: set, every link of this client uses CURVE. @default none (plaintext) */
  curveServerKey?: CurveServerKey;
}

/** The names {@link CurveLinkOptions} may hold. */
export const CURVE_LINK_OPTION_NAMES = optionNamesOf<CurveLinkOptions>()(["curveClient", "curveServerKey"]);

/** Why a string is not a CURVE key, or null; never quotes it (it may be a secret key). */
function keyProblem(key: unknown): string | null {
  if (typeof key !== "string") return key === undefined || key === null ? "is missing" : `is a ${typeof key}, not a string`;
  if (key.length !== CURVE_KEY_LENGTH) return `has ${key.length} characters, not ${CURVE_KEY_LENGTH}`;
  try {
    z85Decode(key);
  } catch (e) {
    return `is not Z85 (${(e as Error).message.replace(/^Not a Z85 key: /, "").replace(/\.$/, "")})`;
  }
  return null;
}

/**
 * Checks that `key` is a Z85 CURVE key (40 characters decoding to 32 bytes); throws MQError
 * ILLEGAL_ARGUMENT naming `option`. A secret key is never quoted; a public one is, shortened.
 */
export function checkCurveKeyOption(key: unknown, option: string, secret: boolean): asserts key is string {
  const problem = keyProblem(key);
  if (problem === null) return;
  const shown = !secret && typeof key === "string" && key.length > 0 ? ` ("${key.length > 12 ? `${key.slice(0, 12)}...` : key}")` : "";
  throw new MQError(
    "ILLEGAL_ARGUMENT",
    `${option}${shown} ${problem}: a CURVE ${secret ? "secret" : "public"} key is ${CURVE_KEY_LENGTH} Z85 characters (32 bytes), as \`actormq keygen\` or curveKeyPair() print them.`,
  );
}

/** A key pair whose public key, when given, belongs to the secret key; throws ILLEGAL_ARGUMENT naming `option`. */
function keyPairOf(value: unknown, option: string): { publicKey: string; secretKey: string } {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      // only the type: a secret key passed by itself would otherwise be printed whole
      `${option} must be an object { secretKey, publicKey? } of Z85 CURVE keys, got ${value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`}.`,
    );
  const { secretKey, publicKey } = value as { secretKey?: unknown; publicKey?: unknown };
  checkCurveKeyOption(secretKey, `${option}.secretKey`, true);
  const derived = curvePublicKeyOf(secretKey);
  if (publicKey !== undefined) {
    checkCurveKeyOption(publicKey, `${option}.publicKey`, false);
    if (publicKey !== derived)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `${option}.publicKey is not the public key of ${option}.secretKey (that one's is ${derived}): the two keys come from different pairs. Give the pair \`actormq keygen\` printed, or the secret key alone.`,
      );
  }
  return { publicKey: derived, secretKey };
}

/**
 * The transport options of a server's `curve` (undefined when not given); throws MQError
 * ILLEGAL_ARGUMENT naming the option for a bad key, a public key of another pair, or an allow-list
 * that is not an array of public keys.
 */
export function resolveCurveServer(value: unknown, option = "curve"): CurveServerOptions | undefined {
  if (value === undefined || value === null) return undefined;
  const pair = keyPairOf(value, option);
  const allowed = (value as { allowedClientKeys?: unknown }).allowedClientKeys;
  if (allowed === undefined) return pair;
  if (!Array.isArray(allowed))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `${option}.allowedClientKeys must be an array of client public keys (Z85), got ${shownValue(allowed)}.`,
    );
  for (const [i, k] of allowed.entries()) checkCurveKeyOption(k, `${option}.allowedClientKeys[${i}]`, false);
  // the server's own key: brokers and name servers started with one key pair reach each other with it
  return { ...pair, allowedClientKeys: [...new Set([...(allowed as string[]), pair.publicKey])] };
}

/** The key pair a process uses towards CURVE servers when given none (one per process, made on first use). */
let processKeys: { publicKey: string; secretKey: string } | undefined;

/**
 * The transport options of a node's links (`curveClient`, `curveServerKey`); undefined when
 * neither is given (plaintext). `ownKeys`: the key pair to use when `curveClient` is not given (a
 * broker's server keys), else a fresh one per process. Throws MQError ILLEGAL_ARGUMENT naming the option.
 */
export function resolveCurveLink(
  opts: CurveLinkOptions | undefined,
  ownKeys?: { publicKey: string; secretKey: string },
): CurveClientOptions | undefined {
  const { curveClient, curveServerKey } = opts ?? {};
  if (curveServerKey === undefined || curveServerKey === null) {
    if (curveClient !== undefined && curveClient !== null)
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        "curveClient needs curveServerKey: the servers' public key, without which no CURVE link can be made (`actormq keygen` wrote it to the .pub file).",
      );
    return undefined;
  }
  let serverKeys: string | Record<string, string>;
  if (typeof curveServerKey === "string") {
    checkCurveKeyOption(curveServerKey, "curveServerKey", false);
    serverKeys = curveServerKey;
  } else if (typeof curveServerKey === "object" && !Array.isArray(curveServerKey)) {
    serverKeys = {};
    for (const [address, key] of Object.entries(curveServerKey)) {
      checkCurveKeyOption(key, `curveServerKey["${address}"]`, false);
      serverKeys[address] = key;
    }
  } else
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `curveServerKey must be the servers' public key (Z85), or an object of one per address, got ${shownValue(curveServerKey)}.`,
    );
  const pair =
    curveClient !== undefined && curveClient !== null
      ? keyPairOf(curveClient, "curveClient")
      : (ownKeys ?? (processKeys ??= curveKeyPair()));
  return { ...pair, serverKeys };
}
