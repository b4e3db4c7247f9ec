/**
 * The inspection stream of a CURVE cluster: the inspector's probes go over CURVE links, and the
 * nodes publish to a collector that is a CURVE server with a key of its own, sent with
 * INSPECT_SUBSCRIBE; a publisher without that key cannot connect to it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { setup } from "xstate";
import * as zmq from "zeromq";
import { Inspector } from "../../../actors/inspector/index.ts";
import { ActorNode, InspectionCollector, resolveCurveLink, resolveCurveServer } from "../../../actors/runtime/index.ts";
import { curveKeyPair } from "../../../transport/curve.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { EPHEMERAL, waitFor } from "../../helpers.ts";

const idle = setup({}).createMachine({ id: "idle" });

test("a CURVE collector gets a CURVE node's stream through an allowed client; a plaintext publisher cannot connect to it", async (t) => {
  const server = curveKeyPair();
  const allowed = curveKeyPair();
  const node = await ActorNode.start({
    listen: EPHEMERAL,
    curve: resolveCurveServer({ ...server, allowedClientKeys: [allowed.publicKey] }),
  });
  t.after(() => node.close());
  node.spawn("idle", idle);
  const collector = await InspectionCollector.start({ curve: true });
  t.after(() => collector.close());
  assert.equal(typeof collector.curvePublicKey, "string");
  const client = await ActorNode.start({
    listen: null,
    curveClient: resolveCurveLink({ curveServerKey: server.publicKey, curveClient: allowed }),
  });
  t.after(() => client.close());
  assert.equal(await collector.requestFrom(client.ref(node.address, "idle")), node.nodeId);
  await waitFor(
    () => collector.records.some((r) => r.nodeId === node.nodeId && r.kind === "actor"),
    10_000,
    "the node's actors over the CURVE stream",
  );

  // a publisher without the collector's key is refused at its handshake
  const plain = new zmq.XPublisher({ linger: 0 });
  t.after(() => plain.close());
  let refused = false;
  plain.events.on("handshake:error:protocol", () => (refused = true));
  plain.connect(collector.endpoint);
  await waitFor(() => refused, 10_000, "the plaintext publisher refused");
  await waitFor(() => collector.refusedPublishers > 0, 10_000, "the refusal counted by the collector");

  // a key that is not one is refused by the node, not taken for a stream that never connects
  await assert.rejects(
    client.ref(node.address, "idle").ask({ type: "INSPECT_SUBSCRIBE", endpoint: collector.endpoint, curveServerKey: "short" }),
    (e) => isMQError(e, "ILLEGAL_ARGUMENT"),
  );
});

test("a process that publishes itself reaches a CURVE inspector's collector with its public key, and only with it", async (t) => {
  const server = curveKeyPair();
  const node = await ActorNode.start({ listen: EPHEMERAL, curve: resolveCurveServer(server) });
  t.after(() => node.close());
  const insp = await Inspector.start({ collect: [node.address!], curveServerKey: server.publicKey, listen: "127.0.0.1:0" });
  t.after(() => insp.close());
  const key = insp.collectorPublicKey;
  assert.equal(typeof key, "string");
  // a client-like node (no listener, nothing to probe) publishing on its own, as ACTORMQ_INSPECTOR_KEY makes it
  const keyed = await ActorNode.start({ listen: null, nodeId: "self-keyed" });
  t.after(() => keyed.close());
  keyed.spawn("idle", idle);
  await keyed.publishInspection(insp.collectorEndpoint, { curveServerKey: key });
  const plain = await ActorNode.start({ listen: null, nodeId: "self-plain" });
  t.after(() => plain.close());
  plain.spawn("idle", idle);
  await plain.publishInspection(insp.collectorEndpoint);
  const state = async () =>
    (await (await fetch(new URL("/api/state", insp.url))).json()) as {
      stats: { refusedPublishers: number };
      nodes: { nodeId: string; actors: { actorName: string }[] }[];
    };
  await waitFor(
    async () => (await state()).nodes.some((n) => n.nodeId === "self-keyed" && n.actors.some((a) => a.actorName === "idle")),
    10_000,
    "the keyed node's actors",
  );
  await waitFor(async () => (await state()).stats.refusedPublishers > 0, 10_000, "the plaintext node refused");
  assert.ok(!(await state()).nodes.some((n) => n.nodeId === "self-plain"), "nothing of the plaintext node");

  // a plaintext inspector (nodes of this process only) has no key to give
  const local = await Inspector.start({ nodes: [node], listen: "127.0.0.1:0" });
  t.after(() => local.close());
  assert.equal(local.collectorPublicKey, undefined);
});
