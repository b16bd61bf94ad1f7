/**
 * The metrics listener (`--metrics-addr`, default `:2122`): `/metrics` in the
 * Prometheus text format, rendered by Effect's own exporter
 * (`PrometheusMetrics` from `effect/observability`) over the global Effect
 * metric registry, plus the `/healthz` and `/readyz` probes.
 *
 * The state gauges and process metrics are registered before the listener
 * opens, so the first scrape already has them (Q23), and removed when it
 * closes.
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"
import { Context, Effect, Layer } from "effect"
import type { HttpServerError } from "effect/http"
import { HttpRouter, HttpServerResponse } from "effect/http"
import type { NetAddress } from "effect/net"
import { PrometheusMetrics } from "effect/observability"
import type { ClusterState } from "../../core/server/ClusterState.ts"
import * as Health from "./Health.ts"
import { boundAddress, serveOn } from "./listener.ts"
import * as ProcessMetrics from "./ProcessMetrics.ts"
import type { Readiness } from "./Readiness.ts"
import * as StateMetrics from "./StateMetrics.ts"

/**
 * How the metrics listener behaves; every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface MetricsOptions {
  /** Listen address, Go style: `:2122` (every interface, the default), `127.0.0.1:0`. */
  readonly address?: string | undefined
  /** Export process_* and nodejs_* metrics (default true). */
  readonly processMetrics?: boolean | undefined
  /** How long open requests may take to finish on shutdown (default 5 seconds). */
  readonly shutdownTimeout?: Duration.Input | undefined
  /**
   * Runs before each scrape renders the registry: where series kept
   * elsewhere are read in (the I/O threads' metrics).
   */
  readonly beforeScrape?: Effect.Effect<void> | undefined
}

/**
 * The running metrics listener: where it is bound (useful with port 0).
 *
 * @category services
 * @since 0.1.0
 */
export class MetricsServer extends Context.Service<
  MetricsServer,
  { readonly address: NetAddress.SocketAddress; readonly port: number }
>()("talos-discovery/http/MetricsServer") {}

/**
 * Registers the scrape-time series in the global registry: the state gauges
 * and GC counters, and (unless turned off) the process metrics. They stay
 * registered while the layer is open.
 *
 * @category layers
 * @since 0.1.0
 */
export const collectors = (options: MetricsOptions = {}): Layer.Layer<never, never, ClusterState> =>
  Layer.effectDiscard(
    options.processMetrics === false
      ? StateMetrics.register
      : Effect.andThen(StateMetrics.register, ProcessMetrics.register)
  )

/**
 * The `/metrics` route (GET) with the probes, for any `HttpRouter`;
 * `beforeScrape` runs before each rendering.
 *
 * @category layers
 * @since 0.1.0
 */
export const routes = (
  beforeScrape: Effect.Effect<void> = Effect.void
): Layer.Layer<never, never, HttpRouter.HttpRouter | Readiness> =>
  Layer.merge(
    Layer.effectDiscard(
      Effect.flatMap(HttpRouter.HttpRouter, (router) =>
        router.add(
          "GET",
          "/metrics",
          Effect.andThen(beforeScrape, PrometheusMetrics.format()).pipe(
            Effect.map((body) =>
              HttpServerResponse.text(body, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
            )
          )
        )
      )
    ),
    Health.routes
  )

/**
 * The metrics listener at `options.address` (default `:2122`): collectors
 * first, then the server, so nothing is scraped before they exist.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: MetricsOptions = {}
): Layer.Layer<MetricsServer, HttpServerError.ServeError, ClusterState | Readiness> =>
  serveOn(
    Layer.merge(routes(options.beforeScrape), Layer.effect(MetricsServer, boundAddress)),
    options.address ?? ":2122",
    options.shutdownTimeout
  ).pipe(Layer.provide(collectors(options)))
