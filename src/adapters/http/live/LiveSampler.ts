/**
 * Takes the live view's sample once a second: the state's counts, the rates
 * of updates, deliveries and watchers cut off (from the same counters
 * `/metrics` exports, threads included), and the request memory in use; keeps
 * the last 15 minutes. With an instance directory (a shared state), it also
 * announces this instance every 5 seconds, for 15, and lists the others.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Cause, Clock, Effect, Fiber, Metric, Schedule } from "effect"
import { ClusterState } from "../../../core/server/ClusterState.ts"
import type { InstanceAnnouncement, InstanceDirectory } from "../../../ports/InstanceDirectory.ts"
import type { LiveSample, LiveSelf, ThreadRow } from "./LiveSample.ts"
import { SampleRing } from "./LiveSample.ts"
import { LiveView } from "./LiveView.ts"

/**
 * Where the sampler reads what the state does not know.
 *
 * @category models
 * @since 0.1.0
 */
export interface LiveSources {
  readonly self: LiveSelf
  /** Where this instance's gRPC port listens (`host:port`), as it announces itself. */
  readonly address: () => string
  /** The threads serving the gRPC port now, given the watches the state counts (read once per sample). */
  readonly threads: (watches: number) => ReadonlyArray<ThreadRow>
  /** Request bytes held now and the budget, when known. */
  readonly requestMemory: () => { readonly bytes: number; readonly budget: number } | undefined
  /** Brings the threads' counters into this thread's registry (what `/metrics` runs before a scrape). */
  readonly refreshMetrics: Effect.Effect<void>
  /** The instances' directory of a shared state. */
  readonly directory?: InstanceDirectory["Service"] | undefined
}

/**
 * Running totals the rates are computed from.
 *
 * @category models
 * @since 0.1.0
 */
export interface Totals {
  readonly updates: number
  readonly deliveries: number
  readonly cutOff: number
}

const countOf = (state: unknown): number => {
  const count = (state as { readonly count?: number | bigint }).count
  return count === undefined ? 0 : Number(count)
}

/**
 * The totals in a registry snapshot: AffiliateUpdate calls handled, Watch
 * messages sent, watches ended `cut_off`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const totalsOf = (snapshots: ReadonlyArray<Metric.Metric.Snapshot>): Totals => {
  let updates = 0
  let deliveries = 0
  let cutOff = 0
  for (const snapshot of snapshots) {
    if (snapshot.type !== "Counter") continue
    const attributes = snapshot.attributes ?? {}
    if (snapshot.id === "grpc_server_handled_total" && attributes.grpc_method === "AffiliateUpdate") {
      updates += countOf(snapshot.state)
    } else if (snapshot.id === "grpc_server_msg_sent_total" && attributes.grpc_method === "Watch") {
      deliveries += countOf(snapshot.state)
    } else if (snapshot.id === "discovery_watch_endings_total" && attributes.cause === "cut_off") {
      cutOff += countOf(snapshot.state)
    }
  }
  return { updates, deliveries, cutOff }
}

const perSecond = (now: number, before: number, seconds: number) =>
  seconds <= 0 ? 0 : Math.max(0, Math.round(((now - before) / seconds) * 10) / 10)

/** How long an announcement lives, and how often it is renewed. */
const announcementTtlMillis = 15_000
const announceEvery = 5

/**
 * Starts sampling in the scope and gives the live view it feeds.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (sources: LiveSources): Effect.Effect<LiveView["Service"], never, ClusterState | Scope.Scope> =>
  Effect.gen(function* () {
    const state = yield* ClusterState
    const context = yield* Effect.context<never>()
    const ring = new SampleRing()
    let previous: { readonly at: number; readonly totals: Totals } | undefined
    // the rows of the last sample: a frame costs nothing on the thread that owns the state
    let threads: ReadonlyArray<ThreadRow> = []
    let instances: { list: ReadonlyArray<InstanceAnnouncement> | undefined; error: string | undefined } = {
      list: undefined,
      error: undefined
    }
    const sample = Effect.gen(function* () {
      yield* sources.refreshMetrics
      const at = yield* Clock.currentTimeMillis
      const stats = yield* state.stats
      const totals = totalsOf(Metric.snapshotUnsafe(context))
      const seconds = previous === undefined ? 0 : (at - previous.at) / 1000
      const before = previous?.totals ?? totals
      const memory = sources.requestMemory()
      const taken: LiveSample = {
        at,
        clusters: stats.clusters,
        affiliates: stats.affiliates,
        endpoints: stats.endpoints,
        watches: stats.watches,
        updatesPerSecond: perSecond(totals.updates, before.updates, seconds),
        deliveriesPerSecond: perSecond(totals.deliveries, before.deliveries, seconds),
        cutOffPerSecond: perSecond(totals.cutOff, before.cutOff, seconds),
        cutOffTotal: totals.cutOff,
        requestBytes: memory?.bytes,
        requestBudgetBytes: memory?.budget,
        backendAvailable: state.available()
      }
      previous = { at, totals }
      ring.push(taken)
      threads = sources.threads(stats.watches)
    })
    // a sample that dies is logged and the next one taken: the view never stops for good
    const survive = (what: string) =>
      Effect.catchCause((cause: Cause.Cause<unknown>) =>
        Effect.logWarning(`live view: ${what} failed`).pipe(Effect.annotateLogs({ cause: Cause.pretty(cause) }))
      )
    yield* sample.pipe(survive("a sample"), Effect.repeat(Schedule.spaced("1 second")), Effect.forkScoped)
    const directory = sources.directory
    if (directory !== undefined) {
      let round = 0
      const announcement = (at: number): InstanceAnnouncement => {
        const latest = ring.latest
        return {
          name: sources.self.name,
          address: sources.address(),
          version: sources.self.version,
          startedAt: sources.self.startedAt,
          announcedAt: at,
          threads: threads.length,
          watches: latest?.watches ?? 0,
          updatesPerSecond: latest?.updatesPerSecond ?? 0,
          deliveriesPerSecond: latest?.deliveriesPerSecond ?? 0
        }
      }
      const visit = Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        if (round++ % announceEvery === 0) {
          yield* directory.announce(announcement(at), announcementTtlMillis)
        }
        instances = { list: yield* directory.list, error: undefined }
      }).pipe(
        Effect.catch((error) =>
          Effect.sync(() => {
            round = 0
            instances = { list: instances.list, error: error.message }
          })
        )
      )
      // withdrawn once the announcing has stopped, so that no announcement in flight puts it back
      yield* Effect.acquireRelease(
        visit.pipe(survive("listing the instances"), Effect.repeat(Schedule.spaced("1 second")), Effect.forkDetach),
        (visiting) =>
          Effect.andThen(
            Fiber.interrupt(visiting),
            directory.withdraw(sources.self.name).pipe(Effect.timeout("500 millis"), Effect.ignore)
          )
      )
    }
    return LiveView.of({
      frame: (since) =>
        Effect.sync(() => ({
          self: sources.self,
          samples: ring.since(since),
          threads,
          instances: directory === undefined ? undefined : instances.list,
          instancesError: instances.error
        }))
    })
  })
