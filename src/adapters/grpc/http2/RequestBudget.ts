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

/** Where the shared budget keeps its capacity, then each holder's bytes. */
const capacityAt = 0
const firstHolderAt = 1

/**
 * One budget for several servers on one port in different threads (the I/O
 * threads), in shared memory: the capacity and each server's bytes. A
 * server changes only its own cell, in one atomic step, and the bytes
 * reserved are the sum of the cells: a reservation adds its bytes to its
 * cell, then takes them back if the sum passed the capacity (two servers
 * racing may both be refused, never both let past). So a thread terminated
 * at any point leaves nothing behind but its own cell, which `reclaim`
 * empties: the budget stays exact however its threads end.
 *
 * @category models
 * @since 0.1.0
 */
export class SharedRequestBudget {
  readonly buffer: SharedArrayBuffer
  readonly #cells: BigInt64Array

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer
    this.#cells = new BigInt64Array(buffer)
  }

  /** A budget of `capacity` bytes for servers numbered 0 to `holders` − 1. */
  static make(capacity: number, holders: number): SharedRequestBudget {
    const budget = new SharedRequestBudget(new SharedArrayBuffer((firstHolderAt + holders) * 8))
    Atomics.store(budget.#cells, capacityAt, BigInt(Math.floor(capacity)))
    return budget
  }

  /** The budget of `buffer` (from `make`, in another thread). */
  static attach(buffer: SharedArrayBuffer): SharedRequestBudget {
    return new SharedRequestBudget(buffer)
  }

  /** The most bytes reserved at once, all servers together. */
  get capacity(): number {
    return Number(Atomics.load(this.#cells, capacityAt))
  }

  /** How many servers share it (numbered from 0). */
  get holders(): number {
    return this.#cells.length - firstHolderAt
  }

  /** Bytes reserved now, all servers together. */
  get reserved(): number {
    return Number(this.#sum())
  }

  /** Bytes server `holder` has reserved now. */
  reservedBy(holder: number): number {
    return Number(Atomics.load(this.#cells, firstHolderAt + holder))
  }

  /** Reserves `bytes` for server `holder` when they fit. */
  tryReserve(holder: number, bytes: number): boolean {
    const cells = this.#cells
    const wanted = BigInt(bytes)
    Atomics.add(cells, firstHolderAt + holder, wanted)
    if (this.#sum() <= Atomics.load(cells, capacityAt)) return true
    Atomics.sub(cells, firstHolderAt + holder, wanted)
    return false
  }

  /** Gives back `bytes` server `holder` reserved. */
  release(holder: number, bytes: number): void {
    Atomics.sub(this.#cells, firstHolderAt + holder, BigInt(bytes))
  }

  /** Gives back everything server `holder` reserved (its thread is gone); returns how many bytes. */
  reclaim(holder: number): number {
    return Number(Atomics.exchange(this.#cells, firstHolderAt + holder, 0n))
  }

  #sum(): bigint {
    const cells = this.#cells
    let sum = 0n
    for (let at = firstHolderAt; at < cells.length; at++) sum += Atomics.load(cells, at)
    return sum
  }
}

/**
 * A byte budget shared by every call of a server, or by the servers of
 * several threads (`SharedRequestBudget`).
 *
 * @category models
 * @since 0.1.0
 */
export class RequestBudget {
  /** The most bytes reserved at once. */
  readonly capacity: number
  #reserved = 0
  #refused = 0
  readonly #shared: { readonly budget: SharedRequestBudget; readonly holder: number } | undefined

  /** `shared`: reserve from that budget, as server `holder`; `capacity` is then the shared budget's. */
  constructor(
    capacity: number,
    shared?: { readonly budget: SharedRequestBudget; readonly holder: number } | undefined
  ) {
    if (!(capacity >= 0) || !Number.isFinite(capacity)) {
      throw new RangeError(`request budget: capacity must be a non-negative number of bytes, got ${capacity}`)
    }
    if (shared !== undefined && !(shared.holder >= 0 && shared.holder < shared.budget.holders)) {
      throw new RangeError(`request budget: server ${shared.holder} of a budget shared by ${shared.budget.holders}`)
    }
    this.capacity = shared === undefined ? capacity : shared.budget.capacity
    this.#shared = shared
  }

  /** Bytes reserved now (by this server). */
  get reserved(): number {
    return this.#reserved
  }

  /** Messages refused so far because the budget could not cover them. */
  get refused(): number {
    return this.#refused
  }

  /** Reserves `bytes` when they fit; false (and nothing reserved) when they do not. */
  tryReserve(bytes: number): boolean {
    const shared = this.#shared
    const fits =
      shared === undefined ? this.#reserved + bytes <= this.capacity : shared.budget.tryReserve(shared.holder, bytes)
    if (!fits) {
      this.#refused++
      return false
    }
    this.#reserved += bytes
    return true
  }

  /** Gives back `bytes` reserved earlier. */
  release(bytes: number): void {
    this.#reserved -= bytes
    this.#shared?.budget.release(this.#shared.holder, bytes)
  }
}
