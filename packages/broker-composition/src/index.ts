export { brokerComposition } from './composition.js';
