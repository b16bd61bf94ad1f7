/**
 * How far an I/O thread has read what the owner posted to it. The owner
 * counts each batch it posts (with its approximate bytes and when); the
 * thread counts each batch it has handled in shared memory, without a
 * message back. What is posted and not yet handled waits in the port's
 * queue, outside V8's heap: a thread that stalls lets it grow, and this is
 * how the owner sees it.
 *
 * @since 0.1.0
 */

/** One posted batch: its number, the bytes posted up to and with it, and when. */
interface Posted {
  readonly batch: number
  readonly bytesUpTo: number
  readonly at: number
}

/**
 * The shared cell a thread counts its handled batches in.
 *
 * @category constructors
 * @since 0.1.0
 */
export const progressCell = (): SharedArrayBuffer => new SharedArrayBuffer(4)

/**
 * Counts one handled batch in `cell` (the thread's side).
 *
 * @category constructors
 * @since 0.1.0
 */
export const acknowledger = (cell: SharedArrayBuffer): (() => void) => {
  const handled = new Int32Array(cell)
  return () => {
    Atomics.add(handled, 0, 1)
  }
}

/**
 * What the thread has not handled yet.
 *
 * @category models
 * @since 0.1.0
 */
export interface Backlog {
  readonly batches: number
  readonly bytes: number
  /** Milliseconds since the oldest of them was posted (0 when there is none). */
  readonly oldestMillis: number
}

/**
 * The owner's side: what it posted to one thread, against what the thread
 * says it handled.
 *
 * @category models
 * @since 0.1.0
 */
export class ThreadProgress {
  readonly #handled: Int32Array
  readonly #waiting: Array<Posted> = []
  #head = 0
  #batches = 0
  #bytes = 0
  #bytesHandled = 0
  #lastPostAt: number

  /** Reads the thread's count in `cell`; `now` is when the thread started. */
  constructor(cell: SharedArrayBuffer, now: number) {
    this.#handled = new Int32Array(cell)
    this.#lastPostAt = now
  }

  /** When the owner last posted to the thread. */
  get lastPostAt(): number {
    return this.#lastPostAt
  }

  /** Records one batch of about `bytes` posted at `now`. */
  posted(bytes: number, now: number): void {
    this.#batches = (this.#batches + 1) | 0
    this.#bytes += bytes
    this.#lastPostAt = now
    this.#waiting.push({ batch: this.#batches, bytesUpTo: this.#bytes, at: now })
  }

  /** What the thread has not handled yet, at `now`. */
  backlog(now: number): Backlog {
    const handled = Atomics.load(this.#handled, 0)
    const waiting = this.#waiting
    // batch numbers wrap at 2^31: compare their distance, not their values
    while (this.#head < waiting.length && ((handled - waiting[this.#head]!.batch) | 0) >= 0) {
      this.#bytesHandled = waiting[this.#head]!.bytesUpTo
      this.#head++
    }
    if (this.#head > 1024 && this.#head * 2 > waiting.length) {
      waiting.splice(0, this.#head)
      this.#head = 0
    }
    const oldest = waiting[this.#head]
    return {
      batches: waiting.length - this.#head,
      bytes: this.#bytes - this.#bytesHandled,
      oldestMillis: oldest === undefined ? 0 : now - oldest.at
    }
  }
}
