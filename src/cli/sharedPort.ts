/**
 * The gRPC port shared by threads (`--io-threads` above 1): the main thread
 * holds the state and serves its share of the port, and `IoThreads` starts
 * the other threads, which serve theirs over the state here (`serve`); each
 * of those threads runs the same program, which then runs `serveThread`.
 *
 * The main thread's own server counts its gRPC series in a registry of its
 * own, summed with the threads' into `/metrics` (so no series is counted in
 * two places), while the core's series stay in the main registry.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Exit, Metric, Option, Scope, Stream } from "effect"
import { Http2Server } from "../adapters/grpc/http2/Http2Server.ts"
import { ConnectionCounts } from "../adapters/grpc/http2/ConnectionCounts.ts"
import { defaultRequestBudgetBytes, SharedRequestBudget } from "../adapters/grpc/http2/RequestBudget.ts"
import * as RateLimit from "../adapters/grpc/rateLimit.ts"
import type { LiveFrame, ThreadRow } from "../adapters/http/live/LiveSample.ts"
import { LiveView } from "../adapters/http/live/LiveView.ts"
import { snapshotWire } from "../adapters/http/MergedMetrics.ts"
import * as Readiness from "../adapters/http/Readiness.ts"
import { ClusterState } from "../core/server/ClusterState.ts"
import * as DiscoveryServer from "../core/server/DiscoveryServer.ts"
import { RedirectPolicy } from "../core/server/RedirectPolicy.ts"
import { ClusterApi } from "../ports/ClusterApi.ts"
import { grpcStopTimeout, serverOn } from "./grpcListener.ts"
import { lazySite } from "./grpcPortSite.ts"
import * as IoThread from "./IoThread.ts"
import * as IoThreads from "./IoThreads.ts"
import { LoadSampler } from "./loadSampler.ts"
import { ThreadScaler } from "./ThreadScaler.ts"
import { remoteState } from "./ioThreadState.ts"
import { threadEntry } from "./threadEntry.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"

/** `api` with every operation counting its series in `registry` (the core's metrics stay in the main registry). */
const countingIn = (api: ClusterApi["Service"], registry: Metric.MetricRegistry): ClusterApi["Service"] => {
  const inRegistry = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, Metric.MetricRegistry, registry)
  const subscribe = api.subscribe
  return ClusterApi.of({
    hello: (request) => inRegistry(api.hello(request)),
    affiliateUpdate: (request) => inRegistry(api.affiliateUpdate(request)),
    affiliateDelete: (request) => inRegistry(api.affiliateDelete(request)),
    list: (request) => inRegistry(api.list(request)),
    watch: (request) => Stream.provideService(api.watch(request), Metric.MetricRegistry, registry),
    subscribe: subscribe === undefined ? undefined : (request, sink) => inRegistry(subscribe(request, sink))
  })
}

/** Whose connections the main thread's own server holds in the counts (the threads' are numbered from 0). */
const mainThreadHolder = -1

/**
 * Serves the port on this thread and `config.ioThreads - 1` I/O threads:
 * the address is first bound without SO_REUSEPORT and let go (so a port
 * another process holds fails the start, unless `--reuse-port` asks to share
 * it), then this thread listens, then the threads join. On the way out all
 * of them drain at once. Gives the port, what `/metrics` runs first, and how
 * many threads serve the port now.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serve = (config: ServiceConfig, addresses: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const outer = yield* Effect.scope
    const candidates = config.transport.reusePort ? addresses : [yield* IoThreads.firstFreeAddress(addresses)]
    const connections = new ConnectionCounts(config.transport.maxConnections, config.transport.maxConnectionsPerAddress)
    const requestBudget = SharedRequestBudget.make(
      config.transport.requestBudgetBytes ?? defaultRequestBudgetBytes(),
      config.ioThreads
    )
    const limiter = config.rateLimit === false ? undefined : yield* RateLimit.make(config.rateLimit)
    const ownRegistry: Metric.MetricRegistry = new Map()
    const api = countingIn(yield* ClusterApi, yield* Metric.MetricRegistry)
    const fallback = yield* lazySite(config)
    const ownScope = yield* Scope.fork(outer)
    const threadsScope = yield* Scope.fork(outer)
    yield* Effect.addFinalizer(() =>
      Effect.all([Scope.close(threadsScope, Exit.void), Scope.close(ownScope, Exit.void)], {
        concurrency: 2,
        discard: true
      })
    )
    const bound = yield* serverOn(config, {
      addresses: candidates,
      fallback,
      reusePort: true,
      rateLimiter: limiter,
      admission: connections.admission(mainThreadHolder),
      requestBudget: { budget: requestBudget, holder: 0 }
    }).pipe(
      Effect.annotateLogs({ thread: 0 }),
      Effect.provideService(ClusterApi, api),
      Effect.provideService(Metric.MetricRegistry, ownRegistry),
      Scope.provide(ownScope)
    )
    const threads = yield* IoThreads.make({
      threads: config.ioThreadsAuto ? 0 : config.ioThreads - 1,
      maxThreads: config.ioThreads - 1,
      entry: threadEntry(),
      argv: process.argv.slice(2),
      addresses: [IoThreads.withPort(bound.address, bound.port)],
      connections,
      requestBudget,
      limiter,
      stats: (yield* ClusterState).stats,
      history: (yield* ClusterState).history,
      live: Option.match(yield* Effect.serviceOption(LiveView), {
        onNone: () => undefined,
        onSome: (view) => view.frame
      }),
      ownSeries: () => snapshotWire(Context.make(Metric.MetricRegistry, ownRegistry)),
      stopTimeout: Duration.sum(grpcStopTimeout, Duration.millis(500))
    }).pipe(Scope.provide(threadsScope))
    if (config.ioThreadsAuto) {
      const server = bound.server
      const shed = server instanceof Http2Server ? (share: number) => server.shed(share) : undefined
      yield* scaleThreads(threads, config.ioThreads - 1, shed).pipe(Scope.provide(threadsScope))
    }
    const threadRows = (watches: number): Array<ThreadRow> => {
      const running = threads.threads()
      let relayed = 0
      for (const thread of running) relayed += thread.watches
      const main: ThreadRow = {
        index: 0,
        connections: connections.heldBy(mainThreadHolder),
        watches: Math.max(0, watches - relayed),
        requestBytes: requestBudget.reservedBy(0),
        unreadBytes: 0
      }
      return [
        main,
        ...running.map((thread) => ({
          index: thread.index + 1,
          connections: thread.connections,
          watches: thread.watches,
          requestBytes: thread.requestBytes,
          unreadBytes: thread.unread.bytes
        }))
      ]
    }
    return {
      port: bound.port,
      beforeScrape: threads.refreshMetrics,
      threads: () => 1 + threads.workers(),
      threadRows,
      requestMemory: () => ({ bytes: requestBudget.reserved, budget: requestBudget.capacity })
    }
  })

/**
 * `--io-threads auto`: each second, one `LoadSampler` sample goes to a
 * `ThreadScaler`, which adds a worker thread (and sends a share of this
 * thread's idle connections away, so that some come back on it) or takes
 * one away. On the real clock, as the load it measures.
 */
const scaleThreads = (
  threads: IoThreads.IoThreads["Service"],
  maxWorkers: number,
  shed: ((share: number) => number) | undefined
) =>
  Effect.gen(function* () {
    const runFork = Effect.runForkWith(Context.omit(Scope.Scope)(yield* Effect.context<never>()))
    const scope = yield* Effect.scope
    const scaler = new ThreadScaler({ maxWorkers })
    const sampler = new LoadSampler()
    let changing = false
    const sample = () => {
      const taken = sampler.sample()
      const workers = threads.workers()
      const decision = scaler.decide(taken, workers)
      if (decision === "hold" || changing) return
      changing = true
      const figures = {
        workers,
        main_utilization: Math.round(taken.mainUtilization * 100) / 100,
        process_cores: Math.round(taken.processCores * 100) / 100,
        idle_cores: Math.round(taken.idleCores * 100) / 100
      }
      const change =
        decision === "add"
          ? Effect.andThen(threads.add, () => {
              const sent = shed?.(1 / (workers + 2)) ?? 0
              return Effect.logInfo("I/O threads: one more, the main thread being the bottleneck").pipe(
                Effect.annotateLogs({ ...figures, connections_sent_away: sent })
              )
            })
          : Effect.andThen(
              threads.remove,
              Effect.logInfo("I/O threads: one less, the process being quiet").pipe(Effect.annotateLogs(figures))
            )
      // in the threads' scope: a change under way when the service stops is interrupted before the threads stop
      runFork(
        Effect.forkIn(
          change.pipe(
            Effect.catch((error) =>
              Effect.logError("I/O threads: could not add one").pipe(Effect.annotateLogs({ cause: error.message }))
            ),
            Effect.ensuring(Effect.sync(() => (changing = false)))
          ),
          scope
        )
      )
    }
    const timer = setInterval(sample, 1000)
    timer.unref()
    yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(timer)))
  })

/**
 * What an I/O thread of the command runs (`IoThread.run`): the gRPC server
 * of `config` on the thread's share of the port, over the main thread's
 * state, its rate limiter and the shared connection counts. Its log lines
 * carry `thread` (from 1; the main thread's are 0).
 *
 * @category constructors
 * @since 0.1.0
 */
export const serveThread = (config: ServiceConfig): Effect.Effect<void> =>
  IoThread.run((thread) =>
    Effect.gen(function* () {
      const remote = yield* ClusterApi
      const state = remoteState(thread, remote)
      // Hello needs no state: answered here, it does not cross to the main thread
      const api = ClusterApi.of({
        ...remote,
        hello: DiscoveryServer.hello(RedirectPolicy.staticTo(config.redirectEndpoint), {
          reportClientIp: !config.disableClientIpReporting
        })
      })
      const view = LiveView.of({ frame: (since) => Effect.orDie(thread.live(since)) as Effect.Effect<LiveFrame> })
      const fallback = yield* lazySite(config).pipe(
        Effect.provideService(ClusterState, state),
        Effect.provideService(LiveView, view),
        Effect.provide(Readiness.Readiness.layer)
      )
      return yield* serverOn(config, {
        addresses: thread.addresses,
        fallback,
        reusePort: true,
        rateLimiter: { take: RateLimit.fromReservations(thread.limiter.reserve, thread.limiter.release).take },
        admission: thread.admission,
        requestBudget: thread.requestBudget,
        callDeadlines: true
      }).pipe(Effect.provideService(ClusterApi, api))
    }).pipe(Effect.annotateLogs({ thread: thread.index + 1 }))
  )
