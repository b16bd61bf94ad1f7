/**
 * Liveness and readiness probes: `/healthz` answers 200 while the process
 * serves HTTP at all, `/readyz` answers 200 only while `Readiness` says so
 * (503 before start-up completes and once shutdown begins).
 *
 * @since 0.1.0
 */
import type { Layer } from "effect"
import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Readiness } from "./Readiness.ts"

const headers = { "cache-control": "no-store" }

/**
 * The `/healthz` and `/readyz` routes (any method).
 *
 * @category layers
 * @since 0.1.0
 */
export const routes: Layer.Layer<never, never, HttpRouter.HttpRouter | Readiness> = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const readiness = yield* Readiness
    yield* router.add("*", "/healthz", HttpServerResponse.text("ok\n", { headers }))
    yield* router.add(
      "*",
      "/readyz",
      Effect.map(readiness.isReady, (ready) =>
        ready
          ? HttpServerResponse.text("ready\n", { headers })
          : HttpServerResponse.text("not ready\n", { status: 503, headers })
      )
    )
  })
)
