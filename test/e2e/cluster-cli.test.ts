import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import type { ClusterFile, ClusterProcess } from "../../actors/cluster/index.ts";
import { clusterDown, clusterUp, cmdlineOf, isAlive, planCluster, startProcess } from "../../actors/cluster/index.ts";
import { MQError } from "../../transport/protocol.ts";
import { bin, cli } from "../bin/cliRun.ts";
import { tempDir, waitFor } from "../helpers.ts";

const listenOn = (server: net.Server, port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const fail = (): void => resolve(false);
    server.once("error", fail);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", fail);
      resolve(true);
    });
  });

/** A base port below the kernel's ephemeral range (which `tcp://…:*` binds by tests running alongside
 * draw from) that is free, with `blocker` listening on base + 1. */
async function blockNextPort(blocker: net.Server): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 12_000);
    const probe = net.createServer();
    const free = await listenOn(probe, base);
    if (free) await new Promise((r) => probe.close(r));
    if (free && (await listenOn(blocker, base + 1))) return base;
  }
  throw new Error("no free port pair below the ephemeral range");
}

/** The node flags brokers run with (heap sizing, README: Operate) and the name server runs without. */
const BROKER_FLAGS = ["--max-semi-space-size=8", "--initial-old-space-size=64"];

function readCf(dir: string): ClusterFile {
  return JSON.parse(readFileSync(path.join(dir, "cluster.json"), "utf8")) as ClusterFile;
}

test("cluster up / status / kill / restart / down with two masters and a slave each", async () => {
  const { dir, cleanup } = await tempDir();
  let cf: ClusterFile | undefined;
  try {
    const up = await cli(["cluster", "up", "--dir", dir, "--brokers", "2", "--slaves", "1"]);
    assert.equal(up.code, 0, up.err);
    cf = readCf(dir);
    assert.equal(cf.processes.length, 5);
    for (const name of ["namesrv-0", "broker-a", "broker-a-s1", "broker-b", "broker-b-s1"])
      assert.match(up.out, new RegExp(`^${name}\\s`, "m"));
    for (const p of cf.processes) assert.ok(isAlive(p.pid), `${p.name} runs`);
    // brokers run with the heap sizes of BROKER_NODE_FLAGS, the name server as node starts
    for (const p of cf.processes) {
      const cmdline = readFileSync(`/proc/${p.pid}/cmdline`, "utf8").split("\0");
      for (const flag of BROKER_FLAGS)
        assert.equal(cmdline.includes(flag), p.role !== "nameserver", `${p.name} ${flag}: ${cmdline.join(" ")}`);
    }
    const slave = cf.processes.find((p) => p.name === "broker-a-s1")!;
    assert.equal(slave.argv[slave.argv.indexOf("--role") + 1], "SLAVE");
    assert.equal(slave.argv[slave.argv.indexOf("--master-address") + 1], cf.processes.find((p) => p.name === "broker-a")!.address);

    const env = { ACTORMQ_NAMESRV: cf.nameservers[0]! };
    const s = await cli(["send", "--topic", "ClusterT", "--count", "3", "m"], { env });
    assert.equal(s.code, 0, s.err);
    const master = cf.processes.find((p) => p.name === "broker-a")!;
    const res = await fetch(`http://${master.metrics}/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /# TYPE actormq_messages_in_total counter/);
    assert.match(text, /actormq_store_bytes\{broker="broker-a",brokerId="0"\} \d+/);
    assert.match(text, /actormq_put_flush_latency_seconds_count/);

    const st = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(st.code, 0, st.err);
    assert.equal((st.out.match(/ running /g) ?? []).length, 5);

    const k = await cli(["cluster", "kill", "broker-b", "--dir", dir]);
    assert.equal(k.code, 0, k.err);
    const st2 = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(st2.code, 3);
    assert.match(st2.out, /^broker-b\s.*\sdead\s/m);
    const again = await cli(["cluster", "kill", "broker-b", "--dir", dir]);
    assert.equal(again.code, 1);
    assert.equal(again.err.trim().split("\n").length, 1);
    assert.match(again.err, /not running.*cluster restart broker-b/);

    const before = cf.processes.find((p) => p.name === "broker-b")!;
    const r = await cli(["cluster", "restart", "broker-b", "--dir", dir]);
    assert.equal(r.code, 0, r.err);
    const afterB = readCf(dir).processes.find((p) => p.name === "broker-b")!;
    assert.notEqual(afterB.pid, before.pid);
    assert.equal(afterB.address, before.address, "restart keeps the port");
    const restarted = readFileSync(`/proc/${afterB.pid}/cmdline`, "utf8").split("\0");
    for (const flag of BROKER_FLAGS) assert.ok(restarted.includes(flag), `restart keeps ${flag}: ${restarted.join(" ")}`);
    cf = readCf(dir);

    const busy = await cli(["cluster", "up", "--dir", dir]);
    assert.equal(busy.code, 1);
    assert.match(busy.err, /already running/);

    const down = await cli(["cluster", "down", "--dir", dir]);
    assert.equal(down.code, 0, down.err);
    assert.match(down.out, /stopped 5 process/);
    for (const p of cf.processes) assert.ok(!isAlive(p.pid), `${p.name} stopped`);
    const stopped = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(stopped.code, 3);
    // the hint is the command that makes this cluster again, not a default one-master cluster
    assert.match(
      stopped.err,
      /5 process\(es\) not running: .*; `actormq cluster up --dir \S+ --brokers 2 --slaves 1 --log-level warn` starts the cluster again with its data \(on new ports/,
    );
  } finally {
    for (const p of cf?.processes ?? []) if (isAlive(p.pid)) process.kill(p.pid, "SIGKILL");
    await cleanup();
  }
});

test("cluster status of a stopped cluster names the `cluster up` that makes it again: its base port and flags; counts from an older file", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const up = {
      nameservers: 2,
      brokers: 3,
      slaves: 1,
      basePort: 23_000,
      bindHost: "0.0.0.0",
      advertiseHost: "10.0.0.5",
      flush: "async" as const,
    };
    // a file as `cluster up` leaves it, every process stopped (pid 0 is never ours)
    const cf: ClusterFile = {
      version: 1,
      createdAt: new Date().toISOString(),
      nameservers: [],
      processes: planCluster({ dir, ...up }),
      up,
    };
    writeFileSync(path.join(dir, "cluster.json"), JSON.stringify(cf));
    const st = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(st.code, 3);
    assert.match(
      st.err,
      / `actormq cluster up --dir \S+ --nameservers 2 --brokers 3 --slaves 1 --base-port 23000 --bind-host 0\.0\.0\.0 --advertise-host 10\.0\.0\.5 --flush async` starts the cluster again with its data\n$/,
    );
    // a file written before the flags were kept: the layout from its processes
    writeFileSync(path.join(dir, "cluster.json"), JSON.stringify({ ...cf, up: undefined }));
    const old = await cli(["cluster", "status", "--dir", dir]);
    assert.match(
      old.err,
      / `actormq cluster up --dir \S+ --nameservers 2 --brokers 3 --slaves 1` starts the cluster again with its data \(on new ports/,
    );
  } finally {
    await cleanup();
  }
});

test("a cluster file entry whose brokerId is not a broker id is refused by status, kill, restart and down, naming the file and the entry", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const file = path.join(dir, "cluster.json");
    const processes = planCluster({ dir, nameservers: 1, brokers: 1, slaves: 1 });
    const write = (brokerId: unknown) =>
      writeFileSync(
        file,
        JSON.stringify({
          version: 1,
          createdAt: new Date().toISOString(),
          nameservers: [],
          processes: processes.map((p) => (p.name === "broker-a-s1" ? { ...p, brokerId } : p)),
        }),
      );
    const refused = (r: { code: number | null; err: string }, shown: string, what: string) => {
      assert.equal(r.code, 1, `${what}: ${r.err}`);
      const lines = r.err.trim().split("\n");
      assert.equal(lines.length, 1, `${what}: ${r.err}`);
      assert.ok(
        lines[0]!.startsWith(
          `actormq: error MALFORMED: Cluster file ${file} has a malformed process entry: "broker-a-s1" ("slave") ${shown}`,
        ),
        `${what}: ${r.err}`,
      );
      assert.match(lines[0]!, /\(an integer >= 0: 0 for a master, 1, 2, \.\.\. for its slaves\); fix or remove it\.$/, what);
    };
    for (const [v, shown] of [
      ["1", 'has brokerId "1", not a broker id'],
      [-1, "has brokerId -1, not a broker id"],
      [1.5, "has brokerId 1.5, not a broker id"],
      [undefined, "has no brokerId"],
    ] as const) {
      write(v);
      refused(await cli(["cluster", "status", "--dir", dir]), shown, `status with ${String(v)}`);
    }
    write("1");
    for (const args of [["kill", "broker-a-s1"], ["restart", "broker-a-s1"], ["down"]])
      refused(await cli(["cluster", ...args, "--dir", dir]), 'has brokerId "1", not a broker id', args.join(" "));
    assert.equal(readCf(dir).processes.length, 3, "the file is left as it was");
  } finally {
    await cleanup();
  }
});

test("cluster up refuses a --base-port whose last port would be above 65535 before starting anything", () => {
  // 1 name server + 64 masters with 4 slaves each, two ports per broker: 641 ports
  const opts = { dir: "/nonexistent/c", nameservers: 1, brokers: 64, slaves: 4 };
  assert.throws(
    () => planCluster({ ...opts, basePort: 65_000 }),
    (e: unknown) =>
      e instanceof MQError &&
      e.code === "ILLEGAL_ARGUMENT" &&
      /--base-port 65000 needs 641 ports, up to 65640, above 65535: use a --base-port of at most 64895/.test(e.message),
  );
  assert.throws(() => planCluster({ ...opts, basePort: 64_896 }), /up to 65536/);
  const plan = planCluster({ ...opts, basePort: 64_895 });
  const last = plan.at(-1)!.argv;
  assert.equal(last[last.indexOf("--metrics-listen") + 1], "127.0.0.1:65535");
  // a small cluster fits above 65000: the ports it needs decide, not a fixed bound
  const small = { dir: "/nonexistent/c", nameservers: 1, brokers: 1, slaves: 0 };
  const top = planCluster({ ...small, basePort: 65_533 }).at(-1)!.argv;
  assert.equal(top[top.indexOf("--metrics-listen") + 1], "127.0.0.1:65535");
  assert.throws(
    () => planCluster({ ...small, basePort: 65_534 }),
    /needs 3 ports, up to 65536, above 65535: use a --base-port of at most 65533/,
  );
  assert.throws(() => planCluster({ ...small, basePort: 70_000 }), /needs 3 ports, up to 70002/);
});

test("cluster down never signals a pid that is no longer ours; a port in use fails cleanly with nothing left running", async () => {
  const { dir, cleanup } = await tempDir();
  const stranger = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  const blocker = net.createServer();
  try {
    // a cluster file naming a dead process whose pid now belongs to an unrelated process
    writeFileSync(
      path.join(dir, "cluster.json"),
      JSON.stringify({
        version: 1,
        createdAt: new Date().toISOString(),
        nameservers: ["tcp://127.0.0.1:1"],
        processes: [
          {
            name: "namesrv-0",
            role: "nameserver",
            host: "localhost",
            listen: "tcp://127.0.0.1:1",
            address: "tcp://127.0.0.1:1",
            pid: stranger.pid,
            dir: path.join(dir, "namesrv-0"),
            logFile: path.join(dir, "x.log"),
            argv: [],
          },
        ],
      }),
    );
    const down = await cli(["cluster", "down", "--dir", dir]);
    assert.equal(down.code, 0, down.err);
    assert.match(down.out, /stopped 0 process/);
    assert.match(down.out, /already not running: namesrv-0/);
    assert.ok(isAlive(stranger.pid!), "the unrelated process still runs");
    const k = await cli(["cluster", "kill", "namesrv-0", "--dir", dir]);
    assert.equal(k.code, 1);
    assert.match(k.err, /not running \(the pid now belongs to another process\)/);

    // the name server's port (base) is free, the first broker's (base + 1) is taken
    const base = await blockNextPort(blocker);
    const dir2 = path.join(dir, "c2");
    const up = await cli(["cluster", "up", "--dir", dir2, "--base-port", String(base)]);
    assert.equal(up.code, 1);
    assert.equal(up.err.trim().split("\n").length, 1, up.err);
    assert.match(up.err, /broker-a failed to start: .*(in use|Cannot listen)/i);
    const ready = path.join(dir2, "namesrv-0", "ready.json");
    const nsPid = (JSON.parse(readFileSync(ready, "utf8")) as { pid: number }).pid;
    await waitFor(() => !isAlive(nsPid), 15_000, "the started name server to be stopped");
    assert.throws(() => readFileSync(path.join(dir2, "cluster.json")), "no cluster file for a failed start");
  } finally {
    stranger.kill("SIGKILL");
    blocker.close();
    await cleanup();
  }
});

/** Pids of actormq processes whose command line names something under `dir` (Linux /proc). */
function actormqProcessesUnder(dir: string): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => {
      const argv = cmdlineOf(pid);
      return !!argv && argv.some((a) => a.endsWith("actormq.mjs")) && argv.some((a) => a.startsWith(dir));
    });
}

function killAll(pids: number[]): void {
  for (const pid of pids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
}

test("a reused pid is not taken for a member when it only names the member's ready file, nor when it started after the member", async () => {
  const { dir: tmp, cleanup } = await tempDir();
  // the default --dir's name: every path under it contains "actormq"
  const dir = path.join(tmp, "actormq-cluster");
  const [ns] = planCluster({ dir });
  const readyFile = path.join(ns!.dir, "ready.json");
  mkdirSync(ns!.dir, { recursive: true });
  writeFileSync(readyFile, "{}");
  // after a reboot the member's pid went to an operator's `tail -f` of its ready file
  const stranger = spawn("tail", ["-f", readyFile], { stdio: "ignore" });
  const c = path.join(tmp, "c");
  try {
    const cf: ClusterFile = {
      version: 1,
      createdAt: new Date().toISOString(),
      nameservers: [],
      processes: [{ ...ns!, pid: stranger.pid! }],
    };
    writeFileSync(path.join(dir, "cluster.json"), JSON.stringify(cf));
    const st = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(st.code, 3, st.out);
    assert.match(st.out, /^namesrv-0\s.*\sdead\s/m);
    const k = await cli(["cluster", "kill", "namesrv-0", "--dir", dir]);
    assert.equal(k.code, 1);
    assert.match(k.err, /the pid now belongs to another process/);
    const down = await cli(["cluster", "down", "--dir", dir]);
    assert.match(down.out, /already not running: namesrv-0/);
    assert.ok(isAlive(stranger.pid!), "the unrelated process still runs");

    // the member's own command line, but not the start time recorded when it was spawned: another process
    await clusterUp({ dir: c, logLevel: "warn" });
    const up = readCf(c);
    const b = up.processes.find((p) => p.name === "broker-a")!;
    assert.match(b.startTime ?? "", /^\d+$/, "the start time is recorded at spawn");
    writeFileSync(
      path.join(c, "cluster.json"),
      JSON.stringify({ ...up, processes: up.processes.map((p) => (p === b ? { ...p, startTime: "1" } : p)) }),
    );
    const st2 = await cli(["cluster", "status", "--dir", c]);
    assert.match(st2.out, /^broker-a\s.*\sdead\s/m);
    assert.match(st2.out, /^namesrv-0\s.*\srunning\s/m);
    const down2 = await cli(["cluster", "down", "--dir", c]);
    assert.match(down2.out, /already not running: broker-a/);
    assert.ok(isAlive(b.pid), "a pid started at another time is not signalled");
  } finally {
    stranger.kill("SIGKILL");
    killAll(actormqProcessesUnder(tmp));
    await cleanup();
  }
});

test("a process that dies while starting is reported with what this run logged, and by its signal when killed", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const logFile = path.join(dir, "p.log");
    // the previous run's clean shutdown ends the log, which every start appends to
    writeFileSync(logFile, `${JSON.stringify({ level: 30, msg: "stopped" })}\n`);
    const p = (code: string): ClusterProcess => ({
      name: "broker-a",
      role: "master",
      host: "localhost",
      listen: "tcp://127.0.0.1:*",
      address: "",
      pid: 0,
      dir,
      logFile,
      argv: ["-e", code],
    });
    await assert.rejects(startProcess(p("process.kill(process.pid, 'SIGKILL')")), (e: Error) => {
      assert.match(e.message, /^broker-a failed to start: killed by SIGKILL \(log: /);
      return true;
    });
    await assert.rejects(startProcess(p("process.exit(3)")), /^MQError: broker-a failed to start: exit code 3 \(log: /);
    await assert.rejects(
      startProcess(p("console.error('actormq: port in use'); process.exit(1)")),
      /^MQError: broker-a failed to start: port in use \(log: /,
    );
    await assert.rejects(
      startProcess(p("console.error('actormq: out of memory'); process.kill(process.pid, 'SIGKILL')")),
      /^MQError: broker-a failed to start: killed by SIGKILL, after logging: out of memory \(log: /,
    );
  } finally {
    await cleanup();
  }
});

test("a failed cluster up on a stopped cluster's directory leaves that cluster's file, and `down` of an unfinished up puts it back", async () => {
  const { dir: tmp, cleanup } = await tempDir();
  const blocker = net.createServer();
  const dir = path.join(tmp, "c");
  const file = path.join(dir, "cluster.json");
  try {
    // a stopped cluster (pid 0 is never ours) made with a base port: status prints how to start it again
    const base = await blockNextPort(blocker);
    const up = { nameservers: 1, brokers: 1, slaves: 0, basePort: base, bindHost: "127.0.0.1", flush: "sync" as const };
    mkdirSync(dir);
    const stopped = JSON.stringify({ version: 1, createdAt: "", nameservers: [], processes: planCluster({ dir, ...up }), up });
    writeFileSync(file, stopped);
    // broker-a's port (base + 1) is taken
    await assert.rejects(clusterUp({ dir, basePort: base, logLevel: "warn" }), /broker-a failed to start/);
    assert.equal(readFileSync(file, "utf8"), stopped, "the stopped cluster's file is as it was");
    assert.ok(!existsSync(`${file}.prev`));
    const st = await cli(["cluster", "status", "--dir", dir]);
    assert.match(st.err, new RegExp(`\`actormq cluster up --dir \\S+ --base-port ${base}\` starts the cluster again`));
    const interrupt = new AbortController();
    interrupt.abort();
    await assert.rejects(clusterUp({ dir, basePort: base, logLevel: "warn", signal: interrupt.signal }), /interrupted/);
    assert.equal(readFileSync(file, "utf8"), stopped, "an interrupted up leaves it too");

    // an `up` killed outright left its unfinished file with the stopped one kept aside: `down` puts it back
    writeFileSync(`${file}.prev`, stopped);
    writeFileSync(file, JSON.stringify({ version: 1, createdAt: "", nameservers: [], processes: [], starting: true }));
    const down = await cli(["cluster", "down", "--dir", dir]);
    assert.equal(down.code, 0, down.err);
    assert.equal(readFileSync(file, "utf8"), stopped);
    assert.ok(!existsSync(`${file}.prev`));
    // `down` run while an `up` still starts: both put the stopped cluster's file back, and the
    // second (the failing up's) does not delete what the first restored
    const starting = clusterUp({ dir, logLevel: "warn" }).then(
      () => "up finished",
      (e: Error) => e.message,
    );
    await waitFor(() => existsSync(`${file}.prev`) && readCf(dir).starting && readCf(dir).processes.length > 0, 30_000, "up spawning");
    // in this process: a `cluster down` command takes a second to start, long enough for the up to
    // finish on a busy machine (the command's own put-back is the one tested above)
    await clusterDown(dir);
    assert.match(await starting, /failed to start|interrupted|killed/);
    assert.equal(readFileSync(file, "utf8"), stopped, "the stopped cluster's file is back, not deleted by the second put-back");
    assert.ok(!existsSync(`${file}.prev`));

    // an up that succeeds replaces it
    blocker.close();
    await clusterUp({ dir, logLevel: "warn" });
    assert.equal(readCf(dir).starting, undefined);
    assert.ok(!existsSync(`${file}.prev`));
  } finally {
    blocker.close();
    killAll(actormqProcessesUnder(tmp));
    await cleanup();
  }
});

test("the commands printed as hints run as printed: --dir quoted for a shell, and restart hints name it", async () => {
  const { dir: tmp, cleanup } = await tempDir();
  const dir = path.join(tmp, "my 'c' dir");
  const quoted = `'${tmp}/my '\\''c'\\'' dir'`;
  /** The first `actormq cluster ...` command in `text`, run by a shell from another directory. */
  const runHint = (text: string) => {
    const hint = /`(actormq cluster [^`]*)`/.exec(text)?.[1];
    assert.ok(hint, text);
    assert.ok(hint.includes(`--dir ${quoted}`), hint);
    return cli(["-c", hint.replace(/^actormq /, `'${process.execPath}' '${bin}' `)], { cwd: tmp }, "sh");
  };
  try {
    const none = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(none.code, 1);
    const up = await runHint(none.err);
    assert.equal(up.code, 0, up.err);

    const k = await cli(["cluster", "kill", "namesrv-0", "--dir", dir]);
    assert.equal(k.code, 0, k.err);
    const st = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(st.code, 3);
    assert.ok(st.err.includes(`\`actormq cluster restart <name> --dir ${quoted}\` starts one again`), st.err);
    const again = await cli(["cluster", "kill", "namesrv-0", "--dir", dir]);
    assert.equal(again.code, 1);
    const r = await runHint(again.err);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^restarted namesrv-0 /);

    const busy = await cli(["cluster", "up", "--dir", dir]);
    assert.equal(busy.code, 1);
    const down = await runHint(busy.err);
    assert.equal(down.code, 0, down.err);
    assert.match(down.out, /stopped 2 process/);
    const stopped = await cli(["cluster", "status", "--dir", dir]);
    assert.equal(stopped.code, 3);
    const upAgain = await runHint(stopped.err);
    assert.equal(upAgain.code, 0, upAgain.err);
    assert.equal((await cli(["cluster", "down", "--dir", dir])).code, 0);

    // the default directory needs no --dir (pid 0 is never ours)
    const def = path.join(tmp, "actormq-cluster");
    mkdirSync(def);
    writeFileSync(
      path.join(def, "cluster.json"),
      JSON.stringify({ version: 1, createdAt: "", nameservers: [], processes: planCluster({ dir: def }) }),
    );
    const kd = await cli(["cluster", "kill", "namesrv-0"], { cwd: tmp });
    assert.match(kd.err, /; `actormq cluster restart namesrv-0` starts it again\.$/m);
  } finally {
    killAll(actormqProcessesUnder(tmp));
    await cleanup();
  }
});

test("cluster up: one master failing to start stops the other masters still starting, not only the ready processes", async () => {
  const { dir, cleanup } = await tempDir();
  const blocker = net.createServer();
  try {
    // broker-a's port (base + 1) is taken; broker-b and broker-c start alongside it
    const base = await blockNextPort(blocker);
    await assert.rejects(
      clusterUp({ dir: path.join(dir, "c"), brokers: 3, basePort: base, logLevel: "warn" }),
      /broker-a failed to start: .*(in use|Cannot listen)/i,
    );
    assert.deepEqual(actormqProcessesUnder(dir), [], "no process of the failed start runs");
    assert.throws(() => readFileSync(path.join(dir, "c", "cluster.json")), "no cluster file for a failed start");
  } finally {
    blocker.close();
    killAll(actormqProcessesUnder(dir));
    await cleanup();
  }
});

test("cluster up: an abort (Ctrl-C) while processes start stops every process spawned", async () => {
  const { dir, cleanup } = await tempDir();
  const interrupt = new AbortController();
  try {
    await assert.rejects(
      clusterUp({
        dir: path.join(dir, "c"),
        brokers: 2,
        slaves: 1,
        logLevel: "warn",
        signal: interrupt.signal,
        // while the other master may still be starting, before any slave
        onProgress: (_n, _t, p) => p.role === "master" && interrupt.abort(),
      }),
      (e: unknown) => e instanceof MQError && e.code === "CLOSED" && /interrupted/.test(e.message),
    );
    assert.deepEqual(actormqProcessesUnder(dir), []);
    assert.throws(() => readFileSync(path.join(dir, "c", "cluster.json")));
  } finally {
    killAll(actormqProcessesUnder(dir));
    await cleanup();
  }
});

test("cluster up: Ctrl-C while starting stops what was started and exits 130 with one line", async () => {
  const { dir, cleanup } = await tempDir();
  const c = path.join(dir, "c");
  const up = spawn(process.execPath, [bin, "cluster", "up", "--dir", c, "--brokers", "2", "--slaves", "1"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  let err = "";
  up.stderr.on("data", (d: Buffer) => (err += d.toString()));
  up.stdout.resume();
  const exit = new Promise<number | null>((r) => up.once("exit", (code) => r(code)));
  try {
    // the name server is up and the masters are being started
    await waitFor(() => existsSync(path.join(c, "broker-a", "broker-a.log")), 30_000, "the masters to be spawned");
    up.kill("SIGINT");
    assert.equal(await exit, 130, err);
    const lines = err.split(/[\r\n]/).filter((l) => l.startsWith("actormq:"));
    assert.equal(lines.length, 1, err);
    assert.match(lines[0]!, /^actormq: error CLOSED: cluster up was interrupted/);
    assert.deepEqual(actormqProcessesUnder(dir), []);
    assert.ok(!existsSync(path.join(c, "cluster.json")));
  } finally {
    up.kill("SIGKILL");
    killAll(actormqProcessesUnder(dir));
    await cleanup();
  }
});

test("cluster up killed with SIGKILL while starting: the cluster file names what it spawned, and `cluster down` stops it", async () => {
  const { dir, cleanup } = await tempDir();
  const c = path.join(dir, "c");
  const up = spawn(process.execPath, [bin, "cluster", "up", "--dir", c, "--brokers", "2", "--slaves", "1"], {
    stdio: "ignore",
    env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
  });
  const exit = new Promise<void>((r) => up.once("exit", () => r()));
  try {
    // the name server is up and the masters are being started (the file is written as each is spawned)
    const masters = () => (existsSync(path.join(c, "cluster.json")) ? readCf(c).processes.filter((p) => p.role === "master").length : 0);
    await waitFor(() => masters() === 2, 30_000, "the masters to be spawned");
    up.kill("SIGKILL");
    await exit;
    const left = actormqProcessesUnder(dir);
    assert.ok(left.length >= 3, `the name server and the masters outlive a killed \`up\` (${left.length})`);
    const cf = readCf(c);
    assert.equal(cf.starting, true);
    const named = new Set(cf.processes.map((p) => p.pid));
    assert.deepEqual(
      left.filter((pid) => !named.has(pid)),
      [],
      "the file names every process still running",
    );
    const status = await cli(["cluster", "status", "--dir", c]);
    assert.match(status.out + status.err, /did not finish/);
    const again = await cli(["cluster", "up", "--dir", c]);
    assert.notEqual(again.code, 0);
    assert.match(again.err, /cluster down/);
    const down = await cli(["cluster", "down", "--dir", c]);
    assert.equal(down.code, 0, down.err);
    assert.deepEqual(actormqProcessesUnder(dir), []);
    assert.ok(!existsSync(path.join(c, "cluster.json")), "the unfinished start's file goes with its processes");
  } finally {
    up.kill("SIGKILL");
    killAll(actormqProcessesUnder(dir));
    await cleanup();
  }
});

test("cluster restart interrupted after it spawned the new process: Ctrl-C stops it and exits 130; a SIGKILL leaves it named in the cluster file", async () => {
  const { dir, cleanup } = await tempDir();
  const c = path.join(dir, "c");
  const restart = () =>
    spawn(process.execPath, [bin, "cluster", "restart", "broker-a", "--dir", c], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ACTORMQ_LOG_LEVEL: "warn" },
    });
  const readyFile = path.join(c, "broker-a", "ready.json");
  /** The broker-a processes running now, but not `old`. */
  const brokerA = (old: number) => actormqProcessesUnder(dir).filter((pid) => pid !== old && cmdlineOf(pid)!.includes(readyFile));
  try {
    await clusterUp({ dir: c, logLevel: "warn" });
    const old = readCf(c).processes.find((p) => p.name === "broker-a")!.pid;

    const r = restart();
    let err = "";
    r.stderr.on("data", (d: Buffer) => (err += d.toString()));
    r.stdout.resume();
    const exit = new Promise<number | null>((res) => r.once("exit", (code) => res(code)));
    const spawned = await waitFor(() => brokerA(old)[0], 30_000, "the new broker-a to be spawned", 5);
    r.kill("SIGINT");
    assert.equal(await exit, 130, err);
    const lines = err.split(/[\r\n]/).filter((l) => l.startsWith("actormq:"));
    assert.equal(lines.length, 1, err);
    assert.match(lines[0]!, /^actormq: error CLOSED: cluster restart was interrupted/);
    assert.ok(!isAlive(spawned), "the process the interrupted restart spawned is stopped");
    assert.deepEqual(brokerA(old), []);

    const k = restart();
    k.stdout.resume();
    k.stderr.resume();
    const killed = new Promise<void>((res) => k.once("exit", () => res()));
    const named = () => readCf(c).processes.find((p) => p.name === "broker-a")!.pid;
    const second = await waitFor(() => (named() !== spawned ? named() : 0), 30_000, "the file to name the new broker-a", 5);
    assert.ok(!existsSync(readyFile), "named as soon as it is spawned, before it is ready");
    k.kill("SIGKILL");
    await killed;
    assert.deepEqual(brokerA(old), [second], "the process the file names is the one running");
    const down = await cli(["cluster", "down", "--dir", c]);
    assert.equal(down.code, 0, down.err);
    assert.deepEqual(actormqProcessesUnder(dir), []);
  } finally {
    killAll(actormqProcessesUnder(dir));
    await cleanup();
  }
});

test("cluster up and restart run with the CURVE settings of the cluster file, not the CURVE variables a client shell exports", async () => {
  const { dir, cleanup } = await tempDir();
  const cdir = path.join(dir, "c");
  try {
    const prefix = path.join(dir, "clients");
    assert.equal((await cli(["keygen", "--out", prefix])).code, 0);
    // a shell set up for the clients of some CURVE cluster: up takes no CURVE flag from it but the secret
    const up = await cli(["cluster", "up", "--dir", cdir], { env: { ACTORMQ_CURVE_SERVER: `${prefix}.pub` } });
    assert.equal(up.code, 0, up.err);
    const ns = readCf(cdir).nameservers.join(",");
    // a plaintext cluster: its broker registers with its plaintext name server
    await waitFor(
      async () => (await cli(["topic", "route", "TBW102", "--namesrv", ns])).out.includes("broker-a"),
      15_000,
      "broker-a registered",
    );
    const restarted = await cli(["cluster", "restart", "broker-a", "--dir", cdir], {
      env: { ACTORMQ_CURVE_SERVER: `${prefix}.pub`, ACTORMQ_CURVE_SECRET: `${prefix}.key` },
    });
    assert.equal(restarted.code, 0, restarted.err);
    for (const p of readCf(cdir).processes) {
      const environ = readFileSync(`/proc/${p.pid}/environ`, "utf8").split("\0");
      assert.deepEqual(
        environ.filter((v) => v.startsWith("ACTORMQ_CURVE_")),
        [],
        `${p.name} runs without the shell's CURVE variables`,
      );
    }
  } finally {
    if (existsSync(path.join(cdir, "cluster.json"))) await clusterDown(cdir);
    await cleanup();
  }
});

test("cluster up with an unusable --dir (on /proc, /proc itself, a file, under a file) fails at once in one line naming it, exit 1, before starting anything", async () => {
  const { dir: tmp, cleanup } = await tempDir();
  const file = path.join(tmp, "a-file");
  writeFileSync(file, "");
  try {
    for (const dir of ["/proc/actormq-cluster", "/proc", file, path.join(file, "c")]) {
      // killed, never answered: Node's recursive mkdir spun forever on /proc, deaf to SIGTERM
      const r = await cli(["-s", "KILL", "30", process.execPath, bin, "cluster", "up", "--dir", dir], {}, "timeout");
      assert.equal(r.code, 1, `${dir}: exit ${r.code}, ${r.err}`);
      const line = r.err.trim().split("\n").at(-1)!;
      assert.match(line, /^actormq: error ILLEGAL_ARGUMENT: --dir /, dir);
      assert.ok(line.includes(dir), `${dir}: ${line}`);
    }
    assert.equal(actormqProcessesUnder(tmp).length, 0);
  } finally {
    await cleanup();
  }
});
