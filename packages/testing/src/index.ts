export * from './harness.js';
export { testStream, type TestStream, type TestStreamOptions, type PushOptions, type Emit, type StateRow, type DeadLetter, type CompilableChain } from './test-stream.js';
export { acquireCluster, type Cluster, type ClusterSource } from './cluster.js';
export { VirtualClock } from './virtual-clock.js';
export { modulesLoadedBy } from './loaded-modules.js';
export { PgAutoFailover, pgAutoFailoverMissing, killTree, type NodeName } from './pg-auto-failover.js';
