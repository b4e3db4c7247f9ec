import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { assign, setup } from "xstate";
import { ActorNode, type Replier } from "../../../actors/runtime/index.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, waitFor } from "../../helpers.ts";

type Ev = { type: string; reply?: Replier };

// answers every event it gets (like the name server's "*" transition), counts SHUTDOWN and TICK
const machine = setup({ types: { context: {} as { shutdowns: number; ticks: number }, events: {} as Ev } }).createMachine({
  context: { shutdowns: 0, ticks: 0 },
  on: {
    SHUTDOWN: { actions: [assign({ shutdowns: ({ context }) => context.shutdowns + 1 }), ({ event }) => event.reply?.ok({})] },
    TICK: { actions: [assign({ ticks: ({ context }) => context.ticks + 1 }), ({ event }) => event.reply?.ok({})] },
    GET: { actions: ({ context, event }) => event.reply?.ok({ ...context }) },
    "*": { actions: ({ event }) => event.reply?.ok({ got: event.type }) },
  },
});

describe("events remote senders may not send", () => {
  let server: ActorNode;
  let client: ActorNode;
  before(async () => {
    server = await ActorNode.start({ listen: EPHEMERAL, requestTimeoutMs: 2000 });
    client = await ActorNode.start({ listen: null, requestTimeoutMs: 2000 });
    server.spawn("a", machine, { localOnly: ["TICK"] });
  });
  after(async () => {
    await client.close();
    await server.close();
  });

  const get = (ref = client.ref(server.address, "a")) => ref.ask<{ shutdowns: number; ticks: number }>({ type: "GET" });

  it("refuses xstate's own event types (xstate.stop would stop the actor for good) and the wildcard", async () => {
    const remote = client.ref(server.address, "a");
    for (const type of [
      "xstate.stop",
      "xstate.init",
      "xstate.error.actor.x",
      "xstate.done.actor.x",
      "xstate.after.1.a",
      "@xstate.event",
      "*",
    ]) {
      await assert.rejects(
        remote.ask({ type }),
        (e) => isMQError(e, "REQUEST_CODE_NOT_SUPPORTED") && e.message.includes(type) && /internal/.test(e.message),
        type,
      );
    }
    const refused = server.stats().refusedEvents;
    remote.send({ type: "xstate.stop" });
    await waitFor(() => server.stats().refusedEvents === refused + 1, 5000, "the one-way xstate.stop counted as refused");
    assert.equal(server.actorOf("a")?.getSnapshot().status, "active");
    assert.equal((await remote.ask<{ got: string }>({ type: "ANYTHING" })).fields.got, "ANYTHING");
  });

  it("refuses SHUTDOWN and the actor's declared local-only types from the network, delivers them locally", async () => {
    const remote = client.ref(server.address, "a");
    for (const type of ["SHUTDOWN", "TICK"]) {
      await assert.rejects(
        remote.ask({ type }),
        (e) => isMQError(e, "NO_PERMISSION") && e.message.includes(type) && /own process/.test(e.message),
        type,
      );
    }
    const refused = server.stats().refusedEvents;
    remote.send({ type: "SHUTDOWN" });
    remote.send({ type: "TICK" });
    await waitFor(() => server.stats().refusedEvents === refused + 2, 5000, "the one-way sends counted as refused");
    assert.deepEqual((await get()).fields, { shutdowns: 0, ticks: 0 });
    const local = server.ref(null, "a");
    await local.ask({ type: "SHUTDOWN" });
    await local.ask({ type: "TICK" });
    assert.deepEqual((await get(local)).fields, { shutdowns: 1, ticks: 1 });
  });

  it("an actor that declares nothing still refuses SHUTDOWN, and takes other types", async () => {
    server.spawn("b", machine);
    const remote = client.ref(server.address, "b");
    await assert.rejects(remote.ask({ type: "SHUTDOWN" }), (e) => isMQError(e, "NO_PERMISSION"));
    await remote.ask({ type: "TICK" });
    assert.deepEqual((await get(remote)).fields, { shutdowns: 0, ticks: 1 });
  });

  it('an actor spawned with localOnly "all" takes nothing from the network, everything locally', async () => {
    server.spawn("c", machine, { localOnly: "all" });
    const remote = client.ref(server.address, "c");
    for (const type of ["GET", "TICK", "ANYTHING"]) await assert.rejects(remote.ask({ type }), (e) => isMQError(e, "NO_PERMISSION"), type);
    const local = server.ref(null, "c");
    await local.ask({ type: "TICK" });
    assert.deepEqual((await get(local)).fields, { shutdowns: 0, ticks: 1 });
  });

  it('localOnly that is neither "all" nor an array of types is refused at spawn (a string is not split into letters)', async () => {
    for (const localOnly of ["TICK", "al", 42, { TICK: true }, ["TICK", 7], null]) {
      assert.throws(
        () => server.spawn("d", machine, { localOnly: localOnly as unknown as string[] }),
        (e) => isMQError(e, "ILLEGAL_ARGUMENT") && /localOnly/.test((e as Error).message) && /"all"/.test((e as Error).message),
        JSON.stringify(localOnly),
      );
      assert.equal(server.actorOf("d"), undefined, "nothing spawned");
    }
    server.spawn("d", machine, { localOnly: [] });
    await client.ref(server.address, "d").ask({ type: "TICK" });
  });
});
