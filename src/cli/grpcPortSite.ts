/**
 * The landing site on the gRPC port, as the original serves it there for
 * requests that are not gRPC (HTTP/1.1, and HTTP/2 without a gRPC content
 * type). The HTTP stack is loaded on the first such request, so a start
 * that only serves gRPC never pays for it.
 *
 * @since 0.1.0
 */
import { Effect, Scope } from "effect"
import type { FallbackListener } from "../adapters/grpc/http2/Http2Server.ts"
import type { Readiness } from "../adapters/http/Readiness.ts"
import type { ClusterState } from "../core/server/ClusterState.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"

/**
 * A listener that loads the site's routes on its first request and hands
 * every request to them; a load that fails, or a listener that throws,
 * answers 500 (a failed load is tried again on the next request).
 *
 * @category constructors
 * @since 0.1.0
 */
export const lazySite = (
  config: ServiceConfig
): Effect.Effect<FallbackListener, never, ClusterState | Readiness | Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context<ClusterState | Readiness>()
    const scope = yield* Effect.scope
    const load = Effect.promise(() => import("../adapters/http/LandingServer.ts")).pipe(
      Effect.flatMap((landing) =>
        landing.requestListener({
          statsTtl: config.statsCacheTtl,
          trustXRealIp: config.trustXRealIp,
          trustFirstXForwardedFor: config.trustFirstXForwardedFor
        })
      ),
      Scope.provide(scope)
    )
    let site: Promise<FallbackListener> | undefined
    const oops = (response: Parameters<FallbackListener>[1]) => {
      if (response.headersSent) response.destroy()
      else {
        response.statusCode = 500
        response.end("Oops, try again")
      }
    }
    return (request, response) => {
      site ??= Effect.runPromiseWith(context)(load)
      site.then(
        (listener) => {
          try {
            listener(request, response)
          } catch {
            oops(response)
          }
        },
        () => {
          site = undefined
          oops(response)
        }
      )
    }
  })
