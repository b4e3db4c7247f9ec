/** actors/cluster: multi-process clusters on one machine, their cluster file and process checks. */

export { prepareClusterDir } from "./clusterDir.ts";
export type { ClusterFile, ClusterProcess, ClusterRole, ClusterUpFlags } from "./clusterFile.ts";
export {
  CLUSTER_FILE_NAME,
  CLUSTER_UP_DEFAULTS,
  clusterFilePath,
  DEFAULT_CLUSTER_DIR,
  dirArg,
  readClusterFile,
  resolveUpFlags,
  shellArg,
  writeClusterFile,
} from "./clusterFile.ts";
export { ACTORMQ_BIN, isRunning, lastLogLine, startProcess, stopPid } from "./clusterProcesses.ts";
export type { ClusterMemberStatus, ClusterUpOptions } from "./localProcessCluster.ts";
export { brokerDirName, clusterDown, clusterKill, clusterRestart, clusterStatus, clusterUp, planCluster } from "./localProcessCluster.ts";
export { cmdlineOf, isAlive, isOurProcess, startTimeOf } from "./processCheck.ts";
