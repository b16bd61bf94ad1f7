/**
 * Connection counts shared by the worker threads that serve one port
 * (`reusePort`): the total and the count per client address live in a
 * `SharedArrayBuffer` every thread attaches to, so the connection caps hold
 * for all the threads together. Admission takes a spin lock in the buffer,
 * which is cheap since it happens once per connection.
 *
 * Addresses are kept in an open-addressing table (linear probing,
 * backward-shift deletion) keyed by two 32-bit hashes of the address (FNV-1a
 * and a murmur3-style hash of its UTF-16 code units): two addresses share a
 * count only if both of their hashes collide.
 *
 * @since 0.1.0
 */

const LOCK = 0
const TOTAL = 1
const SLOTS = 2
const USED = 3
const HEADER = 4
/** Int32s per slot: first hash, second hash, count (0 marks a free slot). */
const SLOT = 3
const MIN_SLOTS = 1024
const MAX_SLOTS = 2 ** 20
/** Failed attempts at the lock before each short nap, so a waiting thread yields to one holding it. */
const SPINS = 64
const NAP_MILLIS = 0.05

const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  return hash | 0
}

const murmur = (text: string): number => {
  let hash = 0x9747b28c
  for (let i = 0; i < text.length; i++) {
    let k = Math.imul(text.charCodeAt(i), 0xcc9e2d51)
    k = Math.imul((k << 15) | (k >>> 17), 0x1b873593)
    hash ^= k
    hash = (Math.imul((hash << 13) | (hash >>> 19), 5) + 0xe6546b64) | 0
  }
  hash ^= text.length
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b)
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35)
  return (hash ^ (hash >>> 16)) | 0
}

const slotsFor = (capacity: number): number => {
  let slots = MIN_SLOTS
  while (slots < capacity * 2 && slots < MAX_SLOTS) slots *= 2
  return slots
}

/**
 * The total of open connections and the count per client address, shared
 * by every thread attached to the same buffer. `make` it once, send its
 * `buffer` to the other threads, `attach` there.
 *
 * The table refuses a new address once three quarters of its slots are in
 * use (as if that address had reached its cap), so memory stays bounded:
 * `make(capacity)` tracks at least `capacity` addresses at once, up to
 * 786,432 (2^20 slots).
 *
 * @category models
 * @since 0.1.0
 */
export class SharedConnectionCounts {
  readonly buffer: SharedArrayBuffer
  readonly #cells: Int32Array<SharedArrayBuffer>
  readonly #mask: number
  readonly #maxUsed: number

  private constructor(buffer: SharedArrayBuffer) {
    const cells = new Int32Array(buffer)
    const slots = cells[SLOTS] ?? 0
    if (slots < MIN_SLOTS || (slots & (slots - 1)) !== 0 || cells.length !== HEADER + slots * SLOT) {
      throw new RangeError("not the buffer of a SharedConnectionCounts")
    }
    this.buffer = buffer
    this.#cells = cells
    this.#mask = slots - 1
    this.#maxUsed = (slots / 4) * 3
  }

  /** A new table able to track at least `capacity` client addresses at once (up to 786,432). */
  static make(capacity: number): SharedConnectionCounts {
    const slots = slotsFor(capacity)
    const buffer = new SharedArrayBuffer((HEADER + slots * SLOT) * Int32Array.BYTES_PER_ELEMENT)
    new Int32Array(buffer)[SLOTS] = slots
    return new SharedConnectionCounts(buffer)
  }

  /** The table made by `make` in another thread, from its `buffer`. */
  static attach(buffer: SharedArrayBuffer): SharedConnectionCounts {
    return new SharedConnectionCounts(buffer)
  }

  /** Connections counted now, all addresses and threads together. */
  get total(): number {
    return Atomics.load(this.#cells, TOTAL)
  }

  /** Connections counted now from `address`. */
  countOf(address: string): number {
    const first = fnv1a(address)
    const second = murmur(address)
    this.#lock()
    const slot = this.#find(first, second)
    const count = this.#cells[HEADER + slot * SLOT + 2] ?? 0
    this.#unlock()
    return count
  }

  /**
   * Counts one more connection from `address` if the total is under
   * `maxTotal` and the address's count under `maxPerAddress` (and the table
   * has room for a new address); returns whether it did.
   */
  tryAcquire(address: string, maxTotal: number, maxPerAddress: number): boolean {
    const first = fnv1a(address)
    const second = murmur(address)
    const cells = this.#cells
    this.#lock()
    const total = cells[TOTAL] ?? 0
    const slot = this.#find(first, second)
    const at = HEADER + slot * SLOT
    const count = cells[at + 2] ?? 0
    const admitted = total < maxTotal && count < maxPerAddress && (count > 0 || (cells[USED] ?? 0) < this.#maxUsed)
    if (admitted) {
      if (count === 0) {
        cells[at] = first
        cells[at + 1] = second
        cells[USED] = (cells[USED] ?? 0) + 1
      }
      cells[at + 2] = count + 1
      cells[TOTAL] = total + 1
    }
    this.#unlock()
    return admitted
  }

  /** Counts out one connection from `address`, which `tryAcquire` counted in. */
  release(address: string): void {
    const first = fnv1a(address)
    const second = murmur(address)
    const cells = this.#cells
    this.#lock()
    const slot = this.#find(first, second)
    const at = HEADER + slot * SLOT
    const count = cells[at + 2] ?? 0
    if (count > 0) {
      cells[at + 2] = count - 1
      cells[TOTAL] = (cells[TOTAL] ?? 1) - 1
      if (count === 1) this.#free(slot)
    }
    this.#unlock()
  }

  /** The slot holding the address with these hashes, or the free slot where it would go. */
  #find(first: number, second: number): number {
    const cells = this.#cells
    const mask = this.#mask
    let slot = first & mask
    for (;;) {
      const at = HEADER + slot * SLOT
      if (cells[at + 2] === 0 || (cells[at] === first && cells[at + 1] === second)) return slot
      slot = (slot + 1) & mask
    }
  }

  /** Empties `slot`, moving back the entries after it that probed past it. */
  #free(slot: number): void {
    const cells = this.#cells
    const mask = this.#mask
    let hole = slot
    let next = slot
    for (;;) {
      next = (next + 1) & mask
      const at = HEADER + next * SLOT
      if (cells[at + 2] === 0) break
      const home = (cells[at] ?? 0) & mask
      const reachable = hole <= next ? home <= hole || home > next : home <= hole && home > next
      if (!reachable) continue
      const to = HEADER + hole * SLOT
      cells[to] = cells[at] ?? 0
      cells[to + 1] = cells[at + 1] ?? 0
      cells[to + 2] = cells[at + 2] ?? 0
      hole = next
    }
    cells[HEADER + hole * SLOT + 2] = 0
    cells[USED] = (cells[USED] ?? 1) - 1
  }

  #lock(): void {
    const cells = this.#cells
    for (let tries = 1; Atomics.compareExchange(cells, LOCK, 0, 1) !== 0; tries++) {
      if (tries % SPINS === 0) Atomics.wait(cells, LOCK, 1, NAP_MILLIS)
    }
  }

  #unlock(): void {
    Atomics.store(this.#cells, LOCK, 0)
  }
}
