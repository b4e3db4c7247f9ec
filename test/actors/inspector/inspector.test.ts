import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { after, describe, it } from "node:test";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { Inspector, TIMELINE_FORMAT } from "../../../actors/inspector/index.ts";
import { collectorReachWarning } from "../../../actors/inspector/inspectorOptions.ts";
import { ActorNode, InspectionCollector, MAX_INSPECTION_PUBLISHERS } from "../../../actors/runtime/index.ts";
import { encode } from "../../../transport/codec.ts";
import { EPHEMERAL, waitFor } from "../../helpers.ts";

const toggle = setup({ types: {} as { events: { type: "FLIP" } } }).createMachine({
  id: "toggle",
  initial: "off",
  states: { off: { on: { FLIP: "on" } }, on: { on: { FLIP: "off" } } },
});

function get(url: string, host?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.get({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers: host ? { host } : {} }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
  });
}

describe("Inspector", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  });

  it("drops and counts malformed and oversized frames, keeps good ones", async () => {
    const insp = await Inspector.start({ maxRecordBytes: 4096 });
    cleanups.push(() => insp.close());
    const pub = new zmq.Publisher({ linger: 0 });
    cleanups.push(async () => pub.close());
    pub.connect(insp.collectorEndpoint);
    const good = {
      kind: "event",
      nodeId: "raw",
      actorName: "a",
      sessionId: "x:0",
      time: Date.now(),
      type: "HELLO",
      payload: { body: "secret-body" },
    };
    // PUB drops until the connection is up: resend the good record until it shows
    await waitFor(
      async () => {
        await pub.send(encode(good));
        return insp.stats().kept > 0;
      },
      5000,
      "first record",
    );
    const before = insp.stats();
    await pub.send(Buffer.from([0xc1, 0xc1, 0xc1]));
    await pub.send(encode({ hello: "not a record" }));
    await pub.send(encode({ ...good, kind: "snapshot" }));
    await pub.send(encode({ ...good, payload: { s: "x".repeat(10_000) } }));
    await pub.send(encode({ ...good, type: "LAST" }));
    type Timeline = { entries: { record: { type: string } }[] };
    const tl = await waitFor(
      async () => {
        const t = JSON.parse((await get(`${insp.url}api/timeline`)).body) as Timeline;
        return t.entries.at(-1)?.record.type === "LAST" ? t : null;
      },
      5000,
      "last good record",
    );
    const s = insp.stats();
    assert.equal(s.malformedDropped - before.malformedDropped, 3);
    assert.equal(s.oversizedDropped - before.oversizedDropped, 1);
    assert.doesNotMatch(JSON.stringify(tl), /secret-body/);
  });

  it("shows a process that stops as gone with its last state, and brings it back when it restarts", async () => {
    let node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "proc-1" });
    const address = node.address!;
    node.spawn("toggle", toggle);
    const insp = await Inspector.start({ collect: [address], probeIntervalMs: 200 });
    cleanups.push(() => insp.close());
    const state = async () =>
      JSON.parse((await get(`${insp.url}api/state`)).body) as {
        nodes: { nodeId: string; status: string; actors: { actorName: string; value: unknown }[] }[];
      };
    const proc = async () => (await state()).nodes.find((n) => n.nodeId === "proc-1");
    await waitFor(async () => (await proc())?.actors.some((a) => a.actorName === "toggle" && a.value === "off"), 5000, "toggle seen");
    node.ref(null, "toggle").send({ type: "FLIP" });
    await waitFor(async () => (await proc())?.actors[0]?.value === "on", 5000, "toggle on");
    await node.close();
    const gone = await waitFor(async () => ((await proc())?.status === "gone" ? proc() : null), 5000, "process gone");
    assert.equal(gone!.actors[0]!.value, "on", "last state kept");
    // the closed node's port is released by ZeroMQ's I/O thread shortly after close: retry the bind
    node = await waitFor(
      () => ActorNode.start({ listen: address, nodeId: "proc-1" }).catch(() => null),
      5000,
      "the same address bound again",
    );
    cleanups.push(() => node.close());
    node.spawn("toggle", toggle);
    const back = await waitFor(
      async () => {
        const p = await proc();
        return p?.status === "alive" && p.actors[0]?.value === "off" ? p : null;
      },
      8000,
      "process back",
    );
    assert.equal(back.actors.length, 1);
  });

  it("shows a publishing-only client process as gone as soon as it closes, with its actors' last states", async () => {
    const insp = await Inspector.start({});
    cleanups.push(() => insp.close());
    const node = await ActorNode.start({ listen: null, nodeId: "client-1" });
    node.spawn("toggle", toggle);
    await node.publishInspection(insp.collectorEndpoint);
    const proc = async () =>
      (
        JSON.parse((await get(`${insp.url}api/state`)).body) as {
          nodes: { nodeId: string; status: string; actors: { actorName: string; value: unknown }[] }[];
        }
      ).nodes.find((n) => n.nodeId === "client-1");
    // the publisher's SUB connection comes up asynchronously: flip until the inspector has seen "on"
    await waitFor(
      async () => {
        node.ref(null, "toggle").send({ type: "FLIP" });
        return (await proc())?.actors.some((a) => a.actorName === "toggle" && a.value === "on");
      },
      5000,
      "toggle on seen",
    );
    assert.equal((await proc())?.status, "alive");
    await node.close();
    const gone = await waitFor(async () => ((await proc())?.status === "gone" ? proc() : null), 3000, "client gone after close");
    assert.equal(gone!.actors.length, 1, "its actor is still listed");
  });

  it("shows a publishing-only client process killed with SIGKILL as gone, with its actors' last states, also after a wall clock step back", async () => {
    const insp = await Inspector.start({ probeIntervalMs: 200 });
    cleanups.push(() => insp.close());
    const child = spawn(
      process.execPath,
      ["--import", "tsx", path.join(import.meta.dirname, "fixtures", "publishingClient.ts"), insp.collectorEndpoint],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    cleanups.push(async () => child.kill("SIGKILL"));
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const nodeId = (await waitFor(() => /ready (\S+)/.exec(out), 30_000, "client ready"))[1]!;
    const proc = async () =>
      (
        JSON.parse((await get(`${insp.url}api/state`)).body) as {
          nodes: { nodeId: string; status: string; actors: { actorName: string; value: unknown }[] }[];
        }
      ).nodes.find((n) => n.nodeId === nodeId);
    await waitFor(async () => (await proc())?.actors.some((a) => a.actorName === "toggle" && a.value === "on"), 10_000, "toggle on seen");
    // the wall clock steps back an hour (NTP, a VM resume): the silence is still noticed on time
    const wallNow = Date.now;
    const step = Date.now() - 3_600_000;
    const steppedAt = wallNow();
    Date.now = () => step + (wallNow() - steppedAt);
    cleanups.push(async () => {
      Date.now = wallNow;
    });
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    // no farewell and nothing to probe: the client's heartbeats stop
    const gone = await waitFor(async () => ((await proc())?.status === "gone" ? proc() : null), 15_000, "killed client gone");
    assert.equal(gone!.actors.find((a) => a.actorName === "toggle")?.value, "on", "last state kept");
  });

  it("serves charts, an export that loads back, and refuses foreign hosts and addresses", async () => {
    const node = await ActorNode.start({ listen: null, nodeId: "local-1" });
    cleanups.push(() => node.close());
    node.spawn("toggle", toggle);
    const insp = await Inspector.start({ nodes: [node] });
    cleanups.push(() => insp.close());
    assert.match(insp.url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
    node.ref(null, "toggle").send({ type: "FLIP" });
    await waitFor(() => insp.stats().kept >= 4, 5000, "records");
    const chart = JSON.parse((await get(`${insp.url}api/chart?node=local-1&machine=toggle`)).body) as {
      svg: string;
      states: { id: string }[];
    };
    assert.deepEqual(chart.states.map((s) => s.id).sort(), ["toggle.off", "toggle.on"]);
    assert.match(chart.svg, /data-state="toggle\.on"/);
    assert.equal((await get(`${insp.url}api/chart?node=local-1&machine=nope`)).status, 404);
    const exp = JSON.parse((await get(`${insp.url}api/export`)).body) as {
      format: string;
      entries: { record: { kind: string; type?: string } }[];
      charts: Record<string, unknown>;
    };
    assert.equal(exp.format, TIMELINE_FORMAT);
    assert.ok(exp.entries.some((e) => e.record.kind === "event" && e.record.type === "FLIP"));
    assert.ok(exp.charts.toggle);
    assert.equal((await get(`${insp.url}`, "evil.example:80")).status, 403);
    assert.equal((await get(`${insp.url}index.html`)).status, 200);
    await assert.rejects(
      Inspector.start({ listen: "0.0.0.0:0" }),
      (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && /allowRemote/.test(e.message),
    );
    // "false" is truthy: it served the page on every interface
    for (const allowRemote of ["false", 1, null])
      await assert.rejects(
        Inspector.start({ listen: "0.0.0.0:0", allowRemote: allowRemote as never }),
        (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && /^allowRemote must be true or false/.test(e.message),
        String(allowRemote),
      );
    for (const listen of [5, null])
      await assert.rejects(
        Inspector.start({ listen: listen as never }),
        (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && /host:port/.test(e.message),
        String(listen),
      );
    await assert.rejects(
      Inspector.start({ collectOnFirstView: "false" as never }),
      (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && /^collectOnFirstView must be true or false/.test(e.message),
    );
    const remote = await Inspector.start({ listen: "0.0.0.0:0", allowRemote: true });
    await remote.close();
  });

  it("lists collect addresses that never answered as unreachable until they do, and refuses ones that are not tcp://host:port", async () => {
    for (const bad of ["garbage", "tcp://127.0.0.1:*", "ipc:///tmp/x", "tcp://127.0.0.1:70000", "tcp://127.0.0.1"])
      await assert.rejects(
        Inspector.start({ collect: [bad] }),
        (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && e.message.includes(bad) && /tcp:\/\/host:port/.test(e.message),
        bad,
      );
    // a single address, not in an array: it was read character by character ("Bad collect address \"t\"")
    await assert.rejects(
      Inspector.start({ collect: "tcp://127.0.0.1:9876" as never }),
      (e: Error & { code?: string }) =>
        e.code === "ILLEGAL_ARGUMENT" && /^collect must be an array/.test(e.message) && e.message.includes("tcp://127.0.0.1:9876"),
    );
    // an address nothing listens on yet
    const first = await ActorNode.start({ listen: EPHEMERAL, nodeId: "late-1" });
    const address = first.address!;
    await first.close();
    const insp = await Inspector.start({ collect: [address], probeIntervalMs: 100 });
    cleanups.push(() => insp.close());
    await assert.rejects(insp.collect("not an address"), (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT");
    type State = { nodes: { nodeId: string; status: string }[]; unreachable: { address: string; failures: number }[] };
    const state = async () => JSON.parse((await get(`${insp.url}api/state`)).body) as State;
    const u = await waitFor(async () => (await state()).unreachable.find((x) => x.address === address), 5000, "listed unreachable");
    assert.ok(u.failures >= 2);
    assert.deepEqual((await state()).nodes, []);
    const node = await waitFor(() => ActorNode.start({ listen: address, nodeId: "late-1" }).catch(() => null), 5000, "the address bound");
    cleanups.push(() => node.close());
    // it may publish before a probe's answer comes back in time (a loaded machine): wait for both
    await waitFor(
      async () => {
        const st = await state();
        return st.nodes.some((n) => n.nodeId === "late-1" && n.status === "alive") && st.unreachable.length === 0;
      },
      10_000,
      "answering at last, no longer unreachable",
    );
  });

  it("lists a node that answers its probe with a refusal as busy with the reason, neither unreachable nor gone", async () => {
    const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "busy-1" });
    cleanups.push(() => node.close());
    node.spawn("toggle", toggle);
    const publishers = (node as unknown as { publishers: Map<string, { stop(): Promise<void> }> }).publishers;
    // unleased publishers to other endpoints: the node publishes to as many as it can
    const others: (() => Promise<void>)[] = [];
    for (let i = 0; i < MAX_INSPECTION_PUBLISHERS; i++) others.push(await node.publishInspection(`tcp://127.0.0.1:${1 + i}`));
    const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 100 });
    cleanups.push(() => insp.close());
    type State = {
      nodes: { nodeId: string; status: string }[];
      unreachable: { address: string }[];
      refused: { address: string; nodeId?: string; status: string; code: string; message: string }[];
    };
    const state = async () => JSON.parse((await get(`${insp.url}api/state`)).body) as State;
    const busy = await waitFor(async () => (await state()).refused?.find((x) => x.address === node.address), 5000, "listed busy");
    assert.equal(busy.status, "busy");
    assert.equal(busy.code, "SYSTEM_BUSY");
    assert.match(busy.message, /already publishes its inspection stream to 8 endpoints/);
    assert.deepEqual((await state()).unreachable, [], "it answers: not unreachable");

    // a place frees up: collected, no longer listed busy
    await others.pop()!();
    await waitFor(
      async () => {
        const st = await state();
        return st.nodes.some((n) => n.nodeId === "busy-1" && n.status === "alive") && st.refused.length === 0;
      },
      5000,
      "collected",
    );
    // its place is taken while this inspector's publisher is gone: refused again, and still alive
    await publishers.get(insp.collectorEndpoint)!.stop();
    others.push(await node.publishInspection("tcp://127.0.0.1:100"));
    let refusals = 0;
    const publish = node.publishInspection.bind(node);
    node.publishInspection = (endpoint, opts) =>
      publish(endpoint, opts).catch((e) => {
        refusals++;
        throw e;
      });
    const again = await waitFor(async () => (await state()).refused.find((x) => x.nodeId === "busy-1"), 5000, "busy again");
    assert.equal(again.code, "SYSTEM_BUSY");
    // more refused probes than make a silent process gone
    await waitFor(() => refusals > 4, 5000, "refused probes");
    assert.equal((await state()).nodes.find((n) => n.nodeId === "busy-1")?.status, "alive");
    for (const stop of others) await stop();
  });

  it("asks nodes to publish to collectorAdvertise (its port * read as the bound one), and refuses one that is not tcp://host:port", async () => {
    const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "advertised-to" });
    cleanups.push(() => node.close());
    const asked: string[] = [];
    const publish = node.publishInspection.bind(node);
    node.publishInspection = (endpoint, opts) => {
      asked.push(endpoint);
      return publish(endpoint, opts);
    };
    // TEST-NET-2: the address another host would reach this one at
    const insp = await Inspector.start({ collect: [node.address!], collectorAdvertise: "tcp://198.51.100.7:*" });
    cleanups.push(() => insp.close());
    assert.match(insp.collectorEndpoint, /^tcp:\/\/198\.51\.100\.7:\d+$/);
    assert.deepEqual([...new Set(asked)], [insp.collectorEndpoint]);
    const fixed = await Inspector.start({ collect: [node.address!], collectorAdvertise: "tcp://collector.example:7777" });
    cleanups.push(() => fixed.close());
    assert.equal(fixed.collectorEndpoint, "tcp://collector.example:7777");
    assert.ok(asked.includes("tcp://collector.example:7777"));
    for (const bad of ["198.51.100.7:7777", "tcp://198.51.100.7", "ipc:///tmp/x", "tcp://198.51.100.7:70000"])
      await assert.rejects(
        Inspector.start({ collectorAdvertise: bad }),
        (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && e.message.includes(bad) && /tcp:\/\/host:port/.test(e.message),
        bad,
      );
  });

  it("warns when nodes on other hosts are asked to publish to a loopback or wildcard collector endpoint", () => {
    const remote = "tcp://10.1.2.3:9876";
    const local = ["tcp://127.0.0.1:9876", "tcp://localhost:10911", "tcp://[::1]:9876", "tcp://127.0.1.1:9876"];
    for (const endpoint of ["tcp://127.0.0.1:41234", "tcp://0.0.0.0:41234", "tcp://[::]:41234", "tcp://localhost:41234"]) {
      const w = collectorReachWarning([...local, remote], endpoint);
      assert.ok(
        w?.includes(remote) && w.includes(endpoint) && w.includes("--collector-advertise") && !w.includes("\n"),
        `${endpoint}: ${w}`,
      );
      assert.ok(!w!.includes(local[0]!), "names only the nodes elsewhere");
      assert.equal(collectorReachWarning(local, endpoint), undefined, "every node on this host");
    }
    assert.equal(collectorReachWarning([remote], "tcp://10.1.2.4:41234"), undefined, "advertised where others reach it");
    // one of this host's own addresses is this host
    assert.equal(collectorReachWarning([remote], "tcp://127.0.0.1:41234", new Set(["10.1.2.3"])), undefined);
  });

  it("leaves no publisher feeding on a node's actors once the inspector that asked for it has closed", async () => {
    const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "proc-release" });
    cleanups.push(() => node.close());
    node.spawn("toggle", toggle);
    for (let i = 0; i < 3; i++) {
      const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 100 });
      await waitFor(() => node.inspecting, 5000, "attached");
      await insp.close();
      await waitFor(() => !node.inspecting, 3000, "detached after the inspector closed");
    }
    const publishers = (node as unknown as { publishers: Map<string, unknown> }).publishers;
    await waitFor(() => publishers.size === 0, 3000, "the probes' leases ran out");
  });

  it("with collectOnFirstView, stops collecting when nobody looks any more and starts again on the next view", async () => {
    const node = await ActorNode.start({ listen: EPHEMERAL, nodeId: "proc-idle" });
    cleanups.push(() => node.close());
    node.spawn("toggle", toggle);
    const insp = await Inspector.start({ collect: [node.address!], probeIntervalMs: 100, collectOnFirstView: true, collectIdleMs: 300 });
    cleanups.push(() => insp.close());
    assert.equal(insp.collecting, false);
    // a process that publishes on its own is connected, but not fed before anyone looks
    const client = await ActorNode.start({ listen: null, nodeId: "client-idle" });
    cleanups.push(() => client.close());
    client.spawn("toggle", toggle);
    await client.publishInspection(insp.collectorEndpoint);
    // a second collector shows when the client's connections are up
    const other = await InspectionCollector.start();
    cleanups.push(() => other.close());
    const stopOther = await client.publishInspection(other.endpoint);
    await waitFor(() => other.records.some((r) => r.nodeId === "client-idle"), 5000, "the client publishing");
    await stopOther();
    const pubs = (client as unknown as { publishers: Map<string, { subscribed: boolean }> }).publishers;
    assert.equal(pubs.get(insp.collectorEndpoint)?.subscribed, false, "not fed before the first view");
    assert.equal(client.inspecting, false);
    await get(`${insp.url}api/state`);
    await waitFor(() => node.inspecting && client.inspecting, 5000, "collecting after the first view");
    await waitFor(() => !insp.collecting && !node.inspecting && !client.inspecting, 3000, "stopped after the idle time");
    const publishers = (node as unknown as { publishers: Map<string, unknown> }).publishers;
    await waitFor(() => publishers.size === 0, 3000, "the node's publisher lapsed");
    await get(`${insp.url}api/state`);
    await waitFor(() => node.inspecting, 5000, "collecting again");
    node.ref(null, "toggle").send({ type: "FLIP" });
    await waitFor(
      async () =>
        (JSON.parse((await get(`${insp.url}api/state`)).body) as { nodes: { nodeId: string; actors: { value: unknown }[] }[] }).nodes.find(
          (n) => n.nodeId === "proc-idle",
        )?.actors[0]?.value === "on",
      5000,
      "live again",
    );
  });

  it("refuses a probe interval or a record bound that is not a positive number", async () => {
    for (const bad of [
      { probeIntervalMs: 0 },
      { probeIntervalMs: Number.NaN },
      { probeIntervalMs: -5 },
      { maxRecordBytes: -1 },
      { maxRecordBytes: Number.NaN },
    ])
      await assert.rejects(
        Inspector.start(bad),
        (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT" && new RegExp(Object.keys(bad)[0]!).test(e.message),
        JSON.stringify(bad),
      );
  });

  it("refuses nodes that are not ActorNodes, and a start that fails leaves nothing open (the process exits by itself)", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "fixtures", "failedStart.ts")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    cleanups.push(async () => child.kill("SIGKILL"));
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    let code: number | null | undefined;
    child.once("exit", (c) => (code = c));
    await waitFor(() => code !== undefined, 30_000, "the failed starts' process to exit by itself");
    assert.equal(code, 0, out);
    assert.match(out, /^not a node: ILLEGAL_ARGUMENT: .*nodes/m);
    assert.match(out, /^activate: .*cannot listen to this node/m);
  });

  it("bounds its timeline in bytes as well as in records", async () => {
    await assert.rejects(Inspector.start({ capacityBytes: 1000 }), (e: Error & { code?: string }) => e.code === "ILLEGAL_ARGUMENT");
    const insp = await Inspector.start({ capacityBytes: 4 * 1024 * 1024 });
    cleanups.push(() => insp.close());
    const ingest = (r: unknown) => (insp as unknown as { ingest(r: unknown): void }).ingest(r);
    for (let i = 0; i < 40; i++)
      ingest({
        nodeId: "p",
        actorName: "a",
        sessionId: "s",
        time: Date.now(),
        kind: "event",
        type: "E",
        payload: { note: "x".repeat(500_000) },
      });
    const s = insp.stats();
    assert.ok(s.kept <= 8 && s.kept >= 7, `kept ${s.kept} records of half a MiB in a 4 MiB budget`);
    assert.equal(s.evicted, 40 - s.kept);
  });

  it("builds one cluster view at a time: pages asking while one is built share it", async () => {
    let builds = 0;
    const building: (() => void)[] = [];
    const finish = () => {
      for (const f of building.splice(0)) f();
    };
    const insp = await Inspector.start({
      cluster: async () => {
        const time = ++builds;
        await new Promise<void>((r) => building.push(r));
        return { time, brokers: [], topics: [], groups: [], errors: [] };
      },
    });
    cleanups.push(() => insp.close());
    const first = insp.cluster();
    const second = insp.cluster();
    await waitFor(() => building.length > 0, 5000, "the build started");
    finish();
    const [a, b] = await Promise.all([first, second]);
    assert.equal(builds, 1);
    assert.equal(a, b);
    const later = insp.cluster();
    await waitFor(() => builds === 2, 5000, "a later ask builds anew");
    finish();
    assert.equal((await later).time, 2);
  });
});
