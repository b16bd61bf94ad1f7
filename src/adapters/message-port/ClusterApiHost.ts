/**
 * The owner's side of `ClusterApi` over a `MessagePort`: answers the requests
 * that arrive on the port with the `ClusterApi` it holds (the core), and
 * relays each watch's start, changes and end. A watch's changes offered
 * before its start was posted wait for it, so the other side always sees the
 * start first.
 *
 * @since 0.1.0
 */
import type { MessagePort } from "node:worker_threads"
import { Context, Effect, Fiber, Scope } from "effect"
import type { ClusterApi, WatchDelta, WatchRequest } from "../../ports/ClusterApi.ts"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import { fromWireUpdate, type Reply, type Request, toWireError, type WireUpdate } from "./protocol.ts"

/**
 * Serves `api` on `port` until the scope closes; then every watch it relays
 * ends and the port is closed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serve = (api: ClusterApi["Service"], port: MessagePort): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const subscribe = api.subscribe
    if (subscribe === undefined) return yield* Effect.die(new Error("the served ClusterApi has no push-form watch"))
    const runFork = Effect.runForkWith(Context.omit(Scope.Scope)(yield* Effect.context<never>()))
    const watches = new Map<number, Fiber.Fiber<unknown, unknown>>()
    const post = (reply: Reply) => port.postMessage(reply)
    const failed = (id: number) => (error: DiscoveryError) => Effect.sync(() => post({ id, error: toWireError(error) }))

    const unary = (
      message: Extract<Request, { readonly request: unknown }>
    ): Effect.Effect<unknown, DiscoveryError> => {
      switch (message.op) {
        case "hello":
          return api.hello(message.request as Parameters<typeof api.hello>[0])
        case "affiliateUpdate":
          return api.affiliateUpdate(fromWireUpdate(message.request as WireUpdate))
        case "affiliateDelete":
          return api.affiliateDelete(message.request as Parameters<typeof api.affiliateDelete>[0])
        case "list":
          return api.list(message.request as Parameters<typeof api.list>[0])
        default:
          return Effect.die(new Error(`not a unary operation: ${message.op}`))
      }
    }

    const watch = (id: number, request: WatchRequest) =>
      Effect.scoped(
        Effect.gen(function* () {
          let early: Array<WatchDelta> | undefined = []
          const start = yield* subscribe(request, {
            offer: (delta) => {
              if (early === undefined) post({ id, delta })
              else early.push(delta)
              return true
            },
            end: (error) => post({ id, end: toWireError(error) })
          })
          post({ id, start })
          for (const delta of early ?? []) post({ id, delta })
          early = undefined
          return yield* Effect.never
        })
      ).pipe(Effect.catch(failed(id)))

    const onMessage = (message: Request) => {
      if (message.op === "cancel") {
        const fiber = watches.get(message.id)
        watches.delete(message.id)
        if (fiber !== undefined) runFork(Fiber.interrupt(fiber))
        return
      }
      if (message.op === "watch") {
        const fiber = runFork(watch(message.id, message.request as WatchRequest))
        watches.set(message.id, fiber)
        fiber.addObserver(() => watches.delete(message.id))
        return
      }
      runFork(
        unary(message).pipe(
          Effect.flatMap((ok) => Effect.sync(() => post({ id: message.id, ok }))),
          Effect.catch(failed(message.id))
        )
      )
    }

    port.on("message", onMessage)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        port.off("message", onMessage)
        for (const fiber of watches.values()) yield* Fiber.interrupt(fiber)
        watches.clear()
        port.close()
      })
    )
  })
