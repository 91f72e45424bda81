export { consolePlugin, type ConsoleOptions } from './plugin.js';
