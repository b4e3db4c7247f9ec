/**
 * `arg` as a POSIX shell reads it back, for the commands printed as hints: single-quoted (a `'`
 * written `'\''`) unless it holds only characters no shell treats specially.
 */
export function shellArg(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`;
}
