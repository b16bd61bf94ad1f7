/**
 * The last changes of one cluster, kept so that a watcher that reconnects can
 * be sent only what it missed: a ring of at most `capacity` deltas in
 * revision order, with no gap, each with the record of its cause (the
 * cluster's history, as the inspect page shows it).
 *
 * @since 0.1.0
 */
import type { ChangeRecord } from "../../ports/ChangeCause.ts"
import type { WatchDelta } from "../../ports/ClusterApi.ts"

/**
 * A bounded log of a cluster's deltas.
 *
 * @category models
 * @since 0.1.0
 */
export class ChangeLog {
  private readonly entries: Array<WatchDelta> = []
  private readonly records: Array<ChangeRecord | undefined> = []
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

  /**
   * Appends the next change (its revision follows the last one's), with the
   * record of its cause when the caller keeps one, dropping the oldest when full.
   */
  push(delta: WatchDelta, record?: ChangeRecord): void {
    if (this.entries.length < this.capacity) {
      this.entries.push(delta)
      this.records.push(record)
      return
    }
    this.entries[this.head] = delta
    this.records[this.head] = record
    this.head = (this.head + 1) % this.capacity
  }

  /** The records of the changes it holds, newest first, at most `limit`. */
  history(limit: number): Array<ChangeRecord> {
    const length = this.records.length
    const result: Array<ChangeRecord> = []
    for (let i = 0; i < length && result.length < limit; i++) {
      const record = this.records[(this.head + length - 1 - i) % length]
      if (record !== undefined) result.push(record)
    }
    return result
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
