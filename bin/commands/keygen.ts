/** `actormq keygen`: a CURVE key pair, printed or written to `<prefix>.key` (mode 0600) and `<prefix>.pub`. */
import { closeSync, constants, existsSync, openSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { mkdirs } from "../../store/mkdirs.ts";
import { curveKeyPair } from "../../transport/curve.ts";
import { MQError } from "../../transport/protocol.ts";
import { fail } from "../common.ts";

const errnoOf = (e: unknown) => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/** A key file that is there already: keygen replaces none without --force. */
const exists = (file: string) =>
  new MQError("ILLEGAL_ARGUMENT", `${file} exists: keygen does not overwrite keys. Choose another --out, or add --force.`);

/** Removes `file` (gone already is fine); MQError naming it when it cannot be removed. */
function removeFile(file: string, why: string): void {
  try {
    unlinkSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw new MQError("ILLEGAL_ARGUMENT", `Cannot ${why} ${file} (${errnoOf(e)}).`, { cause: e });
  }
}

/**
 * Writes `text` to a new file with `mode` (an existing one is refused). Throws MQError naming the
 * file; a file it created and could not fill is removed.
 */
function writeNew(file: string, text: string, mode: number): void {
  let fd: number;
  try {
    // O_EXCL: created with `mode` from the start, never readable by others for a moment
    fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") throw exists(file);
    throw new MQError("ILLEGAL_ARGUMENT", `Cannot write ${file} (${errnoOf(e)}).`, { cause: e });
  }
  try {
    try {
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    try {
      unlinkSync(file);
    } catch {
      // reported below with the write's error
    }
    throw new MQError("ILLEGAL_ARGUMENT", `Cannot write ${file} (${errnoOf(e)}).`, { cause: e });
  }
}

/**
 * Writes the pair whole or not at all (making a missing directory of `prefix`, mode 0700): `.key`
 * then `.pub`, each a new file; when the second cannot be written the first is removed. With `force` the existing files are removed first (`.pub`
 * before `.key`: a `.pub` that cannot be removed, say a directory, fails before anything is written).
 */
export function writePair(prefix: string, publicKey: string, secretKey: string, force: boolean): void {
  const keyFile = `${prefix}.key`;
  const pubFile = `${prefix}.pub`;
  try {
    // `--out keys/cluster` in a fresh directory: keys/ is made, private since it holds a secret key
    mkdirs(path.dirname(prefix), 0o700);
  } catch (e) {
    throw new MQError(
      "ILLEGAL_ARGUMENT",
      `Cannot make the directory ${path.dirname(prefix)} (${errnoOf(e)}). Give --out a path in a directory you can write in.`,
      { cause: e },
    );
  }
  if (force) {
    for (const file of [pubFile, keyFile]) removeFile(file, "replace");
  } else {
    // both checked first, so that an existing .pub is named before a .key is written
    for (const file of [keyFile, pubFile]) if (existsSync(file)) throw exists(file);
  }
  writeNew(keyFile, `# actormq CURVE secret key (public key ${publicKey}): keep it private\n${secretKey}\n`, 0o600);
  try {
    writeNew(pubFile, `# actormq CURVE public key\n${publicKey}\n`, 0o644);
  } catch (e) {
    // a secret key without its .pub would be taken for a pair written whole
    try {
      unlinkSync(keyFile);
    } catch (u) {
      throw new MQError(
        "ILLEGAL_ARGUMENT",
        `${(e as Error).message} The secret key written to ${keyFile} could not be removed (${errnoOf(u)}): delete it.`,
        { cause: e },
      );
    }
    throw new MQError("ILLEGAL_ARGUMENT", `${(e as Error).message} Nothing was written (${keyFile} removed).`, { cause: e });
  }
}

export function addKeygenCommand(program: Command): void {
  program
    .command("keygen")
    .description(
      "Make a CURVE key pair for --curve-secret / --curve-server (docs/security.md): printed, or with --out written to " +
        "<prefix>.key (the secret key, mode 0600) and <prefix>.pub (the public key), both or neither.",
    )
    .option("--out <prefix>", "write <prefix>.key and <prefix>.pub (a missing directory is made, mode 0700) instead of printing the pair")
    .option("--force", "replace existing files")
    .action((f: { out?: string; force?: boolean }) => {
      // a prefix names files: "keys/" would write keys.key and keys.pub beside the directory (path.resolve drops
      // the slash), and "" would print the pair as if --out were not given
      if (f.out !== undefined && (f.out === "" || f.out.endsWith("/") || f.out.endsWith(path.sep)))
        fail(
          new MQError(
            "ILLEGAL_ARGUMENT",
            `--out takes a file prefix such as keys/cluster (it writes keys/cluster.key and keys/cluster.pub), not ${JSON.stringify(f.out)}.`,
          ),
        );
      const { publicKey, secretKey } = curveKeyPair();
      if (f.out === undefined) {
        process.stdout.write(`public-key ${publicKey}\nsecret-key ${secretKey}\n`);
        return;
      }
      const prefix = path.resolve(f.out);
      try {
        writePair(prefix, publicKey, secretKey, f.force === true);
      } catch (e) {
        fail(e);
      }
      process.stdout.write(`wrote ${prefix}.key (secret key, mode 600) and ${prefix}.pub (public key ${publicKey})\n`);
    });
}
