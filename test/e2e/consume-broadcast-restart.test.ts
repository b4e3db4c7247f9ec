/**
 * Broadcasting offsets outlive the process: a member restarted as a new process with the same
 * instance name finds the offsets file its predecessor wrote (kept under host@instanceName, not
 * under the client id, which holds the pid) and resumes after what it consumed.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Admin, Producer, startLocalCluster } from "../../index.ts";
import { tempDir, waitFor } from "../helpers.ts";
import { startConsumerChild } from "./fixtures/consumerChild.ts";

test("broadcasting member restarted as a new process resumes from its offsets file", async () => {
  const { dir, cleanup } = await tempDir("actormq-bcast-restart-");
  const cluster = await startLocalCluster({ dir: path.join(dir, "store"), broker: { flush: "async" } });
  const producer = await Producer.start({ group: "pg", nameservers: cluster.nameservers });
  const admin = await Admin.start({ nameservers: cluster.nameservers });
  const env = {
    NAMESRV: cluster.nameservers[0]!,
    GROUP: "cgBR",
    TOPIC: "BR",
    MODEL: "BROADCASTING",
    INSTANCE: "member-1",
    OFFSET_DIR: path.join(dir, "offsets"),
    FROM: "CONSUME_FROM_FIRST_OFFSET",
  };
  const children: ReturnType<typeof startConsumerChild>[] = [];
  const run = async (expect: number) => {
    const child = startConsumerChild(env);
    children.push(child);
    await child.ready;
    await waitFor(() => child.consumed.length >= expect, 20_000, `${expect} consumed`);
    child.proc.kill("SIGTERM");
    assert.equal(await child.exited, 0);
    return child.consumed.map((m) => m.body);
  };
  try {
    await admin.createTopic({ topic: "BR", readQueueNums: 1, writeQueueNums: 1 });
    await producer.sendBatch(Array.from({ length: 5 }, (_, j) => ({ topic: "BR", body: `a${j}` })));
    assert.deepEqual(await run(5), ["a0", "a1", "a2", "a3", "a4"]);
    // sent while no member runs
    await producer.sendBatch(Array.from({ length: 5 }, (_, j) => ({ topic: "BR", body: `b${j}` })));
    assert.deepEqual(await run(5), ["b0", "b1", "b2", "b3", "b4"], "the new process resumes after a4");
  } finally {
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
    await admin.close();
    await producer.close();
    await cluster.close();
    await cleanup();
  }
});
