/**
 * Request validation with the original's checks, order and messages, plus the
 * checks this service adds: endpoint blobs must be whole AES blocks and IDs must
 * be valid Unicode.
 *
 * @since 0.1.0
 */
import { Duration, Effect } from "effect"
import type { AffiliateUpdateRequest } from "../../ports/ClusterApi.ts"
import { InvalidArgument } from "../../ports/DiscoveryError.ts"
import { utf8Length } from "../utf8.ts"
import { Limits } from "./limits.ts"

/**
 * The UTF-8 byte length of a string.
 *
 * @category validation
 * @since 0.1.0
 */
export { utf8Length }

const checkId = (value: string, name: string, max: number): string | undefined => {
  if (value.length === 0) return `${name} can't be empty`
  if (utf8Length(value) > max) return `${name} is too long`
  if (!value.isWellFormed()) return `${name} is not valid UTF-8`
  return undefined
}

/**
 * Checks a cluster ID: not empty, at most 256 bytes, valid Unicode.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateClusterId = (clusterId: string): Effect.Effect<void, InvalidArgument> => {
  const problem = checkId(clusterId, "cluster ID", Limits.clusterIdMax)
  return problem === undefined ? Effect.void : Effect.fail(new InvalidArgument({ message: problem }))
}

/**
 * Checks the IDs of an affiliate request: the cluster ID, then the affiliate ID.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateAffiliateIds = (clusterId: string, affiliateId: string): Effect.Effect<void, InvalidArgument> => {
  const problem =
    checkId(clusterId, "cluster ID", Limits.clusterIdMax) ?? checkId(affiliateId, "affiliate ID", Limits.affiliateIdMax)
  return problem === undefined ? Effect.void : Effect.fail(new InvalidArgument({ message: problem }))
}

const ttlMax = Duration.millis(Limits.ttlMaxMillis)

const updateProblem = (request: AffiliateUpdateRequest): string | undefined => {
  const idProblem =
    checkId(request.clusterId, "cluster ID", Limits.clusterIdMax) ??
    checkId(request.affiliateId, "affiliate ID", Limits.affiliateIdMax)
  if (idProblem !== undefined) return idProblem
  if (request.data !== undefined && request.data.length > Limits.affiliateDataMax) return "affiliate data is too big"
  for (const endpoint of request.endpoints) {
    if (endpoint.length > Limits.affiliateEndpointMax) return "affiliate endpoint is too big"
    if (endpoint.length === 0 || endpoint.length % 16 !== 0) {
      return "affiliate endpoint must be a positive multiple of 16 bytes"
    }
  }
  if (Duration.isGreaterThan(request.ttl, ttlMax)) return "ttl is too large"
  return undefined
}

/**
 * Checks an AffiliateUpdate in the original's order: cluster ID, affiliate ID,
 * data size, each endpoint in turn, then the TTL's upper bound.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateUpdate = (request: AffiliateUpdateRequest): Effect.Effect<void, InvalidArgument> => {
  const problem = updateProblem(request)
  return problem === undefined ? Effect.void : Effect.fail(new InvalidArgument({ message: problem }))
}
