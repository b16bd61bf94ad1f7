/**
 * The gRPC client adapter: `ClusterApi` implemented over a grpc-js channel to
 * any discovery service speaking the Talos protocol (ours or the original).
 * Failures come back as the port's tagged errors; a watch is a stream that
 * reads only as fast as it is consumed, so a slow consumer pushes back on the
 * server through HTTP/2 flow control.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Cause, Duration, Effect, Layer, Stream } from "effect"
import type { WatchResponse as ProtoWatchResponse } from "../../gen/discovery/server/cluster_pb.ts"
import type { WatchEvent, WatchRequest } from "../../ports/ClusterApi.ts"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import type { UnaryRpc } from "./ClusterService.ts"
import { ClusterRpcs, ClusterService, serviceName } from "./ClusterService.ts"
import { WatchResponseReader } from "./codec.ts"
import { fromServiceError } from "./status.ts"

/**
 * Where and how the client connects.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClientOptions {
  /** The service's `host:port`, e.g. `discovery.talos.dev:443`. */
  readonly endpoint: string
  /**
   * TLS with system roots (true, the default), plaintext h2c (false), or
   * explicit credentials, e.g. `grpc.credentials.createSsl(caPem)` to trust a
   * private CA or a self-signed server certificate.
   */
  readonly tls?: boolean | grpc.ChannelCredentials | undefined
  /** Interval of keepalive pings while calls are open (default 30 seconds; servers may refuse under 10 s). */
  readonly keepaliveTime?: Duration.Input | undefined
  /** Deadline of each unary call (default 10 seconds); watches have none. */
  readonly callTimeout?: Duration.Input | undefined
  /** Extra grpc-js channel options, applied over the defaults. */
  readonly channelOptions?: grpc.ChannelOptions | undefined
}

const ClusterClient = grpc.makeGenericClientConstructor(ClusterService, serviceName)

const credentialsOf = (tls: ClientOptions["tls"]): grpc.ChannelCredentials =>
  tls === false
    ? grpc.credentials.createInsecure()
    : tls === true || tls === undefined
      ? grpc.credentials.createSsl()
      : tls

type WatchCall = grpc.ClientReadableStream<ProtoWatchResponse>

const reader = (call: WatchCall): Effect.Effect<ProtoWatchResponse, DiscoveryError | Cause.Done> => {
  const buffered: Array<ProtoWatchResponse> = []
  let failure: DiscoveryError | undefined
  let ended = false
  let waiter: (() => void) | undefined
  const wake = () => {
    const resume = waiter
    waiter = undefined
    resume?.()
  }
  call.on("data", (message: ProtoWatchResponse) => {
    buffered.push(message)
    call.pause()
    wake()
  })
  call.on("error", (error) => {
    failure ??= fromServiceError(error)
  })
  const end = () => {
    ended = true
    wake()
  }
  call.on("end", end)
  call.on("close", end)
  return Effect.callback<ProtoWatchResponse, DiscoveryError | Cause.Done>((resume) => {
    const settle = (): boolean => {
      const message = buffered.shift()
      if (message !== undefined) resume(Effect.succeed(message))
      else if (ended) resume(failure === undefined ? Cause.done() : Effect.fail(failure))
      else return false
      return true
    }
    if (settle()) return
    waiter = settle
    call.resume()
    return Effect.sync(() => {
      waiter = undefined
    })
  })
}

/**
 * Builds a `ClusterApi` over a new channel to `options.endpoint`; the channel
 * closes with the scope. The channel connects lazily, on the first call.
 * Deadlines use real time, not Effect's clock.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: ClientOptions): Effect.Effect<ClusterApi["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMillis = Duration.toMillis(options.callTimeout ?? "10 seconds")
    const channelOptions: grpc.ChannelOptions = {
      "grpc.keepalive_time_ms": Duration.toMillis(options.keepaliveTime ?? "30 seconds"),
      "grpc.max_receive_message_length": 4 * 1024 * 1024,
      ...options.channelOptions
    }
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => new ClusterClient(options.endpoint, credentialsOf(options.tls), channelOptions)),
      (client) => Effect.sync(() => client.close())
    )

    /** A unary RPC as a method of the port: its message out, its reply back as the port's result. */
    const unary =
      <Proto, Request, Result, Reply>(rpc: UnaryRpc<Proto, Request, Result, Reply>) =>
      (request: Request): Effect.Effect<Result, DiscoveryError> =>
        Effect.callback<Result, DiscoveryError>((resume) => {
          const call = client.makeUnaryRequest(
            rpc.definition.path,
            rpc.definition.requestSerialize,
            rpc.definition.responseDeserialize,
            rpc.toProto(request),
            new grpc.Metadata(),
            { deadline: Date.now() + timeoutMillis },
            (error, reply) =>
              resume(error ? Effect.fail(fromServiceError(error)) : Effect.succeed(rpc.fromProto(reply as Reply)))
          )
          return Effect.sync(() => call.cancel())
        })

    const watch = (request: WatchRequest): Stream.Stream<WatchEvent, DiscoveryError> =>
      Stream.unwrap(
        Effect.gen(function* () {
          const call = yield* Effect.acquireRelease(
            Effect.sync(
              (): WatchCall =>
                client.makeServerStreamRequest(
                  ClusterRpcs.Watch.definition.path,
                  ClusterRpcs.Watch.definition.requestSerialize,
                  ClusterRpcs.Watch.definition.responseDeserialize,
                  ClusterRpcs.Watch.toProto(request),
                  new grpc.Metadata()
                )
            ),
            (call) => Effect.sync(() => call.cancel())
          )
          const events = new WatchResponseReader()
          const toEvents = (message: ProtoWatchResponse): Array<WatchEvent> => events.read(message)
          return Stream.flattenIterable(Stream.map(Stream.fromEffectRepeat(reader(call)), toEvents))
        })
      )

    return ClusterApi.of({
      hello: unary(ClusterRpcs.Hello),
      affiliateUpdate: unary(ClusterRpcs.AffiliateUpdate),
      affiliateDelete: unary(ClusterRpcs.AffiliateDelete),
      list: unary(ClusterRpcs.List),
      watch
    })
  })

/**
 * `ClusterApi` over gRPC as a scoped layer: the remote service stands in for
 * the in-process core.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: ClientOptions): Layer.Layer<ClusterApi> => Layer.effect(ClusterApi, make(options))
