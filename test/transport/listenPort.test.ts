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
