/**
 * The protocol's fixed limits, as the original service enforces them. Sizes are
 * UTF-8 bytes; durations are milliseconds.
 *
 * @since 0.1.0
 */

/**
 * The protocol limits (PROTOCOL.md §2.2).
 *
 * @category models
 * @since 0.1.0
 */
export const Limits = {
  clusterIdMax: 256,
  affiliateIdMax: 256,
  affiliateDataMax: 2048,
  affiliateEndpointMax: 32,
  ttlMaxMillis: 30 * 60 * 1000,
  clusterAffiliatesMax: 1024,
  affiliateEndpointsMax: 64,
  watchBuffer: 32
} as const

/**
 * The messages of the RESOURCE_EXHAUSTED errors a cap or limit gives, as the
 * original words them; every backend uses these.
 *
 * @category models
 * @since 0.1.0
 */
export const LimitMessages = {
  tooManyAffiliates: "too many affiliates in the cluster",
  tooManyEndpoints: "too many endpoints in the affiliate",
  tooManyClusters: "too many clusters",
  tooManyWatches: "too many watches"
} as const
