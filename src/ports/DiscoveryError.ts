/**
 * The failures a discovery operation can end with, as tagged values. Each one
 * names what went wrong in the domain; only the gRPC adapter turns them into
 * status codes (and back).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * A request field is empty, too long, too big or malformed. Maps to gRPC
 * INVALID_ARGUMENT.
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", {
  message: Schema.String
}) {}

/**
 * A limit or cap would be exceeded (affiliates per cluster, endpoints per
 * affiliate, clusters, watches, rate). Maps to gRPC RESOURCE_EXHAUSTED.
 *
 * @category errors
 * @since 0.1.0
 */
export class ResourceExhausted extends Schema.TaggedError<ResourceExhausted>()("ResourceExhausted", {
  message: Schema.String
}) {}

/**
 * A watcher fell behind and missed an update; it must watch again to get a
 * fresh snapshot. Maps to gRPC ABORTED.
 *
 * @category errors
 * @since 0.1.0
 */
export class SubscriptionLost extends Schema.TaggedError<SubscriptionLost>()("SubscriptionLost", {
  message: Schema.String
}) {}

/**
 * The service cannot answer now (shutting down, or unreachable); retrying later
 * or elsewhere may succeed. Maps to gRPC UNAVAILABLE.
 *
 * @category errors
 * @since 0.1.0
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  message: Schema.String
}) {}

/**
 * Any other failure reported by a remote service, kept with its gRPC status
 * code number and message.
 *
 * @category errors
 * @since 0.1.0
 */
export class RemoteFailure extends Schema.TaggedError<RemoteFailure>()("RemoteFailure", {
  code: Schema.Number,
  message: Schema.String
}) {}

/**
 * Every failure a `ClusterApi` operation can end with.
 *
 * @category errors
 * @since 0.1.0
 */
export type DiscoveryError = InvalidArgument | ResourceExhausted | SubscriptionLost | Unavailable | RemoteFailure

/**
 * The message a watcher gets when it was cut off for falling behind.
 *
 * @category errors
 * @since 0.1.0
 */
export const lostUpdateMessage = "subscription canceled: lost update"

/**
 * The end of a watch whose backend lost the sequence of its cluster's changes
 * (a restart, a failover or a flush of a shared state), as its watchers see
 * it: the same failure as falling behind, so they start again. One value, so
 * the core can tell it from a watcher that fell behind by identity.
 *
 * @category errors
 * @since 0.1.0
 */
export const sequenceLost: SubscriptionLost = new SubscriptionLost({ message: lostUpdateMessage })

/**
 * The message of the Unavailable failure that ends calls when the service
 * shuts down.
 *
 * @category errors
 * @since 0.1.0
 */
export const shuttingDownMessage = "server is shutting down"
