/**
 * The gRPC server adapter: binds any `ClusterApi` from the Effect context to
 * grpc-js, either mounted on a `grpc.Server` an application already runs
 * (`register`) or on a server of its own (`layer`). Watches follow flow
 * control, so a client that stops reading fills its core buffer and is cut off
 * instead of growing memory; closing ends every open call with UNAVAILABLE so
 * clients reconnect.
 *
 * @since 0.1.0
 */
import { create } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Context, Duration, Effect, Exit, Fiber, Layer, Schema, Scope, Stream } from "effect"
import type {
  AffiliateDeleteRequest as ProtoAffiliateDeleteRequest,
  AffiliateDeleteResponse as ProtoAffiliateDeleteResponse,
  AffiliateUpdateRequest as ProtoAffiliateUpdateRequest,
  AffiliateUpdateResponse as ProtoAffiliateUpdateResponse,
  HelloRequest as ProtoHelloRequest,
  HelloResponse as ProtoHelloResponse,
  ListRequest as ProtoListRequest,
  ListResponse as ProtoListResponse,
  WatchRequest as ProtoWatchRequest
} from "../../gen/discovery/server/cluster_pb.ts"
import { AffiliateDeleteResponseSchema, AffiliateUpdateResponseSchema } from "../../gen/discovery/server/cluster_pb.ts"
import type { WatchEvent } from "../../ports/ClusterApi.ts"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import { shuttingDownMessage, Unavailable } from "../../ports/DiscoveryError.ts"
import type { TrustOptions } from "./clientAddress.ts"
import { clientAddress } from "./clientAddress.ts"
import { ClusterService } from "./ClusterService.ts"
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
import { fromCause } from "./status.ts"

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
}

/**
 * How the standalone server listens and stops.
 *
 * @category models
 * @since 0.1.0
 */
export interface ServerOptions extends HandlerOptions {
  /** `host:port` to listen on (default `0.0.0.0:3000`; port 0 picks a free one). */
  readonly address?: string | undefined
  /** Transport security (default plaintext h2c). */
  readonly credentials?: grpc.ServerCredentials | undefined
  /** How long a graceful stop may take before open connections are cut (default 5 seconds). */
  readonly shutdownTimeout?: Duration.Input | undefined
  /** Extra grpc-js server options, applied over `serverChannelOptions`. */
  readonly channelOptions?: grpc.ServerOptions | undefined
}

/**
 * The default snapshot budget: 1 MiB.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultSnapshotBudget = 1024 * 1024

/**
 * The grpc-js options of the standalone server: Go's defaults of 4 MiB per
 * received message and no limit on sent ones. grpc-js 1.14 has no option that
 * enforces a minimum client ping interval, so every keepalive rate a client
 * uses (the Go client's is at least 10 s) is tolerated.
 *
 * @category models
 * @since 0.1.0
 */
export const serverChannelOptions: grpc.ServerOptions = {
  "grpc.max_receive_message_length": 4 * 1024 * 1024,
  "grpc.max_send_message_length": -1
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
    readonly server: grpc.Server
    readonly port: number
  }
>()("talos-discovery/grpc/GrpcServer") {}

type Call = NodeJS.EventEmitter & { readonly cancelled: boolean }

type WatchCall = grpc.ServerWritableStream<DecodedRequest<ProtoWatchRequest>, Uint8Array>

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

/**
 * Mounts the Cluster service on a grpc-js server the caller runs, serving the
 * `ClusterApi` of the current context. Handlers run with this context. When
 * the scope closes, every open call ends with UNAVAILABLE (`server is shutting
 * down`) and the service is removed; the server itself is left running.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = (
  server: grpc.Server,
  options: HandlerOptions = {}
): Effect.Effect<void, never, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const api = yield* ClusterApi
    const runFork = Effect.runForkWith(Context.omit(Scope.Scope)(yield* Effect.context<never>()))
    const budget = options.snapshotBudget ?? defaultSnapshotBudget
    const trust: TrustOptions = { trustXRealIp: options.trustXRealIp, trustXForwardedFor: options.trustXForwardedFor }
    const fibers = new Set<Fiber.Fiber<unknown, DiscoveryError>>()
    const deltas = new WeakMap<WatchEvent, Uint8Array>()
    let open = true

    const start = <A>(
      call: Call,
      effect: Effect.Effect<A, DiscoveryError>,
      reply: (exit: Exit.Exit<A, DiscoveryError>) => void
    ): void => {
      if (!open) {
        reply(Exit.fail(new Unavailable({ message: shuttingDownMessage })))
        return
      }
      const fiber = runFork(effect)
      fibers.add(fiber)
      fiber.addObserver((exit) => {
        fibers.delete(fiber)
        if (!call.cancelled) reply(exit)
      })
      call.on("cancelled", () => fiber.interruptUnsafe())
    }

    const messagesOf = (event: WatchEvent): ReadonlyArray<Uint8Array> => {
      if (event._tag === "Snapshot") return encodeSnapshot(event.affiliates, budget)
      let bytes = deltas.get(event)
      if (bytes === undefined) {
        bytes = encodeDelta(event)
        deltas.set(event, bytes)
      }
      return [bytes]
    }

    const send = (call: WatchCall, event: WatchEvent): Effect.Effect<void> =>
      Effect.suspend(() => {
        let ready = true
        for (const bytes of messagesOf(event)) ready = call.write(bytes)
        return ready ? Effect.void : awaitDrain(call)
      })

    const handlers = {
      Hello: (
        call: grpc.ServerUnaryCall<DecodedRequest<ProtoHelloRequest>, ProtoHelloResponse>,
        callback: grpc.sendUnaryData<ProtoHelloResponse>
      ) =>
        start(
          call,
          Effect.flatMap(Effect.fromResult(call.request), (message) =>
            api.hello(helloRequestFromProto(message, clientAddress(call.getPeer(), call.metadata, trust)))
          ),
          unaryReply(callback, helloResponseToProto)
        ),
      AffiliateUpdate: (
        call: grpc.ServerUnaryCall<DecodedRequest<ProtoAffiliateUpdateRequest>, ProtoAffiliateUpdateResponse>,
        callback: grpc.sendUnaryData<ProtoAffiliateUpdateResponse>
      ) =>
        start(
          call,
          Effect.flatMap(Effect.fromResult(call.request), (message) =>
            api.affiliateUpdate(affiliateUpdateRequestFromProto(message))
          ),
          unaryReply(callback, () => updateResponse)
        ),
      AffiliateDelete: (
        call: grpc.ServerUnaryCall<DecodedRequest<ProtoAffiliateDeleteRequest>, ProtoAffiliateDeleteResponse>,
        callback: grpc.sendUnaryData<ProtoAffiliateDeleteResponse>
      ) =>
        start(
          call,
          Effect.flatMap(Effect.fromResult(call.request), (message) =>
            api.affiliateDelete(affiliateDeleteRequestFromProto(message))
          ),
          unaryReply(callback, () => deleteResponse)
        ),
      List: (
        call: grpc.ServerUnaryCall<DecodedRequest<ProtoListRequest>, ProtoListResponse>,
        callback: grpc.sendUnaryData<ProtoListResponse>
      ) =>
        start(
          call,
          Effect.flatMap(Effect.fromResult(call.request), (message) => api.list(clusterRequestFromProto(message))),
          unaryReply(callback, listResponseToProto)
        ),
      Watch: (call: WatchCall) =>
        start(
          call,
          Effect.flatMap(Effect.fromResult(call.request), (message) =>
            Stream.runForEach(api.watch(clusterRequestFromProto(message)), (event) => send(call, event))
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

const bind = (server: grpc.Server, address: string, credentials: grpc.ServerCredentials) =>
  Effect.callback<number, BindError>((resume) => {
    server.bindAsync(address, credentials, (error, port) =>
      resume(error ? Effect.fail(new BindError({ address, message: error.message })) : Effect.succeed(port))
    )
  })

const shutdown = (server: grpc.Server, timeoutMillis: number) =>
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
 * Starts a standalone server for the `ClusterApi` of the context: creates a
 * grpc-js server, mounts the service with `register` and listens on
 * `options.address`. When the scope closes, open calls end with UNAVAILABLE,
 * then the server stops gracefully, or by force after `shutdownTimeout`. The
 * shutdown wait uses real time, not Effect's clock.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: ServerOptions = {}
): Effect.Effect<GrpcServer["Service"], BindError, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const address = options.address ?? "0.0.0.0:3000"
    const timeoutMillis = Duration.toMillis(options.shutdownTimeout ?? "5 seconds")
    const server = yield* Effect.acquireRelease(
      Effect.sync(() => new grpc.Server({ ...serverChannelOptions, ...options.channelOptions })),
      (server) => shutdown(server, timeoutMillis)
    )
    yield* register(server, options)
    const port = yield* bind(server, address, options.credentials ?? grpc.ServerCredentials.createInsecure())
    return GrpcServer.of({ server, port })
  })

/**
 * The standalone server as a scoped layer over the `ClusterApi` it is given;
 * `GrpcServer` tells the bound port (useful with port 0).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: ServerOptions = {}): Layer.Layer<GrpcServer, BindError, ClusterApi> =>
  Layer.effect(GrpcServer, make(options))
