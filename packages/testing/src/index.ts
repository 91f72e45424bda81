export * from './harness.js';
export { modulesLoadedBy } from './loaded-modules.js';
