export * from './harness.js';
export { acquireCluster, type Cluster, type ClusterSource } from './cluster.js';
export { VirtualClock } from './virtual-clock.js';
export { modulesLoadedBy } from './loaded-modules.js';
