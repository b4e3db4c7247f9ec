/**
 * `actormq keygen` and the CURVE flags: --curve-secret, --curve-allow, --curve-server and their
 * environment variables on servers, client commands and `cluster up`.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { curvePublicKeyOf } from "../../transport/curve.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { bin, cli, oneLine } from "./cliRun.ts";

let dir: string;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await tempDir("actormq-curve-cli-");
  dir = t.dir;
  cleanup = t.cleanup;
});

after(async () => {
  await cleanup();
});

/** The key line of a key file `keygen --out` wrote. */
const keyOf = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .find((l) => l.length > 0 && !l.startsWith("#"))!;

test("keygen prints a key pair, or writes <prefix>.key (mode 600) and <prefix>.pub and does not overwrite them", async () => {
  const p = await cli(["keygen"]);
  assert.equal(p.code, 0, p.err);
  const m = /^public-key (\S{40})\nsecret-key (\S{40})\n$/.exec(p.out);
  assert.ok(m, p.out);
  assert.equal(curvePublicKeyOf(m[2]!), m[1], "a pair");

  const prefix = path.join(dir, "server");
  const w = await cli(["keygen", "--out", prefix]);
  assert.equal(w.code, 0, w.err);
  assert.equal(statSync(`${prefix}.key`).mode & 0o777, 0o600);
  const secret = keyOf(`${prefix}.key`);
  const pub = keyOf(`${prefix}.pub`);
  assert.equal(curvePublicKeyOf(secret), pub);
  assert.ok(w.out.includes(pub) && !w.out.includes(secret), "prints the public key, never the secret one");

  const again = await cli(["keygen", "--out", prefix]);
  assert.equal(again.code, 1);
  assert.match(oneLine(again.err), /server\.key exists: keygen does not overwrite keys.*--force/);
  assert.equal(keyOf(`${prefix}.key`), secret, "left as it was");
  const forced = await cli(["keygen", "--out", prefix, "--force"]);
  assert.equal(forced.code, 0, forced.err);
  assert.notEqual(keyOf(`${prefix}.key`), secret);
  assert.equal(statSync(`${prefix}.key`).mode & 0o777, 0o600);
});

test("keygen --out keys/cluster makes a missing directory keys (mode 700), as docs/security.md's example runs it", async () => {
  const prefix = path.join(dir, "fresh", "keys", "cluster");
  const w = await cli(["keygen", "--out", prefix]);
  assert.equal(w.code, 0, w.err);
  assert.equal(curvePublicKeyOf(keyOf(`${prefix}.key`)), keyOf(`${prefix}.pub`));
  assert.equal(statSync(path.dirname(prefix)).mode & 0o777, 0o700, "a directory made for a secret key is private");
});

test("keygen --out whose directory cannot be made (on /proc, under a file) fails at once in one line naming it, exit 1", async () => {
  const file = path.join(dir, "not-a-dir");
  writeFileSync(file, "");
  for (const prefix of ["/proc/actormq-keys/k", "/proc/actormq-keys/a/k", path.join(file, "keys", "k")]) {
    // killed, never answered: Node's recursive mkdir spun forever on /proc, deaf to SIGTERM
    const r = await cli(["-s", "KILL", "30", process.execPath, bin, "keygen", "--out", prefix], {}, "timeout");
    assert.equal(r.code, 1, `${prefix}: exit ${r.code}, ${r.err}`);
    assert.match(oneLine(r.err), /^actormq: error ILLEGAL_ARGUMENT: Cannot make the directory /, prefix);
    assert.ok(r.err.includes(path.dirname(prefix)), r.err);
    assert.match(r.err, /Give --out a path in a directory you can write in/);
  }
});

test("keygen --out refuses a prefix ending in / (it wrote <dir>.key and <dir>.pub beside the directory) and an empty one", async () => {
  const slash = path.join(dir, "slashed");
  mkdirSync(slash);
  for (const out of [`${slash}/`, ""]) {
    const w = await cli(["keygen", "--out", out]);
    assert.equal(w.code, 1, `--out ${JSON.stringify(out)}: ${w.out}`);
    assert.match(oneLine(w.err), /^actormq: error ILLEGAL_ARGUMENT: --out takes a file prefix such as keys\/cluster/);
    assert.equal(w.out, "", "no key pair printed or written");
  }
  assert.ok(!existsSync(`${slash}.key`) && !existsSync(`${slash}.pub`), "nothing written beside the directory");
});

test("keygen --out writes both files or neither: a .pub it cannot write leaves no .key behind", async () => {
  // --force, and <prefix>.pub is a directory, which it cannot replace
  const forced = path.join(dir, "half-forced");
  mkdirSync(`${forced}.pub`);
  const f = await cli(["keygen", "--out", forced, "--force"]);
  assert.equal(f.code, 1);
  assert.match(oneLine(f.err), /^actormq: error ILLEGAL_ARGUMENT: Cannot replace .*half-forced\.pub \(EISDIR\)/);
  assert.ok(!existsSync(`${forced}.key`), "no secret key left without its .pub");
  assert.ok(statSync(`${forced}.pub`).isDirectory(), "the directory is left as it was");
  // no --force, and <prefix>.pub appears only when it is written (a dangling symlink: not found by
  // the check for existing files, but there when the file is created)
  const racing = path.join(dir, "half-racing");
  symlinkSync(path.join(dir, "nowhere"), `${racing}.pub`);
  const r = await cli(["keygen", "--out", racing]);
  assert.equal(r.code, 1);
  assert.match(
    oneLine(r.err),
    /^actormq: error ILLEGAL_ARGUMENT: .*half-racing\.pub exists: .*Nothing was written \(.*half-racing\.key removed\)/,
  );
  assert.ok(!existsSync(`${racing}.key`), "the .key written first is removed");
  assert.equal(r.out, "");
});

test("bad CURVE flags are one line, and a secret key is never echoed", async () => {
  const secret = keyOf(path.join(dir, "server.key"));
  const typo = `${secret.slice(0, 39)}"`;
  const s = await cli(["nameserver", "--listen", "tcp://127.0.0.1:*", "--curve-secret", typo]);
  assert.equal(s.code, 1);
  assert.match(
    oneLine(s.err),
    /^actormq: error ILLEGAL_ARGUMENT: --curve-secret is neither a 40-character Z85 secret key nor a file that can be read \(ENOENT\)/,
  );
  assert.ok(!s.err.includes(secret.slice(0, 12)), s.err);
  const env = await cli(["nameserver", "--listen", "tcp://127.0.0.1:*"], { env: { ACTORMQ_CURVE_SECRET: path.join(dir, "none.key") } });
  assert.equal(env.code, 1);
  assert.match(oneLine(env.err), /--curve-secret is neither a 40-character Z85 secret key nor a file that can be read \(ENOENT\)/);
  assert.ok(!env.err.includes("none.key"), "the value is not quoted");
  const allow = await cli(["nameserver", "--curve-allow", path.join(dir, "server.pub")]);
  assert.equal(allow.code, 1);
  assert.match(oneLine(allow.err), /--curve-allow needs --curve-secret/);
  const badAllow = path.join(dir, "bad-allow.txt");
  writeFileSync(badAllow, "# clients\nnot-a-key\n");
  const ba = await cli(["nameserver", "--curve-secret", secret, "--curve-allow", badAllow]);
  assert.equal(ba.code, 2, "a usage error");
  assert.match(oneLine(ba.err), /--curve-allow: line 2 of .*bad-allow\.txt is not a public key/);
  const client = await cli(["topic", "list", "--curve-secret", path.join(dir, "server.key")]);
  assert.equal(client.code, 1);
  assert.match(oneLine(client.err), /--curve-secret needs --curve-server/);
  const server = await cli(["topic", "list", "--curve-server", "xyz"]);
  assert.equal(server.code, 2);
  assert.match(oneLine(server.err), /--curve-server: .*cannot read the key file/);
});

test("--curve-server refuses a file holding a secret key with ILLEGAL_ARGUMENT that names the .pub file and never the key", async () => {
  const prefix = path.join(dir, "pair");
  assert.equal((await cli(["keygen", "--out", prefix])).code, 0);
  const keyFile = `${prefix}.key`;
  const secret = keyOf(keyFile);
  const pub = keyOf(`${prefix}.pub`);
  // keygen's .key file, on the command line and in $ACTORMQ_CURVE_SERVER
  const runs = [
    await cli(["topic", "list", "--namesrv", "tcp://127.0.0.1:1", "--curve-server", keyFile]),
    await cli(["topic", "list", "--namesrv", "tcp://127.0.0.1:1"], { env: { ACTORMQ_CURVE_SERVER: keyFile } }),
  ];
  for (const r of runs) {
    assert.equal(r.code, 1, r.err);
    assert.match(
      oneLine(r.err),
      /^actormq: error ILLEGAL_ARGUMENT: --curve-server: .*pair\.key holds a secret key .*not the servers' public key: give the \.pub file .*pair\.pub/,
    );
    assert.ok(r.err.includes(pub), "names its public key");
    assert.ok(!r.err.includes(secret.slice(0, 12)) && !r.out.includes(secret.slice(0, 12)), "never the secret key");
  }
  // a file written by hand, with another name and comment, that names the secret key's public key
  const handMade = path.join(dir, "handmade.txt");
  writeFileSync(handMade, `# the servers' key pair; clients use ${pub}\n${secret}\n`);
  const h = await cli(["topic", "list", "--namesrv", "tcp://127.0.0.1:1", "--curve-server", handMade]);
  assert.equal(h.code, 1, h.err);
  assert.match(oneLine(h.err), /error ILLEGAL_ARGUMENT: --curve-server: .*handmade\.txt holds a secret key/);
  assert.ok(!h.err.includes(secret.slice(0, 12)), h.err);
});

test("--curve-secret refuses keygen's .pub file: its key taken as a secret key would be one everyone holding the .pub file has", async () => {
  const prefix = path.join(dir, "mixed");
  assert.equal((await cli(["keygen", "--out", prefix])).code, 0);
  const pubFile = `${prefix}.pub`;
  const server = serve(["nameserver", "--listen", "tcp://127.0.0.1:*", "--curve-secret", pubFile], dir);
  // a server that took it serves: stopped here, it fails the test below
  await waitFor(() => server.out().includes("listening") || server.child.exitCode !== null, 20_000);
  if (server.child.exitCode === null) server.child.kill("SIGKILL");
  const code = await server.exit;
  const client = await cli(["topic", "list", "--namesrv", "tcp://127.0.0.1:1", "--curve-server", pubFile], {
    env: { ACTORMQ_CURVE_SECRET: pubFile },
  });
  for (const [c, err] of [
    [code, server.out()],
    [client.code, client.err],
  ] as const) {
    assert.equal(c, 1, err);
    assert.match(
      oneLine(err),
      /^actormq: error ILLEGAL_ARGUMENT: --curve-secret: .*mixed\.pub holds a public key .*not a secret key: give the \.key file .*mixed\.key/,
    );
  }
});

/** A server command run until the test ends; its stdout so far. */
function serve(args: string[], cwd: string): { child: ChildProcess; out: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, out: () => out, exit };
}

test("start --curve-secret --curve-allow: clients with --curve-server and an allowed --curve-secret (or the env vars) work, others fail with AUTH_FAILED", async () => {
  const keys = path.join(dir, "start");
  mkdirSync(keys);
  for (const name of ["server", "client", "other"]) assert.equal((await cli(["keygen", "--out", path.join(keys, name)])).code, 0);
  const allow = path.join(keys, "allow.txt");
  writeFileSync(allow, `# allowed clients\n${keyOf(path.join(keys, "client.pub"))}\n`);
  const s = serve(
    [
      "start",
      "--no-inspector",
      "--store",
      path.join(dir, "data"),
      "--namesrv-listen",
      "tcp://127.0.0.1:*",
      "--listen",
      "tcp://127.0.0.1:*",
      "--curve-secret",
      path.join(keys, "server.key"),
      "--curve-allow",
      allow,
    ],
    dir,
  );
  try {
    await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `start to be ready (${s.out()})`);
    const serverPub = keyOf(path.join(keys, "server.pub"));
    assert.ok(s.out().includes(`curve        public key ${serverPub}, clients allowed: the 1 key(s) of ${allow}`), s.out());
    const namesrv = /name server {2}(tcp:\/\/\S+)/.exec(s.out())![1]!;
    const ok = await cli([
      "send",
      "--namesrv",
      namesrv,
      "--topic",
      "CurveCli",
      "hello",
      "--curve-server",
      path.join(keys, "server.pub"),
      "--curve-secret",
      path.join(keys, "client.key"),
    ]);
    assert.equal(ok.code, 0, ok.err);
    assert.match(ok.out, /^SEND_OK /);
    const viaEnv = await cli(["consume", "--namesrv", namesrv, "--topic", "CurveCli", "--from", "first", "--count", "1"], {
      env: { ACTORMQ_CURVE_SERVER: serverPub, ACTORMQ_CURVE_SECRET: path.join(keys, "client.key") },
    });
    assert.equal(viaEnv.code, 0, viaEnv.err);
    assert.match(viaEnv.out, /hello\n$/);
    const plain = await cli(["topic", "list", "--namesrv", namesrv]);
    assert.equal(plain.code, 1);
    assert.match(oneLine(plain.err), /^actormq: error AUTH_FAILED: .*requires CURVE/);
    const notAllowed = await cli([
      "topic",
      "list",
      "--namesrv",
      namesrv,
      "--curve-server",
      serverPub,
      "--curve-secret",
      path.join(keys, "other.key"),
    ]);
    assert.equal(notAllowed.code, 1);
    assert.match(oneLine(notAllowed.err), /^actormq: error AUTH_FAILED: .*not in the server's allowed client keys/);
    await waitFor(() => s.out().includes(keyOf(path.join(keys, "other.pub"))), 10_000, "the refused key logged by the server");
  } finally {
    s.child.kill("SIGTERM");
    assert.equal(await s.exit, 0);
  }
});

test("cluster up --curve-secret <key> gives every process a key file, never the key, and prints the clients' --curve-server", async () => {
  const secret = keyOf(path.join(dir, "server.key"));
  const cdir = path.join(dir, "cluster");
  const up = await cli(["cluster", "up", "--dir", cdir], { env: { ACTORMQ_CURVE_SECRET: secret } });
  try {
    assert.equal(up.code, 0, up.err);
    const pub = curvePublicKeyOf(secret);
    assert.ok(up.out.includes("--curve-server"), up.out);
    const file = path.join(cdir, "curve.key");
    assert.equal(keyOf(file), secret);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const cf = readFileSync(path.join(cdir, "cluster.json"), "utf8");
    assert.ok(!cf.includes(secret), "no secret key in cluster.json (nor in the argv it keeps)");
    const members = JSON.parse(cf).processes as { argv: string[] }[];
    for (const p of members) assert.equal(p.argv[p.argv.indexOf("--curve-secret") + 1], file);
    const namesrv = (JSON.parse(cf).nameservers as string[]).join(",");
    const send = await cli(["send", "--namesrv", namesrv, "--topic", "CurveUp", "x", "--curve-server", pub]);
    assert.equal(send.code, 0, send.err);
    const plain = await cli(["send", "--namesrv", namesrv, "--topic", "CurveUp", "x"]);
    assert.equal(plain.code, 1);
    assert.match(oneLine(plain.err), /AUTH_FAILED/);
  } finally {
    const down = await cli(["cluster", "down", "--dir", cdir]);
    assert.equal(down.code, 0, down.err);
  }
});
