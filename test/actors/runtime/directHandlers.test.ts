import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { setup } from "xstate";
import { type ActorFailure, ActorNode, type DirectHandlers, type InspectionRecord, type Replier } from "../../../actors/runtime/index.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { waitFor } from "../../helpers.ts";

type Ev = { type: "HIT"; n: number; reply?: Replier } | { type: "CLOSE" } | { type: "GET"; reply?: Replier };
interface Ctx {
  viaMachine: number[];
  viaDirect: number[];
}

// The machine and the direct handler record into different lists so a test can tell the paths
// apart; real actors run the same function on both.
const counter = setup({
  types: { context: {} as Ctx, events: {} as Ev },
}).createMachine({
  context: () => ({ viaMachine: [], viaDirect: [] }),
  initial: "open",
  states: {
    open: {
      on: {
        HIT: { actions: ({ context, event }) => void context.viaMachine.push(event.n) },
        CLOSE: "closed",
      },
    },
    closed: { on: { HIT: { actions: ({ event }) => event.reply?.ok({ closed: true }) } } },
  },
  on: {
    GET: { actions: ({ context, event }) => event.reply?.ok({ machine: context.viaMachine, direct: context.viaDirect }) },
    "*": { actions: ({ event }) => (event as { reply?: Replier }).reply?.ok({ unknown: event.type }) },
  },
});

const direct: DirectHandlers = {
  state: "open",
  handlers: {
    HIT: (context: Ctx, event: { n: number; reply?: Replier }) => {
      if (event.n < 0) return false; // "needs the machine"
      if (event.n === 13) throw new Error("unlucky");
      context.viaDirect.push(event.n);
      event.reply?.ok({ direct: true });
      return true;
    },
  },
};

describe("direct handlers", () => {
  const nodes: ActorNode[] = [];
  after(async () => {
    for (const n of nodes) await n.close();
  });

  async function get(node: ActorNode, name: string): Promise<{ machine: number[]; direct: number[] }> {
    return (await node.ref(null, name).ask<{ machine: number[]; direct: number[] }>({ type: "GET" })).fields;
  }

  it("take the declared events in the declared state without the machine, local and remote", async () => {
    const server = await ActorNode.start({ listen: "tcp://127.0.0.1:*" });
    const client = await ActorNode.start({ listen: null });
    nodes.push(server, client);
    server.spawn("c", counter, { direct });
    const local = server.ref(null, "c");
    local.send({ type: "HIT", n: 1 });
    assert.deepEqual((await local.ask<{ direct: boolean }>({ type: "HIT", n: 2 })).fields, { direct: true });
    const remote = client.ref(server.address, "c");
    assert.deepEqual((await remote.ask<{ direct: boolean }>({ type: "HIT", n: 3 })).fields, { direct: true });
    // false from the handler: the machine takes the event
    local.send({ type: "HIT", n: -1 });
    assert.deepEqual(await get(server, "c"), { machine: [-1], direct: [1, 2, 3] });
  });

  it("with an inspector listening, still skip the machine and give the inspector the event and its snapshot", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    node.spawn("c", counter, { direct });
    const ref = node.ref(null, "c");
    const records: InspectionRecord[] = [];
    const stop = node.inspect((r) => records.push(r));
    ref.send({ type: "HIT", n: 1 });
    assert.deepEqual(await get(node, "c"), { machine: [], direct: [1] });
    const hits = records.filter(
      (r) => r.actorName === "c" && (r.kind === "event" ? r.type === "HIT" : r.kind === "snapshot" && r.eventType === "HIT"),
    );
    assert.deepEqual(
      hits.map((r) => r.kind),
      ["event", "snapshot"],
      "one event record and the snapshot after it, as the machine's inspection gives",
    );
    const ev = hits[0]!;
    assert.ok(ev.kind === "event" && (ev.payload as { n?: number }).n === 1, "the event's fields are in its payload");
    stop();
  });

  it("leave events to the machine in other states", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    node.spawn("c", counter, { direct });
    const ref = node.ref(null, "c");
    ref.send({ type: "HIT", n: 2 });
    // a type that names an Object.prototype member is no handler's
    for (const type of ["toString", "constructor", "__proto__", "hasOwnProperty"])
      assert.deepEqual((await ref.ask({ type })).fields, { unknown: type });
    ref.send({ type: "CLOSE" });
    assert.deepEqual((await ref.ask({ type: "HIT", n: 3 })).fields, { closed: true }, "closed: the machine's transition answers");
    assert.deepEqual(await get(node, "c"), { machine: [], direct: [2] });
  });

  it("a handler that throws fails the actor like a throwing action: supervision restarts it", async () => {
    const node = await ActorNode.start({ listen: null });
    nodes.push(node);
    const failures: ActorFailure[] = [];
    node.on("actorFailure", (f) => failures.push(f));
    node.spawn("c", counter, { direct, supervision: { strategy: "restart", backoffMs: 10, maxRestarts: 3 } });
    const ref = node.ref(null, "c");
    ref.send({ type: "HIT", n: 5 });
    ref.send({ type: "HIT", n: 13 });
    assert.equal(failures.length, 1);
    assert.equal(failures[0]!.action, "restart");
    assert.match(String((failures[0]!.error as Error).message), /unlucky/);
    await assert.rejects(ref.ask({ type: "GET" }), (e) => isMQError(e, "SYSTEM_BUSY"));
    await waitFor(() => node.actorOf("c") !== undefined, 2000, "restart");
    assert.deepEqual(await get(node, "c"), { machine: [], direct: [] }, "a restarted actor starts from its initial context");
    ref.send({ type: "HIT", n: 6 });
    assert.deepEqual(await get(node, "c"), { machine: [], direct: [6] });
  });
});
