/**
 * The snapshot lifecycle of the service (PROTOCOL.md §4.7), as one layer: the
 * state is loaded from the `SnapshotStore` while the layer is built, saved
 * every interval, and saved once more when the layer's scope closes. Each
 * operation is logged (`state loaded`, `state saved`) and counted in the
 * original's `discovery_storage_*` metrics.
 *
 * Unlike the original, a damaged snapshot never stops the service nor gets
 * overwritten: every intact record is loaded, what was lost is reported, and
 * the file is moved aside before the next save.
 *
 * @since 0.1.0
 */
import type { Duration as DurationT } from "effect"
import { Cause, Context, Duration, Effect, Exit, Fiber, Layer, Metric, Option, Schedule, Semaphore } from "effect"
import { SnapshotStore, SnapshotStoreError } from "../../ports/SnapshotStore.ts"
import { ClusterState } from "./ClusterState.ts"
import type { SkippedRange, SnapshotContents } from "./SnapshotCodec.ts"

/**
 * How the snapshot layer behaves; every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface SnapshotOptions {
  /**
   * Period between saves (default 10 minutes); the first save comes one
   * interval after start. Zero or less turns periodic saves off (the load and
   * the final save still happen).
   */
  readonly interval?: DurationT.Input | undefined
  /** Longest the final save on shutdown is waited for (default 10 seconds). */
  readonly finalSaveTimeout?: DurationT.Input | undefined
  /**
   * Asked on shutdown whether to write the final snapshot (default: always).
   * A service that failed to start (a busy port, a bad key pair) answers no,
   * so it never overwrites a file another instance may be using.
   */
  readonly saveOnClose?: Effect.Effect<boolean> | undefined
}

/**
 * What one load or save handled.
 *
 * @category models
 * @since 0.1.0
 */
export interface SnapshotStats {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  readonly sizeBytes: number
  readonly duration: DurationT.Duration
}

/**
 * The result of the load at start.
 *
 * - `Missing`: there was no snapshot yet; the state starts empty.
 * - `Loaded`: the snapshot was loaded. `skipped` lists the byte ranges that
 *   could not be (empty for an intact snapshot); when it is not empty, the
 *   snapshot was moved to `movedAside` so the next save does not replace it.
 * - `Failed`: the store could not read the snapshot; the state starts empty,
 *   and the unreadable snapshot was moved to `movedAside` when possible.
 *
 * @category models
 * @since 0.1.0
 */
export type LoadOutcome =
  | { readonly _tag: "Missing" }
  | {
      readonly _tag: "Loaded"
      readonly stats: SnapshotStats
      readonly expiredAffiliates: number
      readonly expiredEndpoints: number
      readonly skipped: ReadonlyArray<SkippedRange>
      readonly movedAside: Option.Option<string>
    }
  | { readonly _tag: "Failed"; readonly error: SnapshotStoreError; readonly movedAside: Option.Option<string> }

/**
 * The running snapshot lifecycle: what the start-up load found, and a save
 * that can be triggered at any time (saves never overlap).
 *
 * @category services
 * @since 0.1.0
 */
export class SnapshotService extends Context.Service<
  SnapshotService,
  {
    readonly loaded: LoadOutcome
    readonly save: Effect.Effect<SnapshotStats, SnapshotStoreError>
  }
>()("talos-discovery/SnapshotService") {
  /**
   * Loads the state while the layer is built, saves every interval and once
   * more when the layer's scope closes. Compose it below the gRPC server (in
   * the layer the server is provided with) so that the load finishes before
   * the port opens and the final save runs after the server has stopped.
   * When the final save fails or does not finish in time, closing the scope
   * ends with a defect (a `runMain` program then exits with status 1).
   */
  static readonly layer = (
    options: SnapshotOptions = {}
  ): Layer.Layer<SnapshotService, never, ClusterState | SnapshotStore> =>
    Layer.effect(SnapshotService, makeSnapshotService(options))
}

/**
 * The default period between saves: 10 minutes, as in the original.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultSnapshotInterval: DurationT.Duration = Duration.minutes(10)

/**
 * `discovery_storage_operations_total{operation, status}`: loads and saves by
 * outcome (`success` or `error`).
 *
 * @category metrics
 * @since 0.1.0
 */
export const storageOperationsTotal = Metric.counter("discovery_storage_operations_total", {
  description: "The number of storage operations by type and status.",
  incremental: true
})

/**
 * `discovery_storage_last_snapshot_size_bytes{operation}`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const storageLastSnapshotSizeBytes = Metric.gauge("discovery_storage_last_snapshot_size_bytes", {
  description: "The size of the last processed snapshot in bytes."
})

/**
 * `discovery_storage_last_operation_clusters{operation}`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const storageLastOperationClusters = Metric.gauge("discovery_storage_last_operation_clusters", {
  description: "The number of clusters in the snapshot of the last operation."
})

/**
 * `discovery_storage_last_operation_affiliates{operation}`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const storageLastOperationAffiliates = Metric.gauge("discovery_storage_last_operation_affiliates", {
  description: "The number of affiliates in the snapshot of the last operation."
})

/**
 * `discovery_storage_last_operation_endpoints{operation}`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const storageLastOperationEndpoints = Metric.gauge("discovery_storage_last_operation_endpoints", {
  description: "The number of endpoints in the snapshot of the last operation."
})

/**
 * `discovery_storage_last_operation_duration_seconds{operation}`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const storageLastOperationDurationSeconds = Metric.gauge("discovery_storage_last_operation_duration_seconds", {
  description: "The duration of the last operation in seconds."
})

type Operation = "load" | "save"

const countOperation = (operation: Operation, status: "success" | "error") =>
  Metric.update(Metric.withAttributes(storageOperationsTotal, { operation, status }), 1)

const recordStats = (operation: Operation, stats: SnapshotStats) =>
  Effect.all(
    [
      Metric.update(Metric.withAttributes(storageLastSnapshotSizeBytes, { operation }), stats.sizeBytes),
      Metric.update(Metric.withAttributes(storageLastOperationClusters, { operation }), stats.clusters),
      Metric.update(Metric.withAttributes(storageLastOperationAffiliates, { operation }), stats.affiliates),
      Metric.update(Metric.withAttributes(storageLastOperationEndpoints, { operation }), stats.endpoints),
      Metric.update(
        Metric.withAttributes(storageLastOperationDurationSeconds, { operation }),
        Duration.toSeconds(stats.duration)
      )
    ],
    { discard: true }
  )

const statsFields = (stats: SnapshotStats) => ({
  clusters: stats.clusters,
  affiliates: stats.affiliates,
  endpoints: stats.endpoints,
  duration: Duration.toSeconds(stats.duration),
  size_bytes: stats.sizeBytes
})

const withStorageLogs = <A, E, R>(self: Effect.Effect<A, E, R>, location: string) =>
  Effect.annotateLogs(self, { component: "storage", location })

/** How many skip reasons a log line lists. */
const reasonsLogged = 10

const moveAside = (store: Context.Service.Shape<typeof SnapshotStore>) =>
  store.moveAside.pipe(
    Effect.tap((moved) =>
      Option.isSome(moved)
        ? Effect.logWarning("damaged state snapshot moved aside").pipe(Effect.annotateLogs({ moved_to: moved.value }))
        : Effect.void
    ),
    Effect.catch((error) =>
      Effect.logError("could not move the damaged state snapshot aside; the next save will replace it").pipe(
        Effect.annotateLogs({ error: error.message }),
        Effect.as(Option.none<string>())
      )
    )
  )

const loadWith = (
  state: Context.Service.Shape<typeof ClusterState>,
  store: Context.Service.Shape<typeof SnapshotStore>
): Effect.Effect<LoadOutcome> =>
  Effect.gen(function* () {
    const read = Effect.gen(function* () {
      const imported = yield* Effect.result(state.importSnapshotFrom(store.read))
      if (imported._tag === "Failure") return { _tag: "Failure", error: imported.failure } as const
      if (Option.isNone(imported.success)) return { _tag: "Missing" } as const
      return { _tag: "Imported", imported: imported.success.value } as const
    })
    const [duration, result] = yield* Effect.timed(read)
    switch (result._tag) {
      case "Failure": {
        yield* countOperation("load", "error")
        yield* Effect.logWarning("failed to load state from storage").pipe(
          Effect.annotateLogs({ error: result.error.message })
        )
        const movedAside = yield* moveAside(store)
        const outcome: LoadOutcome = { _tag: "Failed", error: result.error, movedAside }
        return outcome
      }
      case "Missing": {
        yield* countOperation("load", "success")
        yield* recordStats("load", { clusters: 0, affiliates: 0, endpoints: 0, sizeBytes: 0, duration })
        yield* Effect.logInfo("no saved state found, starting empty")
        const outcome: LoadOutcome = { _tag: "Missing" }
        return outcome
      }
      case "Imported": {
        const imported = result.imported
        const stats: SnapshotStats = {
          clusters: imported.clusters,
          affiliates: imported.affiliates,
          endpoints: imported.endpoints,
          sizeBytes: imported.sizeBytes,
          duration
        }
        const damaged = imported.skipped.length > 0
        yield* countOperation("load", damaged ? "error" : "success")
        yield* recordStats("load", stats)
        yield* Effect.logInfo("state loaded").pipe(
          Effect.annotateLogs({
            ...statsFields(stats),
            expired_affiliates: imported.expiredAffiliates,
            expired_endpoints: imported.expiredEndpoints
          })
        )
        const outcome = (movedAside: Option.Option<string>): LoadOutcome => ({
          _tag: "Loaded",
          stats,
          expiredAffiliates: imported.expiredAffiliates,
          expiredEndpoints: imported.expiredEndpoints,
          skipped: imported.skipped,
          movedAside
        })
        if (!damaged) return outcome(Option.none())
        const skippedBytes = imported.skipped.reduce((sum, range) => sum + range.length, 0)
        yield* Effect.logWarning("state snapshot is damaged: loaded every intact record, skipped the rest").pipe(
          Effect.annotateLogs({
            skipped_ranges: imported.skipped.length,
            skipped_bytes: skippedBytes,
            reasons: imported.skipped.slice(0, reasonsLogged).map((range) => range.reason)
          })
        )
        return outcome(yield* moveAside(store))
      }
    }
  }).pipe((self) => withStorageLogs(self, store.location))

const saveWith = (
  state: Context.Service.Shape<typeof ClusterState>,
  store: Context.Service.Shape<typeof SnapshotStore>
): Effect.Effect<SnapshotStats, SnapshotStoreError> =>
  Effect.gen(function* () {
    const [duration, encoded] = yield* Effect.timed(
      Effect.flatMap(state.snapshotPieces, (pieces) => {
        let written: SnapshotContents | undefined
        return Effect.flatMap(
          store.save(
            (function* () {
              written = yield* pieces
            })()
          ),
          () =>
            written === undefined
              ? Effect.fail(
                  new SnapshotStoreError({ operation: "save", message: "the store did not write the snapshot" })
                )
              : Effect.succeed(written)
        )
      })
    ).pipe(Effect.tapError(() => countOperation("save", "error")))
    const stats: SnapshotStats = {
      clusters: encoded.clusters,
      affiliates: encoded.affiliates,
      endpoints: encoded.endpoints,
      sizeBytes: encoded.size,
      duration
    }
    yield* countOperation("save", "success")
    yield* recordStats("save", stats)
    yield* Effect.logInfo("state saved").pipe(Effect.annotateLogs(statsFields(stats)))
    if (encoded.oversized.length > 0) {
      yield* Effect.logWarning("clusters too large for a snapshot record were left out").pipe(
        Effect.annotateLogs({ clusters: encoded.oversized })
      )
    }
    return stats
  }).pipe((self) => withStorageLogs(self, store.location))

/**
 * Loads the snapshot into the cluster state once, with the log lines and
 * metrics of a start-up load. Never fails: problems are logged and returned.
 *
 * @category constructors
 * @since 0.1.0
 */
export const loadSnapshot: Effect.Effect<LoadOutcome, never, ClusterState | SnapshotStore> = Effect.flatMap(
  Effect.all([ClusterState, SnapshotStore]),
  ([state, store]) => loadWith(state, store)
)

/**
 * Saves the cluster state once, with the log line and metrics of a save.
 *
 * @category constructors
 * @since 0.1.0
 */
export const saveSnapshot: Effect.Effect<SnapshotStats, SnapshotStoreError, ClusterState | SnapshotStore> =
  Effect.flatMap(Effect.all([ClusterState, SnapshotStore]), ([state, store]) => saveWith(state, store))

const describeCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : Cause.pretty(cause)
}

const logSaveFailure = (location: string) => (cause: Cause.Cause<SnapshotStoreError>) =>
  Cause.hasInterruptsOnly(cause)
    ? Effect.failCause(cause)
    : Effect.logError("failed to save state").pipe(
        Effect.annotateLogs({ component: "storage", location, error: describeCause(cause) })
      )

/**
 * Builds the lifecycle: loads now, then saves every interval and on scope
 * close.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSnapshotService = Effect.fnUntraced(function* (options: SnapshotOptions) {
  const state = yield* ClusterState
  const store = yield* SnapshotStore
  const interval = options.interval ?? defaultSnapshotInterval
  const finalSaveTimeout = options.finalSaveTimeout ?? "10 seconds"
  const loaded = yield* loadWith(state, store)

  const semaphore = yield* Semaphore.make(1)
  const saveNow = semaphore.withPermits(1)(saveWith(state, store))

  // Registered before the periodic fiber is forked, so it runs after that
  // fiber is interrupted (finalizers run in reverse order). The save runs in
  // its own fiber so that a stuck disk delays shutdown by at most the timeout.
  // A failed or late final save is logged and then ends the scope with a
  // defect, so that a program run by `runMain` exits with status 1, as the
  // original does.
  const saveOnClose = options.saveOnClose ?? Effect.succeed(true)
  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      if (!(yield* saveOnClose)) {
        return yield* Effect.logWarning("final state save skipped: the service did not start").pipe(
          Effect.annotateLogs({ component: "storage", location: store.location })
        )
      }
      const fiber = yield* Effect.forkDetach(saveNow)
      const exit = yield* Fiber.await(fiber).pipe(Effect.interruptible, Effect.timeoutOption(finalSaveTimeout))
      if (Option.isNone(exit)) {
        const seconds = Duration.toSeconds(finalSaveTimeout)
        yield* Effect.logError("final state save did not finish in time").pipe(
          Effect.annotateLogs({ component: "storage", location: store.location, timeout_seconds: seconds })
        )
        return yield* Effect.die(new Error(`final state save did not finish within ${seconds}s`))
      }
      if (Exit.isFailure(exit.value)) {
        yield* Effect.logError("failed to save state on shutdown").pipe(
          Effect.annotateLogs({
            component: "storage",
            location: store.location,
            error: describeCause(exit.value.cause)
          })
        )
        return yield* Effect.die(Cause.squash(exit.value.cause))
      }
    })
  )

  if (Duration.isGreaterThan(Duration.fromInputUnsafe(interval), Duration.zero)) {
    yield* saveNow.pipe(
      Effect.catchCause(logSaveFailure(store.location)),
      Effect.schedule(Schedule.spaced(interval)),
      Effect.forkScoped
    )
  }

  return SnapshotService.of({ loaded, save: saveNow })
})
