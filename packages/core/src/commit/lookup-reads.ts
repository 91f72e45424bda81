import { kvKey } from '@queen-mq/protocol';
import type { StreamsApi } from '../context/state-api.js';
import type { CycleKvReadWire } from '../context/wire.js';
import { SEP } from '../plan/keys.js';

// A lookup's KV reads for one cycle: every key the batch needs, read once,
// with the version read. The cycle sends the versions (`kv_reads`) and the
// broker commits it only if they are all still the live ones, holding the
// KV's lock on them to the commit; a conflict recomputes with fresh reads.

/** One entry as read: its value, or absent (version 0). */
interface Read {
  value: unknown;
  version: number;
}

/** KV reads at most this many at once. */
const READS_IN_FLIGHT = 16;

export class LookupReads {
  private readonly entries = new Map<string, Read | null>();
  /** Keys a pass over the batch asked for and this holds no read of: the next round reads them. */
  readonly wanted = new Map<string, { namespace: string; key: string }>();

  /** The entry of (namespace, key): its read, null when absent, undefined when not read yet (the key is then wanted). */
  get(namespace: string, key: string): Read | null | undefined {
    const id = `${namespace}${SEP}${key}`;
    if (!kvKey.safeParse(key).success) return null; // no such key can exist
    const read = this.entries.get(id);
    if (read === undefined) this.wanted.set(id, { namespace, key });
    return read;
  }

  /** Reads the wanted keys; answers whether there were any. */
  async readWanted(api: StreamsApi): Promise<boolean> {
    const todo = [...this.wanted.entries()];
    this.wanted.clear();
    for (let i = 0; i < todo.length; i += READS_IN_FLIGHT) {
      await Promise.all(
        todo.slice(i, i + READS_IN_FLIGHT).map(async ([id, { namespace, key }]) => {
          this.entries.set(id, await api.kvEntry(namespace, key));
        }),
      );
    }
    return todo.length > 0;
  }

  /** The versions read, as the cycle sends them (0: absent). */
  wire(): CycleKvReadWire[] {
    return [...this.entries.entries()].map(([id, read]) => {
      const at = id.indexOf(SEP);
      return { namespace: id.slice(0, at), key: id.slice(at + 1), version: read?.version ?? 0 };
    });
  }
}
