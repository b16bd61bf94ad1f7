/**
 * The event surface of the http2 transport's calls: the part of Node's
 * `EventEmitter` that gRPC handlers use (`on`, `once`, `off`, `emit`), kept
 * in a plain class whose listener table is created only when a first
 * listener arrives, so a unary call that nobody listens to allocates nothing
 * for events.
 *
 * @since 0.1.0
 */

// biome-ignore lint/suspicious/noExplicitAny: listeners take whatever their event carries, as with EventEmitter.
type Listener = (...args: Array<any>) => void

/** A listener added with `once`, removed before it runs; `listener` is what `off` is given. */
interface OnceListener extends Listener {
  readonly listener: Listener
}

const isOnce = (entry: Listener): entry is OnceListener => "listener" in entry

/**
 * Named events with listeners, in the order they were added. Unlike
 * `EventEmitter`, an "error" event without listeners does not throw: each
 * call kind decides what an error means.
 *
 * @category models
 * @since 0.1.0
 */
export class CallEvents {
  private listeners: Map<string | symbol, Array<Listener>> | undefined

  /** Adds `listener` for `event`. */
  on(event: string | symbol, listener: Listener): this {
    this.listeners ??= new Map()
    const list = this.listeners.get(event)
    if (list === undefined) this.listeners.set(event, [listener])
    else list.push(listener)
    return this
  }

  /** The same as `on`. */
  addListener(event: string | symbol, listener: Listener): this {
    return this.on(event, listener)
  }

  /** Adds `listener` for the next `event` only. */
  once(event: string | symbol, listener: Listener): this {
    const wrapped = Object.assign(
      (...args: Array<unknown>) => {
        this.off(event, wrapped)
        listener(...args)
      },
      { listener }
    )
    return this.on(event, wrapped)
  }

  /** Removes the last added `listener` of `event` (one added with `once` too). */
  off(event: string | symbol, listener: Listener): this {
    const list = this.listeners?.get(event)
    if (list === undefined) return this
    for (let i = list.length - 1; i >= 0; i--) {
      const entry = list[i]!
      if (entry === listener || (isOnce(entry) && entry.listener === listener)) {
        list.splice(i, 1)
        if (list.length === 0) this.listeners!.delete(event)
        break
      }
    }
    return this
  }

  /** The same as `off`. */
  removeListener(event: string | symbol, listener: Listener): this {
    return this.off(event, listener)
  }

  /** Removes every listener of `event`, or of all events. */
  removeAllListeners(event?: string | symbol): this {
    if (event === undefined) this.listeners = undefined
    else this.listeners?.delete(event)
    return this
  }

  /** How many listeners `event` has. */
  listenerCount(event: string | symbol): number {
    return this.listeners?.get(event)?.length ?? 0
  }

  /** Calls the listeners of `event` with `args`, in order; true when there were any. */
  emit(event: string | symbol, ...args: Array<unknown>): boolean {
    const list = this.listeners?.get(event)
    if (list === undefined) return false
    if (list.length === 1) list[0]!(...args)
    else for (const listener of list.slice()) listener(...args)
    return true
  }
}
