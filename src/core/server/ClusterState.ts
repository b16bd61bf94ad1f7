/**
 * The cluster state as an Effect service: the store's rules driven by Effect's
 * `Clock`, with watches as streams that start with a snapshot and carry every
 * later change in revision order.
 *
 * @since 0.1.0
 */
import type { Scope, Stream as StreamT } from "effect"
import { Clock, Context, Duration, Effect, Layer, Metric, Option } from "effect"
import type {
  AffiliateDeleteRequest,
  AffiliateUpdateRequest,
  AffiliateView,
  ClusterRequest,
  WatchEvent,
  WatchRequest,
  WatchSink,
  WatchStart
} from "../../ports/ClusterApi.ts"
import type { InvalidArgument, ResourceExhausted, SubscriptionLost } from "../../ports/DiscoveryError.ts"
import { sequenceLost, shuttingDownMessage, Unavailable } from "../../ports/DiscoveryError.ts"
import type { ChangeRecord, WatchEndCause } from "../../ports/ChangeCause.ts"
import { WatchLeaving } from "../../ports/WatchLeaving.ts"
import type { StateBackendShape } from "../../ports/StateBackend.ts"
import { StateBackend } from "../../ports/StateBackend.ts"
import type { GcReport, StoreCaps, StoreStats } from "./ClusterStore.ts"
import { ClusterStore, defaultCaps } from "./ClusterStore.ts"
import { reportChange, reportChanges, reportWatchEnd } from "./changeReport.ts"
import * as MemoryBackend from "./MemoryBackend.ts"
import { watchFromSubscribe } from "./pushedWatch.ts"
import type { EncodedSnapshot, SkippedRange, SnapshotContents } from "./SnapshotCodec.ts"
import * as SnapshotCodec from "./SnapshotCodec.ts"
import { validateAffiliateIds, validateClusterId, validateUpdate } from "./validation.ts"

/**
 * The failures a watch can end with.
 *
 * @category errors
 * @since 0.1.0
 */
export type WatchError = InvalidArgument | ResourceExhausted | SubscriptionLost | Unavailable

/**
 * What importing a snapshot put into the state, what it dropped as already
 * expired, and which byte ranges of the snapshot it could not load.
 *
 * @category models
 * @since 0.1.0
 */
export interface SnapshotImport {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  readonly expiredAffiliates: number
  readonly expiredEndpoints: number
  /** Damaged or unknown parts of the snapshot, and clusters that were already in memory. */
  readonly skipped: ReadonlyArray<SkippedRange>
  readonly sizeBytes: number
}

/**
 * Cluster state: validated updates, deletes, lists, watches and garbage
 * collection over all clusters.
 *
 * @category services
 * @since 0.1.0
 */
export class ClusterState extends Context.Service<
  ClusterState,
  {
    readonly update: (
      request: AffiliateUpdateRequest
    ) => Effect.Effect<void, InvalidArgument | ResourceExhausted | Unavailable>
    readonly delete: (request: AffiliateDeleteRequest) => Effect.Effect<void, InvalidArgument | Unavailable>
    readonly list: (
      request: ClusterRequest
    ) => Effect.Effect<ReadonlyArray<AffiliateView>, InvalidArgument | Unavailable>
    /** The cluster's last changes with their causes, newest first (as many as the backend keeps). */
    readonly history: (
      request: ClusterRequest
    ) => Effect.Effect<ReadonlyArray<ChangeRecord>, InvalidArgument | Unavailable>
    /** A watch: a snapshot (or, resumed, the point it resumed after and the changes since), then every change. */
    readonly watch: (request: WatchRequest) => StreamT.Stream<WatchEvent, WatchError>
    /**
     * A watch in push form: registers `sink` until the scope closes and returns
     * how it starts; each later change is offered to `sink` synchronously.
     */
    readonly subscribe: (
      request: WatchRequest,
      sink: WatchSink
    ) => Effect.Effect<WatchStart, Exclude<WatchError, SubscriptionLost>, Scope.Scope>
    readonly collectGarbage: Effect.Effect<GcReport, Unavailable>
    /** Whether the state can be served right now (false while a shared backend is unreachable). */
    readonly available: () => boolean
    readonly stats: Effect.Effect<StoreStats>
    /** The whole state as snapshot bytes, TTLs measured from the clock's now, in one consistent step. */
    readonly exportSnapshot: Effect.Effect<EncodedSnapshot>
    /**
     * The whole state as a snapshot made in pieces as they are asked for (see
     * `SnapshotCodec.encodePieces`): TTLs are measured from the clock's now
     * when this runs; each cluster is encoded as it is when its piece is made,
     * and the generator returns what it wrote.
     */
    readonly snapshotPieces: Effect.Effect<Generator<Uint8Array, SnapshotContents, undefined>>
    /** Adds the clusters of a snapshot; never fails, damaged parts are reported in `skipped`. */
    readonly importSnapshot: (bytes: Uint8Array) => Effect.Effect<SnapshotImport>
    /**
     * `importSnapshot` over a snapshot that `read` hands over piece by piece
     * (see `SnapshotCodec.SnapshotDecoder`), with the same result as over its
     * whole bytes; `None` when `read` found no snapshot.
     */
    readonly importSnapshotFrom: <E>(
      read: (reader: (bytes: Uint8Array, final: boolean) => number) => Effect.Effect<boolean, E>
    ) => Effect.Effect<Option.Option<SnapshotImport>, E>
  }
>()("talos-discovery/ClusterState") {
  /** The state with the default caps. */
  static readonly layer: Layer.Layer<ClusterState> = Layer.effect(
    ClusterState,
    Effect.suspend(() => make(defaultCaps))
  )

  /** The state with the given caps. */
  static readonly layerWith = (caps: Partial<StoreCaps>): Layer.Layer<ClusterState> =>
    Layer.effect(
      ClusterState,
      Effect.suspend(() => make({ ...defaultCaps, ...caps }))
    )

  /**
   * The state on the `StateBackend` of the context (a shared one, such as
   * Redis). Snapshot files are the memory backend's: a shared state is moved
   * with its backend's own export and import.
   */
  static readonly layerOnBackend: Layer.Layer<ClusterState, never, StateBackend> = Layer.effect(
    ClusterState,
    Effect.flatMap(StateBackend, (backend) => makeOn(backend, undefined))
  )
}

const shuttingDown = new Unavailable({ message: shuttingDownMessage })

/** Why a watch its backend or the core ended is over. */
const endCauseOf = (error: SubscriptionLost | Unavailable): WatchEndCause =>
  error._tag === "SubscriptionLost"
    ? error === sequenceLost
      ? "backend_unavailable"
      : "cut_off"
    : error.message === shuttingDownMessage
      ? "shutdown"
      : "backend_unavailable"

/**
 * `discovery_watches_started_total{start}`: watches started with a snapshot
 * (`start="snapshot"`) or resumed with only the changes the watcher missed
 * (`start="resumed"`).
 *
 * @category metrics
 * @since 0.1.0
 */
export const watchesStartedTotal = Metric.counter("discovery_watches_started_total", {
  description: "Watches started, by how: with a snapshot, or resumed with only the changes the watcher missed",
  incremental: true
})
const watchesResumed = Metric.withAttributes(watchesStartedTotal, { start: "resumed" })
const watchesFromSnapshot = Metric.withAttributes(watchesStartedTotal, { start: "snapshot" })

const alwaysAvailable = () => true

/**
 * Builds the cluster state service on the memory backend; open watches end
 * with Unavailable when the scope closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (caps: StoreCaps) =>
  Effect.suspend(() => {
    const store = new ClusterStore(caps)
    return makeOn(MemoryBackend.make(store), store)
  })

/**
 * Snapshot files need the state in this process: they are made from, and
 * read into, the memory backend's engine.
 */
const noLocalState = () =>
  Effect.die(new Error("snapshot files are made from the memory backend; a shared state has its own export"))

/**
 * Builds the cluster state service on `backend`, with snapshot files when
 * `store` (the memory backend's engine) is given; open watches end with
 * Unavailable when the scope closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeOn = Effect.fnUntraced(function* (backend: StateBackendShape, store: ClusterStore | undefined) {
  let closed = false
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closed = true
      backend.closeWatches((sink) => sink.end(shuttingDown))
    })
  )

  const withStore = <A, E, R>(use: (store: ClusterStore) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    store === undefined ? noLocalState() : use(store)

  const update = (request: AffiliateUpdateRequest) =>
    Effect.flatMap(validateUpdate(request), () =>
      Clock.clockWith((clock) =>
        Effect.flatMap(
          backend.update(request, clock.currentTimeMillisUnsafe() + Duration.toMillis(request.ttl)),
          reportChange
        )
      )
    )

  const subscribe = (request: WatchRequest, sink: WatchSink) =>
    Effect.flatMap(validateClusterId(request.clusterId), () =>
      Clock.clockWith((clock) => {
        const opened = clock.currentTimeMillisUnsafe()
        let ended: WatchEndCause | undefined
        const watched: WatchSink = {
          offer: (delta) => sink.offer(delta),
          end: (error) => {
            ended ??= endCauseOf(error)
            sink.end(error)
          }
        }
        return Effect.acquireRelease(
          Effect.suspend(
            (): Effect.Effect<WatchStart, ResourceExhausted | Unavailable> =>
              closed
                ? Effect.fail(shuttingDown)
                : Effect.tap(backend.subscribe(request.clusterId, watched, request.resume), (start) =>
                    Metric.update(start._tag === "Resumed" ? watchesResumed : watchesFromSnapshot, 1)
                  )
          ),
          () =>
            Effect.gen(function* () {
              const now = clock.currentTimeMillisUnsafe()
              const cause = ended ?? (closed ? "shutdown" : (yield* WatchLeaving)())
              const dropped = yield* backend.unsubscribe(request.clusterId, watched, now)
              yield* reportWatchEnd(request.clusterId, cause, now - opened)
              if (dropped !== undefined) yield* reportChange(dropped)
            })
        )
      })
    )

  const watch: (request: WatchRequest) => StreamT.Stream<WatchEvent, WatchError> = watchFromSubscribe(subscribe)

  return ClusterState.of({
    update,
    delete: (request) =>
      Effect.flatMap(validateAffiliateIds(request.clusterId, request.affiliateId), () =>
        Clock.clockWith((clock) =>
          Effect.flatMap(backend.delete(request, clock.currentTimeMillisUnsafe()), reportChanges)
        )
      ),
    list: (request) => Effect.flatMap(validateClusterId(request.clusterId), () => backend.list(request.clusterId)),
    history: (request) =>
      Effect.flatMap(validateClusterId(request.clusterId), () => backend.history(request.clusterId)),
    watch,
    subscribe,
    collectGarbage: Clock.clockWith((clock) =>
      Effect.tap(backend.collectGarbage(clock.currentTimeMillisUnsafe()), (report) => reportChanges(report.changes))
    ),
    stats: backend.stats,
    available: backend.available ?? alwaysAvailable,
    exportSnapshot: withStore((store) =>
      Clock.clockWith((clock) =>
        Effect.sync(() => SnapshotCodec.encode(store.snapshotEntries(), clock.currentTimeMillisUnsafe()))
      )
    ),
    snapshotPieces: withStore((store) =>
      Clock.clockWith((clock) =>
        Effect.sync(() => SnapshotCodec.encodePieces(store.snapshotEntries(), clock.currentTimeMillisUnsafe()))
      )
    ),
    importSnapshot: (bytes) =>
      withStore((store) =>
        Clock.clockWith((clock) =>
          Effect.sync(() => {
            const now = clock.currentTimeMillisUnsafe()
            return restoreSnapshot(store, SnapshotCodec.decode(bytes, now), now)
          })
        )
      ),
    importSnapshotFrom: (read) =>
      withStore((store) =>
        Clock.clockWith((clock) =>
          Effect.suspend(() => {
            const now = clock.currentTimeMillisUnsafe()
            const decoder = new SnapshotCodec.SnapshotDecoder(now)
            return Effect.map(
              read((bytes, final) => decoder.feed(bytes, 0, bytes.length, final)),
              (found) => (found ? Option.some(restoreSnapshot(store, decoder.result(), now)) : Option.none())
            )
          })
        )
      )
  })
})

const restoreSnapshot = (store: ClusterStore, decoded: SnapshotCodec.DecodedSnapshot, now: number): SnapshotImport => {
  const skipped = [...decoded.skipped]
  let clusters = 0
  let affiliates = 0
  let endpoints = 0
  let expiredAffiliates = 0
  let expiredEndpoints = 0
  for (const cluster of decoded.clusters) {
    const report = store.restore(cluster.id, cluster.packed ?? cluster.affiliates, now)
    if (report === undefined) {
      skipped.push({ offset: -1, length: 0, reason: `cluster ${JSON.stringify(cluster.id)} is already in memory` })
      continue
    }
    clusters++
    affiliates += report.affiliates
    endpoints += report.endpoints
    expiredAffiliates += report.expiredAffiliates
    expiredEndpoints += report.expiredEndpoints
  }
  return { clusters, affiliates, endpoints, expiredAffiliates, expiredEndpoints, skipped, sizeBytes: decoded.size }
}
