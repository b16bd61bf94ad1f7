/**
 * The bytes of request messages a server holds before their calls can use
 * them, bounded for the whole server. A message that does not arrive whole
 * in one DATA frame reserves its announced length as soon as its length
 * prefix is read, and one that arrives whole but waits past the turn that
 * brought it (its client has not ended the request) reserves its length
 * then; either is refused when the budget cannot cover it. So unfinished
 * requests, large or small, cannot grow the server's memory past the budget
 * however many streams carry them. A message read and used in the turn it
 * came in, as every request of a well-behaved client is, needs none.
 *
 * @since 0.1.0
 */
import { getHeapStatistics } from "node:v8"

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
