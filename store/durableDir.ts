/**
 * Directory entries that survive a power loss. fdatasync of a file makes its bytes durable, not
 * its name: a segment created just before an acknowledged, fdatasync'ed write could vanish with
 * its directory entry. So a new file's directory, and the parent of every directory created, is
 * fsync'ed once, when it is created (a segment roll, a queue's first message; never per message).
 */
import fs from "node:fs";
import path from "node:path";

/** The primitive; tests swap it to see which directories are synced. */
export const dirIo = {
  fsync(dir: string): void {
    let fd = -1;
    try {
      fd = fs.openSync(dir, "r");
      fs.fsyncSync(fd);
    } catch {
      /* some file systems refuse directory fsync; what was written still survives a process crash */
    } finally {
      if (fd >= 0) fs.closeSync(fd);
    }
  },
};

/** fsync of `dir`, so the files created or renamed in it keep their names after a power loss. */
export function fsyncDir(dir: string): void {
  dirIo.fsync(dir);
}

/** `mkdir -p dir`, then fsync of the parent of each directory it created (nothing when it existed). */
export function mkdirDurable(dir: string): void {
  const first = fs.mkdirSync(dir, { recursive: true });
  if (first === undefined) return;
  const top = path.dirname(first);
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    fsyncDir(d);
    if (d === top || d === path.dirname(d)) break;
  }
}
