/**
 * The messages of `ClusterApi` over a `MessagePort` (between worker threads
 * and the thread that owns the state): each request carries an ID, and every
 * reply names the request it answers. Values are structured-cloned, so a
 * Duration travels as milliseconds and an error as its tag and fields.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"
import type { AffiliateUpdateRequest, WatchDelta, WatchStart } from "../../ports/ClusterApi.ts"
import {
  type DiscoveryError,
  InvalidArgument,
  RemoteFailure,
  ResourceExhausted,
  SubscriptionLost,
  Unavailable
} from "../../ports/DiscoveryError.ts"

/**
 * A unary operation of the port.
 *
 * @category models
 * @since 0.1.0
 */
export type UnaryOperation = "hello" | "affiliateUpdate" | "affiliateDelete" | "list"

/**
 * What the side without the state sends.
 *
 * @category models
 * @since 0.1.0
 */
export type Request =
  | { readonly id: number; readonly op: UnaryOperation; readonly request: unknown }
  | { readonly id: number; readonly op: "watch"; readonly request: unknown }
  | { readonly id: number; readonly op: "cancel" }

/**
 * What the owner of the state answers.
 *
 * @category models
 * @since 0.1.0
 */
export type Reply =
  | { readonly id: number; readonly ok: unknown }
  | { readonly id: number; readonly error: WireError }
  | { readonly id: number; readonly start: WatchStart }
  | { readonly id: number; readonly delta: WatchDelta }
  | { readonly id: number; readonly end: WireError }

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
 * An AffiliateUpdate with its TTL in milliseconds, as it crosses the port.
 *
 * @category models
 * @since 0.1.0
 */
export type WireUpdate = Omit<AffiliateUpdateRequest, "ttl"> & { readonly ttlMillis: number }

/**
 * An AffiliateUpdate as it crosses the port.
 *
 * @category codecs
 * @since 0.1.0
 */
export const toWireUpdate = ({ ttl, ...request }: AffiliateUpdateRequest): WireUpdate => ({
  ...request,
  ttlMillis: Duration.toMillis(ttl)
})

/**
 * An AffiliateUpdate back from the port.
 *
 * @category codecs
 * @since 0.1.0
 */
export const fromWireUpdate = ({ ttlMillis, ...request }: WireUpdate): AffiliateUpdateRequest => ({
  ...request,
  ttl: Duration.millis(ttlMillis)
})

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
