/**
 * The messages one side of the port has to send, posted together: whatever
 * one turn of the event loop produced goes as one array in one
 * `postMessage`, after the code that produced it returns (a microtask), so
 * a busy thread pays the cost of crossing to the other once per turn rather
 * than once per reply.
 *
 * @since 0.1.0
 */
import type { MessagePort } from "node:worker_threads"

/**
 * A batch of messages on its way to `port`.
 *
 * @category models
 * @since 0.1.0
 */
export class Outbox<T> {
  private readonly port: MessagePort
  private batch: Array<T> = []
  private scheduled = false
  private readonly onFlush: (() => void) | undefined

  /** `onFlush` runs after each batch was posted (the owner forgets the deltas it grouped). */
  constructor(port: MessagePort, onFlush?: () => void) {
    this.port = port
    this.onFlush = onFlush
  }

  /** Adds `message` to the batch; it is posted once the current code returns. */
  push(message: T): void {
    this.batch.push(message)
    if (!this.scheduled) {
      this.scheduled = true
      queueMicrotask(this.flush)
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false
    const batch = this.batch
    this.batch = []
    this.onFlush?.()
    try {
      this.port.postMessage(batch)
    } catch {
      // a closed port: the other side is gone, and with it whoever waited for these messages
    }
  }
}
