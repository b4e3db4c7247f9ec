/**
 * The CURVE flags (docs/security.md): `--curve-secret <file|key>` (this process's secret key),
 * `--curve-allow <file>` (a server's allowed client keys) and `--curve-server <key|file>` (the
 * servers' public key), each with its environment variable. Key files hold one Z85 key a line;
 * blank lines and lines starting with `#` are skipped. A secret key is never echoed in an error.
 */
import { statSync } from "node:fs";
import path from "node:path";
import { type Command, InvalidArgumentError, Option } from "commander";
import {
  CURVE_KEY_LENGTH,
  type CurveLinkOptions,
  type CurveServerKeys,
  curvePublicKeyOrFile,
  isExistingFile,
  isCurveKey as isKey,
  isSecretKeyFile,
  readCurveKeyFile,
  resolveCurveServer,
} from "../actors/runtime/index.ts";
import { curvePublicKeyOf } from "../transport/curve.ts";
import { MQError } from "../transport/protocol.ts";

export const CURVE_SECRET_ENV = "ACTORMQ_CURVE_SECRET";
export const CURVE_ALLOW_ENV = "ACTORMQ_CURVE_ALLOW";
export const CURVE_SERVER_ENV = "ACTORMQ_CURVE_SERVER";

/** A secret key from --curve-secret, with the file it was read from (undefined: given as a key). */
export interface CurveSecretFlag {
  secretKey: string;
  publicKey: string;
  file?: string;
}

/** The allowed client keys of --curve-allow, and the file. */
export interface CurveAllowFlag {
  keys: string[];
  file: string;
}

/** The flags as commander gives them. */
export interface CurveFlags {
  /** parsed by {@link curveSecretOf}, not by commander, whose errors quote the value */
  curveSecret?: string;
  curveAllow?: CurveAllowFlag;
  curveServer?: string;
}

/** A usage error of a flag commander parses: commander shows the value, which is public. */
const usage = (message: string) => new InvalidArgumentError(message);
/** An error about --curve-secret, parsed in the action: commander's own would quote the value. */
const secretError = (message: string) => new MQError("ILLEGAL_ARGUMENT", message);

const secrets = new Map<string, CurveSecretFlag>();

/**
 * The key of --curve-secret (or $ACTORMQ_CURVE_SECRET): a 40-character Z85 key, else a file
 * holding one; undefined when not given. MQError ILLEGAL_ARGUMENT that never quotes the key. A file
 * others may read is warned of, once.
 */
export function curveSecretOf(f: CurveFlags): CurveSecretFlag | undefined {
  if (f.curveSecret === undefined) return undefined;
  let parsed = secrets.get(f.curveSecret);
  if (!parsed) {
    parsed = parseSecret(f.curveSecret);
    secrets.set(f.curveSecret, parsed);
  }
  return parsed;
}

function parseSecret(value: string): CurveSecretFlag {
  let secretKey = value.trim();
  if (isKey(secretKey) && !isExistingFile(secretKey)) return { secretKey, publicKey: curvePublicKeyOf(secretKey) };
  const file = path.resolve(secretKey);
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (e) {
    // the value is not quoted: it may be a key with a typo (Z85 has "/" and "." too)
    throw secretError(
      `--curve-secret is neither a ${CURVE_KEY_LENGTH}-character Z85 secret key nor a file that can be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): give the key, or the .key file \`actormq keygen --out\` wrote.`,
    );
  }
  const { text, lines } = readCurveKeyFile(
    file,
    "--curve-secret",
    secretError,
    "give a file `actormq keygen --out` wrote, or the key itself",
  );
  // any 40 Z85 characters make a secret key: a .pub file's would be one everyone given that file holds
  if (/^\s*#\s*actormq CURVE public key\b/im.test(text)) {
    const key = file.endsWith(".pub") ? `${file.slice(0, -".pub".length)}.key` : "the .key file of its pair";
    throw secretError(
      `--curve-secret: ${file} holds a public key (as the .pub file of \`actormq keygen --out\`), not a secret key: give the .key file written with it (${key}).`,
    );
  }
  if (lines.length !== 1 || !isKey(lines[0]!.key))
    throw secretError(
      `--curve-secret: ${file} must hold one secret key (${CURVE_KEY_LENGTH} Z85 characters) on a line of its own, as \`actormq keygen --out\` writes it; it holds ${lines.length} key line(s)${lines.length === 1 ? " that is not a key" : ""}.`,
    );
  secretKey = lines[0]!.key;
  if ((mode & 0o077) !== 0)
    process.stderr.write(
      `actormq: warning: the secret key file ${file} may be read by other users (mode ${(mode & 0o777).toString(8)}): chmod 600 it\n`,
    );
  return { secretKey, publicKey: curvePublicKeyOf(secretKey), file };
}

/** Parses --curve-allow: a file of client public keys, one a line. */
export function curveAllowArg(value: string): CurveAllowFlag {
  const file = path.resolve(value);
  const { text, lines } = readCurveKeyFile(file, "--curve-allow", usage, "give a file `actormq keygen --out` wrote");
  // keygen's .key file: the secret key would be taken as a client's public key, and that client never allowed
  if (lines.length === 1 && isKey(lines[0]!.key) && isSecretKeyFile(text, lines[0]!.key))
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `--curve-allow: ${file} holds a secret key (public key ${curvePublicKeyOf(lines[0]!.key)}), not clients' public keys: list the keys of the clients' .pub files, one a line.`,
    );
  const keys = lines.map(({ line, key }) => {
    if (!isKey(key))
      throw usage(
        `--curve-allow: line ${line} of ${file} is not a public key (${CURVE_KEY_LENGTH} Z85 characters, as the .pub files of \`actormq keygen --out\` hold).`,
      );
    return key;
  });
  if (keys.length === 0)
    throw usage(`--curve-allow: ${file} holds no key: it would refuse every client. Add the clients' public keys, one a line.`);
  return { keys, file };
}

/**
 * Parses --curve-server: a server's public key, or a file holding it (a .pub file). A file of a
 * secret key (a .key file) is refused with MQError ILLEGAL_ARGUMENT, which never quotes the key:
 * passed on, the secret key would be used as the servers' public key, and every handshake fail.
 */
export function curveServerArg(value: string): string {
  return curvePublicKeyOrFile(value, {
    option: "--curve-server",
    whose: "the servers'",
    err: usage,
    unreadable: "give a file `actormq keygen --out` wrote, or the key itself",
    file: "as the .pub file of `actormq keygen --out`",
    notSecret: (file) => {
      const pub = file.endsWith(".key") ? `${file.slice(0, -".key".length)}.pub` : "the .pub file of its pair";
      return `give the .pub file \`actormq keygen --out\` wrote with it (${pub}), or the public key itself; the secret key stays with the servers`;
    },
  });
}

const secretOption = (help: string) => new Option("--curve-secret <file|key>", help).env(CURVE_SECRET_ENV);
const serverOption = (help: string) => new Option("--curve-server <key|file>", help).env(CURVE_SERVER_ENV).argParser(curveServerArg);
const allowOption = () =>
  new Option("--curve-allow <file>", "with --curve-secret: only clients whose public key is in this file (one a line) may connect")
    .env(CURVE_ALLOW_ENV)
    .argParser(curveAllowArg);

/** Adds a server's CURVE flags; `links`: also --curve-server, for a broker's links to name servers and master. */
export function addServerCurveFlags(cmd: Command, links: boolean): Command {
  cmd.addOption(secretOption("CURVE: encrypt and authenticate every connection with this secret key (`actormq keygen`)"));
  cmd.addOption(allowOption());
  if (links)
    cmd.addOption(serverOption("CURVE: the name servers' and master's public key (default: this broker's own with --curve-secret)"));
  return cmd;
}

/** Adds a client command's CURVE flags. */
export function addClientCurveFlags(cmd: Command): Command {
  return cmd
    .addOption(serverOption("CURVE: the servers' public key; connect over CURVE"))
    .addOption(secretOption("CURVE: this client's secret key, for servers with an allow-list (default: a fresh key pair)"));
}

/** A server's `curve` option from its flags; ILLEGAL_ARGUMENT for --curve-allow without --curve-secret. */
export function serverCurveOf(f: CurveFlags): CurveServerKeys | undefined {
  const secret = curveSecretOf(f);
  if (f.curveAllow && !secret)
    throw new MQError("ILLEGAL_ARGUMENT", "--curve-allow needs --curve-secret: only a CURVE server checks its clients' keys.");
  if (!secret) return undefined;
  const curve = {
    secretKey: secret.secretKey,
    ...(f.curveAllow ? { allowedClientKeys: f.curveAllow.keys } : {}),
  };
  resolveCurveServer(curve); // checked now: one error line before anything starts
  return curve;
}

/** A broker's link options: --curve-server, else its own public key when it has --curve-secret. */
export function brokerLinkCurveOf(f: CurveFlags): CurveLinkOptions {
  const serverKey = f.curveServer ?? curveSecretOf(f)?.publicKey;
  return serverKey ? { curveServerKey: serverKey } : {};
}

/**
 * The links of a process that runs its own servers (`start`'s debugger): as a broker's, and with the
 * process's own key pair as the client's, which its servers admit whatever --curve-allow lists.
 */
export function ownLinkCurveOf(f: CurveFlags): CurveLinkOptions {
  const secret = curveSecretOf(f);
  return { ...brokerLinkCurveOf(f), ...(secret ? { curveClient: { secretKey: secret.secretKey } } : {}) };
}

/** A client's link options from its flags; ILLEGAL_ARGUMENT for --curve-secret without --curve-server. */
export function clientCurveOf(f: CurveFlags): CurveLinkOptions {
  const secret = curveSecretOf(f);
  if (secret && !f.curveServer)
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `--curve-secret needs --curve-server (or $${CURVE_SERVER_ENV}): the servers' public key, without which no CURVE connection can be made.`,
    );
  if (!f.curveServer) return {};
  return {
    curveServerKey: f.curveServer,
    ...(secret ? { curveClient: { secretKey: secret.secretKey } } : {}),
  };
}
