/**
 * The grpc-js service definition of `sidero.discovery.server.Cluster`, built
 * from the generated protobuf-es descriptors (no proto-loader). The server
 * side decodes requests into `DecodedRequest` values, so invalid UTF-8 IDs are
 * answered before the `ClusterApi` is called; Watch responses are sent as
 * already encoded WatchResponse bytes.
 *
 * @since 0.1.0
 */
import type { DescMessage, MessageShape } from "@bufbuild/protobuf"
import { fromBinary, toBinary } from "@bufbuild/protobuf"
import type {
  AffiliateDeleteRequest,
  AffiliateDeleteResponse,
  AffiliateUpdateRequest,
  AffiliateUpdateResponse,
  HelloRequest,
  HelloResponse,
  ListRequest,
  ListResponse,
  WatchRequest,
  WatchResponse
} from "../../gen/discovery/server/cluster_pb.ts"
import { Cluster } from "../../gen/discovery/server/cluster_pb.ts"
import { fieldSize, putVarint } from "../../core/varint.ts"
import type { DecodedRequest } from "./codec.ts"
import {
  decodeAffiliateDeleteRequest,
  decodeAffiliateUpdateRequest,
  decodeHelloRequest,
  decodeListRequest,
  decodeWatchRequest
} from "./codec.ts"

/**
 * One method of the service, with the types each side sees: the client sends
 * `ClientRequest` and receives `ClientResponse`; the server receives
 * `ServerRequest` and sends `ServerResponse`. It is a grpc-js
 * `MethodDefinition`.
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
 * A view of bytes as a Buffer, without copying.
 *
 * @category codecs
 * @since 0.1.0
 */
export const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * The grpc-js serializer of a protobuf-es message type.
 *
 * @category codecs
 * @since 0.1.0
 */
export const serializer =
  <Desc extends DescMessage>(schema: Desc) =>
  (message: MessageShape<Desc>): Buffer =>
    asBuffer(toBinary(schema, message))

const noBytes = Buffer.alloc(0)

/**
 * The serializer of a message without fields (AffiliateUpdateResponse,
 * AffiliateDeleteResponse): the shared empty buffer unless the message
 * carries unknown fields, so the server's constant replies are not encoded
 * again on every call. grpc-js copies the bytes into its frame, so sharing
 * them is safe.
 */
const emptySerializer =
  <Desc extends DescMessage>(schema: Desc) =>
  (message: MessageShape<Desc>): Buffer =>
    message.$unknown === undefined || message.$unknown.length === 0 ? noBytes : asBuffer(toBinary(schema, message))

/**
 * The HelloResponse serializer, written directly: every Hello answers one, and
 * protobuf-es's general writer cost about a tenth of the server's time per
 * call. The bytes are those `toBinary` writes (fields in order, defaults left
 * out); a message carrying unknown fields goes through `toBinary`.
 */
const helloResponseSerializer = (message: HelloResponse): Buffer => {
  const redirect = message.redirect
  if ((message.$unknown?.length ?? 0) > 0 || (redirect?.$unknown?.length ?? 0) > 0) {
    return asBuffer(toBinary(Cluster.method.hello.output, message))
  }
  const endpointLength = redirect === undefined ? 0 : Buffer.byteLength(redirect.endpoint, "utf8")
  const redirectLength = endpointLength === 0 ? 0 : fieldSize(endpointLength)
  const ip = message.clientIp
  const size = (redirect === undefined ? 0 : fieldSize(redirectLength)) + (ip.length === 0 ? 0 : fieldSize(ip.length))
  if (size === 0) return noBytes
  const bytes = Buffer.allocUnsafe(size)
  let pos = 0
  if (redirect !== undefined) {
    bytes[pos++] = 0x0a
    pos = putVarint(bytes, pos, redirectLength)
    if (endpointLength > 0) {
      bytes[pos++] = 0x0a
      pos = putVarint(bytes, pos, endpointLength)
      pos += bytes.write(redirect.endpoint, pos, "utf8")
    }
  }
  if (ip.length > 0) {
    bytes[pos++] = 0x12
    pos = putVarint(bytes, pos, ip.length)
    bytes.set(ip, pos)
  }
  return bytes
}

/**
 * The grpc-js deserializer of a protobuf-es message type.
 *
 * @category codecs
 * @since 0.1.0
 */
export const deserializer =
  <Desc extends DescMessage>(schema: Desc) =>
  (bytes: Buffer): MessageShape<Desc> =>
    fromBinary(schema, bytes)

const path = (name: string): string => `/${Cluster.typeName}/${name}`

/**
 * The service definition for `grpc.Server#addService` and
 * `grpc.makeGenericClientConstructor`. Keys are the RPC names of the proto.
 *
 * @category protocols
 * @since 0.1.0
 */
export const ClusterService = {
  Hello: {
    path: path(Cluster.method.hello.name),
    requestStream: false,
    responseStream: false,
    originalName: Cluster.method.hello.localName,
    requestSerialize: serializer(Cluster.method.hello.input),
    requestDeserialize: decodeHelloRequest,
    responseSerialize: helloResponseSerializer,
    responseDeserialize: deserializer(Cluster.method.hello.output)
  } satisfies ClusterMethod<HelloRequest, DecodedRequest<HelloRequest>, HelloResponse, HelloResponse>,
  AffiliateUpdate: {
    path: path(Cluster.method.affiliateUpdate.name),
    requestStream: false,
    responseStream: false,
    originalName: Cluster.method.affiliateUpdate.localName,
    requestSerialize: serializer(Cluster.method.affiliateUpdate.input),
    requestDeserialize: decodeAffiliateUpdateRequest,
    responseSerialize: emptySerializer(Cluster.method.affiliateUpdate.output),
    responseDeserialize: deserializer(Cluster.method.affiliateUpdate.output)
  } satisfies ClusterMethod<
    AffiliateUpdateRequest,
    DecodedRequest<AffiliateUpdateRequest>,
    AffiliateUpdateResponse,
    AffiliateUpdateResponse
  >,
  AffiliateDelete: {
    path: path(Cluster.method.affiliateDelete.name),
    requestStream: false,
    responseStream: false,
    originalName: Cluster.method.affiliateDelete.localName,
    requestSerialize: serializer(Cluster.method.affiliateDelete.input),
    requestDeserialize: decodeAffiliateDeleteRequest,
    responseSerialize: emptySerializer(Cluster.method.affiliateDelete.output),
    responseDeserialize: deserializer(Cluster.method.affiliateDelete.output)
  } satisfies ClusterMethod<
    AffiliateDeleteRequest,
    DecodedRequest<AffiliateDeleteRequest>,
    AffiliateDeleteResponse,
    AffiliateDeleteResponse
  >,
  List: {
    path: path(Cluster.method.list.name),
    requestStream: false,
    responseStream: false,
    originalName: Cluster.method.list.localName,
    requestSerialize: serializer(Cluster.method.list.input),
    requestDeserialize: decodeListRequest,
    responseSerialize: serializer(Cluster.method.list.output),
    responseDeserialize: deserializer(Cluster.method.list.output)
  } satisfies ClusterMethod<ListRequest, DecodedRequest<ListRequest>, ListResponse, ListResponse>,
  Watch: {
    path: path(Cluster.method.watch.name),
    requestStream: false,
    responseStream: true,
    originalName: Cluster.method.watch.localName,
    requestSerialize: serializer(Cluster.method.watch.input),
    requestDeserialize: decodeWatchRequest,
    responseSerialize: asBuffer,
    responseDeserialize: deserializer(Cluster.method.watch.output)
  } satisfies ClusterMethod<WatchRequest, DecodedRequest<WatchRequest>, Uint8Array, WatchResponse>
} as const

/**
 * The name the service is registered under: `sidero.discovery.server.Cluster`.
 *
 * @category protocols
 * @since 0.1.0
 */
export const serviceName: string = Cluster.typeName
