/**
 * The stored form of one affiliate and its merge and expiry rules. Instances are
 * mutable and owned by their cluster; watchers only ever see immutable views.
 *
 * An affiliate is kept compact, because the service holds hundreds of
 * thousands: its data and endpoints are one binary string (one char per
 * byte, see `binaryString.ts`), and their bounds and expiries one exact-size
 * array of numbers.
 *
 * @since 0.1.0
 */
import type { AffiliateView } from "../../ports/ClusterApi.ts"
import { BinaryStringBuilder, sameBytes, toBytes } from "./binaryString.ts"

/**
 * One endpoint as plain data, as the snapshot encoder reads it. Times are
 * milliseconds since the epoch.
 *
 * @category models
 * @since 0.1.0
 */
export interface EndpointEntry {
  readonly data: Uint8Array
  readonly expiresAt: number
}

/**
 * One affiliate as plain data: what {@link Affiliate.fromEntry} copies, and
 * what the snapshot encoder reads.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateEntry {
  readonly id: string
  readonly data: Uint8Array
  readonly expiresAt: number
  readonly endpoints: ReadonlyArray<EndpointEntry>
}

/**
 * A copy of one stored endpoint and the instant (ms since the epoch) it
 * expires.
 *
 * @category models
 * @since 0.1.0
 */
export interface StoredEndpoint {
  readonly data: Uint8Array
  readonly expiresAt: number
}

/**
 * The outcome of a GC pass over one affiliate.
 *
 * @category models
 * @since 0.1.0
 */
export type AffiliateExpiry = "kept" | "trimmed" | "expired"

const builder = new BinaryStringBuilder()

/**
 * A merge changed the data (see `Affiliate.merge`).
 *
 * @category models
 * @since 0.1.0
 */
export const mergedData = 1

/**
 * A merge added endpoints (see `Affiliate.merge`).
 *
 * @category models
 * @since 0.1.0
 */
export const mergedEndpoints = 2

/** Arrays of doubles of each length a layout can have without a huge snapshot entry, copied by `layoutOf`. */
const templates: Array<Array<number>> = []

/**
 * A new layout of `length` numbers, with no spare capacity (unlike an array
 * grown by `push`) and stored as doubles from the start (unlike `new Array`,
 * which is converted, copied, on the first non-integer store).
 *
 * @category constructors
 * @since 0.1.0
 */
export const layoutOf = (length: number): Array<number> => {
  if (length > 130) return new Array<number>(length).fill(0.5)
  let template = templates[length]
  if (template === undefined) {
    template = new Array<number>(length).fill(0.5)
    templates[length] = template
  }
  return template.slice()
}

/**
 * A stored affiliate: data, expiry and endpoints in insertion order.
 *
 * The layout: `record` holds the data and then each endpoint, back to back,
 * one char per byte; `layout` is `[expiresAt, dataEnd]` followed by
 * `[expiresAt, end]` for each endpoint, where an end is an offset in
 * `record` and each piece starts where the previous one ends.
 *
 * @category models
 * @since 0.1.0
 */
export class Affiliate implements AffiliateEntry {
  readonly id: string
  private record: string
  private layout: Array<number>
  /** Starts with no data, no endpoints and an expiry in the far past. */
  constructor(id: string)
  /** @internal */
  constructor(id: string, record: string, layout: Array<number>)
  constructor(id: string, record = "", layout?: Array<number>) {
    this.id = id
    this.record = record
    this.layout = layout ?? [Number.NEGATIVE_INFINITY, 0]
  }

  /**
   * An affiliate over a record and layout built elsewhere (the snapshot
   * decoder, with {@link layoutOf}), taken as they are: the caller must not
   * keep or change them.
   */
  static unsafeMake(id: string, record: string, layout: Array<number>): Affiliate {
    return new Affiliate(id, record, layout)
  }

  /** A stored affiliate holding copies of an entry's bytes, endpoints (duplicates included) and expiries. */
  static fromEntry(entry: AffiliateEntry): Affiliate {
    const count = entry.endpoints.length
    const layout = layoutOf(2 + 2 * count)
    layout[0] = entry.expiresAt
    layout[1] = entry.data.length
    builder.bytes(entry.data, 0, entry.data.length)
    let end = entry.data.length
    for (let i = 0; i < count; i++) {
      const endpoint = entry.endpoints[i]!
      builder.bytes(endpoint.data, 0, endpoint.data.length)
      end += endpoint.data.length
      layout[2 + 2 * i] = endpoint.expiresAt
      layout[3 + 2 * i] = end
    }
    return Affiliate.unsafeMake(entry.id, builder.finish(), layout)
  }

  /** The data and endpoints, one char per byte, as the layout describes (read-only). */
  get unsafeRecord(): string {
    return this.record
  }

  /** `[expiresAt, dataEnd, ...[endpointExpiresAt, endpointEnd]]` over the record (read-only). */
  get unsafeLayout(): ReadonlyArray<number> {
    return this.layout
  }

  /** When the affiliate expires (ms since the epoch); far past until the first merge. */
  get expiresAt(): number {
    return this.layout[0]!
  }

  /** How many endpoints are stored. */
  get endpointCount(): number {
    return (this.layout.length - 2) >> 1
  }

  /** A copy of the data. */
  get data(): Uint8Array {
    return toBytes(this.record, 0, this.layout[1]!)
  }

  /** Copies of the endpoints with their expiries, in insertion order. */
  get endpoints(): Array<StoredEndpoint> {
    const layout = this.layout
    const endpoints = new Array<StoredEndpoint>(this.endpointCount)
    for (let i = 0, j = 2; j < layout.length; i++, j += 2) {
      endpoints[i] = { data: toBytes(this.record, layout[j - 1]!, layout[j + 1]!), expiresAt: layout[j]! }
    }
    return endpoints
  }

  /** The index of the stored endpoint with these bytes, or -1. */
  indexOfEndpoint(blob: Uint8Array): number {
    const layout = this.layout
    const record = this.record
    for (let j = 2; j < layout.length; j += 2) {
      if (sameBytes(record, layout[j - 1]!, layout[j + 1]!, blob)) return (j - 2) >> 1
    }
    return -1
  }

  /**
   * Whether storing these blobs would take the affiliate past `limit`
   * endpoints (duplicates in the list count once). It stops as soon as the
   * answer is known, so a request with many blobs costs O(blobs × limit).
   */
  wouldExceed(blobs: ReadonlyArray<Uint8Array>, limit: number): boolean {
    const room = limit - this.endpointCount
    const added: Array<Uint8Array> = []
    for (const blob of blobs) {
      if (this.indexOfEndpoint(blob) !== -1 || isAmong(added, blob)) continue
      added.push(blob)
      if (added.length > room) return true
    }
    return false
  }

  /**
   * Applies an update that already passed every limit check, expiring at
   * `expiresAt`. Stored bytes are copies. Returns what a watcher can see
   * changed: `mergedData`, `mergedEndpoints`, both (or-ed), or 0 for nothing.
   */
  merge(data: Uint8Array | undefined, blobs: ReadonlyArray<Uint8Array>, expiresAt: number): number {
    const layout = this.layout
    let newData: Uint8Array | undefined
    if (data !== undefined && data.length > 0) {
      if (!sameBytes(this.record, 0, layout[1]!, data)) newData = data
      layout[0] = expiresAt
    }
    let added: Array<Uint8Array> | undefined
    for (const blob of blobs) {
      const index = this.indexOfEndpoint(blob)
      if (index !== -1) {
        const slot = 2 + 2 * index
        if (layout[slot]! < expiresAt) layout[slot] = expiresAt
      } else if (added === undefined) added = [blob]
      else if (!isAmong(added, blob)) added.push(blob)
    }
    const changed = (newData === undefined ? 0 : mergedData) | (added === undefined ? 0 : mergedEndpoints)
    if (changed !== 0) this.rebuild(newData, added ?? [], expiresAt)
    if (this.layout[0]! < expiresAt) this.layout[0] = expiresAt
    return changed
  }

  /** The latest expiry among the endpoints that expire at `now` (see `expire`), or `undefined` when none does. */
  lastEndpointExpiryBy(now: number): number | undefined {
    const layout = this.layout
    let latest: number | undefined
    for (let j = 2; j < layout.length; j += 2) {
      if (layout[j]! <= now && (latest === undefined || layout[j]! > latest)) latest = layout[j]!
    }
    return latest
  }

  /**
   * Drops what has expired at `now`: the whole affiliate once its own expiry is
   * strictly past, otherwise every endpoint whose expiry is at or before `now`.
   */
  expire(now: number): AffiliateExpiry {
    const layout = this.layout
    if (layout[0]! < now) return "expired"
    let kept = 0
    for (let j = 2; j < layout.length; j += 2) if (layout[j]! > now) kept++
    if (kept === this.endpointCount) return "kept"
    const record = this.record
    const trimmed = layoutOf(2 + 2 * kept)
    trimmed[0] = layout[0]!
    trimmed[1] = layout[1]!
    builder.chars(record, 0, layout[1]!)
    let end = layout[1]!
    for (let j = 2, k = 2; j < layout.length; j += 2) {
      if (layout[j]! <= now) continue
      const start = layout[j - 1]!
      builder.chars(record, start, layout[j + 1]!)
      end += layout[j + 1]! - start
      trimmed[k++] = layout[j]!
      trimmed[k++] = end
    }
    this.record = builder.finish()
    this.layout = trimmed
    return "trimmed"
  }

  /** A copy of what a watcher sees; changing its bytes never reaches the store. */
  view(): AffiliateView {
    const layout = this.layout
    const record = this.record
    const endpoints = new Array<Uint8Array>(this.endpointCount)
    for (let i = 0, j = 2; j < layout.length; i++, j += 2)
      endpoints[i] = toBytes(record, layout[j - 1]!, layout[j + 1]!)
    return { id: this.id, data: toBytes(record, 0, layout[1]!), endpoints }
  }

  /** Replaces the data (when `data` is given) and appends `added` endpoints, all expiring at `expiresAt`. */
  private rebuild(data: Uint8Array | undefined, added: ReadonlyArray<Uint8Array>, expiresAt: number): void {
    const layout = this.layout
    const record = this.record
    const oldDataEnd = layout[1]!
    const dataEnd = data === undefined ? oldDataEnd : data.length
    const shift = dataEnd - oldDataEnd
    const next = layoutOf(layout.length + 2 * added.length)
    next[0] = layout[0]!
    next[1] = dataEnd
    if (data === undefined) builder.chars(record, 0, oldDataEnd)
    else builder.bytes(data, 0, data.length)
    builder.chars(record, oldDataEnd, record.length)
    for (let j = 2; j < layout.length; j += 2) {
      next[j] = layout[j]!
      next[j + 1] = layout[j + 1]! + shift
    }
    let end = record.length + shift
    for (let i = 0, j = layout.length; i < added.length; i++, j += 2) {
      const blob = added[i]!
      builder.bytes(blob, 0, blob.length)
      end += blob.length
      next[j] = expiresAt
      next[j + 1] = end
    }
    this.record = builder.finish()
    this.layout = next
  }
}

const isAmong = (blobs: ReadonlyArray<Uint8Array>, blob: Uint8Array): boolean => {
  for (const other of blobs) {
    if (other.length !== blob.length) continue
    let i = 0
    while (i < blob.length && other[i] === blob[i]) i++
    if (i === blob.length) return true
  }
  return false
}
