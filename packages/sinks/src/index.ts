export { queueSink, queueSinkOptionsSchema, type QueueSinkOptions } from './queue-sink.js';
export { foreachSink } from './foreach-sink.js';
