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
import { create } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import type { Metric } from "effect"
import { Cause, Clock, Context, Duration, Effect, Exit, Fiber, Layer, Result, Schema, Scope, Stream } from "effect"
import type {
  AffiliateDeleteRequest as ProtoAffiliateDeleteRequest,
  AffiliateDeleteResponse as ProtoAffiliateDeleteResponse,
  AffiliateUpdateRequest as ProtoAffiliateUpdateRequest,
  AffiliateUpdateResponse as ProtoAffiliateUpdateResponse,
  HelloRequest as ProtoHelloRequest,
  ListRequest as ProtoListRequest,
  WatchRequest as ProtoWatchRequest
} from "../../gen/discovery/server/cluster_pb.ts"
import { AffiliateDeleteResponseSchema, AffiliateUpdateResponseSchema } from "../../gen/discovery/server/cluster_pb.ts"
import { Limits } from "../../core/server/limits.ts"
import type { ClusterRequest, WatchDelta, WatchEvent } from "../../ports/ClusterApi.ts"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import type { DiscoveryError, SubscriptionLost } from "../../ports/DiscoveryError.ts"
import { shuttingDownMessage, Unavailable } from "../../ports/DiscoveryError.ts"
import type { TrustOptions } from "./clientAddress.ts"
import { callClientAddress, formatIp, limiterKey } from "./clientAddress.ts"
import { ClusterService, serviceName } from "./ClusterService.ts"
import type { DecodedRequest } from "./codec.ts"
import {
  affiliateDeleteRequestFromProto,
  affiliateUpdateRequestFromProto,
  clusterRequestFromProto,
  encodeDelta,
  encodeSnapshot,
  helloRequestFromProto,
  helloResponseToProto,
  listResponseToProto
} from "./codec.ts"
import type { FailureLogOptions } from "./failureLog.ts"
import * as FailureLog from "./failureLog.ts"
import * as Health from "./health.ts"
import type { FallbackListener, Http2ServerOptions } from "./http2/Http2Server.ts"
import { Http2Server } from "./http2/Http2Server.ts"
import type { MethodMetrics } from "./metrics.ts"
import { clusterMetrics, goCodeNames, helloRequests, parseVersion, seed } from "./metrics.ts"
import type { RateLimitOptions } from "./rateLimit.ts"
import * as RateLimit from "./rateLimit.ts"
import * as Reflection from "./reflection.ts"
import type { GrpcStatus } from "./status.ts"
import { fromCause } from "./status.ts"
import type { KeyPairSource, TlsOptions } from "./tls.ts"
import * as Tls from "./tls.ts"
import { TlsError } from "./tls.ts"
import type { WritableCall } from "./watchSink.ts"
import { CallSink, FanOut } from "./watchSink.ts"

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
  "maxConcurrentStreams" | "maxSessionMemoryMiB" | "requestBudgetBytes" | "connections"
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

/** What the handlers use of a call, on either transport. */
interface Call {
  readonly cancelled: boolean
  readonly metadata: grpc.Metadata
  getPeer(): string
  getDeadline(): grpc.Deadline
  on(event: "cancelled", listener: () => void): unknown
}

interface UnaryCall<Request> extends Call {
  readonly request: Request
}

interface WatchCall extends Call, WritableCall {
  readonly request: DecodedRequest<ProtoWatchRequest>
  end(): unknown
  emit(event: "error", status: GrpcStatus): unknown
  on(event: "cancelled" | "drain" | "close", listener: () => void): unknown
  off(event: "drain" | "close", listener: () => void): unknown
}

const awaitDrain = (call: WatchCall): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (call.destroyed) {
      resume(Effect.interrupt)
      return
    }
    const cleanup = () => {
      call.off("drain", onDrain)
      call.off("close", onClose)
    }
    const onDrain = () => {
      cleanup()
      resume(Effect.void)
    }
    const onClose = () => {
      cleanup()
      resume(Effect.interrupt)
    }
    call.on("drain", onDrain)
    call.on("close", onClose)
    return Effect.sync(cleanup)
  })

const unaryReply =
  <A, M>(callback: grpc.sendUnaryData<M>, encode: (value: A) => M) =>
  (exit: Exit.Exit<A, DiscoveryError>): void => {
    if (Exit.isSuccess(exit)) callback(null, encode(exit.value))
    else callback(fromCause(exit.cause))
  }

const watchReply =
  (call: WatchCall) =>
  (exit: Exit.Exit<void, DiscoveryError>): void => {
    if (call.destroyed || call.writableEnded) return
    if (Exit.isSuccess(exit)) call.end()
    else call.emit("error", fromCause(exit.cause))
  }

const updateResponse: ProtoAffiliateUpdateResponse = create(AffiliateUpdateResponseSchema)
const deleteResponse: ProtoAffiliateDeleteResponse = create(AffiliateDeleteResponseSchema)

const ok: GrpcStatus = { code: grpc.status.OK, details: "" }
const cancelled: GrpcStatus = { code: grpc.status.CANCELLED, details: "call cancelled by the client" }

/**
 * The status a call ended with as the log and the metrics report it: a
 * client's cancel is OK for a Watch (that is how a watch ends) and CANCELLED
 * for a unary call; an interrupt without one is the server shutting down.
 */
const statusOf = (exit: Exit.Exit<unknown, DiscoveryError>, call: Call, streaming: boolean): GrpcStatus => {
  if (Exit.isSuccess(exit)) return ok
  if (call.cancelled && Cause.hasInterruptsOnly(exit.cause)) return streaming ? ok : cancelled
  return fromCause(exit.cause)
}

/** Milliseconds left until the call's deadline (real time), `Infinity` without one. */
const timeLeft = (call: Call): number => {
  const deadline = call.getDeadline()
  const at = deadline instanceof Date ? deadline.getTime() : deadline
  return at === Number.POSITIVE_INFINITY ? at : at - Date.now()
}

/** What the chain needs to know about one method. */
interface Method<Request> {
  readonly path: string
  readonly streaming: boolean
  readonly metrics: MethodMetrics
  /** The request's fields for the log line: IDs and the client version, never blobs. */
  readonly fields: (request: Request) => Record<string, string>
}

/** A request field as logged: at most 256 characters, so a huge invalid ID cannot flood the log. */
const clip = (value: string): string =>
  value.length <= 256 ? value : `${value.slice(0, 256)}…(${value.length} characters)`

const clusterFields = (request: { readonly clusterId: string }) => ({ cluster_id: clip(request.clusterId) })
const affiliateFields = (request: { readonly clusterId: string; readonly affiliateId: string }) => ({
  cluster_id: clip(request.clusterId),
  affiliate_id: clip(request.affiliateId)
})

const methods = {
  Hello: {
    path: ClusterService.Hello.path,
    streaming: false,
    metrics: clusterMetrics.Hello,
    fields: (request: ProtoHelloRequest) => ({
      cluster_id: clip(request.clusterId),
      client_version: clip(request.clientVersion)
    })
  } satisfies Method<ProtoHelloRequest>,
  AffiliateUpdate: {
    path: ClusterService.AffiliateUpdate.path,
    streaming: false,
    metrics: clusterMetrics.AffiliateUpdate,
    fields: affiliateFields
  } satisfies Method<ProtoAffiliateUpdateRequest>,
  AffiliateDelete: {
    path: ClusterService.AffiliateDelete.path,
    streaming: false,
    metrics: clusterMetrics.AffiliateDelete,
    fields: affiliateFields
  } satisfies Method<ProtoAffiliateDeleteRequest>,
  List: {
    path: ClusterService.List.path,
    streaming: false,
    metrics: clusterMetrics.List,
    fields: clusterFields
  } satisfies Method<ProtoListRequest>,
  Watch: {
    path: ClusterService.Watch.path,
    streaming: true,
    metrics: clusterMetrics.Watch,
    fields: clusterFields
  } satisfies Method<ProtoWatchRequest>
}

/**
 * Mounts the Cluster service on a grpc-js server the caller runs (or any
 * `ServiceHost`), serving the `ClusterApi` of the current context. Handlers
 * run with this context (its logger, clock and metric registry). When the
 * scope closes, every open call ends with UNAVAILABLE (`server is shutting
 * down`) and the service is removed; the server itself is left running. Dies with a RangeError for
 * invalid rate limit or failure log settings. The health and reflection services are not
 * added here (the application may have its own); `Health.register` and
 * `Reflection.register` add them to any server.
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
    const budget = options.snapshotBudget ?? defaultSnapshotBudget
    const trust: TrustOptions = { trustXRealIp: options.trustXRealIp, trustXForwardedFor: options.trustXForwardedFor }
    const limiter = options.rateLimit === false ? undefined : yield* RateLimit.make(options.rateLimit)
    const metered = options.metrics !== false
    const logged = options.requestLog !== false
    const failureLog =
      logged && options.failureLog !== false
        ? yield* FailureLog.make(metered ? options.failureLog : { ...options.failureLog, metrics: false })
        : undefined
    if (metered) seed(context)
    const fibers = new Set<Fiber.Fiber<unknown, DiscoveryError>>()
    const deltas = new WeakMap<WatchEvent, Uint8Array>()
    let open = true

    const count = (metric: Metric.Metric<number, unknown>, value: number) => metric.updateUnsafe(value, context)
    const secondsSince = (startedAt: bigint): number =>
      Number(clock.monotonicTimeNanosUnsafe() - startedAt) / 1_000_000_000

    /** The start of the metrics layer of the chain (go-grpc-middleware's prometheus interceptor). */
    const countStart = (metrics: MethodMetrics): bigint => {
      count(metrics.started, 1)
      count(metrics.received, 1)
      return clock.monotonicTimeNanosUnsafe()
    }

    /** The end of the metrics layer: what the call sent, its code and how long the handler took. */
    const countEnd = (method: Method<never>, status: GrpcStatus, startedAt: bigint): void => {
      const metrics = method.metrics
      if (!method.streaming) count(metrics.sent, 1)
      count(metrics.handled[status.code] ?? metrics.handled[grpc.status.UNKNOWN]!, 1)
      count(metrics.handlingSeconds, secondsSince(startedAt))
    }

    /** The request log line of a call that ended with `exit`, unless the failure log holds it back. */
    const logLine = <Request>(
      method: Method<Request>,
      decoded: DecodedRequest<Request>,
      address: Uint8Array | undefined,
      exit: Exit.Exit<unknown, DiscoveryError>,
      status: GrpcStatus,
      startedAt: bigint
    ): Effect.Effect<void> => {
      if (failureLog !== undefined && !failureLog.admitUnsafe(status.code, address)) return Effect.void
      const annotations: Record<string, unknown> = {
        "peer.address": formatIp(address),
        code: goCodeNames[status.code] ?? String(status.code),
        duration: secondsSince(startedAt)
      }
      if (Result.isSuccess(decoded)) Object.assign(annotations, method.fields(decoded.success))
      if (status.code !== grpc.status.OK) annotations.error = status.details
      const failed = Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
      return Effect.annotateLogs(Effect.logWithLevel(failed ? "Error" : "Info")(method.path), annotations)
    }

    /**
     * Runs a call through the chain, outermost first: the request log, the
     * rate limiter, the metrics, the handler. A call the limiter refuses is
     * logged but not counted. Log and metrics share one exit hook, and without
     * a limiter the metrics start synchronously, so a call costs few Effect
     * steps beyond its handler's.
     */
    const start = <Request, A>(
      method: Method<Request>,
      call: Call,
      decoded: DecodedRequest<Request>,
      handler: (decoded: DecodedRequest<Request>, address: Uint8Array | undefined) => Effect.Effect<A, DiscoveryError>,
      reply: (exit: Exit.Exit<A, DiscoveryError>) => void
    ): void => {
      if (!open) {
        reply(Exit.fail(new Unavailable({ message: shuttingDownMessage })))
        return
      }
      const address = callClientAddress(call, trust)
      const loggedAt = logged ? clock.monotonicTimeNanosUnsafe() : 0n
      let countedAt: bigint | undefined
      let effect = handler(decoded, address)
      if (limiter !== undefined && address !== undefined) {
        const take = limiter.take(limiterKey(address), timeLeft(call))
        const handled = effect
        effect = metered
          ? Effect.andThen(
              take,
              Effect.suspend(() => {
                countedAt = countStart(method.metrics)
                return handled
              })
            )
          : Effect.andThen(take, handled)
      } else if (metered) {
        countedAt = countStart(method.metrics)
      }
      if (metered || logged) {
        effect = Effect.onExit(effect, (exit) => {
          const status = statusOf(exit, call, method.streaming)
          if (countedAt !== undefined) countEnd(method, status, countedAt)
          return logged ? logLine(method, decoded, address, exit, status, loggedAt) : Effect.void
        })
      }
      const fiber = runFork(effect)
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

    let lastDelta: WatchDelta | undefined
    let lastBytes: Uint8Array = new Uint8Array(0)
    /** A delta's message, encoded once for all watchers (they get it one after another). */
    const deltaBytes = (delta: WatchDelta): Uint8Array => {
      if (delta === lastDelta) return lastBytes
      let bytes = deltas.get(delta)
      if (bytes === undefined) {
        bytes = encodeDelta(delta)
        deltas.set(delta, bytes)
      }
      lastDelta = delta
      lastBytes = bytes
      return bytes
    }

    const messagesOf = (event: WatchEvent): ReadonlyArray<Uint8Array> =>
      event._tag === "Snapshot" ? encodeSnapshot(event.affiliates, budget) : [deltaBytes(event)]

    const watchSent = methods.Watch.metrics.sent
    const countSent = (messages: number): void => {
      if (metered && messages > 0) count(watchSent, messages)
    }

    /** A Watch over a `ClusterApi` that only has the Stream form: one fiber pulls and writes. */
    const send = (call: WatchCall, event: WatchEvent): Effect.Effect<void> =>
      Effect.suspend(() => {
        let ready = true
        const messages = messagesOf(event)
        for (const bytes of messages) ready = call.write(bytes)
        countSent(messages.length)
        return ready ? Effect.void : awaitDrain(call)
      })

    const fanOut = new FanOut()
    const subscribe = api.subscribe

    /** A Watch over a `ClusterApi` with the push form: deltas are written by the fan-out, no fiber per delta. */
    const pushed = (
      call: WatchCall,
      request: ClusterRequest,
      subscribe: NonNullable<typeof api.subscribe>
    ): Effect.Effect<void, DiscoveryError> =>
      Effect.scoped(
        Effect.suspend(() => {
          const sink = new CallSink(call, fanOut, deltaBytes, countSent, Limits.watchBuffer)
          return Effect.andThen(
            Effect.tap(subscribe(request, sink), (snapshot) =>
              Effect.sync(() => sink.start(encodeSnapshot(snapshot.affiliates, budget)))
            ),
            Effect.callback<void, SubscriptionLost | Unavailable>((resume) => {
              sink.whenEnded((error) => resume(Effect.fail(error)))
              // A call that ends on its own (a message it could not send) takes its watch with it.
              const closed = () => resume(Effect.void)
              call.on("close", closed)
              return Effect.sync(() => {
                call.off("close", closed)
                sink.close()
              })
            })
          )
        })
      )

    const countHello = (decoded: DecodedRequest<ProtoHelloRequest>) => {
      if (metered) {
        const version = Result.isSuccess(decoded) ? decoded.success.clientVersion : ""
        count(helloRequests(parseVersion(version)), 1)
      }
    }

    /** The request's message, or its decoding failure, passed on to `run`. */
    const onMessage =
      <Request, A>(run: (message: Request, address: Uint8Array | undefined) => Effect.Effect<A, DiscoveryError>) =>
      (decoded: DecodedRequest<Request>, address: Uint8Array | undefined): Effect.Effect<A, DiscoveryError> =>
        Effect.flatMap(Effect.fromResult(decoded), (message) => run(message, address))

    /** A unary handler: the chain of `start`, then the reply encoded by `encode`. */
    const unary =
      <Request, A, Response>(
        method: Method<Request>,
        handler: (
          decoded: DecodedRequest<Request>,
          address: Uint8Array | undefined
        ) => Effect.Effect<A, DiscoveryError>,
        encode: (value: A) => Response
      ) =>
      (call: UnaryCall<DecodedRequest<Request>>, callback: grpc.sendUnaryData<Response>) =>
        start(method, call, call.request, handler, unaryReply(callback, encode))

    const hello = onMessage((message: ProtoHelloRequest, address) => api.hello(helloRequestFromProto(message, address)))

    const handlers = {
      Hello: unary(
        methods.Hello,
        (decoded, address) =>
          Effect.suspend(() => {
            // Counted before validation, as the original does (§2.4).
            countHello(decoded)
            return hello(decoded, address)
          }),
        helloResponseToProto
      ),
      AffiliateUpdate: unary(
        methods.AffiliateUpdate,
        onMessage((message: ProtoAffiliateUpdateRequest) =>
          api.affiliateUpdate(affiliateUpdateRequestFromProto(message))
        ),
        (): ProtoAffiliateUpdateResponse => updateResponse
      ),
      AffiliateDelete: unary(
        methods.AffiliateDelete,
        onMessage((message: ProtoAffiliateDeleteRequest) =>
          api.affiliateDelete(affiliateDeleteRequestFromProto(message))
        ),
        (): ProtoAffiliateDeleteResponse => deleteResponse
      ),
      List: unary(
        methods.List,
        onMessage((message: ProtoListRequest) => api.list(clusterRequestFromProto(message))),
        listResponseToProto
      ),
      Watch: (call: WatchCall) =>
        start(
          methods.Watch,
          call,
          call.request,
          onMessage((message: ProtoWatchRequest) =>
            subscribe === undefined
              ? Stream.runForEach(api.watch(clusterRequestFromProto(message)), (event) => send(call, event))
              : pushed(call, clusterRequestFromProto(message), subscribe)
          ),
          watchReply(call)
        )
    }

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
