/**
 * The bytes of request messages a server holds before their calls can use
 * them, bounded for the whole server. A message that arrives in one DATA
 * frame is never counted (one frame per stream at most, so the stream caps
 * bound it); a larger one reserves its announced length from the budget as
 * soon as its length prefix is read, and is refused when the budget cannot
 * cover it, so unfinished large requests cannot grow the server's memory
 * past the budget however many streams carry them.
 *
 * @since 0.1.0
 */
import { getHeapStatistics } from "node:v8"

/**
 * Messages of at most this many bytes need no reservation: a whole gRPC
 * message of that size fits in one DATA frame of the default 16 KiB frame
 * size, and every request of the discovery protocol is smaller (the largest
 * AffiliateUpdate is about 4.5 KiB).
 *
 * @category models
 * @since 0.1.0
 */
export const unbudgetedMessageBytes = 16 * 1024

/**
 * The default budget: an eighth of V8's heap limit, at most 256 MiB (256 MiB
 * on a host where Node's heap limit is 2 GiB or more; about 64 MiB where a
 * container limit brings it to 512 MiB).
 *
 * @category constructors
 * @since 0.1.0
 */
export const defaultRequestBudgetBytes = (): number =>
  Math.min(256 * 1024 * 1024, Math.floor(getHeapStatistics().heap_size_limit / 8))

/**
 * A byte budget shared by every call of a server.
 *
 * @category models
 * @since 0.1.0
 */
export class RequestBudget {
  /** The most bytes reserved at once. */
  readonly capacity: number
  #reserved = 0
  #refused = 0

  constructor(capacity: number) {
    if (!(capacity >= 0) || !Number.isFinite(capacity)) {
      throw new RangeError(`request budget: capacity must be a non-negative number of bytes, got ${capacity}`)
    }
    this.capacity = capacity
  }

  /** Bytes reserved now. */
  get reserved(): number {
    return this.#reserved
  }

  /** Messages refused so far because the budget could not cover them. */
  get refused(): number {
    return this.#refused
  }

  /** Reserves `bytes` when they fit; false (and nothing reserved) when they do not. */
  tryReserve(bytes: number): boolean {
    if (this.#reserved + bytes > this.capacity) {
      this.#refused++
      return false
    }
    this.#reserved += bytes
    return true
  }

  /** Gives back `bytes` reserved earlier. */
  release(bytes: number): void {
    this.#reserved -= bytes
  }
}
