/**
 * The one mapping between the port's tagged errors and gRPC status codes, used
 * by the server to answer and by the client to read answers. Messages pass
 * through unchanged, so clients see the exact texts of the protocol.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import { Cause } from "effect"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import {
  InvalidArgument,
  RemoteFailure,
  ResourceExhausted,
  SubscriptionLost,
  shuttingDownMessage,
  Unavailable
} from "../../ports/DiscoveryError.ts"

/**
 * A gRPC status: code and message (grpc-js calls the message `details`).
 *
 * @category models
 * @since 0.1.0
 */
export interface GrpcStatus {
  readonly code: grpc.status
  readonly details: string
}

/**
 * The status a tagged error is sent as.
 *
 * @category errors
 * @since 0.1.0
 */
export const toStatus = (error: DiscoveryError): GrpcStatus => {
  switch (error._tag) {
    case "InvalidArgument":
      return { code: grpc.status.INVALID_ARGUMENT, details: error.message }
    case "ResourceExhausted":
      return { code: grpc.status.RESOURCE_EXHAUSTED, details: error.message }
    case "SubscriptionLost":
      return { code: grpc.status.ABORTED, details: error.message }
    case "Unavailable":
      return { code: grpc.status.UNAVAILABLE, details: error.message }
    case "RemoteFailure":
      return { code: error.code, details: error.message }
    default:
      return { code: grpc.status.INTERNAL, details: String(error) }
  }
}

/**
 * The tagged error a received non-OK status stands for; codes without a
 * domain meaning become RemoteFailure.
 *
 * @category errors
 * @since 0.1.0
 */
export const fromStatus = (code: number, details: string): DiscoveryError => {
  switch (code) {
    case grpc.status.INVALID_ARGUMENT:
      return new InvalidArgument({ message: details })
    case grpc.status.RESOURCE_EXHAUSTED:
      return new ResourceExhausted({ message: details })
    case grpc.status.ABORTED:
      return new SubscriptionLost({ message: details })
    case grpc.status.UNAVAILABLE:
      return new Unavailable({ message: details })
    default:
      return new RemoteFailure({ code, message: details })
  }
}

/**
 * The tagged error for whatever a grpc-js client call failed with: a status
 * error goes through `fromStatus`, anything else is an UNKNOWN RemoteFailure.
 *
 * @category errors
 * @since 0.1.0
 */
export const fromServiceError = (error: unknown): DiscoveryError => {
  if (typeof error === "object" && error !== null && "code" in error && typeof error.code === "number") {
    const details = "details" in error && typeof error.details === "string" ? error.details : String(error)
    return fromStatus(error.code, details)
  }
  return new RemoteFailure({
    code: grpc.status.UNKNOWN,
    message: error instanceof Error ? error.message : String(error)
  })
}

const defectMessage = (defect: unknown): string => (defect instanceof Error ? defect.message : String(defect))

/**
 * The status a failed handler is answered with: its tagged error, INTERNAL for
 * a defect (with the defect's message, as the original's recovery does), and
 * UNAVAILABLE for a handler interrupted because the server is stopping.
 *
 * @category errors
 * @since 0.1.0
 */
export const fromCause = (cause: Cause.Cause<DiscoveryError>): GrpcStatus => {
  const failure = Cause.findErrorOption(cause)
  if (failure._tag === "Some") return toStatus(failure.value)
  const defect = Cause.findDefect(cause)
  if (defect._tag === "Success") return { code: grpc.status.INTERNAL, details: defectMessage(defect.success) }
  if (Cause.hasInterruptsOnly(cause)) return { code: grpc.status.UNAVAILABLE, details: shuttingDownMessage }
  return { code: grpc.status.INTERNAL, details: "internal error" }
}
