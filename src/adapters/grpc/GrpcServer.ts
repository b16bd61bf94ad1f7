/**
 * The gRPC server adapter: binds any `ClusterApi` from the Effect context to
 * grpc-js, either mounted on a `grpc.Server` an application already runs
 * (`register`) or on a server of its own (`layer`). Watches follow flow
 * control, so a client that stops reading fills its core buffer and is cut off
 * instead of growing memory; closing ends every open call with UNAVAILABLE so
 * clients reconnect.
 *
 * Every call goes through the original's chain (PROTOCOL.md §3.2), outermost
 * first: the request log, the per-client rate limiter, the metrics, then the
 * handler; so a call the limiter refuses is logged but not counted. The
 * standalone server adds TLS with certificate reload, the standard health
 * service and server reflection. It runs on the lean `node:http2` transport
 * of `./http2/Http2Server.ts` unless told to use grpc-js (which it does by
 * itself for caller-supplied credentials it cannot serve); the mounted form
 * is grpc-js, whose server the application runs.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Result, Schema, Scope } from "effect"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import { shuttingDownMessage, Unavailable } from "../../ports/DiscoveryError.ts"
import type { TrustOptions } from "./clientAddress.ts"
import { callClientAddress } from "./clientAddress.ts"
import type { AnyUnaryRpc, RpcInfo, UnaryRpc } from "./ClusterService.ts"
import { ClusterRpcs, ClusterService, serviceName } from "./ClusterService.ts"
import type { DecodedRequest } from "./codec.ts"
import { wantsRevisions } from "./codec.ts"
import type { FailureLogOptions } from "./failureLog.ts"
import * as FailureLog from "./failureLog.ts"
import * as Health from "./health.ts"
import type { FallbackListener, Http2ServerOptions } from "./http2/Http2Server.ts"
import { Http2Server } from "./http2/Http2Server.ts"
import type { Call } from "./interceptors.ts"
import { intercept, serverChain, withCallDeadline } from "./interceptors.ts"
import { seed } from "./metrics.ts"
import * as MetricsInterceptor from "./metricsInterceptor.ts"
import type { RateLimitOptions } from "./rateLimit.ts"
import * as RateLimit from "./rateLimit.ts"
import * as Reflection from "./reflection.ts"
import * as RequestLog from "./requestLog.ts"
import { fromCause } from "./status.ts"
import type { KeyPairSource, TlsOptions } from "./tls.ts"
import * as Tls from "./tls.ts"
import { TlsError } from "./tls.ts"
import type { WatchEndCause } from "../../ports/ChangeCause.ts"
import { WatchLeaving } from "../../ports/WatchLeaving.ts"
import type { WatchCall } from "./watchCall.ts"
import { WatchSender, watchReply } from "./watchCall.ts"

export { TlsError } from "./tls.ts"

/**
 * How the handlers treat calls.
 *
 * @category models
 * @since 0.1.0
 */
export interface HandlerOptions extends TrustOptions {
  /**
   * Largest WatchResponse a snapshot is split into, in bytes (default 1 MiB,
   * well below the 4 MiB a client accepts; a full cluster is about 4.6 MB).
   */
  readonly snapshotBudget?: number | undefined
  /**
   * Per-client rate limiting (default on: 15 calls per second, bursts of 60,
   * waits of at most 10 seconds; see `RateLimitOptions`); `false` turns it
   * off. Clients are told apart by the address of `clientAddress`, so the
   * trust settings decide whether a proxy header can pick the bucket. A call
   * whose address is unknown is not limited.
   */
  readonly rateLimit?: RateLimitOptions | false | undefined
  /**
   * The limiter whose buckets the calls take tokens from, when they are kept
   * elsewhere (the state's owner thread, shared by every I/O thread): used
   * instead of a limiter of `rateLimit`'s options, unless `rateLimit` is
   * `false`.
   */
  readonly rateLimiter?: Pick<RateLimit.RateLimiter, "take"> | undefined
  /**
   * Tell the `ClusterApi` each call's deadline (`CallDeadline`), for one that
   * queues calls and should skip those whose caller has gone (the state's
   * owner thread, reached by an I/O thread); default false, as a `ClusterApi`
   * that answers at once has no use for it.
   */
  readonly callDeadlines?: boolean | undefined
  /**
   * One log line per call through Effect's logger (default true): the method
   * path as the message and the annotations `peer.address`, `code`,
   * `duration` (seconds), `error` (when failed), `cluster_id`, `affiliate_id`
   * (AffiliateUpdate, AffiliateDelete) and `client_version` (Hello), each cut
   * at 256 characters. `code` is spelled as the original logs it (`OK`,
   * `InvalidArgument`, …); a Watch the client cancels is `OK`, a unary call it
   * cancels `Canceled`. Info level,
   * Error when the call failed (not when it was cut short by the client or by
   * shutdown); a Watch is logged when it ends. Blobs are never logged.
   * Lines of calls that did not end OK are bounded by `failureLog`.
   */
  readonly requestLog?: boolean | undefined
  /**
   * Bounds the request log's lines of calls that did not end OK (default on:
   * 1 line per second per client address with bursts of 10, and 100 per
   * second for all addresses together with bursts of 1000; see
   * `FailureLogOptions`); `false` logs every failed call. Lines of calls that
   * ended OK are always written. A line held back is counted in
   * `discovery_server_log_lines_suppressed_total` (unless `metrics` is
   * false), and once a minute, when
   * any were, one Warn line `request log lines suppressed` tells how many
   * (`suppressed`), from how many client addresses (`addresses`) and which
   * address had the most (`peer.address`).
   */
  readonly failureLog?: FailureLogOptions | false | undefined
  /**
   * The original's `grpc_server_*` metrics and
   * `discovery_server_hello_requests_total` in the context's metric registry
   * (default true), created at zero when mounted, and with the failure log
   * `discovery_server_log_lines_suppressed_total`.
   */
  readonly metrics?: boolean | undefined
}

/**
 * Which server carries the standalone layer's calls: `"http2"`, a gRPC
 * server written directly on `node:http2` (less CPU per call), or
 * `"grpc-js"`'s `grpc.Server`.
 *
 * @category models
 * @since 0.1.0
 */
export type Transport = "http2" | "grpc-js"

/**
 * What services are registered on: grpc-js's `grpc.Server`, or the http2
 * transport's server, which offers the same two methods.
 *
 * @category models
 * @since 0.1.0
 */
export type ServiceHost = Pick<grpc.Server, "addService" | "removeService">

/**
 * How the standalone server listens and stops.
 *
 * @category models
 * @since 0.1.0
 */
export interface ServerOptions extends HandlerOptions {
  /** `host:port` to listen on (default `0.0.0.0:3000`; port 0 picks a free one). */
  readonly address?: string | undefined
  /**
   * Transport security as grpc-js credentials (default plaintext h2c). Not
   * together with `tls`. The http2 transport serves insecure credentials
   * and those of `Tls.watchedCredentials`; any other secure credentials make
   * the default transport grpc-js.
   */
  readonly credentials?: grpc.ServerCredentials | undefined
  /**
   * TLS from a PEM certificate file and key file, reloaded when they change
   * (default plaintext). Both paths or neither; not together with
   * `credentials`.
   */
  readonly tls?: TlsOptions | undefined
  /** Serve `grpc.health.v1.Health` (default true): SERVING until shutdown begins, then NOT_SERVING. */
  readonly health?: boolean | undefined
  /** Serve gRPC server reflection, v1 and v1alpha (default true), so grpcurl needs no proto files. */
  readonly reflection?: boolean | undefined
  /** How long a graceful stop may take before open connections are cut (default 5 seconds). */
  readonly shutdownTimeout?: Duration.Input | undefined
  /**
   * Extra grpc-js server options, applied over `serverChannelOptions`. The
   * http2 transport reads `grpc.max_receive_message_length`,
   * `grpc.max_send_message_length` and `grpc.max_concurrent_streams` of them.
   */
  readonly channelOptions?: grpc.ServerOptions | undefined
  /**
   * The server that carries the calls (default `"http2"`, or `"grpc-js"` when
   * `credentials` are secure credentials the http2 transport cannot serve).
   */
  readonly transport?: Transport | undefined
  /**
   * What one client may make the http2 transport hold: streams per
   * connection, session memory, the request budget, connections and their
   * deadlines, the ping policy (defaults in `Http2ServerOptions`). The
   * grpc-js transport has none of these.
   */
  readonly transportLimits?: TransportLimits | undefined
  /**
   * Answers the requests on the port that are not gRPC (HTTP/1.1, and HTTP/2
   * without a gRPC content type), as the original's port serves its landing
   * page; http2 transport only. Without it they get HTTP 415.
   */
  readonly fallback?: FallbackListener | undefined
}

/**
 * The limits of the http2 transport that a standalone server passes on.
 *
 * @category models
 * @since 0.1.0
 */
export type TransportLimits = Pick<
  Http2ServerOptions,
  | "maxConcurrentStreams"
  | "maxSessionMemoryMiB"
  | "requestBudgetBytes"
  | "sharedRequestBudget"
  | "connections"
  | "reusePort"
>

/**
 * The default snapshot budget: 1 MiB.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultSnapshotBudget = 1024 * 1024

/**
 * The grpc-js options of the standalone server: Go's defaults of 4 MiB per
 * received message and no limit on sent ones, and no channelz bookkeeping
 * (nothing serves it; it costs a closure set per call and a clock read per
 * message). grpc-js 1.14 has no option that enforces a minimum client ping
 * interval, so every keepalive rate a client uses (the Go client's is at
 * least 10 s) is tolerated.
 *
 * @category models
 * @since 0.1.0
 */
export const serverChannelOptions: grpc.ServerOptions = {
  "grpc.max_receive_message_length": 4 * 1024 * 1024,
  "grpc.max_send_message_length": -1,
  "grpc.enable_channelz": 0
}

/**
 * The standalone server could not listen on its address.
 *
 * @category errors
 * @since 0.1.0
 */
export class BindError extends Schema.TaggedError<BindError>()("BindError", {
  address: Schema.String,
  message: Schema.String
}) {}

/**
 * A running standalone server and the port it actually listens on.
 *
 * @category services
 * @since 0.1.0
 */
export class GrpcServer extends Context.Service<
  GrpcServer,
  {
    /** Where more services can be added. */
    readonly server: ServiceHost
    readonly port: number
    readonly transport: Transport
  }
>()("talos-discovery/grpc/GrpcServer") {}

interface UnaryCall<Request> extends Call {
  readonly request: Request
}

const unaryReply =
  <A, M>(callback: grpc.sendUnaryData<M>, encode: (value: A) => M) =>
  (exit: Exit.Exit<A, DiscoveryError>): void => {
    if (Exit.isSuccess(exit)) callback(null, encode(exit.value))
    else callback(fromCause(exit.cause))
  }

/**
 * Mounts the Cluster service on a grpc-js server the caller runs (or any
 * `ServiceHost`), serving the `ClusterApi` of the current context. Handlers
 * run with this context (its logger, clock and metric registry). Every call
 * goes through the chain of `interceptors.ts`: the request log, the rate
 * limiter, the metrics, then its RPC's handler (`ClusterService.ts`). When the
 * scope closes, every open call ends with UNAVAILABLE (`server is shutting
 * down`) and the service is removed; the server itself is left running. Dies
 * with a RangeError for invalid rate limit or failure log settings. The
 * health and reflection services are not added here (the application may
 * have its own); `Health.register` and `Reflection.register` add them to any
 * server.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = (
  server: ServiceHost,
  options: HandlerOptions = {}
): Effect.Effect<void, never, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const api = yield* ClusterApi
    const context = Context.omit(Scope.Scope)(yield* Effect.context<never>())
    const runFork = Effect.runForkWith(context)
    const clock = yield* Clock.Clock
    const trust: TrustOptions = { trustXRealIp: options.trustXRealIp, trustXForwardedFor: options.trustXForwardedFor }
    const metered = options.metrics !== false
    const logged = options.requestLog !== false
    const rpcs = Object.values(ClusterRpcs)
    if (metered)
      seed(
        context,
        rpcs.map((rpc) => rpc.metrics)
      )
    const failureLog =
      logged && options.failureLog !== false
        ? yield* FailureLog.make(metered ? options.failureLog : { ...options.failureLog, metrics: false })
        : undefined
    const chain = serverChain({
      requestLog: logged ? RequestLog.interceptor(clock, failureLog) : undefined,
      rateLimit:
        options.rateLimit === false
          ? undefined
          : RateLimit.interceptor(options.rateLimiter ?? (yield* RateLimit.make(options.rateLimit))),
      metrics: metered ? MetricsInterceptor.interceptor(context, clock) : undefined
    })
    const watchSent = ClusterRpcs.Watch.metrics.sent
    const watches = new WatchSender(options.snapshotBudget ?? defaultSnapshotBudget, (messages) => {
      if (metered && messages > 0) watchSent.updateUnsafe(messages, context)
    })
    const fibers = new Set<Fiber.Fiber<unknown, DiscoveryError>>()
    const withDeadline: typeof withCallDeadline =
      options.callDeadlines === true ? withCallDeadline : (_call, effect) => effect
    let open = true
    /** Why a watch this server lets go of is ending: its client went away, or the server is stopping. */
    const leaving = (): WatchEndCause => (open ? "client_gone" : "shutdown")

    /** Runs a call's effect through the chain, and replies once it ends. */
    const start = <Proto, A>(
      rpc: RpcInfo<Proto>,
      call: Call,
      decoded: DecodedRequest<Proto>,
      handler: (message: Proto, address: Uint8Array | undefined) => Effect.Effect<A, DiscoveryError>,
      reply: (exit: Exit.Exit<A, DiscoveryError>) => void
    ): void => {
      if (!open) {
        reply(Exit.fail(new Unavailable({ message: shuttingDownMessage })))
        return
      }
      const address = callClientAddress(call, trust)
      const handled = Result.isSuccess(decoded) ? handler(decoded.success, address) : Effect.fail(decoded.failure)
      const fiber = runFork(intercept(chain, { rpc, call, decoded, address }, handled))
      // Most calls finish synchronously inside runFork: reply at once, with no
      // bookkeeping for a fiber that can no longer be interrupted.
      const done = fiber.pollUnsafe()
      if (done !== undefined) {
        if (!call.cancelled) reply(done)
        return
      }
      fibers.add(fiber)
      fiber.addObserver((exit) => {
        fibers.delete(fiber)
        if (!call.cancelled) reply(exit)
      })
      call.on("cancelled", () => fiber.interruptUnsafe())
    }

    const unary =
      <Proto, Request, Result, Reply>(rpc: UnaryRpc<Proto, Request, Result, Reply>) =>
      (call: UnaryCall<DecodedRequest<Proto>>, callback: grpc.sendUnaryData<Reply>) =>
        start(
          rpc,
          call,
          call.request,
          (message, address) => withDeadline(call, rpc.invoke(api, rpc.toCore(message, address))),
          unaryReply(callback, rpc.fromCore)
        )

    const watch = (call: WatchCall) =>
      start(
        ClusterRpcs.Watch,
        call,
        call.request,
        (message) =>
          withDeadline(
            call,
            Effect.provideService(
              watches.serve(api, call, ClusterRpcs.Watch.toCore(message), wantsRevisions(message)),
              WatchLeaving,
              leaving
            )
          ),
        watchReply(call)
      )

    const handlers = Object.fromEntries(
      Object.entries(ClusterRpcs).map(([name, rpc]) => [name, rpc.streaming ? watch : unary(rpc as AnyUnaryRpc)])
    )

    yield* Effect.sync(() => server.addService(ClusterService, handlers))
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        open = false
        return Fiber.interruptAll([...fibers])
      }).pipe(Effect.andThen(Effect.sync(() => server.removeService(ClusterService))))
    )
  })

/** How a server stops: grpc-js's two methods, which the http2 transport's server offers too. */
interface Stoppable {
  tryShutdown(callback: (error?: Error) => void): void
  forceShutdown(): void
}

/** A standalone server before it listens. */
interface Host {
  readonly server: ServiceHost & Stoppable
  readonly bind: (address: string) => Effect.Effect<number, BindError>
}

/** The transport a standalone server runs on, with what it needs to secure its connections. */
type Listener =
  | { readonly transport: "grpc-js"; readonly credentials: grpc.ServerCredentials }
  | { readonly transport: "http2"; readonly keyPair: KeyPairSource | undefined }

const bound =
  (address: string, resume: (effect: Effect.Effect<number, BindError>) => void) =>
  (error: Error | null, port: number) =>
    resume(error ? Effect.fail(new BindError({ address, message: error.message })) : Effect.succeed(port))

const grpcJsHost = (credentials: grpc.ServerCredentials, options: grpc.ServerOptions): Host => {
  const server = new grpc.Server(options)
  return {
    server,
    bind: (address) =>
      Effect.callback<number, BindError>((resume) => server.bindAsync(address, credentials, bound(address, resume)))
  }
}

const http2Host = (
  keyPair: KeyPairSource | undefined,
  options: grpc.ServerOptions,
  limits: TransportLimits,
  fallback: FallbackListener | undefined
): Host => {
  const server = new Http2Server({
    ...limits,
    maxReceiveMessageLength: options["grpc.max_receive_message_length"],
    maxSendMessageLength: options["grpc.max_send_message_length"],
    maxConcurrentStreams: limits.maxConcurrentStreams ?? options["grpc.max_concurrent_streams"],
    keyPair,
    fallback
  })
  return {
    server,
    bind: (address) => Effect.callback<number, BindError>((resume) => server.bindAsync(address, bound(address, resume)))
  }
}

const shutdown = (server: Stoppable, timeoutMillis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => {
      server.forceShutdown()
      resume(Effect.void)
    }, timeoutMillis)
    server.tryShutdown(() => {
      clearTimeout(timer)
      resume(Effect.void)
    })
  })

/**
 * The transport and its security: TLS paths are watched, credentials from
 * `Tls.watchedCredentials` give their key pair to the http2 transport, and
 * other secure credentials need grpc-js.
 */
const listenerOf = (options: ServerOptions): Effect.Effect<Listener, TlsError, Scope.Scope> => {
  const paths = Tls.paths(options.tls ?? {})
  if (paths instanceof TlsError) return Effect.fail(paths)
  const credentials = options.credentials
  if (paths !== undefined && credentials !== undefined) {
    return Effect.fail(new TlsError({ message: "give either credentials or TLS certificate and key paths, not both" }))
  }
  const secure = credentials?._isSecure() === true
  const source = credentials !== undefined && secure ? Tls.keyPairSourceOf(credentials) : undefined
  const http2Capable = !secure || source !== undefined
  const transport = options.transport ?? (http2Capable ? "http2" : "grpc-js")
  if (transport === "grpc-js") {
    if (paths === undefined) {
      return Effect.succeed({ transport, credentials: credentials ?? grpc.ServerCredentials.createInsecure() })
    }
    return Effect.map(Tls.watchedCredentials(paths.certificatePath, paths.keyPath), (watched) => ({
      transport,
      credentials: watched
    }))
  }
  if (!http2Capable) {
    return Effect.fail(
      new TlsError({
        message:
          "the http2 transport serves TLS from certificate and key paths or Tls.watchedCredentials only; use the grpc-js transport for other credentials"
      })
    )
  }
  if (paths === undefined) return Effect.succeed({ transport, keyPair: source })
  return Effect.map(Tls.watchedKeyPair(paths.certificatePath, paths.keyPath), (keyPair) => ({ transport, keyPair }))
}

/**
 * Starts a standalone server for the `ClusterApi` of the context: creates a
 * server on `options.transport`, mounts the service with `register` (plus
 * the health and reflection services unless turned off) and listens on
 * `options.address`, over TLS when `options.tls` names a certificate and key.
 * When the scope closes, health turns NOT_SERVING, open calls end with
 * UNAVAILABLE, then the server stops gracefully (GOAWAY; calls still running
 * finish), or by force after `shutdownTimeout`. The shutdown wait uses real
 * time, not Effect's clock. Fails with TlsError when the TLS settings are
 * incomplete, the key pair cannot be loaded, or the http2 transport is asked
 * to serve credentials it cannot.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: ServerOptions = {}
): Effect.Effect<GrpcServer["Service"], BindError | TlsError, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const address = options.address ?? "0.0.0.0:3000"
    const timeoutMillis = Duration.toMillis(options.shutdownTimeout ?? "5 seconds")
    const listener = yield* listenerOf(options)
    const channelOptions = { ...serverChannelOptions, ...options.channelOptions }
    const host = yield* Effect.acquireRelease(
      Effect.sync(() =>
        listener.transport === "grpc-js"
          ? grpcJsHost(listener.credentials, channelOptions)
          : http2Host(listener.keyPair, channelOptions, options.transportLimits ?? {}, options.fallback)
      ),
      (host) => shutdown(host.server, timeoutMillis)
    )
    const server = host.server
    yield* register(server, options)
    const health = options.health !== false
    if (health) yield* Health.register(server, [serviceName])
    if (options.reflection !== false) {
      yield* Reflection.register(server, health ? yield* Health.fileDescriptorProtos : [])
    }
    const port = yield* host.bind(address)
    return GrpcServer.of({ server, port, transport: listener.transport })
  })

/**
 * The standalone server as a scoped layer over the `ClusterApi` it is given;
 * `GrpcServer` tells the bound port (useful with port 0).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: ServerOptions = {}): Layer.Layer<GrpcServer, BindError | TlsError, ClusterApi> =>
  Layer.effect(GrpcServer, make(options))
