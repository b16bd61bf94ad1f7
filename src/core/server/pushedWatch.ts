/**
 * A watch as a stream, made from its push form (`subscribe`): changes go
 * into a bounded queue (the watch buffer; a full one cuts the watcher off),
 * and the stream starts with the snapshot, or the resumed start and the
 * changes missed.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Cause, Effect, Queue, Stream } from "effect"
import type { WatchEvent, WatchRequest, WatchSink, WatchStart } from "../../ports/ClusterApi.ts"
import type { SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"
import { Limits } from "./limits.ts"

/**
 * The stream form of `subscribe`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const watchFromSubscribe =
  <E>(subscribe: (request: WatchRequest, sink: WatchSink) => Effect.Effect<WatchStart, E, Scope.Scope>) =>
  (request: WatchRequest): Stream.Stream<WatchEvent, E | SubscriptionLost | Unavailable> =>
    Stream.unwrap(
      Effect.gen(function* () {
        const queue = yield* Queue.bounded<WatchEvent, SubscriptionLost | Unavailable | Cause.Done>(Limits.watchBuffer)
        const start = yield* subscribe(request, {
          offer: (delta) => Queue.offerUnsafe(queue, delta),
          end: (error) => Queue.failCauseUnsafe(queue, Cause.fail(error))
        })
        const first: ReadonlyArray<WatchEvent> =
          start._tag === "Snapshot"
            ? [start]
            : [{ _tag: "Resumed", revision: start.revision, epoch: start.epoch }, ...start.missed]
        return Stream.concat(Stream.fromIterable(first), Stream.fromQueue(queue))
      })
    )
