/**
 * The stored form of one affiliate and its merge and expiry rules. Instances are
 * mutable and owned by their cluster; watchers only ever see immutable views.
 *
 * @since 0.1.0
 */
import type { AffiliateView } from "../../ports/ClusterApi.ts"

/**
 * One endpoint blob and the instant (ms since the epoch) it expires.
 *
 * @category models
 * @since 0.1.0
 */
export interface StoredEndpoint {
  readonly data: Uint8Array
  expiresAt: number
}

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/**
 * The outcome of a GC pass over one affiliate.
 *
 * @category models
 * @since 0.1.0
 */
export type AffiliateExpiry = "kept" | "trimmed" | "expired"

/**
 * A stored affiliate: data, expiry and endpoints in insertion order.
 *
 * @category models
 * @since 0.1.0
 */
export class Affiliate {
  data: Uint8Array = new Uint8Array(0)
  /** Far past until the first merge sets it. */
  expiresAt = Number.NEGATIVE_INFINITY
  readonly endpoints: Array<StoredEndpoint> = []
  readonly id: string
  constructor(id: string) {
    this.id = id
  }

  /** The index of the stored endpoint with these bytes, or -1. */
  indexOfEndpoint(blob: Uint8Array): number {
    const endpoints = this.endpoints
    for (let i = 0; i < endpoints.length; i++) {
      if (sameBytes(endpoints[i]!.data, blob)) return i
    }
    return -1
  }

  /**
   * Whether storing these blobs would take the affiliate past `limit`
   * endpoints (duplicates in the list count once). It stops as soon as the
   * answer is known, so a request with many blobs costs O(blobs × limit).
   */
  wouldExceed(blobs: ReadonlyArray<Uint8Array>, limit: number): boolean {
    const room = limit - this.endpoints.length
    const added: Array<Uint8Array> = []
    for (const blob of blobs) {
      if (this.indexOfEndpoint(blob) !== -1) continue
      let seen = false
      for (let j = 0; j < added.length && !seen; j++) seen = sameBytes(added[j]!, blob)
      if (seen) continue
      added.push(blob)
      if (added.length > room) return true
    }
    return false
  }

  /**
   * Applies an update that already passed every limit check, expiring at
   * `expiresAt`. Stored bytes are copies. Returns whether a watcher can see a
   * difference.
   */
  merge(data: Uint8Array | undefined, blobs: ReadonlyArray<Uint8Array>, expiresAt: number): boolean {
    let changed = false
    if (data !== undefined && data.length > 0) {
      if (!sameBytes(this.data, data)) {
        this.data = data.slice()
        changed = true
      }
      this.expiresAt = expiresAt
    }
    for (const blob of blobs) {
      const index = this.indexOfEndpoint(blob)
      if (index === -1) {
        this.endpoints.push({ data: blob.slice(), expiresAt })
        changed = true
      } else {
        const endpoint = this.endpoints[index]!
        if (endpoint.expiresAt < expiresAt) endpoint.expiresAt = expiresAt
      }
    }
    if (this.expiresAt < expiresAt) this.expiresAt = expiresAt
    return changed
  }

  /**
   * Drops what has expired at `now`: the whole affiliate once its own expiry is
   * strictly past, otherwise every endpoint whose expiry is at or before `now`.
   */
  expire(now: number): AffiliateExpiry {
    if (this.expiresAt < now) return "expired"
    const endpoints = this.endpoints
    let kept = 0
    for (let i = 0; i < endpoints.length; i++) {
      const endpoint = endpoints[i]!
      if (endpoint.expiresAt > now) endpoints[kept++] = endpoint
    }
    if (kept === endpoints.length) return "kept"
    endpoints.length = kept
    return "trimmed"
  }

  /** A copy of what a watcher sees; changing its bytes never reaches the store. */
  view(): AffiliateView {
    const endpoints = new Array<Uint8Array>(this.endpoints.length)
    for (let i = 0; i < endpoints.length; i++) endpoints[i] = this.endpoints[i]!.data.slice()
    return { id: this.id, data: this.data.slice(), endpoints }
  }
}
