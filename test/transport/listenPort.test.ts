import assert from "node:assert/strict";
import { test } from "node:test";
import { NameServer } from "../../actors/nameserver/index.ts";
import { ActorNode } from "../../actors/runtime/index.ts";
import { isMQError } from "../../transport/protocol.ts";

test("a tcp endpoint's port must be 0-65535 or *: libzmq would bind another port (99999 mod 65536)", async () => {
  for (const listen of [
    "tcp://127.0.0.1:99999",
    "tcp://127.0.0.1:65536",
    "tcp://127.0.0.1:-1",
    "tcp://127.0.0.1:1e3",
    "tcp://127.0.0.1:",
  ]) {
    await assert.rejects(
      ActorNode.start({ listen }).then((n) => n.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /port/.test((e as Error).message),
      listen,
    );
  }
  // peers connect to the advertised address: 0 and * are ports no one can connect to
  for (const advertise of ["tcp://10.0.0.2:70000", "tcp://127.0.0.1:0", "tcp://127.0.0.1:*"]) {
    await assert.rejects(
      ActorNode.start({ listen: "tcp://127.0.0.1:*", advertise }).then((n) => n.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /advertise/.test((e as Error).message),
      advertise,
    );
  }
  const n = await ActorNode.start({ listen: "tcp://127.0.0.1:*" });
  assert.match(n.address!, /^tcp:\/\/127\.0\.0\.1:\d+$/);
  await n.close();
});

test("a connect address's port must be 1-65535: libzmq would connect to another port (port + 65536 reaches port)", async () => {
  const srv = await ActorNode.start({ listen: "tcp://127.0.0.1:*" });
  const cli = await ActorNode.start({ listen: null });
  try {
    const port = Number(srv.address!.split(":").pop());
    for (const address of [`tcp://127.0.0.1:${port + 65536}`, "tcp://127.0.0.1:99999", "tcp://127.0.0.1:0", "tcp://127.0.0.1:-1"]) {
      assert.throws(
        () => cli.ref(address, "echo"),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && (e as Error).message.includes(address) && /port/.test((e as Error).message),
        address,
      );
    }
    assert.equal((cli.transport as unknown as { peers: Map<string, unknown> }).peers.size, 0, "no socket made for them");
    await assert.rejects(cli.ref(srv.address, "echo").ask({ type: "ECHO" }, { timeoutMs: 3000 }), (e) => isMQError(e, "SYSTEM_ERROR"));
  } finally {
    await cli.close();
    await srv.close();
  }
});

test("a listen or advertise that is not a string is refused with ILLEGAL_ARGUMENT, not a TypeError from inside", async () => {
  for (const listen of [9876, { port: 9876 }, true])
    await assert.rejects(
      ActorNode.start({ listen: listen as never }).then((n) => n.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^listen must be/.test((e as Error).message),
      String(listen),
    );
  await assert.rejects(
    ActorNode.start({ listen: "tcp://127.0.0.1:*", advertise: 9876 as never }).then((n) => n.close()),
    (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^advertise must be/.test((e as Error).message),
  );
  await assert.rejects(
    NameServer.start({ listen: 9876 as never, logLevel: "error" }).then((n) => n.close()),
    (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /^listen must be/.test((e as Error).message),
  );
});

test("a node closed in this process frees its port for the next start: a listener started on it at once binds, every time", async () => {
  // libzmq's I/O thread closes the listening socket a moment after close() returns; a node started
  // on the port in that moment failed with "Address already in use"
  const first = await ActorNode.start({ listen: "tcp://127.0.0.1:*" });
  let address = first.address!;
  const client = await ActorNode.start({ listen: null });
  let node = first;
  try {
    for (let i = 0; i < 40; i++) {
      // a connected client, as a broker's or name server's has
      await client
        .ref(address, "none")
        .ask({ type: "PING" }, { timeoutMs: 3000 })
        .catch(() => {});
      await node.close();
      node = await ActorNode.start({ listen: address });
      address = node.address!;
    }
  } finally {
    await node.close();
    await client.close();
  }
});

test("a port another socket holds is still refused (ILLEGAL_ARGUMENT), at once", async () => {
  const holder = await ActorNode.start({ listen: "tcp://127.0.0.1:*" });
  try {
    const t0 = performance.now();
    await assert.rejects(
      ActorNode.start({ listen: holder.address! }).then((n) => n.close()),
      (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /in use/.test((e as Error).message),
    );
    assert.ok(performance.now() - t0 < 500, `refused after ${performance.now() - t0} ms`);
  } finally {
    await holder.close();
  }
});
