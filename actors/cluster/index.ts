/** actors/cluster: multi-process clusters on one machine, their cluster file and process checks. */
export { clusterUp, clusterStatus, clusterDown, clusterKill, clusterRestart, planCluster } from "./localProcessCluster.ts";
export type { ClusterUpOptions, ClusterMemberStatus } from "./localProcessCluster.ts";
export { readClusterFile, writeClusterFile, clusterFilePath, CLUSTER_FILE_NAME } from "./clusterFile.ts";
export type { ClusterFile, ClusterProcess, ClusterRole } from "./clusterFile.ts";
export { ACTORMQ_BIN, startProcess, stopPid, isRunning, lastLogLine } from "./clusterProcesses.ts";
export { isOurProcess, isAlive, cmdlineOf } from "./processCheck.ts";
