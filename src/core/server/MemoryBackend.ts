/**
 * The memory backend: the `StateBackend` port over the core's synchronous
 * engine (`ClusterStore`). Every operation runs to completion in one step,
 * so it never fails with `Unavailable` and costs no more than the engine.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { ResourceExhausted } from "../../ports/DiscoveryError.ts"
import type { StateBackendShape } from "../../ports/StateBackend.ts"
import type { ClusterStore } from "./ClusterStore.ts"

/**
 * The port over `store`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (store: ClusterStore): StateBackendShape => ({
  update: (request, expiresAt) =>
    Effect.suspend(() => {
      const result = store.update(request, expiresAt)
      return result instanceof ResourceExhausted ? Effect.fail(result) : Effect.succeed(result)
    }),
  delete: (request, now) => Effect.sync(() => store.delete(request, now)),
  list: (clusterId) => Effect.sync(() => store.list(clusterId)),
  subscribe: (clusterId, sink, resume) =>
    Effect.suspend(() => {
      const result = store.subscribe(clusterId, sink, resume)
      return "revision" in result ? Effect.succeed(result) : Effect.fail(result)
    }),
  unsubscribe: (clusterId, sink, now) => Effect.sync(() => store.unsubscribe(clusterId, sink, now)),
  history: (clusterId) => Effect.sync(() => store.history(clusterId)),
  collectGarbage: (now) => Effect.sync(() => store.collectGarbage(now)),
  stats: Effect.sync(() => store.stats()),
  closeWatches: (end) => store.closeWatches(end)
})
