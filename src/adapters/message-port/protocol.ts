/**
 * The messages of `ClusterApi` over a `MessagePort` (between worker threads
 * and the thread that owns the state): each request carries an ID, and every
 * reply names the request it answers. Values are structured-cloned (their
 * bytes in buffers of their own, see `compact.ts`), an error as its tag and
 * fields; each side posts what one turn of its event loop produced as one
 * message.
 *
 * @since 0.1.0
 */
import { Cause, type Effect } from "effect"
import type { WatchDelta, WatchStart } from "../../ports/ClusterApi.ts"
import {
  type DiscoveryError,
  InvalidArgument,
  RemoteFailure,
  ResourceExhausted,
  shuttingDownMessage,
  SubscriptionLost,
  Unavailable
} from "../../ports/DiscoveryError.ts"

/**
 * A unary operation of the port.
 *
 * @category models
 * @since 0.1.0
 */
export type UnaryOperation = "hello" | "affiliateUpdate" | "affiliateDelete" | "list" | "stats" | "history" | "live"

/**
 * What the side without the state sends: the operations of `ClusterApi` and
 * the state's counts (`stats`, for a landing page), a watch's cancellation,
 * and the token reservations of a rate limiter whose buckets the owner
 * holds (`reserve` answers the wait in milliseconds, as
 * `RateLimiter.reserve`; `release` has no answer). A call or watch carries
 * its caller's deadline (`CallDeadline`, milliseconds since the epoch) when
 * it has one: the owner answers one that arrives after it with
 * DEADLINE_EXCEEDED and does not apply it. Requests travel in batches: each
 * message on the port is an array of them.
 *
 * @category models
 * @since 0.1.0
 */
export type Request =
  | {
      readonly id: number
      readonly op: UnaryOperation
      readonly request: unknown
      readonly deadline?: number | undefined
    }
  | { readonly id: number; readonly op: "watch"; readonly request: unknown; readonly deadline?: number | undefined }
  | { readonly id: number; readonly op: "cancel" }
  | { readonly id: number; readonly op: "reserve"; readonly key: string; readonly timeoutMillis: number }
  | { readonly id: number; readonly op: "release"; readonly key: string }

/**
 * What the owner of the state answers, in batches as the requests. A delta
 * goes once to each thread, encoded (`EncodedDelta`, in shared memory) with
 * the IDs of every watch of that thread it is for; a delta of a watch
 * without an epoch goes as it is. A reply with ID 0 answers nothing (a
 * heartbeat).
 *
 * @category models
 * @since 0.1.0
 */
export type Reply =
  | { readonly id: number; readonly ok: unknown }
  | { readonly id: number; readonly error: WireError }
  | { readonly id: number; readonly start: WatchStart }
  | { readonly id: number; readonly delta: WatchDelta }
  | { readonly ids: ReadonlyArray<number>; readonly encoded: EncodedDelta }
  | { readonly id: number; readonly end: WireError }

/**
 * A delta as one thread encodes it for the others: its message with its
 * position, whose first `plainLength` bytes are the message without it
 * (for the gRPC transport, a WatchResponse: the shape of that adapter's
 * `EncodedDelta`, repeated here because adapters do not import each other).
 *
 * @category models
 * @since 0.1.0
 */
export interface EncodedDelta {
  readonly bytes: Uint8Array
  readonly plainLength: number
}

/**
 * How deltas cross the port as bytes: the owner encodes each once, the other
 * side reads it back once for all its watches. Without one, deltas are
 * structured-cloned for each watch.
 *
 * @category models
 * @since 0.1.0
 */
export interface DeltaCodec {
  readonly encode: (delta: WatchDelta, epoch: string) => EncodedDelta
  readonly decode: (encoded: EncodedDelta) => WatchDelta
}

/**
 * A rate limiter's token reservations (as `RateLimiter` of the gRPC
 * adapter): `reserve` gives 0 when a token was taken, the milliseconds
 * until the reserved one is due, or -1 when none could be had in time.
 *
 * @category models
 * @since 0.1.0
 */
export interface TokenReservations {
  readonly reserve: (key: string, timeoutMillis: number) => Effect.Effect<number>
  readonly release: (key: string) => Effect.Effect<void>
}

/**
 * A tagged error as it crosses the port.
 *
 * @category models
 * @since 0.1.0
 */
export interface WireError {
  readonly _tag: DiscoveryError["_tag"]
  readonly message: string
  readonly code?: number | undefined
}

/**
 * An error as it crosses the port.
 *
 * @category codecs
 * @since 0.1.0
 */
export const toWireError = (error: DiscoveryError): WireError =>
  error._tag === "RemoteFailure"
    ? { _tag: error._tag, message: error.message, code: error.code }
    : { _tag: error._tag, message: error.message }

/**
 * How a failed effect crosses the port: its tagged error; a defect as an
 * internal error with the defect's message (as the gRPC adapter answers
 * one); an interruption as the service shutting down.
 *
 * @category codecs
 * @since 0.1.0
 */
export const toWireCause = (cause: Cause.Cause<DiscoveryError>): WireError => {
  const failure = Cause.findErrorOption(cause)
  if (failure._tag === "Some") return toWireError(failure.value)
  const defect = Cause.findDefect(cause)
  if (defect._tag === "Success") {
    const message = defect.success instanceof Error ? defect.success.message : String(defect.success)
    return { _tag: "RemoteFailure", code: internalCode, message }
  }
  if (Cause.hasInterruptsOnly(cause)) return { _tag: "Unavailable", message: shuttingDownMessage }
  return { _tag: "RemoteFailure", code: internalCode, message: "internal error" }
}

/** gRPC's INTERNAL, the code a defect is answered with. */
const internalCode = 13

/**
 * The answer to a call whose caller's deadline passed before the owner took
 * it: gRPC's DEADLINE_EXCEEDED (the caller has gone; nobody reads it).
 *
 * @category constructors
 * @since 0.1.0
 */
export const expiredCall: WireError = {
  _tag: "RemoteFailure",
  code: 4,
  message: "deadline exceeded before the call was taken"
}

/**
 * The tagged error back from the port.
 *
 * @category codecs
 * @since 0.1.0
 */
export const fromWireError = (wire: WireError): DiscoveryError => {
  switch (wire._tag) {
    case "InvalidArgument":
      return new InvalidArgument({ message: wire.message })
    case "ResourceExhausted":
      return new ResourceExhausted({ message: wire.message })
    case "SubscriptionLost":
      return new SubscriptionLost({ message: wire.message })
    case "Unavailable":
      return new Unavailable({ message: wire.message })
    case "RemoteFailure":
      return new RemoteFailure({ code: wire.code ?? 2, message: wire.message })
  }
}
