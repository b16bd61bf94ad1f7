/**
 * `ClusterApi` over a `MessagePort`, for a thread that does not hold the
 * state (a gRPC worker): each call is a message to the owner
 * (`ClusterApiHost.serve`) and its reply; a watch is pushed (`subscribe`), its
 * changes offered to the sink as they arrive, with the core's rule that a
 * sink that refuses one is cut off with a lost-update error.
 *
 * @since 0.1.0
 */
import type { MessagePort } from "node:worker_threads"
import type { Scope } from "effect"
import { Effect } from "effect"
import { watchFromSubscribe } from "../../core/server/pushedWatch.ts"
import type { WatchRequest, WatchSink, WatchStart } from "../../ports/ClusterApi.ts"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import {
  type DiscoveryError,
  lostUpdateMessage,
  SubscriptionLost,
  type Unavailable
} from "../../ports/DiscoveryError.ts"
import { fromWireError, type Reply, type Request, toWireUpdate, type UnaryOperation } from "./protocol.ts"

/**
 * The port's `ClusterApi` over `port`; the port is closed with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (port: MessagePort): Effect.Effect<ClusterApi["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    let nextId = 1
    const pending = new Map<number, (reply: Reply) => void>()
    const post = (request: Request) => port.postMessage(request)
    const onMessage = (reply: Reply) => pending.get(reply.id)?.(reply)
    port.on("message", onMessage)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        port.off("message", onMessage)
        port.close()
      })
    )

    const call =
      <A>(op: UnaryOperation, wire: (request: never) => unknown = (request) => request) =>
      (request: unknown): Effect.Effect<A, DiscoveryError> =>
        Effect.callback<A, DiscoveryError>((resume) => {
          const id = nextId++
          pending.set(id, (reply) => {
            pending.delete(id)
            if ("ok" in reply) resume(Effect.succeed(reply.ok as A))
            else if ("error" in reply) resume(Effect.fail(fromWireError(reply.error)))
          })
          post({ id, op, request: wire(request as never) })
          return Effect.sync(() => pending.delete(id))
        })

    const subscribe = (
      request: WatchRequest,
      sink: WatchSink
    ): Effect.Effect<WatchStart, DiscoveryError, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.callback<{ readonly id: number; readonly start: WatchStart }, DiscoveryError>((resume) => {
          const id = nextId++
          const cancel = () => {
            if (!pending.delete(id)) return
            post({ id, op: "cancel" })
          }
          pending.set(id, (reply) => {
            if ("start" in reply) resume(Effect.succeed({ id, start: reply.start }))
            else if ("delta" in reply) {
              if (!sink.offer(reply.delta)) {
                cancel()
                sink.end(new SubscriptionLost({ message: lostUpdateMessage }))
              }
            } else if ("end" in reply) {
              pending.delete(id)
              sink.end(fromWireError(reply.end) as SubscriptionLost | Unavailable)
            } else if ("error" in reply) {
              pending.delete(id)
              resume(Effect.fail(fromWireError(reply.error)))
            }
          })
          post({ id, op: "watch", request })
          return Effect.sync(cancel)
        }),
        ({ id }) =>
          Effect.sync(() => {
            if (pending.delete(id)) post({ id, op: "cancel" })
          })
      ).pipe(Effect.map(({ start }) => start))

    return ClusterApi.of({
      hello: call("hello"),
      affiliateUpdate: call("affiliateUpdate", toWireUpdate),
      affiliateDelete: call("affiliateDelete"),
      list: call("list"),
      watch: watchFromSubscribe(subscribe),
      subscribe
    })
  })
