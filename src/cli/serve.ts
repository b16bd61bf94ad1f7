/**
 * Turns the command's settings into running layers: the core with its
 * snapshots, the gRPC server over it, the HTTP listeners and the logger. The
 * snapshot loads before the port opens; on the way out the server stops
 * first, then the HTTP listeners, then the final snapshot is written.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Logger, Metric, References } from "effect"
import { defaultRequestBudgetBytes, SharedRequestBudget } from "../adapters/grpc/http2/RequestBudget.ts"
import type { ThreadRow } from "../adapters/http/live/LiveSample.ts"
import * as Collected from "../adapters/http/collected.ts"
import * as Readiness from "../adapters/http/Readiness.ts"
import { FileSnapshotStore } from "../adapters/storage/index.ts"
import { ClusterState } from "../core/server/ClusterState.ts"
import * as DiscoveryServer from "../core/server/DiscoveryServer.ts"
import { SnapshotService } from "../core/server/SnapshotService.ts"
import { serverOn } from "./grpcListener.ts"
import { lazySite } from "./grpcPortSite.ts"
import type * as HttpListeners from "./httpListeners.ts"
import * as JsonLogger from "./jsonLogger.ts"
import * as LiveViewLayer from "./liveView.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"
import * as SharedPort from "./sharedPort.ts"
import { redactedUrl } from "./stateFlags.ts"
import { serviceVersion } from "./version.ts"

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
 * The logger of the command: JSON lines (the lines of `Logger.consoleJson`,
 * written in batches: see `JsonLogger`) at Info or `--log-level`, or
 * human-readable at Debug with `--debug` (or at `--log-level`).
 *
 * @category layers
 * @since 0.1.0
 */
export const loggerLayer = (config: Pick<ServiceConfig, "debug" | "logLevel">): Layer.Layer<never> =>
  Layer.mergeAll(
    Logger.layer([config.debug ? Logger.consolePretty() : JsonLogger.make()]),
    Layer.succeed(References.MinimumLogLevel, config.logLevel ?? (config.debug ? "Debug" : "Info"))
  )

/**
 * The gRPC port of the command: served on this thread, or shared with
 * `config.ioThreads - 1` I/O threads that reach the state here. Gives the
 * bound port, and what `/metrics` runs before each scrape.
 */
const grpcPort = (config: ServiceConfig) =>
  Effect.gen(function* () {
    const addresses = listenAddresses(config.addr)
    if (config.ioThreads > 1) return yield* SharedPort.serve(config, addresses)
    const fallback = yield* lazySite(config)
    const requestBudget = SharedRequestBudget.make(
      config.transport.requestBudgetBytes ?? defaultRequestBudgetBytes(),
      1
    )
    const bound = yield* serverOn(config, {
      addresses,
      fallback,
      reusePort: config.transport.reusePort,
      requestBudget: { budget: requestBudget, holder: 0 }
    })
    return {
      port: bound.port,
      beforeScrape: Effect.void,
      threads: () => 1,
      threadRows: (watches: number): Array<ThreadRow> => [
        {
          index: 0,
          connections: undefined,
          watches,
          requestBytes: requestBudget.reservedBy(0),
          unreadBytes: 0
        }
      ],
      requestMemory: () => ({ bytes: requestBudget.reserved, budget: requestBudget.capacity })
    }
  })

/**
 * `discovery_io_threads`: the threads serving the gRPC port now (the main
 * thread and the I/O threads running).
 *
 * @category metrics
 * @since 0.1.0
 */
export const ioThreadsGauge = Metric.gauge("discovery_io_threads", {
  description: "Threads serving the gRPC port now: the main thread and the I/O threads running."
})

/**
 * `discovery_build_info{version}`: 1, labelled with the version this
 * instance runs (count it to see the instances and the versions they run).
 *
 * @category metrics
 * @since 0.1.0
 */
export const buildInfoGauge = Metric.gauge("discovery_build_info", {
  description: "1 for each running instance, labelled with its version."
})

/**
 * The HTTP listeners' module, loaded only when one of them is enabled: with
 * both off (as in the benchmark) the HTTP stack is never imported.
 */
const loadHttpListeners = (config: ServiceConfig): Effect.Effect<typeof HttpListeners | undefined> =>
  config.landingAddr === "" && config.metricsAddr === ""
    ? Effect.succeed(undefined)
    : Effect.promise(() => import("./httpListeners.ts"))

const noHttpPorts: Effect.Effect<HttpListeners.HttpPorts> = Effect.succeed({ landing: undefined, metrics: undefined })

/**
 * The cluster state of `config`: in memory (the default state of
 * `DiscoveryServer.layer`), or on Redis, whose backend is loaded only then.
 */
const stateLayer = (config: ServiceConfig): Layer.Layer<ClusterState> | undefined => {
  const state = config.state
  if (state._tag === "Memory") return undefined
  return ClusterState.layerOnBackend.pipe(
    Layer.provide(
      Layer.unwrap(
        Effect.map(
          Effect.promise(() => import("../adapters/redis/RedisBackend.ts")),
          (RedisBackend) =>
            RedisBackend.layer({
              url: state.url,
              cluster: state.cluster,
              password: state.password,
              keyPrefix: state.keyPrefix,
              // the instances' watchers are fed from the same log: it never goes below what they need
              logLength: config.watchLogLength === undefined ? undefined : Math.max(config.watchLogLength, 100),
              caps: { maxClusters: config.maxClusters, maxWatches: config.maxWatches }
            })
        )
      )
    )
  )
}

/**
 * Snapshot load (when built) and saves (periodic, and final after the server
 * stopped). The stop budgets (3 s gRPC, 0.5 s per HTTP listener, 4 s final save)
 * stay under the 10 s limit of `main.ts`.
 */
const snapshotLayer = (config: ServiceConfig, started: () => boolean): Layer.Layer<never, never, ClusterState> =>
  config.snapshotsEnabled && config.state._tag === "Memory"
    ? SnapshotService.layer({
        interval: config.snapshotInterval,
        finalSaveTimeout: "4 seconds",
        saveOnClose: Effect.sync(started)
      }).pipe(Layer.provide(FileSnapshotStore.layer({ path: config.snapshotPath })))
    : Layer.empty

/**
 * Runs the service until interrupted (SIGINT or SIGTERM under `runMain`); on
 * the way out open watches end with UNAVAILABLE and the server stops.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serve = (config: ServiceConfig) =>
  Effect.flatMap(loadHttpListeners(config), (http) => serveWith(config, http))

const serveWith = (config: ServiceConfig, http: typeof HttpListeners | undefined) => {
  let started = false
  const served = LiveViewLayer.notServing()
  return Effect.gen(function* () {
    const server = yield* grpcPort(config)
    served.port = server.port
    served.refreshMetrics = server.beforeScrape
    served.threads = server.threadRows
    served.requestMemory = server.requestMemory
    yield* Collected.gauge(ioThreadsGauge, server.threads)
    yield* Metric.update(Metric.withAttributes(buildInfoGauge, { version: serviceVersion }), 1)
    started = true
    const state = yield* ClusterState
    yield* Effect.flatMap(Readiness.Readiness, (readiness) => readiness.requires(state.available))
    yield* Readiness.readyUntilClosed
    const httpPorts = yield* http?.ports ?? noHttpPorts
    yield* Effect.logInfo("discovery service listening").pipe(
      Effect.annotateLogs({
        addr: config.addr,
        port: server.port,
        io_threads: config.ioThreadsAuto ? `auto (1 to ${config.ioThreads})` : config.ioThreads,
        landing_port: httpPorts.landing,
        metrics_port: httpPorts.metrics,
        landing_addr: config.landingAddr,
        metrics_addr: config.metricsAddr,
        state: config.state._tag === "Memory" ? "memory" : redactedUrl(config.state.url),
        snapshots:
          config.state._tag === "Redis"
            ? "off (the state is in Redis)"
            : config.snapshotsEnabled
              ? config.snapshotPath
              : "disabled",
        tls: config.certificatePath !== "",
        rate_limit: config.rateLimit === false ? "off" : `${config.rateLimit.rate}/s burst ${config.rateLimit.burst}`,
        gc_interval: Duration.format(config.gcInterval),
        redirect_endpoint: config.redirectEndpoint,
        trust_x_real_ip: config.trustXRealIp,
        trust_first_x_forwarded_for: config.trustFirstXForwardedFor,
        client_ip_reporting: !config.disableClientIpReporting,
        max_clusters: config.maxClusters,
        max_watches: config.maxWatches,
        max_concurrent_streams: config.transport.maxConcurrentStreams,
        request_memory_budget: config.transport.requestBudgetBytes ?? defaultRequestBudgetBytes(),
        max_connections: config.transport.maxConnections,
        max_connections_per_address: config.transport.maxConnectionsPerAddress,
        idle_timeout: Duration.format(config.transport.idleTimeout),
        failure_log: config.failureLog === false ? "every line" : `${config.failureLog.perAddressRate}/s per address`
      })
    )
    return yield* Effect.never
  }).pipe(
    Effect.scoped,
    Effect.provide(
      http === undefined
        ? Layer.empty
        : http.layer(
            config,
            Effect.suspend(() => served.refreshMetrics)
          )
    ),
    Effect.provide(LiveViewLayer.layer(config, served)),
    Effect.provide(
      Layer.mergeAll(
        snapshotLayer(config, () => started).pipe(
          Layer.provideMerge(
            DiscoveryServer.layer({
              reportClientIp: !config.disableClientIpReporting,
              gcInterval: config.gcInterval,
              redirectEndpoint: config.redirectEndpoint,
              caps: {
                maxClusters: config.maxClusters,
                maxWatches: config.maxWatches,
                watchLogLength: config.watchLogLength
              },
              state: stateLayer(config)
            })
          )
        ),
        Readiness.Readiness.layer
      )
    ),
    Effect.provide(loggerLayer(config))
  )
}
