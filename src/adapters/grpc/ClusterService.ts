/**
 * `sidero.discovery.server.Cluster` as one record per RPC: its descriptor,
 * how the server decodes the request and hands it to the `ClusterApi`, how it
 * encodes the reply, what the request log says of it and the metric series it
 * counts in, and how the client side converts both ways. The grpc-js service
 * definition, the server's handlers, the client's calls and the metrics are
 * all derived from these records, so adding an RPC is adding one.
 *
 * The server decodes requests into `DecodedRequest` values, so invalid UTF-8
 * IDs are answered before the `ClusterApi` is called; Watch responses are
 * sent as already encoded WatchResponse bytes.
 *
 * @since 0.1.0
 */
import type { DescMessage, DescMethod, MessageShape } from "@bufbuild/protobuf"
import { create } from "@bufbuild/protobuf"
import type { Effect, Metric } from "effect"
import type {
  AffiliateDeleteRequest,
  AffiliateUpdateRequest,
  HelloRequest,
  ListRequest,
  WatchRequest,
  WatchResponse
} from "../../gen/discovery/server/cluster_pb.ts"
import { Cluster } from "../../gen/discovery/server/cluster_pb.ts"
import type { ClusterApi, WatchRequest as CoreWatchRequest } from "../../ports/ClusterApi.ts"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import type { DecodedRequest } from "./codec.ts"
import * as Codec from "./codec.ts"
import type { GrpcType, MethodMetrics } from "./metrics.ts"
import { helloRequests, methodMetrics, parseVersion } from "./metrics.ts"
import { asBuffer, deserializer, emptySerializer, helloResponseSerializer, serializer } from "./serializers.ts"

export { asBuffer, deserializer, serializer } from "./serializers.ts"

/**
 * One method of the service as grpc-js sees it, with the types each side
 * sees: the client sends `ClientRequest` and receives `ClientResponse`; the
 * server receives `ServerRequest` and sends `ServerResponse`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterMethod<ClientRequest, ServerRequest, ServerResponse, ClientResponse> {
  readonly path: string
  readonly requestStream: false
  readonly responseStream: boolean
  readonly originalName: string
  readonly requestSerialize: (value: ClientRequest) => Buffer
  readonly requestDeserialize: (bytes: Buffer) => ServerRequest
  readonly responseSerialize: (value: ServerResponse) => Buffer
  readonly responseDeserialize: (bytes: Buffer) => ClientResponse
}

/**
 * What every RPC record tells: its name and path, the grpc-js definition,
 * its metric series, and what the request log says of a request (IDs and
 * the client version, never blobs, each cut at 256 characters).
 *
 * @category models
 * @since 0.1.0
 */
export interface RpcInfo<Proto> {
  readonly name: string
  readonly path: string
  readonly streaming: boolean
  readonly metrics: MethodMetrics
  readonly logFields: (message: Proto) => Record<string, string>
  /** A series counted for every request that passed the rate limiter, before validation (Hello's by version). */
  readonly countRequest?: ((decoded: DecodedRequest<Proto>) => Metric.Counter<number>) | undefined
}

/**
 * A unary RPC: `Proto` in, the port's `Request` to `ClusterApi`, its `Result`
 * back as the `Reply` message.
 *
 * @category models
 * @since 0.1.0
 */
export interface UnaryRpc<Proto, Request, Result, Reply> extends RpcInfo<Proto> {
  readonly streaming: false
  readonly definition: ClusterMethod<Proto, DecodedRequest<Proto>, Reply, Reply>
  /** The port's request of a decoded message and the caller's address. */
  readonly toCore: (message: Proto, address: Uint8Array | undefined) => Request
  readonly invoke: (api: ClusterApi["Service"], request: Request) => Effect.Effect<Result, DiscoveryError>
  readonly fromCore: (result: Result) => Reply
  /** The client side: the message of a port request, and the port's result of a reply. */
  readonly toProto: (request: Request) => Proto
  readonly fromProto: (reply: Reply) => Result
}

/**
 * Any unary RPC of the table, for code that serves them all alike.
 *
 * @category models
 * @since 0.1.0
 */
// biome-ignore lint/suspicious/noExplicitAny: each record is consistent in itself; code over all of them is generic.
export type AnyUnaryRpc = UnaryRpc<any, any, any, any>

/**
 * The Watch RPC: the request as for a unary RPC; the server sends encoded
 * WatchResponse bytes, the client reads WatchResponse messages.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchRpc extends RpcInfo<WatchRequest> {
  readonly streaming: true
  readonly definition: ClusterMethod<WatchRequest, DecodedRequest<WatchRequest>, Uint8Array, WatchResponse>
  readonly toCore: (message: WatchRequest) => CoreWatchRequest
  readonly toProto: (request: CoreWatchRequest) => WatchRequest
}

/** A request field as logged: at most 256 characters, so a huge invalid ID cannot flood the log. */
const clip = (value: string): string =>
  value.length <= 256 ? value : `${value.slice(0, 256)}…(${value.length} characters)`

const clusterFields = (request: { readonly clusterId: string }) => ({ cluster_id: clip(request.clusterId) })
const affiliateFields = (request: { readonly clusterId: string; readonly affiliateId: string }) => ({
  cluster_id: clip(request.clusterId),
  affiliate_id: clip(request.affiliateId)
})

/** The parts of a record that follow from the descriptor and the kind. */
const base = <I extends DescMessage, O extends DescMessage, ServerReply>(
  method: DescMethod & { readonly input: I; readonly output: O },
  streaming: boolean,
  decode: (bytes: Uint8Array) => DecodedRequest<MessageShape<I>>,
  serializeReply: (reply: ServerReply) => Buffer
) => {
  const type: GrpcType = streaming ? "server_stream" : "unary"
  const path = `/${Cluster.typeName}/${method.name}`
  return {
    name: method.name,
    path,
    metrics: methodMetrics(method.name, type),
    definition: {
      path,
      requestStream: false as const,
      responseStream: streaming,
      originalName: method.localName,
      requestSerialize: serializer(method.input),
      requestDeserialize: decode,
      responseSerialize: serializeReply,
      responseDeserialize: deserializer(method.output)
    }
  }
}

/** A port method named as the descriptor's local name (`hello`, `affiliateUpdate`, …). */
type PortMethod = (request: unknown) => Effect.Effect<unknown, DiscoveryError>

/**
 * A unary record: what `spec` does not give follows from the descriptor. The
 * port's method is the one of the RPC's local name; a reply without fields
 * is one shared empty message, encoded as no bytes, and means `void` to the
 * client.
 */
const unary = <I extends DescMessage, O extends DescMessage, Request, Result>(
  method: DescMethod & { readonly input: I; readonly output: O },
  spec: Pick<UnaryRpc<MessageShape<I>, Request, Result, MessageShape<O>>, "toCore" | "toProto" | "logFields"> &
    Partial<
      Pick<UnaryRpc<MessageShape<I>, Request, Result, MessageShape<O>>, "fromCore" | "fromProto" | "countRequest">
    > & {
      readonly decode: (bytes: Uint8Array) => DecodedRequest<MessageShape<I>>
      readonly serializeReply?: ((reply: MessageShape<O>) => Buffer) | undefined
    }
): UnaryRpc<MessageShape<I>, Request, Result, MessageShape<O>> => {
  const empty = method.output.fields.length === 0
  const emptyReply = create(method.output)
  const { decode, serializeReply, ...rest } = spec
  return {
    ...base(method, false, decode, serializeReply ?? (empty ? emptySerializer : serializer)(method.output)),
    streaming: false,
    invoke: (api, request) =>
      (api[method.localName as keyof ClusterApi["Service"]] as PortMethod)(request) as Effect.Effect<
        Result,
        DiscoveryError
      >,
    fromCore: () => emptyReply,
    fromProto: () => undefined as Result,
    ...rest
  }
}

/**
 * The five RPCs of the service, by name.
 *
 * @category protocols
 * @since 0.1.0
 */
export const ClusterRpcs = {
  Hello: unary(Cluster.method.hello, {
    decode: Codec.decodeHelloRequest,
    serializeReply: helloResponseSerializer,
    toCore: Codec.helloRequestFromProto,
    fromCore: Codec.helloResponseToProto,
    toProto: Codec.helloRequestToProto,
    fromProto: Codec.helloResponseFromProto,
    logFields: (request: HelloRequest) => ({
      cluster_id: clip(request.clusterId),
      client_version: clip(request.clientVersion)
    }),
    countRequest: (decoded) =>
      helloRequests(parseVersion(decoded._tag === "Success" ? decoded.success.clientVersion : ""))
  }),
  AffiliateUpdate: unary(Cluster.method.affiliateUpdate, {
    decode: Codec.decodeAffiliateUpdateRequest,
    toCore: Codec.affiliateUpdateRequestFromProto,
    toProto: Codec.affiliateUpdateRequestToProto,
    logFields: (request: AffiliateUpdateRequest) => affiliateFields(request)
  }),
  AffiliateDelete: unary(Cluster.method.affiliateDelete, {
    decode: Codec.decodeAffiliateDeleteRequest,
    toCore: Codec.affiliateDeleteRequestFromProto,
    toProto: Codec.affiliateDeleteRequestToProto,
    logFields: (request: AffiliateDeleteRequest) => affiliateFields(request)
  }),
  List: unary(Cluster.method.list, {
    decode: Codec.decodeListRequest,
    toCore: Codec.clusterRequestFromProto,
    fromCore: Codec.listResponseToProto,
    toProto: Codec.listRequestToProto,
    fromProto: Codec.listResponseFromProto,
    logFields: (request: ListRequest) => clusterFields(request)
  }),
  Watch: {
    ...base(Cluster.method.watch, true, Codec.decodeWatchRequest, asBuffer),
    streaming: true,
    toCore: Codec.watchRequestFromProto,
    toProto: Codec.watchRequestToProto,
    logFields: (request: WatchRequest) => clusterFields(request)
  } satisfies WatchRpc
} as const

/**
 * The unary RPCs of `ClusterRpcs`.
 *
 * @category protocols
 * @since 0.1.0
 */
export type UnaryRpcName = Exclude<keyof typeof ClusterRpcs, "Watch">

/**
 * The service definition for `grpc.Server#addService` and
 * `grpc.makeGenericClientConstructor`, derived from `ClusterRpcs`. Keys are
 * the RPC names of the proto.
 *
 * @category protocols
 * @since 0.1.0
 */
export const ClusterService = Object.fromEntries(
  Object.entries(ClusterRpcs).map(([name, rpc]) => [name, rpc.definition])
) as { readonly [Name in keyof typeof ClusterRpcs]: (typeof ClusterRpcs)[Name]["definition"] }

/**
 * The name the service is registered under: `sidero.discovery.server.Cluster`.
 *
 * @category protocols
 * @since 0.1.0
 */
export const serviceName: string = Cluster.typeName
