import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { ActorNode } from "../../actors/runtime/index.ts";
import { monotonicNow } from "../../transport/clock.ts";
import { isMQError } from "../../transport/protocol.ts";
import { waitFor } from "../helpers.ts";

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "echoServer.ts");

function startServer(
  listen = "tcp://127.0.0.1:*",
  mode = "serve",
  clockSkewMs = 0,
): Promise<{ child: ChildProcess; line: Record<string, unknown> }> {
  const child = spawn(process.execPath, ["--import", "tsx", fixture, listen, mode], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ECHO_CLOCK_SKEW_MS: String(clockSkewMs) },
  });
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once("line", (l) => resolve({ child, line: JSON.parse(l) }));
    child.once("exit", (code) => reject(new Error(`fixture exited early with ${code}`)));
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.once("exit", (code) => r(code)));
}

describe("two processes", () => {
  const children: ChildProcess[] = [];
  let client: ActorNode;
  after(async () => {
    await client?.close();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  });

  it("ask/reply and one-way across processes; TIMEOUT when the peer dies; recovery when it returns", async () => {
    const s1 = await startServer();
    children.push(s1.child);
    const address = s1.line.address as string;
    client = await ActorNode.start({ listen: null, requestTimeoutMs: 300 });
    const echo = client.ref(address, "echo");
    const r = await echo.ask<{ text: string; pid: number }>({ type: "ECHO", text: "hello" }, { body: Buffer.alloc(1024, 7) });
    assert.equal(r.fields.text, "hello");
    assert.equal(r.fields.pid, s1.child.pid);
    assert.equal(r.body?.length, 1024);
    for (let i = 0; i < 500; i++) echo.send({ type: "COUNT" }, { body: Buffer.alloc(1024) });
    await waitFor(
      async () => (await echo.ask<{ count: number }>({ type: "GET" }, { timeoutMs: 2000 })).fields.count === 500,
      5000,
      "500 one-way sends",
    );
    assert.equal((await echo.ask<{ bytes: number }>({ type: "GET" })).fields.bytes, 500 * 1024);

    s1.child.kill("SIGKILL");
    await exited(s1.child);
    const t0 = Date.now();
    await assert.rejects(echo.ask({ type: "ECHO", text: "dead" }, { timeoutMs: 300 }), (e) => isMQError(e, "TIMEOUT"));
    assert.ok(Date.now() - t0 < 1500, "the ask fails near its timeout, it does not hang");
    // sent while the peer is down (deadline 300 ms): dropped unsent by this side, so it never
    // reaches the next incarnation; the ask with a long timeout waits for it and is answered
    const droppedBefore = client.stats().staleDropped;
    const sentAt = Date.now();
    echo.send({ type: "COUNT" });
    const queued = echo.ask<{ text: string; pid: number }>({ type: "ECHO", text: "queued" }, { timeoutMs: 15_000 });
    await waitFor(
      () => Date.now() - sentAt > 300 && client.stats().staleDropped > droppedBefore,
      5000,
      "the expired one-way to be dropped by the sender",
    );

    const s2 = await startServer(address);
    children.push(s2.child);
    const q = await queued;
    assert.equal(q.fields.text, "queued");
    assert.equal(q.fields.pid, s2.child.pid, "the frame still within its deadline reached the new incarnation");
    const back = await waitFor(
      async () => {
        try {
          return await echo.ask<{ pid: number }>({ type: "ECHO", text: "again" }, { timeoutMs: 300 });
        } catch (e) {
          if (isMQError(e, "TIMEOUT")) return null;
          throw e;
        }
      },
      10_000,
      "traffic to resume",
    );
    assert.equal(back.fields.pid, s2.child.pid);
    assert.equal((await echo.ask<{ count: number }>({ type: "GET" })).fields.count, 0, "no stale one-way delivered after restart");
    s2.child.kill("SIGTERM");
    assert.equal(await exited(s2.child), 0, "closed node exits by itself");
  });

  it("an ask the peer held fails as soon as the peer is killed, not at its timeout", async () => {
    const s = await startServer();
    children.push(s.child);
    const node = await ActorNode.start({ listen: null });
    try {
      const echo = node.ref(s.line.address as string, "echo");
      await echo.ask({ type: "ECHO", text: "up" });
      const held = echo.ask({ type: "HOLD" }, { timeoutMs: 60_000 });
      // the HOLD is on the peer once a later ask on the same connection has been answered
      await echo.ask({ type: "ECHO", text: "after" });
      const t0 = Date.now();
      s.child.kill("SIGKILL");
      await assert.rejects(held, (e: unknown) => isMQError(e, "TIMEOUT") && /connection .* closed/.test(String(e)));
      assert.ok(Date.now() - t0 < 10_000, `failed after ${Date.now() - t0} ms, not at its 60 s timeout`);
    } finally {
      await node.close();
    }
  });

  it("a peer reads unreachable from the moment its connection closes, or cannot be made, until a new connection's handshake; the loss's time stays known", async () => {
    const s1 = await startServer();
    children.push(s1.child);
    const address = s1.line.address as string;
    const node = await ActorNode.start({ listen: null });
    // an address nothing listens on any more
    const gone = await ActorNode.start({ listen: "tcp://127.0.0.1:*" });
    const goneAddress = gone.address!;
    await gone.close();
    try {
      const echo = node.ref(address, "echo");
      await echo.ask({ type: "ECHO", text: "up" });
      assert.equal(node.peerUnreachable(address), false, "connected");
      assert.equal(node.peerUnreachable("tcp://127.0.0.1:9"), false, "never sent to: nothing known");
      assert.equal(node.peerLostAt(address), 0, "never lost");

      const beforeKill = monotonicNow();
      s1.child.kill("SIGKILL");
      await exited(s1.child);
      await waitFor(() => node.peerUnreachable(address), 5000, "the closed connection noticed");
      const lostAt = node.peerLostAt(address);
      assert.ok(lostAt >= beforeKill && lostAt <= monotonicNow(), "when the connection was lost");
      const refused = node.ref(goneAddress, "echo").ask({ type: "ECHO", text: "x" }, { timeoutMs: 300 });
      await waitFor(() => node.peerUnreachable(goneAddress), 5000, "a connection that cannot be made noticed");
      await assert.rejects(refused, (e) => isMQError(e, "TIMEOUT"));

      const s2 = await startServer(address);
      children.push(s2.child);
      await waitFor(() => !node.peerUnreachable(address), 10_000, "reachable again once the peer is back");
      assert.equal((await echo.ask<{ pid: number }>({ type: "ECHO", text: "back" }, { timeoutMs: 5000 })).fields.pid, s2.child.pid);
      assert.equal(node.peerLostAt(address), lostAt, "the last loss stays known once reconnected (the peer may have restarted)");
      s2.child.kill("SIGKILL");
      await exited(s2.child);
    } finally {
      await node.close();
    }
  });

  it("a frame that expires queued behind a batch waiting for the peer is dropped, not sent late", async () => {
    const s1 = await startServer();
    children.push(s1.child);
    const address = s1.line.address as string;
    const node = await ActorNode.start({ listen: null, requestTimeoutMs: 300 });
    try {
      const echo = node.ref(address, "echo");
      await echo.ask({ type: "ECHO", text: "up" });
      s1.child.kill("SIGKILL");
      await exited(s1.child);
      // a send made before this side's ZeroMQ has seen the connection close can still go into it
      // and be lost with it (its ask times out): an ask that times out first gives it that moment,
      // as in the test above
      await assert.rejects(echo.ask({ type: "ECHO", text: "dead" }, { timeoutMs: 300 }), (e) => isMQError(e, "TIMEOUT"));
      // the first batch waits for the peer with a 15 s deadline; the one-way queued behind it
      // (deadline 300 ms) must be dropped when that batch finally leaves
      const first = echo.ask<{ pid: number }>({ type: "ECHO", text: "first" }, { timeoutMs: 15_000 });
      await new Promise((r) => setImmediate(r)); // the link's pump takes that batch in a microtask
      const sentAt = Date.now();
      echo.send({ type: "COUNT" });
      await waitFor(() => Date.now() - sentAt > 300, 2000, "the one-way's deadline to pass");
      const s2 = await startServer(address);
      children.push(s2.child);
      assert.equal((await first).fields.pid, s2.child.pid);
      assert.equal(
        (await echo.ask<{ count: number }>({ type: "GET" }, { timeoutMs: 2000 })).fields.count,
        0,
        "the expired one-way was not sent",
      );
      assert.ok(node.stats().staleDropped >= 1, "the drop is counted");
      s2.child.kill("SIGTERM");
      await exited(s2.child);
    } finally {
      await node.close();
    }
  });

  it("hosts whose clocks differ by more than a timeout still serve each other", async () => {
    for (const skew of [60_000, -60_000]) {
      const s = await startServer("tcp://127.0.0.1:*", "serve", skew);
      children.push(s.child);
      const node = await ActorNode.start({ listen: null, requestTimeoutMs: 2000 });
      try {
        const echo = node.ref(s.line.address as string, "echo");
        const r = await echo.ask<{ text: string }>({ type: "ECHO", text: `skew ${skew}` });
        assert.equal(r.fields.text, `skew ${skew}`);
        for (let i = 0; i < 3; i++) echo.send({ type: "COUNT" });
        assert.equal((await echo.ask<{ count: number }>({ type: "GET" })).fields.count, 3, `one-way sends delivered (skew ${skew} ms)`);
      } finally {
        await node.close();
        s.child.kill("SIGTERM");
        await exited(s.child);
      }
    }
  });

  it("a process whose node is closed exits by itself", async () => {
    const { child, line } = await startServer("tcp://127.0.0.1:*", "close-self");
    children.push(child);
    assert.deepEqual(line, { closed: true, text: "self" });
    const code = await Promise.race([exited(child), new Promise<string>((r) => setTimeout(() => r("still running"), 5000).unref())]);
    assert.equal(code, 0);
  });
});
