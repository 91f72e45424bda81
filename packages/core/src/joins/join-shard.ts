import { createHash } from 'node:crypto';

/**
 * The id a join's state lives under for one partition name: both queues'
 * partitions of that name share it (each queue gives its partition an id of
 * its own, so neither id can be the other's). A UUID (version 8, RFC 9562)
 * made of SHA-256 over the left queue's and the partition's names: every
 * runner of the query finds the same shard without asking the broker, and it
 * is never the id of a partition.
 */
export function joinShardId(leftQueue: string, partition: string): string {
  const h = createHash('sha256').update(`queen-join\u001f${leftQueue}\u001f${partition}`).digest('hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
