/**
 * The last changes of one cluster, kept so that a watcher that reconnects can
 * be sent only what it missed: a ring of at most `capacity` deltas in
 * revision order, with no gap.
 *
 * @since 0.1.0
 */
import type { WatchDelta } from "../../ports/ClusterApi.ts"

/**
 * A bounded log of a cluster's deltas.
 *
 * @category models
 * @since 0.1.0
 */
export class ChangeLog {
  private readonly entries: Array<WatchDelta> = []
  /** Where the oldest entry is, once the ring is full. */
  private head = 0
  private readonly capacity: number

  constructor(capacity: number) {
    this.capacity = capacity
  }

  /** How many changes it holds. */
  get size(): number {
    return this.entries.length
  }

  /** Appends the next change (its revision follows the last one's), dropping the oldest when full. */
  push(delta: WatchDelta): void {
    if (this.entries.length < this.capacity) {
      this.entries.push(delta)
      return
    }
    this.entries[this.head] = delta
    this.head = (this.head + 1) % this.capacity
  }

  /**
   * The changes after `revision` up to `current` (the cluster's revision), in
   * order; `undefined` when some of them are no longer held or `revision` is
   * in the future.
   */
  since(revision: number, current: number): ReadonlyArray<WatchDelta> | undefined {
    if (revision > current || revision < 0) return undefined
    const missed = current - revision
    if (missed === 0) return []
    if (missed > this.entries.length) return undefined
    const length = this.entries.length
    const result = new Array<WatchDelta>(missed)
    for (let i = 0; i < missed; i++) result[i] = this.entries[(this.head + length - missed + i) % length]!
    return result[0]!.revision === revision + 1 ? result : undefined
  }
}
