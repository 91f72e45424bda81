export { main } from './main.js';
export { processIO, type CliIO } from './io.js';
