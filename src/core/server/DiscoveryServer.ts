/**
 * The core server: the `ClusterApi` port implemented over the cluster state and
 * the redirect policy, plus one layer that wires the whole core together.
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"
import { Effect, Layer } from "effect"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import { ClusterState } from "./ClusterState.ts"
import type { StoreCaps } from "./ClusterStore.ts"
import * as GarbageCollector from "./GarbageCollector.ts"
import { RedirectPolicy } from "./RedirectPolicy.ts"
import { validateClusterId } from "./validation.ts"

/**
 * How the core server behaves; every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface ServerOptions {
  /** Report the caller's address in Hello (default true). */
  readonly reportClientIp?: boolean
  /** Period of garbage collection (default 1 minute); "disabled" runs none. */
  readonly gcInterval?: Duration.Input | "disabled"
  /** Redirect every client to this endpoint (default: none). */
  readonly redirectEndpoint?: string
  /** Global caps on clusters and watches (of the default state in memory). */
  readonly caps?: Partial<StoreCaps>
  /** The cluster state (default: in memory, with `caps`), e.g. `ClusterState.layerOnBackend` over Redis. */
  readonly state?: Layer.Layer<ClusterState> | undefined
}

/**
 * Hello, which needs no state: the cluster ID checked, the redirect
 * policy's answer and (when reported) the caller's address. A thread that
 * serves calls for the state held elsewhere answers it itself.
 *
 * @category constructors
 * @since 0.1.0
 */
export const hello =
  (
    redirect: RedirectPolicy["Service"],
    options: { readonly reportClientIp: boolean }
  ): ClusterApi["Service"]["hello"] =>
  (request) =>
    Effect.flatMap(validateClusterId(request.clusterId), () =>
      Effect.map(redirect.redirectFor(request), (endpoint) => ({
        redirect: endpoint,
        clientIp: options.reportClientIp ? request.clientAddress : undefined
      }))
    )

/**
 * Implements `ClusterApi` over `ClusterState` and `RedirectPolicy`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: { readonly reportClientIp: boolean }) =>
  Effect.gen(function* () {
    const state = yield* ClusterState
    const redirect = yield* RedirectPolicy
    return ClusterApi.of({
      hello: hello(redirect, options),
      affiliateUpdate: state.update,
      affiliateDelete: state.delete,
      list: state.list,
      watch: state.watch,
      subscribe: state.subscribe
    })
  })

/**
 * The whole core: state, redirect policy, scheduled GC and the `ClusterApi`
 * over them. GC runs on Effect's clock, so `TestClock` drives it in tests.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: ServerOptions = {}): Layer.Layer<ClusterApi | ClusterState> => {
  const api = Layer.effect(ClusterApi, make({ reportClientIp: options.reportClientIp ?? true })).pipe(
    Layer.provide(RedirectPolicy.layerStatic(options.redirectEndpoint ?? ""))
  )
  const gcInterval = options.gcInterval ?? "1 minute"
  const gc = gcInterval === "disabled" ? Layer.empty : GarbageCollector.layer(gcInterval)
  return Layer.mergeAll(api, gc).pipe(
    Layer.provideMerge(options.state ?? (options.caps ? ClusterState.layerWith(options.caps) : ClusterState.layer))
  )
}
