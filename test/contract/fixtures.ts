/**
 * The contract suite's helpers (from the conformance kit, `src/conformance`),
 * and the controls of targets built on the in-process core.
 */
import { Effect } from "effect"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"

export * from "../../src/conformance/fixtures.ts"

/**
 * Time and cluster counting of a target built on the in-process core
 * (`TestDiscovery`): TestClock, GC on demand, clusters from `ClusterState.stats`.
 */
export const coreControls = {
  time: {
    _tag: "TestClock" as const,
    advance: TestDiscovery.advance,
    runGc: Effect.asVoid(TestDiscovery.runGc)
  },
  clusterCount: Effect.map(
    Effect.flatMap(ClusterState, (state) => state.stats),
    (stats) => stats.clusters
  )
}
