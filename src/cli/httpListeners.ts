/**
 * The HTTP listeners of the command: the landing page and the metrics
 * endpoint. `serve.ts` imports this module only when one of them is enabled,
 * so a start with both turned off never loads the HTTP stack.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Option } from "effect"
import { LandingServer, MetricsServer } from "../adapters/http/index.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"

/**
 * The ports the HTTP listeners bound; `undefined` for a listener left out.
 *
 * @category models
 * @since 0.1.0
 */
export interface HttpPorts {
  readonly landing: number | undefined
  readonly metrics: number | undefined
}

/**
 * The HTTP listeners; an empty address leaves one out. `beforeScrape` runs
 * before each `/metrics` rendering.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (config: ServiceConfig, beforeScrape?: Effect.Effect<void>) =>
  Layer.mergeAll(
    config.metricsAddr === ""
      ? Layer.empty
      : MetricsServer.layer({ address: config.metricsAddr, shutdownTimeout: "500 millis", beforeScrape }),
    config.landingAddr === ""
      ? Layer.empty
      : LandingServer.layer({
          address: config.landingAddr,
          statsTtl: config.statsCacheTtl,
          trustXRealIp: config.trustXRealIp,
          trustFirstXForwardedFor: config.trustFirstXForwardedFor,
          shutdownTimeout: "500 millis"
        })
  )

/**
 * The bound ports, read from the services `layer` provides.
 *
 * @category constructors
 * @since 0.1.0
 */
export const ports: Effect.Effect<HttpPorts> = Effect.gen(function* () {
  const landing = yield* Effect.serviceOption(LandingServer.LandingServer)
  const metrics = yield* Effect.serviceOption(MetricsServer.MetricsServer)
  return {
    landing: Option.getOrUndefined(Option.map(landing, (l) => l.port)),
    metrics: Option.getOrUndefined(Option.map(metrics, (m) => m.port))
  }
})
