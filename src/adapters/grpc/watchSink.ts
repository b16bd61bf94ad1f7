/**
 * The push form of a Watch call: a `WatchSink` the core hands each delta to
 * synchronously, which writes it to the grpc-js call. Writes of all watchers
 * go through one `FanOut`, a batch of watchers per event-loop turn, so the
 * first watchers' bytes reach the socket while later ones are still being
 * written. A watcher whose call stops draining keeps at most `capacity`
 * unwritten deltas; one more and the core cuts it off, as with the buffered
 * `ClusterApi.watch`. Deltas that only wait for the fan-out's turn do not
 * count toward that: a watcher is cut off for its client, not for the server.
 *
 * @since 0.1.0
 */
import type { WatchDelta, WatchSink } from "../../ports/ClusterApi.ts"
import type { SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"

/**
 * The grpc-js side of a server-streaming call, as far as a sink uses it.
 *
 * @category models
 * @since 0.1.0
 */
export interface WritableCall {
  readonly destroyed: boolean
  readonly writableEnded: boolean
  write(bytes: Uint8Array): boolean
  once(event: "drain", listener: () => void): unknown
}

/** How many run slots the fan-out's queue may keep before it drops them. */
const compactAfter = 1024

/**
 * Runs the writes of ready sinks in batches. The first batch of a burst is
 * small and runs as soon as the code that made the change returns (a
 * microtask), so the first watchers' messages leave with the change's own
 * response; each next batch runs one turn of the event loop later (the
 * transport flushes between turns) and is twice as large, up to `batch`
 * sinks.
 *
 * @category models
 * @since 0.1.0
 */
export class FanOut {
  private readonly ready: Array<CallSink | undefined> = []
  private unsettled: Array<CallSink> = []
  private head = 0
  private scheduled = false
  private size: number
  private readonly first: number
  private readonly batch: number
  /** `first`: sinks written in the first turn of a burst; `batch`: most sinks written per turn. */
  constructor(batch = 64, first = 8) {
    this.batch = batch
    this.first = Math.min(first, batch)
    this.size = this.first
  }

  /** Queues a sink whose pending deltas can be written. */
  schedule(sink: CallSink): void {
    this.ready.push(sink)
    if (!this.scheduled) {
      this.scheduled = true
      queueMicrotask(this.run)
    }
  }

  /** Tells `sink`, whose call has just pushed back, at the next turn that it is still pushed back (see `CallSink.offer`). */
  settleLater(sink: CallSink): void {
    this.unsettled.push(sink)
    if (this.unsettled.length === 1) setImmediate(this.settle)
  }

  private readonly settle = (): void => {
    const sinks = this.unsettled
    this.unsettled = []
    for (const sink of sinks) sink.settle()
  }

  private readonly run = (): void => {
    const ready = this.ready
    const end = Math.min(this.head + this.size, ready.length)
    while (this.head < end) {
      const sink = ready[this.head]!
      ready[this.head++] = undefined
      sink.flush()
    }
    if (this.head < ready.length) {
      // Under steady load the queue never runs empty: drop the part already run.
      if (this.head >= compactAfter) {
        ready.copyWithin(0, this.head)
        ready.length -= this.head
        this.head = 0
      }
      this.size = Math.min(2 * this.size, this.batch)
      setImmediate(this.run)
      return
    }
    ready.length = 0
    this.head = 0
    this.size = this.first
    this.scheduled = false
  }

  /** Sinks waiting for their turn (for tests and diagnostics). */
  get waiting(): number {
    return this.ready.length - this.head
  }

  /** Slots the queue holds, run or not (for tests and diagnostics). */
  get slots(): number {
    return this.ready.length
  }
}

/**
 * The most deltas a sink holds while it only waits for the fan-out's turn.
 *
 * @category models
 * @since 0.1.0
 */
export const waitingMax = 4096

/**
 * The sink of one Watch call. `start` writes the snapshot's messages and lets
 * deltas through; `whenEnded` learns of the end once every delta offered
 * before it is written (never if the call goes away first).
 *
 * @category models
 * @since 0.1.0
 */
export class CallSink implements WatchSink {
  private pending: Array<WatchDelta> = []
  private started = false
  private queued = false
  private blocked = false
  /** Blocked since an earlier turn of the event loop: only then does the client hold up its deltas. */
  private pushedBack = false
  private closed = false
  private ending: SubscriptionLost | Unavailable | undefined
  private finished = false
  private onEnd: ((error: SubscriptionLost | Unavailable) => void) | undefined
  private readonly call: WritableCall
  private readonly fanOut: FanOut
  private readonly encode: (delta: WatchDelta, epoch: string | undefined) => Uint8Array
  /** The epoch the watch started in, which its deltas carry. */
  private epoch: string | undefined = undefined
  private readonly sent: (messages: number) => void
  private readonly capacity: number
  /** `encode` turns a delta into its message; `sent` is told how many messages each flush wrote. */
  constructor(
    call: WritableCall,
    fanOut: FanOut,
    encode: (delta: WatchDelta, epoch: string | undefined) => Uint8Array,
    sent: (messages: number) => void,
    capacity: number
  ) {
    this.call = call
    this.fanOut = fanOut
    this.encode = encode
    this.sent = sent
    this.capacity = capacity
  }

  /**
   * Takes a delta. A sink whose call has pushed back since an earlier turn of
   * the event loop holds at most `capacity` unwritten deltas; one waiting
   * only for the fan-out's turn, or pushed back within this turn (its call's
   * buffer cannot drain before the loop turns), holds up to
   * {@link waitingMax}, since the server, not the client, is behind.
   */
  offer(delta: WatchDelta): boolean {
    if (this.closed) return true
    const held = this.pending.length
    if ((this.pushedBack && held >= this.capacity) || held >= waitingMax) return false
    this.pending.push(delta)
    this.wake()
    return true
  }

  end(error: SubscriptionLost | Unavailable): void {
    this.ending = error
    this.wake()
  }

  /** Writes the start's messages (a snapshot, or a resumed start), then lets the deltas offered since through. */
  start(messages: ReadonlyArray<Uint8Array>, epoch?: string): void {
    this.epoch = epoch
    for (const bytes of messages) this.write(bytes)
    this.sent(messages.length)
    this.started = true
    this.wake()
  }

  /** Calls `listener` with the watch's failure once the deltas offered before it are written (at once if they are). */
  whenEnded(listener: (error: SubscriptionLost | Unavailable) => void): void {
    if (this.finished) listener(this.ending!)
    else this.onEnd = listener
  }

  /** Stops writing: the call is over. */
  close(): void {
    this.closed = true
    this.pending = []
    this.onEnd = undefined
  }

  /** Writes what is pending until the call pushes back; called by the fan-out. */
  flush(): void {
    this.queued = false
    if (this.closed || this.call.destroyed || this.call.writableEnded) return
    const pending = this.pending
    let written = 0
    while (written < pending.length && !this.blocked) this.write(this.encode(pending[written++]!, this.epoch))
    if (written > 0) {
      pending.splice(0, written)
      this.sent(written)
    }
    if (pending.length === 0 && this.ending !== undefined && !this.finished) {
      this.finished = true
      this.onEnd?.(this.ending)
    }
  }

  /** Called by the fan-out a turn after the call pushed back: if it has not drained since, the client is behind. */
  settle(): void {
    if (this.blocked) this.pushedBack = true
  }

  private write(bytes: Uint8Array): void {
    if (this.call.write(bytes) || this.blocked) return
    this.blocked = true
    this.fanOut.settleLater(this)
    this.call.once("drain", this.drained)
  }

  private readonly drained = (): void => {
    this.blocked = false
    this.pushedBack = false
    this.wake()
  }

  private wake(): void {
    if (this.started && !this.queued && !this.blocked && !this.closed) {
      this.queued = true
      this.fanOut.schedule(this)
    }
  }
}
