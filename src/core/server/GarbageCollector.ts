/**
 * Runs cluster-state garbage collection on a schedule: once at start, then
 * once per interval, for as long as the layer's scope is open.
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"
import { Effect, Layer, Schedule } from "effect"
import { ClusterState } from "./ClusterState.ts"

/**
 * One GC pass with its log line: Info when something was removed, else Debug.
 *
 * @category constructors
 * @since 0.1.0
 */
export const runOnce = Effect.gen(function* () {
  const state = yield* ClusterState
  const report = yield* state.collectGarbage
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
 * is one minute).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (interval: Duration.Input): Layer.Layer<never, never, ClusterState> =>
  Layer.effectDiscard(runOnce.pipe(Effect.repeat(Schedule.spaced(interval)), Effect.forkScoped))
