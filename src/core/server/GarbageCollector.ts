/**
 * Runs cluster-state garbage collection on a schedule: once at start, then
 * once per interval, for as long as the layer's scope is open. Each pass
 * updates the original's GC counters in Effect's metric registry.
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"
import { Effect, Layer, Metric, Schedule } from "effect"
import { ClusterState } from "./ClusterState.ts"

/**
 * The GC counters, with the original's names: passes run, clusters removed and
 * affiliates removed (endpoint removals are not counted).
 *
 * @category metrics
 * @since 0.1.0
 */
export const metrics = {
  runs: Metric.counter("discovery_state_gc_runs_total", {
    description: "Number of garbage collection runs.",
    incremental: true
  }),
  clusters: Metric.counter("discovery_state_gc_clusters_total", {
    description: "Number of clusters removed by garbage collection.",
    incremental: true
  }),
  affiliates: Metric.counter("discovery_state_gc_affiliates_total", {
    description: "Number of affiliates removed by garbage collection.",
    incremental: true
  })
} as const

/**
 * One GC pass with its log line: Info when something was removed, else Debug.
 *
 * @category constructors
 * @since 0.1.0
 */
export const runOnce = Effect.gen(function* () {
  const state = yield* ClusterState
  const report = yield* state.collectGarbage
  yield* Metric.update(metrics.runs, 1)
  yield* Metric.update(metrics.clusters, report.removedClusters)
  yield* Metric.update(metrics.affiliates, report.removedAffiliates)
  const stats = yield* state.stats
  const fields = {
    removed_clusters: report.removedClusters,
    removed_affiliates: report.removedAffiliates,
    trimmed_affiliates: report.trimmedAffiliates,
    current_clusters: stats.clusters,
    current_affiliates: stats.affiliates,
    current_endpoints: stats.endpoints,
    current_subscriptions: stats.watches
  }
  const removed = report.removedClusters + report.removedAffiliates + report.trimmedAffiliates > 0
  yield* (removed ? Effect.logInfo : Effect.logDebug)("garbage collection run").pipe(Effect.annotateLogs(fields))
  return report
})

/**
 * Collects garbage right away and then every `interval` (the original's default
 * is one minute). A pass that fails is logged and the next one still runs.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (interval: Duration.Input): Layer.Layer<never, never, ClusterState> =>
  Layer.effectDiscard(
    runOnce.pipe(
      Effect.catchCause((cause) => Effect.logError("garbage collection failed", cause)),
      Effect.repeat(Schedule.spaced(interval)),
      Effect.forkScoped
    )
  )
