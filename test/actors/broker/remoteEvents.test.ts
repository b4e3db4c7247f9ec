import assert from "node:assert/strict";
import { test } from "node:test";
import { setup } from "xstate";
import { brokerActors } from "../../../actors/broker/brokerActors.ts";
import { ActorNode, type Replier } from "../../../actors/runtime/index.ts";
import { BrokerActor, isMQError, NAMESRV_ACTOR } from "../../../transport/protocol.ts";
import { EPHEMERAL, waitFor } from "../../helpers.ts";
import { startFixture } from "./consumptionFixture.ts";

test("another process cannot shut down or stop a broker's actors, nor send them their own ticks", async (t) => {
  const f = await startFixture({ logLevel: "silent" });
  t.after(() => f.close());
  await f.send("T", 0, [{ body: "before" }]);
  const hosted = brokerActors.filter((e) => f.broker.ctx.node.actorOf(e.name) !== undefined);
  const internal = hosted.flatMap((e) => ["SHUTDOWN", ...(e.localOnly ?? [])].map((type) => [e.name, type] as const));
  // the actors that hold resources, and their timer ticks and self-sent completions, are covered
  for (const [name, type] of [
    ["store", "SHUTDOWN"],
    ["store", "PUT_GROUP"],
    ["store", "PUT_DONE"],
    ["hold", "HOLD_PULL"],
    ["hold", "EXPIRE"],
    ["offsets", "PERSIST"],
    ["scheduler", "TICK"],
    ["registrar", "SHUTDOWN"],
  ])
    assert.ok(
      internal.some(([n, ty]) => n === name && ty === type),
      `${name} refuses ${type} from the network`,
    );
  for (const [name, type] of internal) {
    await assert.rejects(
      f.client.ref(f.broker.address, name).ask({ type }, { timeoutMs: 3000 }),
      (e) => isMQError(e, "NO_PERMISSION"),
      `${type} to ${name}`,
    );
  }
  const refused = f.broker.ctx.node.stats().refusedEvents;
  for (const e of hosted) {
    f.client.ref(f.broker.address, e.name).send({ type: "SHUTDOWN" });
    f.client.ref(f.broker.address, e.name).send({ type: "xstate.stop" });
  }
  await waitFor(() => f.broker.ctx.node.stats().refusedEvents === refused + 2 * hosted.length, 5000, "every one-way send refused");
  for (const e of hosted) assert.equal(f.broker.ctx.node.actorOf(e.name)?.getSnapshot().status, "active", e.name);
  const after = await f.send("T", 0, [{ body: "after" }]);
  assert.equal(after.queueOffset, 1);
  const pulled = await f.pull({ topic: "T", queueId: 0, queueOffset: 0 });
  assert.equal(pulled.fields.status, "SUCCESS");
  assert.equal(pulled.fields.nextBeginOffset, 2);
});

test("another process cannot make a broker register with a name server of its choosing (NAMESRV_BACK)", async (t) => {
  // a listening node that takes REGISTER_BROKER as a name server would: the broker must never reach it
  const fake = await ActorNode.start({ listen: EPHEMERAL });
  t.after(() => fake.close());
  let registrations = 0;
  fake.spawn(
    NAMESRV_ACTOR,
    setup({ types: { events: {} as { type: string; reply?: Replier } } }).createMachine({
      on: {
        "*": {
          actions: ({ event }) => {
            registrations++;
            event.reply?.ok({});
          },
        },
      },
    }),
  );
  const f = await startFixture({ logLevel: "silent" });
  t.after(() => f.close());
  await assert.rejects(
    f.client.ref(f.broker.address, BrokerActor.REGISTRAR).ask({ type: "NAMESRV_BACK", nameserver: fake.address }, { timeoutMs: 3000 }),
    (e) => isMQError(e, "NO_PERMISSION"),
  );
  // a one-way one is refused too; its refusal is counted once it arrived
  const refused = f.broker.ctx.node.stats().refusedEvents;
  f.client.ref(f.broker.address, BrokerActor.REGISTRAR).send({ type: "NAMESRV_BACK", nameserver: fake.address });
  await waitFor(() => f.broker.ctx.node.stats().refusedEvents > refused, 5000, "the one-way NAMESRV_BACK refused");
  assert.equal(registrations, 0);
  assert.equal(f.broker.ctx.node.peerLostAt(fake.address!), 0, "no connection made to the address given");
});

test("an ask of a type a broker actor does not handle at all is answered REQUEST_CODE_NOT_SUPPORTED, not left to time out", async (t) => {
  const f = await startFixture({ logLevel: "silent" });
  t.after(() => f.close());
  for (const name of ["store", "hold", "registrar"]) {
    const began = performance.now();
    await assert.rejects(
      f.client.ref(f.broker.address, name).ask({ type: "NO_SUCH_REQUEST" }, { timeoutMs: 10_000 }),
      (e) => isMQError(e, "REQUEST_CODE_NOT_SUPPORTED") && new RegExp(`${name}.*NO_SUCH_REQUEST`).test(String(e)),
      name,
    );
    assert.ok(performance.now() - began < 5000, `${name} answered, not the ask's timeout`);
  }
  // what they do handle still reaches them
  assert.equal((await f.send("T", 0, [{ body: "still" }])).queueOffset, 0);
});
