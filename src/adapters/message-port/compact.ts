/**
 * What crosses the port is structured-cloned, and cloning a byte array
 * copies the whole buffer under it, not just its bytes: an affiliate's data
 * that is a view into a 64 KiB read buffer would cost 64 KiB a crossing. So
 * bytes cross in buffers of their own: copied out when they are views
 * (`ownBytes`), in requests, affiliates and addresses.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"
import type { AffiliateUpdateRequest, AffiliateView, WatchDelta, WatchStart } from "../../ports/ClusterApi.ts"

/**
 * `bytes`, or a copy of them when they are a view into a larger buffer.
 *
 * @category codecs
 * @since 0.1.0
 */
export const ownBytes = (bytes: Uint8Array): Uint8Array =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice()

/**
 * An affiliate whose bytes are in buffers of their own.
 *
 * @category codecs
 * @since 0.1.0
 */
export const ownAffiliate = (affiliate: AffiliateView): AffiliateView => ({
  id: affiliate.id,
  data: ownBytes(affiliate.data),
  endpoints: affiliate.endpoints.map(ownBytes)
})

const ownDelta = (delta: WatchDelta): WatchDelta =>
  delta._tag === "Updated" ? { ...delta, affiliate: ownAffiliate(delta.affiliate) } : delta

/**
 * A watch's start whose bytes are in buffers of their own.
 *
 * @category codecs
 * @since 0.1.0
 */
export const ownStart = (start: WatchStart): WatchStart =>
  start._tag === "Snapshot"
    ? { ...start, affiliates: start.affiliates.map(ownAffiliate) }
    : { ...start, missed: start.missed.map(ownDelta) }

/**
 * An AffiliateUpdate as it crosses the port: its TTL in milliseconds, its
 * bytes in buffers of their own.
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
export const toWireUpdate = ({
  ttl,
  data,
  endpoints,
  clientAddress,
  ...request
}: AffiliateUpdateRequest): WireUpdate => {
  const wire = {
    ...request,
    data: data === undefined ? undefined : ownBytes(data),
    endpoints: endpoints.map(ownBytes),
    ttlMillis: Duration.toMillis(ttl)
  }
  return clientAddress === undefined ? wire : { ...wire, clientAddress: ownBytes(clientAddress) }
}

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
