/**
 * Turns the command's settings into running layers: the core, the gRPC server
 * over it, and the logger.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Logger, References } from "effect"
import * as DiscoveryServer from "../core/server/DiscoveryServer.ts"
import * as GrpcServer from "../adapters/grpc/GrpcServer.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"

/**
 * The listen addresses to try for `addr`, in order: Go's `:3000` (empty host)
 * means every interface, so dual-stack `[::]` first, then IPv4 only for hosts
 * without IPv6.
 *
 * @category parsing
 * @since 0.1.0
 */
export const listenAddresses = (addr: string): Array<string> => {
  const colon = addr.lastIndexOf(":")
  const host = colon === -1 ? addr : addr.slice(0, colon)
  const port = colon === -1 ? "3000" : addr.slice(colon + 1)
  return host === "" ? [`[::]:${port}`, `0.0.0.0:${port}`] : [addr]
}

/**
 * The logger of the command: JSON lines at Info, or human-readable at Debug
 * with `--debug`.
 *
 * @category layers
 * @since 0.1.0
 */
export const loggerLayer = (debug: boolean): Layer.Layer<never> =>
  Layer.mergeAll(
    Logger.layer([debug ? Logger.consolePretty() : Logger.consoleJson]),
    Layer.succeed(References.MinimumLogLevel, debug ? "Debug" : "Info")
  )

const serverOn = (config: ServiceConfig) => {
  const [first, ...rest] = listenAddresses(config.addr)
  const options = {
    trustXRealIp: config.trustXRealIp,
    trustXForwardedFor: config.trustFirstXForwardedFor
  }
  return rest.reduce(
    (server, address) => Effect.catchTag(server, "BindError", () => GrpcServer.make({ ...options, address })),
    GrpcServer.make({ ...options, address: first! })
  )
}

/**
 * Runs the service until interrupted (SIGINT or SIGTERM under `runMain`); on
 * the way out open watches end with UNAVAILABLE and the server stops.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serve = (config: ServiceConfig) =>
  Effect.gen(function* () {
    const server = yield* serverOn(config)
    yield* Effect.logInfo("discovery service listening").pipe(
      Effect.annotateLogs({
        addr: config.addr,
        port: server.port,
        gc_interval: Duration.format(config.gcInterval),
        redirect_endpoint: config.redirectEndpoint,
        trust_x_real_ip: config.trustXRealIp,
        trust_first_x_forwarded_for: config.trustFirstXForwardedFor,
        client_ip_reporting: !config.disableClientIpReporting,
        max_clusters: config.maxClusters,
        max_watches: config.maxWatches
      })
    )
    return yield* Effect.never
  }).pipe(
    Effect.scoped,
    Effect.provide(
      DiscoveryServer.layer({
        reportClientIp: !config.disableClientIpReporting,
        gcInterval: config.gcInterval,
        redirectEndpoint: config.redirectEndpoint,
        caps: { maxClusters: config.maxClusters, maxWatches: config.maxWatches }
      })
    ),
    Effect.provide(loggerLayer(config.debug))
  )
