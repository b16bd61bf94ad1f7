/**
 * The cluster-state metrics of the original: four gauges computed when the
 * registry is read (one walk of the state per read), plus the GC counters,
 * registered at zero so they are exported before the first GC pass; and
 * ours: whether the state backend can serve, and the changes, watch starts
 * and watch endings by cause, each cause at zero from the start (so that
 * dashboards and alerts see every series).
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Effect, Metric } from "effect"
import { changesTotal, watchEndingsTotal } from "../../core/server/changeReport.ts"
import { ClusterState, watchesStartedTotal } from "../../core/server/ClusterState.ts"
import { changeCauses, watchEndCauses } from "../../ports/ChangeCause.ts"
import * as GarbageCollector from "../../core/server/GarbageCollector.ts"
import * as Collected from "./collected.ts"

/**
 * The state gauges, with the original's names.
 *
 * @category metrics
 * @since 0.1.0
 */
export const gauges = {
  clusters: Metric.gauge("discovery_state_clusters", { description: "Number of clusters." }),
  affiliates: Metric.gauge("discovery_state_affiliates", { description: "Number of affiliates." }),
  endpoints: Metric.gauge("discovery_state_endpoints", { description: "Number of endpoints." }),
  subscriptions: Metric.gauge("discovery_state_subscriptions", { description: "Number of watch subscriptions." }),
  backendAvailable: Metric.gauge("discovery_state_backend_available", {
    description: "1 while the state backend can serve (always, in memory; while Redis is reachable, on Redis), else 0."
  })
} as const

/**
 * Registers the state gauges (read from `ClusterState.stats` on every scrape)
 * and the GC counters at zero in the current metric registry. The gauges are
 * removed when the scope closes; the counters stay.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register: Effect.Effect<void, never, ClusterState | Scope.Scope> = Effect.gen(function* () {
  const state = yield* ClusterState
  const stats = Collected.oncePerSnapshot(() => Effect.runSync(state.stats))
  yield* Collected.gauge(gauges.clusters, () => stats().clusters)
  yield* Collected.gauge(gauges.affiliates, () => stats().affiliates)
  yield* Collected.gauge(gauges.endpoints, () => stats().endpoints)
  yield* Collected.gauge(gauges.subscriptions, () => stats().watches)
  yield* Collected.gauge(gauges.backendAvailable, () => (state.available() ? 1 : 0))
  for (const cause of changeCauses) yield* Metric.update(Metric.withAttributes(changesTotal, { cause }), 0)
  for (const cause of watchEndCauses) yield* Metric.update(Metric.withAttributes(watchEndingsTotal, { cause }), 0)
  for (const start of ["snapshot", "resumed"]) {
    yield* Metric.update(Metric.withAttributes(watchesStartedTotal, { start }), 0)
  }
  yield* Metric.update(GarbageCollector.metrics.runs, 0)
  yield* Metric.update(GarbageCollector.metrics.clusters, 0)
  yield* Metric.update(GarbageCollector.metrics.affiliates, 0)
})
