/**
 * The HTTP/2 header blocks of a gRPC response: the response headers, the
 * trailers that carry the status (`grpc-status`, the percent-encoded
 * `grpc-message`, custom metadata with `-bin` values in base64), and the
 * Trailers-Only block of a call that fails before its first message.
 *
 * @since 0.1.0
 */
import type * as http2 from "node:http2"
import type * as grpc from "@grpc/grpc-js"
import type { CallStatus } from "./statuses.ts"

/**
 * The content type of every response.
 *
 * @category protocols
 * @since 0.1.0
 */
export const contentType = "application/grpc"

/**
 * The response headers of a call without custom initial metadata. Node copies
 * header objects, so it is shared.
 *
 * @category protocols
 * @since 0.1.0
 */
export const responseHeaders: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": contentType }

/** The trailers of an OK call without metadata. */
const okTrailers: http2.OutgoingHttpHeaders = { "grpc-status": "0" }

const isPrintable = (code: number): boolean => code >= 0x20 && code <= 0x7e && code !== 0x25

const hex = "0123456789ABCDEF"

/**
 * A status message as `grpc-message` carries it: printable ASCII other than
 * `%` as is, every other UTF-8 byte as `%XX`.
 *
 * @category protocols
 * @since 0.1.0
 */
export const encodeMessage = (message: string): string => {
  let i = 0
  while (i < message.length && isPrintable(message.charCodeAt(i))) i++
  if (i === message.length) return message
  let encoded = message.slice(0, i)
  for (const byte of Buffer.from(message.slice(i), "utf8")) {
    encoded += isPrintable(byte) ? String.fromCharCode(byte) : `%${hex[byte >> 4]}${hex[byte & 15]}`
  }
  return encoded
}

/**
 * Headers with the custom metadata added (binary values in base64, as grpc-js
 * writes them).
 *
 * @category protocols
 * @since 0.1.0
 */
export const withMetadata = (
  headers: http2.OutgoingHttpHeaders,
  metadata: grpc.Metadata | null | undefined
): http2.OutgoingHttpHeaders => (metadata == null ? headers : { ...metadata.toHttp2Headers(), ...headers })

/**
 * The trailers that end a call with `status`.
 *
 * @category protocols
 * @since 0.1.0
 */
export const trailers = (status: CallStatus): http2.OutgoingHttpHeaders => {
  if (status.code === 0 && status.details === "" && status.metadata == null) return okTrailers
  const block: http2.OutgoingHttpHeaders = { "grpc-status": String(status.code) }
  if (status.details !== "") block["grpc-message"] = encodeMessage(status.details)
  return withMetadata(block, status.metadata)
}

/**
 * The single header block of a call that ends before sending anything:
 * HTTP `httpStatus` (200 unless the request was not gRPC), the content
 * type and the status.
 *
 * @category protocols
 * @since 0.1.0
 */
export const trailersOnly = (status: CallStatus, httpStatus = 200): http2.OutgoingHttpHeaders => ({
  ...trailers(status),
  ":status": httpStatus,
  "content-type": contentType
})
