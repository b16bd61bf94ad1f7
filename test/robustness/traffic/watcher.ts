/**
 * A logical watcher: it watches one cluster through one instance after
 * another, disconnecting at random and coming back resuming from the last
 * point it applied (on another instance as often as on its own), or afresh
 * now and then. A slow watcher stops reading for seconds at a time (the
 * cut-off path). While a checkpoint holds the traffic (and once it stopped)
 * it settles: one watch open and reading, so the run can compare every view
 * with List.
 */
import type { RecordWriter } from "./historyFiles.ts"
import { openRecordedWatch, type RecordedWatch, type WatcherState } from "./recordedWatch.ts"
import { intBetween, pickOf, sleep, type Target, type TrafficContext } from "./traffic.ts"
import { WireClient } from "./wireClient.ts"

/** What a watcher does. */
export interface WatcherOptions {
  readonly name: string
  readonly cluster: string
  /** False for a watcher that stops reading for a while during each watch. */
  readonly reads: boolean
  /** How long a watch stays open before the watcher drops it, in milliseconds: [low, high]. */
  readonly openMillis: readonly [number, number]
}

/** A running watcher. */
export interface Watcher {
  readonly name: string
  readonly cluster: string
  readonly state: WatcherState
  /** True when it has a watch open, started and being read (what a checkpoint waits for). */
  readonly settled: () => boolean
  /** Ends its watch and its loop. */
  readonly close: () => Promise<void>
}

/** Starts a watcher. */
export const startWatcher = (context: TrafficContext, options: WatcherOptions, random: () => number): Watcher => {
  const write: RecordWriter = context.files.writer(options.name)
  const clients = new Map(
    context.targets.map((target) => [target.name, new WireClient(target.address, context.deadlineMillis)])
  )
  const state: WatcherState = { point: undefined, view: new Map() }
  const control = context.control
  let current: RecordedWatch | undefined
  let reading = false
  let closing = false
  let count = 0
  let last: Target | undefined

  const open = (target: Target, reads: boolean): RecordedWatch => {
    last = target
    const resume = state.point !== undefined && random() < 0.9 ? state.point : undefined
    reading = true
    current = openRecordedWatch({
      context,
      write,
      client: clients.get(target.name)!,
      instance: target.name,
      watcher: options.name,
      id: `${options.name}.${count++}`,
      cluster: options.cluster,
      state,
      resume,
      reads
    })
    return current
  }

  /** Sleeps up to `millis`, waking when `watch` ends or a checkpoint or the close begins. */
  const wait = (watch: RecordedWatch, millis: number) =>
    Promise.race([
      watch.ended,
      (async () => {
        const until = Date.now() + millis
        while (Date.now() < until && !control.settling() && !closing && !watch.isEnded()) {
          await new Promise((resolve) => setTimeout(resolve, Math.min(50, until - Date.now())))
        }
      })()
    ])

  /** One watch from open to drop, unless a checkpoint begins first: then it is kept, reading. */
  const churn = async () => {
    const others = context.targets.filter((target) => target !== last)
    const target =
      last !== undefined && random() < 0.5 ? last : pickOf(random, others.length > 0 ? others : context.targets)
    const watch = open(target, options.reads)
    const until = Date.now() + intBetween(random, options.openMillis[0], options.openMillis[1])
    if (!options.reads) {
      await wait(watch, intBetween(random, 50, 500))
      if (!control.settling() && !closing && !watch.isEnded()) {
        watch.pause()
        reading = false
        await wait(watch, intBetween(random, 1000, 6000))
        watch.resume()
        reading = true
      }
    }
    await wait(watch, Math.max(0, until - Date.now()))
    if (control.settling() || closing) return
    // ended by the server (a cap, a cut-off, a fault): come back after a pause, as a client backs off
    if (watch.isEnded()) {
      await sleep(context, intBetween(random, 100, 500))
      return
    }
    watch.cancel()
    await sleep(context, intBetween(random, 20, 400))
  }

  /** Keeps one watch open and reading while the checkpoint lasts, reopening it (resuming) when the server ends it. */
  const settle = async () => {
    if (current === undefined || current.isEnded()) {
      await new Promise((resolve) => setTimeout(resolve, intBetween(random, 50, 300)))
      if (!closing) open(last ?? pickOf(random, context.targets), true)
      return
    }
    await Promise.race([current.ended, new Promise((resolve) => setTimeout(resolve, 100))])
  }

  const loop = (async () => {
    while (!closing) {
      if (control.settling()) await settle()
      else await churn()
    }
  })()
  return {
    name: options.name,
    cluster: options.cluster,
    state,
    settled: () => current !== undefined && !current.isEnded() && current.started() && reading,
    close: async () => {
      closing = true
      current?.resume()
      current?.cancel()
      await loop
      for (const client of clients.values()) client.close()
    }
  }
}
