/**
 * The encoded snapshots a server sent last, so that watchers of one cluster
 * who reconnect together (a restart, a load balancer moving connections)
 * cost one encoding, not one each. A snapshot is named by its cluster, epoch
 * and revision, which fix its contents; the cache holds at most a byte
 * budget, dropping the oldest first.
 *
 * @since 0.1.0
 */

/**
 * A bounded cache of encoded snapshots.
 *
 * @category models
 * @since 0.1.0
 */
export class SnapshotCache {
  private readonly entries = new Map<string, ReadonlyArray<Uint8Array>>()
  private readonly sizes = new Map<string, number>()
  private bytes = 0
  private readonly budget: number

  /** Holds at most `budget` bytes of messages. */
  constructor(budget: number) {
    this.budget = budget
  }

  /** The messages of the snapshot of `clusterId` at `revision` in `epoch`, encoded by `encode` when not held. */
  messages(
    clusterId: string,
    epoch: string,
    revision: number,
    encode: () => ReadonlyArray<Uint8Array>
  ): ReadonlyArray<Uint8Array> {
    const key = `${revision} ${epoch} ${clusterId}`
    const held = this.entries.get(key)
    if (held !== undefined) return held
    const messages = encode()
    let size = 0
    for (const message of messages) size += message.length
    if (size > this.budget) return messages
    while (this.bytes + size > this.budget) this.evictOldest()
    this.entries.set(key, messages)
    this.sizes.set(key, size)
    this.bytes += size
    return messages
  }

  private evictOldest(): void {
    const oldest = this.entries.keys().next().value!
    this.bytes -= this.sizes.get(oldest)!
    this.entries.delete(oldest)
    this.sizes.delete(oldest)
  }
}
