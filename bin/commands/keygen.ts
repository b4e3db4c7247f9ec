/** `actormq keygen`: a CURVE key pair, printed or written to `<prefix>.key` (mode 0600) and `<prefix>.pub`. */
import { closeSync, constants, existsSync, openSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { curveKeyPair } from "../../transport/curve.ts";
import { MQError } from "../../transport/protocol.ts";
import { fail } from "../common.ts";

/**
 * Writes `text` to a new file with `mode` (an existing one is refused unless `force`, and then
 * replaced: its old mode is not kept). Throws MQError naming the file.
 */
function writeNew(file: string, text: string, mode: number, force: boolean): void {
  if (force) {
    try {
      unlinkSync(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }
  let fd: number;
  try {
    // O_EXCL: created with `mode` from the start, never readable by others for a moment
    fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST")
      throw new MQError("ILLEGAL_ARGUMENT", `${file} exists: keygen does not overwrite keys. Choose another --out, or add --force.`);
    throw new MQError("ILLEGAL_ARGUMENT", `Cannot write ${file} (${code ?? (e as Error).message}).`, { cause: e });
  }
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

export function addKeygenCommand(program: Command): void {
  program
    .command("keygen")
    .description(
      "Make a CURVE key pair for --curve-secret / --curve-server (docs/security.md): printed, or with --out written to " +
        "<prefix>.key (the secret key, mode 0600) and <prefix>.pub (the public key).",
    )
    .option("--out <prefix>", "write <prefix>.key and <prefix>.pub instead of printing the pair")
    .option("--force", "replace existing files")
    .action((f: { out?: string; force?: boolean }) => {
      const { publicKey, secretKey } = curveKeyPair();
      if (!f.out) {
        process.stdout.write(`public-key ${publicKey}\nsecret-key ${secretKey}\n`);
        return;
      }
      const prefix = path.resolve(f.out);
      try {
        // both checked first: a pair is written whole or not at all
        for (const file of [`${prefix}.key`, `${prefix}.pub`])
          if (!f.force && existsSync(file))
            throw new MQError("ILLEGAL_ARGUMENT", `${file} exists: keygen does not overwrite keys. Choose another --out, or add --force.`);
        writeNew(
          `${prefix}.key`,
          `# actormq CURVE secret key (public key ${publicKey}): keep it private\n${secretKey}\n`,
          0o600,
          f.force === true,
        );
        writeNew(`${prefix}.pub`, `# actormq CURVE public key\n${publicKey}\n`, 0o644, f.force === true);
      } catch (e) {
        fail(e);
      }
      process.stdout.write(`wrote ${prefix}.key (secret key, mode 600) and ${prefix}.pub (public key ${publicKey})\n`);
    });
}
