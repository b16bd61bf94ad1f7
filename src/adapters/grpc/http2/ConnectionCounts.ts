/**
 * The connection caps of several servers on one port (the I/O threads),
 * kept in one place by one thread: each server asks before it keeps a
 * connection and says when it closed, and the counts remember which server
 * holds which connections, so a server that is gone (a thread that died)
 * gives all of its back at once and the caps stay exact.
 *
 * @since 0.1.0
 */

/**
 * How a server's `ConnectionGuard` asks the keeper of the counts: `acquire`
 * answers, at once or later, whether a connection from `address` fits the
 * caps (it is closed if not); `release` gives back one that was admitted.
 *
 * @category models
 * @since 0.1.0
 */
export interface ConnectionAdmission {
  readonly acquire: (address: string, answer: (admitted: boolean) => void) => void
  readonly release: (address: string) => void
}

/**
 * Connections per client address and in total, for all servers of a port,
 * with what each server (a `holder` number) holds.
 *
 * @category models
 * @since 0.1.0
 */
export class ConnectionCounts {
  private readonly maxConnections: number
  private readonly maxPerAddress: number
  private readonly perAddress = new Map<string, number>()
  private readonly held = new Map<number, Map<string, number>>()
  private open = 0

  constructor(maxConnections: number, maxPerAddress: number) {
    this.maxConnections = maxConnections
    this.maxPerAddress = maxPerAddress
  }

  /** Connections counted now, all servers together. */
  get total(): number {
    return this.open
  }

  /** Connections counted now from `address`. */
  countOf(address: string): number {
    return this.perAddress.get(address) ?? 0
  }

  /** Connections counted now for `holder`. */
  heldBy(holder: number): number {
    let count = 0
    for (const fromAddress of this.held.get(holder)?.values() ?? []) count += fromAddress
    return count
  }

  /** Counts a connection of `holder` from `address` when both caps allow it. */
  tryAcquire(holder: number, address: string): boolean {
    const fromAddress = this.perAddress.get(address) ?? 0
    if (this.open >= this.maxConnections || fromAddress >= this.maxPerAddress) return false
    this.open++
    this.perAddress.set(address, fromAddress + 1)
    let mine = this.held.get(holder)
    if (mine === undefined) {
      mine = new Map()
      this.held.set(holder, mine)
    }
    mine.set(address, (mine.get(address) ?? 0) + 1)
    return true
  }

  /** Gives back a connection `holder` was counted for; one it does not hold is ignored. */
  release(holder: number, address: string): void {
    const mine = this.held.get(holder)
    const count = mine?.get(address) ?? 0
    if (mine === undefined || count === 0) return
    if (count === 1) mine.delete(address)
    else mine.set(address, count - 1)
    this.drop(address, 1)
  }

  /** Gives back every connection of `holder` (a server that is gone); returns how many. */
  releaseAll(holder: number): number {
    const mine = this.held.get(holder)
    this.held.delete(holder)
    let released = 0
    for (const [address, count] of mine ?? []) {
      this.drop(address, count)
      released += count
    }
    return released
  }

  /** The admission of `holder`, answered at once (for a server on this thread). */
  admission(holder: number): ConnectionAdmission {
    return {
      acquire: (address, answer) => answer(this.tryAcquire(holder, address)),
      release: (address) => this.release(holder, address)
    }
  }

  private drop(address: string, count: number): void {
    this.open -= count
    const left = (this.perAddress.get(address) ?? count) - count
    if (left <= 0) this.perAddress.delete(address)
    else this.perAddress.set(address, left)
  }
}
