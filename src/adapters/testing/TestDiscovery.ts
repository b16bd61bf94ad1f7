/**
 * A test layer for code that uses the discovery service: the in-process core on
 * `TestClock`, with GC run only when the test asks, so every expiry happens at
 * a step the test chose.
 *
 * @since 0.1.0
 */
import type { Duration, Layer } from "effect"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { ClusterState } from "../../core/server/ClusterState.ts"
import type { GcReport } from "../../core/server/ClusterStore.ts"
import * as DiscoveryServer from "../../core/server/DiscoveryServer.ts"
import type { ClusterApi } from "../../ports/ClusterApi.ts"

/**
 * The in-process core for tests, with GC only on `runGc` unless a `gcInterval`
 * is given. Provide it inside `it.effect` (which supplies `TestClock`), or with
 * `TestClock.layer()` elsewhere.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: DiscoveryServer.ServerOptions = {}): Layer.Layer<ClusterApi | ClusterState> =>
  DiscoveryServer.layer({ gcInterval: "disabled", ...options })

/**
 * Moves the test clock forward; scheduled work due by then runs.
 *
 * @category testing
 * @since 0.1.0
 */
export const advance = (duration: Duration.Input): Effect.Effect<void> => TestClock.adjust(duration)

/**
 * Runs one GC pass now, at the test clock's current time; a backend that
 * fails it fails the test (as a defect).
 *
 * @category testing
 * @since 0.1.0
 */
export const runGc: Effect.Effect<GcReport, never, ClusterState> = Effect.flatMap(ClusterState, (state) =>
  Effect.orDie(state.collectGarbage)
)
