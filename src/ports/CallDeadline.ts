/**
 * When the caller of a `ClusterApi` method stops waiting for its answer, in
 * milliseconds since the epoch (`Infinity`: it waits as long as it takes). A
 * transport that knows its call's deadline (gRPC's `grpc-timeout`) provides
 * it; an implementation that queues calls (another thread's) skips one whose
 * caller has already gone rather than apply it unseen.
 *
 * @since 0.1.0
 */
import { Context } from "effect"

/**
 * The current call's deadline, in milliseconds since the epoch.
 *
 * @category services
 * @since 0.1.0
 */
export const CallDeadline: Context.Reference<number> = Context.Reference("talos-discovery/CallDeadline", {
  defaultValue: () => Number.POSITIVE_INFINITY
})
