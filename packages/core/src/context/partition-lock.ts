/**
 * Serialises work per partition inside this process: a cycle and an idle
 * flush of one partition never interleave here (the broker's advisory lock
 * makes it safe anyway; this just avoids pointless VERSION_CONFLICTs).
 */
export class PartitionLocks {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(partitionId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(partitionId) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(partitionId, tail);
    void tail.then(() => {
      if (this.tails.get(partitionId) === tail) this.tails.delete(partitionId);
    });
    return next;
  }
}
