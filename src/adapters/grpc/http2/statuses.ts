/**
 * The statuses the http2 transport answers with on its own, for requests
 * that never reach a handler or break the protocol on the way, and the
 * reading of a handler's error into a status as grpc-js does it. Texts
 * follow grpc-go where it has one (the Talos nodes run grpc-go), grpc-js
 * otherwise; the statuses of the service's own errors come from
 * `../status.ts`.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import type { GrpcStatus } from "../status.ts"

/**
 * A status to end a call with, and the trailing metadata to send with it.
 *
 * @category models
 * @since 0.1.0
 */
export interface CallStatus extends GrpcStatus {
  readonly metadata?: grpc.Metadata | null | undefined
}

/**
 * The OK status.
 *
 * @category models
 * @since 0.1.0
 */
export const ok: CallStatus = { code: grpc.status.OK, details: "" }

/**
 * No handler is registered for the request's path (grpc-js's text).
 *
 * @category errors
 * @since 0.1.0
 */
export const unimplementedMethod = (path: string): CallStatus => ({
  code: grpc.status.UNIMPLEMENTED,
  details: `The server does not implement the method ${path}`
})

/**
 * A large request message arrived while the server's budget for request
 * bytes held was spent: UNAVAILABLE, which clients retry after a backoff.
 *
 * @category errors
 * @since 0.1.0
 */
export const overBudget = (length: number): CallStatus => ({
  code: grpc.status.UNAVAILABLE,
  details: `server busy: no room for a request message of ${length} bytes now, retry later`
})

/**
 * The call's deadline passed before it ended.
 *
 * @category errors
 * @since 0.1.0
 */
export const deadlineExceeded: CallStatus = { code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" }

/**
 * The `grpc-timeout` header cannot be read.
 *
 * @category errors
 * @since 0.1.0
 */
export const malformedTimeout = (value: string): CallStatus => ({
  code: grpc.status.INTERNAL,
  details: `malformed grpc-timeout: ${JSON.stringify(value)}`
})

/**
 * The request is not a POST (sent with HTTP status 405).
 *
 * @category errors
 * @since 0.1.0
 */
export const invalidMethod = (method: string | undefined): CallStatus => ({
  code: grpc.status.INTERNAL,
  details: `Received a HEADERS frame with :method ${JSON.stringify(method ?? "")} which should be POST`
})

/**
 * The request's content type is not gRPC's (sent with HTTP status 415).
 *
 * @category errors
 * @since 0.1.0
 */
export const invalidContentType = (contentType: string | undefined): CallStatus => ({
  code: grpc.status.INVALID_ARGUMENT,
  details: `invalid gRPC request content-type ${JSON.stringify(contentType ?? "")}`
})

/**
 * A received message is longer than the server accepts.
 *
 * @category errors
 * @since 0.1.0
 */
export const messageTooLarge = (length: number, max: number): CallStatus => ({
  code: grpc.status.RESOURCE_EXHAUSTED,
  details: `grpc: received message larger than max (${length} vs. ${max})`
})

/**
 * A response message is longer than the server may send.
 *
 * @category errors
 * @since 0.1.0
 */
export const responseTooLarge = (length: number, max: number): CallStatus => ({
  code: grpc.status.RESOURCE_EXHAUSTED,
  details: `grpc: trying to send message larger than max (${length} vs. ${max})`
})

/**
 * A message is flagged compressed although the request names no encoding.
 *
 * @category errors
 * @since 0.1.0
 */
export const compressedWithoutEncoding: CallStatus = {
  code: grpc.status.INTERNAL,
  details: "grpc: compressed flag set with identity or empty encoding"
}

/**
 * A message is compressed with an encoding the server does not decode (it
 * decodes none). The response tells the client to send `identity`.
 *
 * @category errors
 * @since 0.1.0
 */
export const unsupportedEncoding = (encoding: string): CallStatus => ({
  code: grpc.status.UNIMPLEMENTED,
  details: `grpc: Decompressor is not installed for grpc-encoding ${JSON.stringify(encoding)}`
})

/**
 * A message's flag byte is neither 0 nor 1.
 *
 * @category errors
 * @since 0.1.0
 */
export const unexpectedPayloadFormat = (flag: number): CallStatus => ({
  code: grpc.status.INTERNAL,
  details: `grpc: received unexpected payload format ${flag}`
})

/**
 * A unary or server-streaming request ended without a message (gRPC's
 * status-code table: a cardinality violation is UNIMPLEMENTED).
 *
 * @category errors
 * @since 0.1.0
 */
export const noRequestMessage = (path: string): CallStatus => ({
  code: grpc.status.UNIMPLEMENTED,
  details: `received no request message for the non-client-streaming method ${path}`
})

/**
 * A unary or server-streaming request carried more than one message.
 *
 * @category errors
 * @since 0.1.0
 */
export const secondRequestMessage = (path: string): CallStatus => ({
  code: grpc.status.UNIMPLEMENTED,
  details: `received a second request message for the non-client-streaming method ${path}`
})

/**
 * The method's deserializer threw on the request.
 *
 * @category errors
 * @since 0.1.0
 */
export const deserializationFailed: CallStatus = { code: grpc.status.INTERNAL, details: "Error deserializing request" }

/**
 * The method's serializer threw on the response.
 *
 * @category errors
 * @since 0.1.0
 */
export const serializationFailed: CallStatus = { code: grpc.status.INTERNAL, details: "Error serializing response" }

/**
 * The handler threw instead of answering.
 *
 * @category errors
 * @since 0.1.0
 */
export const handlerThrew: CallStatus = { code: grpc.status.UNKNOWN, details: "Unknown error" }

/**
 * What a handler ended a call with, as grpc-js reads it: a whole-number
 * `code` with its `details` (the error's `message` without them), UNKNOWN
 * with the message otherwise; `trailer` wins over the error's own
 * `metadata`.
 *
 * @category errors
 * @since 0.1.0
 */
export const fromHandlerError = (error: unknown, trailer?: grpc.Metadata): CallStatus => {
  const fields = (typeof error === "object" && error !== null ? error : {}) as {
    readonly code?: unknown
    readonly details?: unknown
    readonly message?: unknown
    readonly metadata?: unknown
  }
  const message = typeof fields.message === "string" ? fields.message : "Unknown Error"
  const metadata = trailer ?? (fields.metadata instanceof grpc.Metadata ? fields.metadata : undefined)
  if (typeof fields.code === "number" && Number.isInteger(fields.code)) {
    const details = typeof fields.details === "string" ? fields.details : message
    return { code: fields.code, details, metadata }
  }
  return { code: grpc.status.UNKNOWN, details: message, metadata }
}

/**
 * The request ended in the middle of a message (grpc-go's text).
 *
 * @category errors
 * @since 0.1.0
 */
export const truncatedMessage: CallStatus = { code: grpc.status.INTERNAL, details: "unexpected EOF" }
