/** readClusterFile: a damaged cluster.json is one MQError MALFORMED naming the file and what is wrong. */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { test } from "node:test";
import { CLUSTER_FILE_VERSION, clusterFilePath, readClusterFile } from "../../../actors/cluster/clusterFile.ts";
import { isMQError } from "../../../transport/protocol.ts";
import { tempDir } from "../../helpers.ts";

test("a malformed process entry of cluster.json is MALFORMED naming the entry and what it lacks", async (t) => {
  const { dir, cleanup } = await tempDir("actormq-clusterfile-");
  t.after(cleanup);
  const good = { name: "namesrv-0", role: "nameserver", pid: 1, argv: [] };
  const cases: [unknown, RegExp][] = [
    [null, /entry number 2 is not an object/],
    [{ role: "master", pid: 1, argv: [] }, /entry number 2 has no name \(a string\)/],
    [{ name: "broker-a", role: "master", brokerId: 0, argv: [] }, /entry "broker-a" has no pid \(a number\)/],
    [{ name: "broker-a", role: "master", brokerId: 0, pid: 2 }, /entry "broker-a" has no argv \(an array\)/],
  ];
  for (const [entry, message] of cases) {
    writeFileSync(clusterFilePath(dir), JSON.stringify({ version: CLUSTER_FILE_VERSION, nameservers: [], processes: [good, entry] }));
    assert.throws(
      () => readClusterFile(dir),
      (e) =>
        isMQError(e, "MALFORMED") &&
        e.message.startsWith(`Cluster file ${clusterFilePath(dir)} has a malformed process entry: `) &&
        message.test(e.message) &&
        e.message.endsWith("fix or remove it."),
      JSON.stringify(entry),
    );
  }
});
