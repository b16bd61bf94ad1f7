/**
 * The grpc-js serializers of the service's messages: protobuf-es's general
 * ones, a shared empty buffer for the replies without fields, and the
 * HelloResponse written directly (it answers every Hello).
 *
 * @since 0.1.0
 */
import type { DescMessage, MessageShape } from "@bufbuild/protobuf"
import { fromBinary, toBinary } from "@bufbuild/protobuf"
import type { HelloResponse } from "../../gen/discovery/server/cluster_pb.ts"
import { Cluster } from "../../gen/discovery/server/cluster_pb.ts"
import { fieldSize, putVarint } from "../../core/wire/wireWriter.ts"

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
 *
 * @category codecs
 * @since 0.1.0
 */
export const emptySerializer =
  <Desc extends DescMessage>(schema: Desc) =>
  (message: MessageShape<Desc>): Buffer =>
    message.$unknown === undefined || message.$unknown.length === 0 ? noBytes : asBuffer(toBinary(schema, message))

/**
 * The HelloResponse serializer, written directly: every Hello answers one, and
 * protobuf-es's general writer cost about a tenth of the server's time per
 * call. The bytes are those `toBinary` writes (fields in order, defaults left
 * out); a message carrying unknown fields goes through `toBinary`.
 *
 * @category codecs
 * @since 0.1.0
 */
export const helloResponseSerializer = (message: HelloResponse): Buffer => {
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
