/**
 * The command's gRPC server: its settings turned into the server's options,
 * bound on the first address that works. The main thread and each I/O
 * thread run one.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Exit, Scope } from "effect"
import * as GrpcServer from "../adapters/grpc/GrpcServer.ts"
import type { FallbackListener } from "../adapters/grpc/http2/Http2Server.ts"
import { defaultKeepalivePolicy } from "../adapters/grpc/http2/keepalive.ts"
import type { ConnectionAdmission } from "../adapters/grpc/http2/ConnectionCounts.ts"
import type { SharedRequestBudget } from "../adapters/grpc/http2/RequestBudget.ts"
import * as Tls from "../adapters/grpc/tls.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"

/**
 * What a gRPC server of the command is given besides the settings: the
 * threads that share the port share some of it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Listening {
  readonly addresses: ReadonlyArray<string>
  readonly fallback: FallbackListener | undefined
  readonly reusePort: boolean
  readonly rateLimiter?: GrpcServer.HandlerOptions["rateLimiter"]
  readonly admission?: ConnectionAdmission | undefined
  readonly requestBudget?: { readonly budget: SharedRequestBudget; readonly holder: number } | undefined
  /** Whether calls tell the `ClusterApi` their deadline (an I/O thread's, whose calls queue at the owner). */
  readonly callDeadlines?: boolean | undefined
}

/** The http2 transport's limits of the command's settings. */
const transportLimits = (config: ServiceConfig, listening: Listening): GrpcServer.TransportLimits => {
  const transport = config.transport
  return {
    maxConcurrentStreams: transport.maxConcurrentStreams,
    maxSessionMemoryMiB: transport.maxSessionMemoryMiB,
    requestBudgetBytes: transport.requestBudgetBytes,
    sharedRequestBudget: listening.requestBudget,
    reusePort: listening.reusePort,
    connections: {
      maxConnections: transport.maxConnections,
      maxConnectionsPerAddress: transport.maxConnectionsPerAddress,
      handshakeTimeoutMillis: Duration.toMillis(transport.handshakeTimeout),
      idleTimeoutMillis: Duration.toMillis(transport.idleTimeout),
      keepalive: Duration.isZero(transport.keepaliveMinTime)
        ? false
        : { ...defaultKeepalivePolicy, minTimeMillis: Duration.toMillis(transport.keepaliveMinTime) },
      admission: listening.admission
    }
  }
}

/**
 * The command's gRPC server on the first of `listening.addresses` that
 * binds; a failed attempt's server is shut down at once.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serverOn = (config: ServiceConfig, listening: Listening) =>
  Effect.gen(function* () {
    const outer = yield* Effect.scope
    const tls = Tls.paths({ certificatePath: config.certificatePath, keyPath: config.keyPath })
    if (tls instanceof Tls.TlsError) return yield* tls
    const credentials = tls === undefined ? undefined : yield* Tls.watchedCredentials(tls.certificatePath, tls.keyPath)
    const addresses = listening.addresses
    for (let i = 0; ; i++) {
      const attempt = yield* Scope.fork(outer)
      const exit = yield* GrpcServer.make({
        address: addresses[i]!,
        credentials,
        trustXRealIp: config.trustXRealIp,
        trustXForwardedFor: config.trustFirstXForwardedFor,
        rateLimit: config.rateLimit,
        rateLimiter: listening.rateLimiter,
        callDeadlines: listening.callDeadlines,
        failureLog: config.failureLog,
        transportLimits: transportLimits(config, listening),
        fallback: listening.fallback,
        shutdownTimeout: grpcStopTimeout
      }).pipe(Scope.provide(attempt), Effect.exit)
      if (Exit.isSuccess(exit)) return { address: addresses[i]!, port: exit.value.port, server: exit.value.server }
      yield* Scope.close(attempt, exit)
      if (i === addresses.length - 1) return yield* Effect.failCause(exit.cause)
    }
  })

/**
 * How long a gRPC server drains on shutdown before its connections are cut.
 *
 * @category models
 * @since 0.1.0
 */
export const grpcStopTimeout = Duration.seconds(3)
