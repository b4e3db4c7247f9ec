/**
 * The visual debugger on the command line: `actormq start` serves it (collecting once opened),
 * `actormq inspect --cluster` collects every process of a cluster file, client processes publish
 * with ACTORMQ_INSPECTOR, and a non-loopback address needs an explicit flag.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { INSPECTOR_ENV, INSPECTOR_KEY_ENV, inspectorKeyFromEnv } from "../../actors/client/clientInstance.ts";
import { ActorNode } from "../../actors/runtime/index.ts";
import { writePair } from "../../bin/commands/keygen.ts";
import { curveKeyPair } from "../../transport/curve.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { bin, cli, root } from "./cliRun.ts";

interface Running {
  child: ChildProcess;
  /** stdout and stderr */
  out: () => string;
  /** stderr alone */
  err: () => string;
  exit: Promise<number | null>;
}

function run(args: string[], cwd: string, env: Record<string, string> = {}): Running {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn", ...env },
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => {
    out += d.toString();
    err += d.toString();
  });
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, out: () => out, err: () => err, exit };
}

/** `actormq start` on ephemeral ports with its store under `dir`, and `extra` flags. */
function runStart(dir: string, extra: string[]): Running {
  return run(
    ["start", "--namesrv-listen", "tcp://127.0.0.1:*", "--listen", "tcp://127.0.0.1:*", "--store", path.join(dir, "data"), ...extra],
    dir,
  );
}

interface StateView {
  stats: { received: number; refusedPublishers: number };
  nodes: { nodeId: string; role: string; status: string; actors: { actorName: string }[] }[];
}

async function state(url: string): Promise<StateView> {
  return (await (await fetch(new URL("/api/state", url))).json()) as StateView;
}

test("start serves the inspector; inspect --cluster collects a cluster's processes; clients publish with ACTORMQ_INSPECTOR", async () => {
  const { dir, cleanup } = await tempDir("actormq-inspect-cli-");
  const s = runStart(dir, ["--flush", "async"]);
  let insp: Running | undefined;
  try {
    await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `start to be ready (${s.out()})`);
    const m =
      /name server\s+(\S+)\n\s+broker\s+\S+ (\S+)[^\n]*\n\s+inspector\s+(http:\/\/127\.0\.0\.1:\d+\/) \(clients publish with ACTORMQ_INSPECTOR=(\S+)\)/.exec(
        s.out(),
      );
    assert.ok(m, s.out());
    const [, ns, broker, url, collector] = m;
    // served at once, collecting from the first view on
    const page = await fetch(url!);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<html/i);
    const started = await waitFor(
      async () => {
        const v = await state(url!);
        return v.nodes.some((n) => n.role === "broker") && v.nodes.some((n) => n.role === "nameserver") ? v : undefined;
      },
      10_000,
      "name server and broker in the start inspector's tree",
    );
    assert.ok(started.stats.received > 0);

    // a client process publishes its actors to the collector named in ACTORMQ_INSPECTOR
    const sent = await cli(["send", "--namesrv", ns!, "--topic", "InspCli", "hello"], { env: { ACTORMQ_INSPECTOR: collector! } });
    assert.equal(sent.code, 0, sent.err);
    await waitFor(
      async () => (await state(url!)).nodes.some((n) => n.role === "client"),
      10_000,
      "the send command's client process in the tree",
    );

    // a cluster file naming the same processes: actormq inspect collects each of them
    const cf = {
      version: 1,
      createdAt: new Date().toISOString(),
      nameservers: [ns],
      processes: [
        { name: "namesrv-0", role: "nameserver", host: "localhost", listen: ns, address: ns, pid: s.child.pid, dir, logFile: "", argv: [] },
        {
          name: "broker-a",
          role: "master",
          host: "localhost",
          brokerName: "broker-a",
          brokerId: 0,
          listen: broker,
          address: broker,
          pid: s.child.pid,
          dir,
          logFile: "",
          argv: [],
        },
      ],
    };
    writeFileSync(path.join(dir, "cluster.json"), JSON.stringify(cf));
    insp = run(["inspect", "--cluster", path.join(dir, "cluster.json")], root);
    await waitFor(() => /Press Ctrl-C/.test(insp!.out()), 30_000, `inspect to be ready (${insp!.out()})`);
    const iu = /actormq inspector (http:\/\/127\.0\.0\.1:\d+\/)/.exec(insp.out())?.[1];
    assert.ok(iu, insp.out());
    assert.match(insp.out(), new RegExp(`collecting\\s+${ns!.replace(/[.*]/g, "\\$&")}, ${broker!.replace(/[.*]/g, "\\$&")}`));
    // a process is listed alive once it answers the probe; its actors' records arrive after that
    const v = await waitFor(
      async () => {
        const x = await state(iu);
        const alive = x.nodes.filter((n) => n.status === "alive" && (n.role === "broker" || n.role === "nameserver"));
        return alive.length >= 2 && alive.some((n) => n.role === "broker" && n.actors.some((a) => a.actorName === "store")) ? x : undefined;
      },
      15_000,
      "both processes of the cluster file collected, the broker with its store actor",
    );
    assert.ok(v.nodes.some((n) => n.role === "nameserver" && n.status === "alive"));
    insp.child.kill("SIGTERM");
    assert.equal(await insp.exit, 0);
    insp = undefined;
  } finally {
    insp?.child.kill("SIGKILL");
    s.child.kill("SIGTERM");
    assert.equal(await s.exit, 0, s.out());
    await cleanup();
  }
});

test("inspect refuses a non-loopback page without --allow-remote, and an empty target list", async () => {
  const remote = await cli(["inspect", "--collect", "tcp://127.0.0.1:1", "--listen", "0.0.0.0:0"]);
  assert.notEqual(remote.code, 0);
  assert.match(remote.err, /loopback only.*--allow-remote/);
  assert.equal(remote.err.trim().split("\n").length, 1);
  const nothing = await cli(["inspect"]);
  assert.notEqual(nothing.code, 0);
  assert.match(nothing.err, /Nothing to inspect/);
  const missing = await cli(["inspect", "--cluster", path.join(root, "no-such-dir", "cluster.json")]);
  assert.notEqual(missing.code, 0);
  // the file named, once; the advice names the directory and the flag that was used
  assert.ok(missing.err.includes(`No cluster file at ${path.join(root, "no-such-dir", "cluster.json")}:`), missing.err);
  assert.doesNotMatch(missing.err, /cluster\.json\/cluster\.json/);
  assert.match(missing.err, /`actormq cluster up --dir \S*no-such-dir` or pass the right --cluster\./);
  const missingDir = await cli(["inspect", "--cluster", path.join(root, "no-such-dir")]);
  assert.ok(missingDir.err.includes(`No cluster file at ${path.join(root, "no-such-dir", "cluster.json")}:`), missingDir.err);
});

test("inspect asks nodes to publish to --collector-advertise, and warns when nodes elsewhere would be asked to publish to loopback", async () => {
  const node = await ActorNode.start({ listen: "tcp://127.0.0.1:*", nodeId: "inspect-advertise" });
  const asked: string[] = [];
  const publish = node.publishInspection.bind(node);
  node.publishInspection = (endpoint, opts) => {
    asked.push(endpoint);
    return publish(endpoint, opts);
  };
  // TEST-NET-1: a node on another host (never answers)
  const elsewhere = "tcp://192.0.2.1:9876";
  const ready = (r: Running, what: string) => waitFor(() => /Press Ctrl-C/.test(r.out()), 30_000, `${what} to be ready (${r.out()})`);
  const advertised = run(["inspect", "--collect", `${node.address},${elsewhere}`, "--collector-advertise", "tcp://192.0.2.10:*"], root);
  let loopback: Running | undefined;
  try {
    await ready(advertised, "inspect --collector-advertise");
    const endpoint = await waitFor(() => asked[0], 10_000, "the node asked to publish");
    assert.match(endpoint, /^tcp:\/\/192\.0\.2\.10:\d+$/);
    assert.ok(advertised.out().includes(`collector    ${endpoint} (clients: ACTORMQ_INSPECTOR=${endpoint})`), advertised.out());
    assert.equal(advertised.err(), "");

    loopback = run(["inspect", "--collect", elsewhere], root);
    await ready(loopback, "inspect");
    const warning = await waitFor(() => loopback!.err(), 5000, "a warning");
    assert.equal(warning.trim().split("\n").length, 1, warning);
    assert.match(warning, /192\.0\.2\.1:9876.*tcp:\/\/127\.0\.0\.1:\d+.*--collector-advertise/);

    const bad = await cli(["inspect", "--collect", elsewhere, "--collector-advertise", "192.0.2.10:7777"]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /ILLEGAL_ARGUMENT.*192\.0\.2\.10:7777.*tcp:\/\/host:port/);
    advertised.child.kill("SIGTERM");
    loopback.child.kill("SIGTERM");
    assert.equal(await advertised.exit, 0);
    assert.equal(await loopback.exit, 0);
  } finally {
    advertised.child.kill("SIGKILL");
    loopback?.child.kill("SIGKILL");
    await node.close();
  }
});

test("inspect --cluster of a CURVE cluster uses the cluster's key file: no key flags needed", async () => {
  const { dir, cleanup } = await tempDir("actormq-inspect-curve-");
  const { secretKey, publicKey } = curveKeyPair();
  const keyFile = path.join(dir, "curve.key");
  writeFileSync(keyFile, `# test key (public key ${publicKey})\n${secretKey}\n`, { mode: 0o600 });
  // an allow-list without the cluster's own key: the inspector presents that pair, which its servers admit
  const allowFile = path.join(dir, "allow.txt");
  writeFileSync(allowFile, `${curveKeyPair().publicKey}\n`);
  const s = runStart(dir, ["--no-inspector", "--curve-secret", keyFile, "--curve-allow", allowFile]);
  let insp: Running | undefined;
  let keyed: Running | undefined;
  let filed: Running | undefined;
  let plain: Running | undefined;
  try {
    await waitFor(() => /Press Ctrl-C/.test(s.out()), 30_000, `start to be ready (${s.out()})`);
    const m = /name server\s+(\S+)\n\s+broker\s+\S+ (\S+)/.exec(s.out());
    assert.ok(m, s.out());
    const [, ns, broker] = m;
    const member = { host: "localhost", pid: s.child.pid, dir, logFile: "", argv: [] };
    const cf = {
      version: 1,
      createdAt: new Date().toISOString(),
      nameservers: [ns],
      up: {
        nameservers: 1,
        brokers: 1,
        slaves: 0,
        bindHost: "127.0.0.1",
        flush: "sync",
        curveSecretFile: keyFile,
        curveAllowFile: allowFile,
      },
      processes: [
        { ...member, name: "namesrv-0", role: "nameserver", listen: ns, address: ns },
        { ...member, name: "broker-a", role: "master", brokerName: "broker-a", brokerId: 0, listen: broker, address: broker },
      ],
    };
    writeFileSync(path.join(dir, "cluster.json"), JSON.stringify(cf));
    insp = run(["inspect", "--cluster", dir], root);
    await waitFor(() => /Press Ctrl-C/.test(insp!.out()), 30_000, `inspect to be ready (${insp!.out()})`);
    const iu = /actormq inspector (http:\/\/127\.0\.0\.1:\d+\/)/.exec(insp.out())?.[1];
    assert.ok(iu, insp.out());
    // both CURVE servers answer its probes and publish their actors to its (CURVE) collector
    await waitFor(
      async () => {
        const x = await state(iu);
        const alive = x.nodes.filter((n) => n.status === "alive" && n.actors.length > 0);
        return alive.some((n) => n.role === "broker") && alive.some((n) => n.role === "nameserver") ? x : undefined;
      },
      15_000,
      `both CURVE processes collected without key flags (${insp.out()})`,
    );

    // its collector is a CURVE server: the banner gives clients its endpoint and public key
    const env = /collector\s+(\S+) \(clients: ACTORMQ_INSPECTOR=(\S+) ACTORMQ_INSPECTOR_KEY=(\S+)\)/.exec(insp.out());
    assert.ok(env, insp.out());
    const [, collector, endpointEnv, collectorKey] = env;
    assert.equal(endpointEnv, collector);
    assert.equal(collectorKey!.length, 40);
    const clientArgs = (group: string) => [
      "consume",
      "--namesrv",
      ns!,
      "--curve-server",
      publicKey,
      "--curve-secret",
      keyFile,
      "--topic",
      "InspCurve",
      "--group",
      group,
      "--count",
      "1",
    ];
    // client nodes of process `pid` (the consume command's admin and consumer each have one)
    const clientsOf = (x: StateView, pid: number | undefined) =>
      x.nodes.filter((n) => n.role === "client" && n.actors.length > 0 && n.nodeId.includes(`:${pid}:`));
    // a client process given both publishes its actors over CURVE; so does one given a file holding the key
    const collectorPub = path.join(dir, "collector.pub");
    writeFileSync(collectorPub, `# actormq CURVE public key\n${collectorKey}\n`);
    keyed = run(clientArgs("cg-keyed"), root, { ACTORMQ_INSPECTOR: collector!, ACTORMQ_INSPECTOR_KEY: collectorKey! });
    filed = run(clientArgs("cg-filed"), root, { ACTORMQ_INSPECTOR: collector!, ACTORMQ_INSPECTOR_KEY: collectorPub });
    await waitFor(
      async () => {
        // one that refused its key has exited: fail with its error rather than wait out the timeout
        for (const c of [keyed!, filed!]) if (c.child.exitCode !== null) assert.fail(`a keyed client exited: ${c.out()}`);
        const x = await state(iu);
        return clientsOf(x, keyed!.child.pid).length > 0 && clientsOf(x, filed!.child.pid).length > 0;
      },
      15_000,
      "the keyed client processes in the tree (given the key, and a file holding it)",
    );
    // one without the key publishes in plaintext: the collector refuses its handshake, and counts it
    const refusedBefore = (await state(iu)).stats.refusedPublishers;
    assert.equal(refusedBefore, 0);
    plain = run(clientArgs("cg-plain"), root, { ACTORMQ_INSPECTOR: collector! });
    await waitFor(
      async () => (await state(iu)).stats.refusedPublishers > refusedBefore,
      15_000,
      `the plaintext client's stream refused (${plain.out()})`,
    );
    // refused at the handshake: nothing of it can arrive later
    assert.deepEqual(clientsOf(await state(iu), plain.child.pid), [], "the plaintext client's actors are not collected");
    keyed.child.kill("SIGTERM");
    filed.child.kill("SIGTERM");
    plain.child.kill("SIGTERM");
    await Promise.all([keyed.exit, filed.exit, plain.exit]);
    keyed = filed = plain = undefined;

    insp.child.kill("SIGTERM");
    assert.equal(await insp.exit, 0);
    insp = undefined;
  } finally {
    keyed?.child.kill("SIGKILL");
    filed?.child.kill("SIGKILL");
    plain?.child.kill("SIGKILL");
    insp?.child.kill("SIGKILL");
    s.child.kill("SIGTERM");
    assert.equal(await s.exit, 0, s.out());
    await cleanup();
  }
});

test("a client refuses a malformed ACTORMQ_INSPECTOR_KEY, a missing, malformed or secret key file in one line naming the variable", async () => {
  const { dir, cleanup } = await tempDir("actormq-inspect-key-");
  try {
    // not 40 characters long: a path of 40 Z85 characters would be taken as a key
    const prefix = path.join(dir, "collector-pair");
    const { publicKey, secretKey: secret } = curveKeyPair();
    writePair(prefix, publicKey, secret, false);
    const send = (key: string) =>
      cli(["send", "--namesrv", "tcp://127.0.0.1:1", "--topic", "InspKey", "hello"], {
        env: { ACTORMQ_INSPECTOR: "tcp://127.0.0.1:2", ACTORMQ_INSPECTOR_KEY: key },
      });
    // anything but a key is a path: "not-a-key" is refused as the missing file is (checked below, in-process)
    const [missing, secretFile] = await Promise.all([send(path.join(dir, "missing-collector.pub")), send(`${prefix}.key`)]);
    for (const bad of [missing, secretFile]) {
      assert.notEqual(bad.code, 0);
      assert.equal(bad.err.trim().split("\n").length, 1, bad.err);
      assert.match(bad.err, /ILLEGAL_ARGUMENT.*ACTORMQ_INSPECTOR_KEY.*actormq inspect/);
    }
    assert.match(missing.err, /missing-collector\.pub.*ENOENT/);
    assert.match(secretFile.err, /collector-pair\.key holds a secret key/);
    assert.ok(!secretFile.err.includes(secret.slice(0, 12)) && !secretFile.out.includes(secret.slice(0, 12)), "never the secret key");
    // read the way --curve-server reads its .pub file: the key alone, blank and # lines skipped
    const keyEnv = (value: string) => inspectorKeyFromEnv({ [INSPECTOR_ENV]: "tcp://127.0.0.1:2", [INSPECTOR_KEY_ENV]: value });
    assert.equal(keyEnv(`${prefix}.pub`), publicKey);
    assert.equal(keyEnv(` ${publicKey}\n`), publicKey);
    assert.throws(() => keyEnv("not-a-key"), {
      code: "ILLEGAL_ARGUMENT",
      message: /^ACTORMQ_INSPECTOR_KEY: cannot read the key file .*not-a-key \(ENOENT\)/,
    });
    const badFile = path.join(dir, "bad-collector.pub");
    writeFileSync(badFile, `# two keys\n${publicKey}\n${publicKey}\n`);
    assert.throws(() => keyEnv(badFile), {
      code: "ILLEGAL_ARGUMENT",
      message: /^ACTORMQ_INSPECTOR_KEY: .*bad-collector\.pub does not hold one key alone/,
    });
  } finally {
    await cleanup();
  }
});
