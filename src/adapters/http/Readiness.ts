/**
 * The readiness signal behind `/readyz`: a flag the program raises once it can
 * serve (state loaded, gRPC listening) and lowers when it starts shutting
 * down, so a load balancer stops sending traffic before the listeners close.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Context, Effect, Layer, Ref } from "effect"

/**
 * Whether the service is ready to take traffic. It starts not ready.
 *
 * @category services
 * @since 0.1.0
 */
export class Readiness extends Context.Service<
  Readiness,
  {
    /** Reports ready from now on. */
    readonly markReady: Effect.Effect<void>
    /** Reports not ready from now on (shutting down, or not started). */
    readonly markNotReady: Effect.Effect<void>
    /** The current state: marked ready, and every condition holds. */
    readonly isReady: Effect.Effect<boolean>
    /** Adds a condition readiness needs from now on (a shared state backend being reachable). */
    readonly requires: (condition: () => boolean) => Effect.Effect<void>
  }
>()("talos-discovery/http/Readiness") {
  /** A fresh signal, not ready until `markReady`. */
  static readonly layer: Layer.Layer<Readiness> = Layer.effect(
    Readiness,
    Effect.suspend(() => make)
  )
}

/**
 * Builds a readiness signal that starts not ready.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<Context.Service.Shape<typeof Readiness>> = Effect.map(Ref.make(false), (ready) => {
  const conditions: Array<() => boolean> = []
  return Readiness.of({
    markReady: Ref.set(ready, true),
    markNotReady: Ref.set(ready, false),
    isReady: Effect.map(Ref.get(ready), (marked) => marked && conditions.every((condition) => condition())),
    requires: (condition) => Effect.sync(() => void conditions.push(condition))
  })
})

/**
 * Marks the service ready until the current scope closes, then not ready. Call
 * it once everything the service needs is up: since finalizers run in reverse
 * order, the flag drops before anything opened earlier in the scope stops.
 *
 * @category constructors
 * @since 0.1.0
 */
export const readyUntilClosed: Effect.Effect<void, never, Readiness | Scope.Scope> = Effect.gen(function* () {
  const readiness = yield* Readiness
  yield* Effect.acquireRelease(readiness.markReady, () => readiness.markNotReady)
})
