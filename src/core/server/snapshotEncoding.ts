/**
 * The snapshot encoder (PROTOCOL.md §1.5), byte-exact with the original:
 * fields in ascending order, defaults left out, TTLs as whole seconds
 * truncated toward zero, never the legacy expiration. It writes from the
 * store's compact {@link Affiliate}s, one cluster at a time: the sizes of a
 * cluster's messages first, then its record, into one buffer reused from
 * piece to piece.
 *
 * @since 0.1.0
 */
import { joinPieces } from "../../ports/SnapshotStore.ts"
import { utf8Length } from "../utf8.ts"
import { fieldSize, putHeader, putUtf8, putVarint, varintSize } from "../wire/wireWriter.ts"
import { Affiliate } from "./Affiliate.ts"
import { writeBytes } from "./binaryString.ts"
import type { ClusterEntry, EncodedSnapshot, PackedAffiliates, SnapshotContents } from "./snapshotFormat.ts"
import { maxClusterSize, maxDurationSeconds } from "./snapshotFormat.ts"

/** The TTL written for an entry: whole seconds left, truncated toward zero, saturated like Go's Duration. */
const ttlSeconds = (expiresAt: number, now: number): number =>
  Math.min(Math.max(Math.trunc((expiresAt - now) / 1000), -maxDurationSeconds), maxDurationSeconds)

/** Bytes of a Duration holding only `seconds` (nanos is always 0, so left out). */
const durationSize = (seconds: number): number => (seconds === 0 ? 0 : 1 + varintSize(seconds))

/** Body bytes of an EndpointSnapshot with `length` bytes of data and a TTL of `seconds`. */
const endpointSize = (length: number, seconds: number): number =>
  (length > 0 ? fieldSize(length) : 0) + fieldSize(durationSize(seconds))

/** Writes a Duration field holding only `seconds`; returns the position after it. */
const putDuration = (bytes: Uint8Array, pos: number, tag: number, seconds: number): number => {
  bytes[pos++] = tag
  if (seconds === 0) {
    bytes[pos++] = 0
    return pos
  }
  pos = putVarint(bytes, pos, 1 + varintSize(seconds))
  bytes[pos++] = 0x08
  return putVarint(bytes, pos, seconds)
}

/** Writes a string field of `length` UTF-8 bytes; returns the position after it. */
const putStringField = (bytes: Uint8Array, pos: number, tag: number, text: string, length: number): number => {
  pos = putHeader(bytes, pos, tag, length)
  if (length !== text.length) return putUtf8(bytes, pos, text)
  // Only ASCII has as many UTF-8 bytes as UTF-16 units: its chars are its bytes.
  writeBytes(text, 0, length, bytes, pos)
  return pos + length
}

/** Writes a bytes field holding `record[start, end)`, one byte per char; returns the position after it. */
const putBytesField = (bytes: Uint8Array, pos: number, tag: number, record: string, start: number, end: number) => {
  pos = putHeader(bytes, pos, tag, end - start)
  writeBytes(record, start, end, bytes, pos)
  return pos + end - start
}

/** Writes an AffiliateSnapshot of `size` body bytes, its ID `idLength` bytes long; returns the position after it. */
const putAffiliate = (
  bytes: Uint8Array,
  pos: number,
  affiliate: Affiliate,
  size: number,
  idLength: number,
  now: number
): number => {
  const record = affiliate.unsafeRecord
  const layout = affiliate.unsafeLayout
  pos = putHeader(bytes, pos, 0x12, size)
  if (idLength > 0) pos = putStringField(bytes, pos, 0x0a, affiliate.id, idLength)
  const dataEnd = layout[1]!
  if (dataEnd > 0) pos = putBytesField(bytes, pos, 0x1a, record, 0, dataEnd)
  for (let j = 2; j < layout.length; j += 2) {
    const start = layout[j - 1]!
    const end = layout[j + 1]!
    const seconds = ttlSeconds(layout[j]!, now)
    pos = putHeader(bytes, pos, 0x22, endpointSize(end - start, seconds))
    if (end > start) pos = putBytesField(bytes, pos, 0x12, record, start, end)
    pos = putDuration(bytes, pos, 0x1a, seconds)
  }
  return putDuration(bytes, pos, 0x2a, ttlSeconds(layout[0]!, now))
}

/** Body bytes of an AffiliateSnapshot whose ID has `idLength` bytes. */
const affiliateSize = (affiliate: Affiliate, idLength: number, now: number): number => {
  const layout = affiliate.unsafeLayout
  let size = idLength === 0 ? 0 : fieldSize(idLength)
  if (layout[1]! > 0) size += fieldSize(layout[1]!)
  for (let j = 2; j < layout.length; j += 2) {
    size += fieldSize(endpointSize(layout[j + 1]! - layout[j - 1]!, ttlSeconds(layout[j]!, now)))
  }
  return size + fieldSize(durationSize(ttlSeconds(layout[0]!, now)))
}

/** Body bytes of the AffiliateSnapshot whose spans start at `spans[at]` (see `PackedAffiliates.spans`). */
const spannedAffiliateSize = (spans: ReadonlyArray<number>, at: number, now: number): number => {
  const idLength = spans[at + 2]! - spans[at + 1]!
  const dataLength = spans[at + 4]! - spans[at + 3]!
  const count = spans[at + 5]!
  let size = idLength === 0 ? 0 : fieldSize(idLength)
  if (dataLength > 0) size += fieldSize(dataLength)
  for (let k = 0, j = at + 6; k < count; k++, j += 3) {
    size += fieldSize(endpointSize(spans[j + 1]! - spans[j]!, ttlSeconds(spans[j + 2]!, now)))
  }
  return size + fieldSize(durationSize(ttlSeconds(spans[at]!, now)))
}

/**
 * Writes the AffiliateSnapshot whose spans start at `spans[at]`, of `size`
 * body bytes, from the packed `record`: the same bytes `putAffiliate` writes
 * for it once unpacked. Returns the position after it.
 */
const putSpannedAffiliate = (
  bytes: Uint8Array,
  pos: number,
  record: string,
  spans: ReadonlyArray<number>,
  at: number,
  size: number,
  now: number
): number => {
  pos = putHeader(bytes, pos, 0x12, size)
  // An ID's bytes are its UTF-8, as `putStringField` writes it.
  if (spans[at + 2]! > spans[at + 1]!) pos = putBytesField(bytes, pos, 0x0a, record, spans[at + 1]!, spans[at + 2]!)
  if (spans[at + 4]! > spans[at + 3]!) pos = putBytesField(bytes, pos, 0x1a, record, spans[at + 3]!, spans[at + 4]!)
  const count = spans[at + 5]!
  for (let k = 0, j = at + 6; k < count; k++, j += 3) {
    const start = spans[j]!
    const end = spans[j + 1]!
    const seconds = ttlSeconds(spans[j + 2]!, now)
    pos = putHeader(bytes, pos, 0x22, endpointSize(end - start, seconds))
    if (end > start) pos = putBytesField(bytes, pos, 0x12, record, start, end)
    pos = putDuration(bytes, pos, 0x1a, seconds)
  }
  return putDuration(bytes, pos, 0x2a, ttlSeconds(spans[at]!, now))
}

/**
 * Two buffers records are written into in turn: the current one is handed
 * out as a piece when the next record would take it past a piece's size, and
 * writing goes on in the other. Each grows up to that size (further for a
 * larger record, and back once that piece is consumed) and is then reused,
 * so a piece stays valid until the piece after the next one is asked for.
 */
class Pieces {
  bytes: Uint8Array
  pos = 0
  private spare: Uint8Array
  private readonly pieceBytes: number
  constructor(pieceBytes: number) {
    this.pieceBytes = pieceBytes
    this.bytes = new Uint8Array(Math.min(pieceBytes, 1 << 16))
    this.spare = new Uint8Array(this.bytes.length)
  }

  /** True when a record of `size` bytes should start a new piece. */
  full(size: number): boolean {
    return this.pos > 0 && this.pos + size > this.pieceBytes
  }

  /** Makes room for a record of `size` bytes. */
  room(size: number): void {
    if (this.pos + size <= this.bytes.length) return
    const grown = new Uint8Array(Math.max(this.pos + size, Math.min(2 * this.bytes.length, this.pieceBytes)))
    grown.set(this.bytes.subarray(0, this.pos))
    this.bytes = grown
  }

  /**
   * What the buffer holds, as a piece; writing goes on in the other buffer,
   * whose piece was consumed (a buffer grown past twice a piece's size for
   * one large record is let go then).
   */
  take(): Uint8Array {
    const piece = this.bytes.subarray(0, this.pos)
    const next = this.spare
    this.spare = this.bytes
    this.bytes = next.length > 2 * this.pieceBytes ? new Uint8Array(this.pieceBytes) : next
    this.pos = 0
    return piece
  }
}

/**
 * The size of the pieces `encodeTo` emits by default: 1 MiB, small enough
 * for the buffer to stay in the processor's cache.
 *
 * @category encoding
 * @since 0.1.0
 */
export const defaultPieceBytes = 1024 * 1024

/**
 * Encodes clusters as the snapshot file, with every TTL measured from `now`
 * (ms since the epoch). Runs in one synchronous step, so the snapshot is
 * consistent across all clusters. Clusters with no affiliates are written as
 * a record holding only the ID; an empty iterable gives empty bytes.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encode = (clusters: Iterable<ClusterEntry>, now: number): EncodedSnapshot => {
  const pieces: Array<Uint8Array> = []
  const contents = encodeTo(clusters, now, (piece) => {
    pieces.push(piece.slice())
  })
  const bytes = pieces.length === 1 ? pieces[0]! : joinPieces(pieces)
  return {
    bytes,
    clusters: contents.clusters,
    affiliates: contents.affiliates,
    endpoints: contents.endpoints,
    oversized: contents.oversized
  }
}

/**
 * `encode`, handing the bytes to `emit` as they are written, in pieces of
 * whole cluster records of about `pieceBytes` (a larger record is a piece of
 * its own), in one synchronous step. Every piece is a view of a reused
 * buffer, overwritten after `emit` returns: the receiver writes or copies it
 * before that.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeTo = (
  clusters: Iterable<ClusterEntry>,
  now: number,
  emit: (piece: Uint8Array) => void,
  pieceBytes: number = defaultPieceBytes
): SnapshotContents => {
  const pieces = encodePieces(clusters, now, pieceBytes)
  for (let next = pieces.next(); ; next = pieces.next()) {
    if (next.done) return next.value
    emit(next.value)
  }
}

/**
 * The pieces of `encode`'s bytes, made as they are asked for, of whole
 * cluster records of about `pieceBytes` (a larger record is a piece of its
 * own); the generator returns what was written. Each piece is a view of one
 * of two reused buffers, valid until the piece after the next one is asked
 * for, so a piece can be written while the next is made. Each cluster
 * record is read and written in one synchronous step, so it is consistent;
 * between pieces the caller may let other work change clusters not written
 * yet, as the original's per-cluster locking allows.
 *
 * @category encoding
 * @since 0.1.0
 */
export function* encodePieces(
  clusters: Iterable<ClusterEntry>,
  now: number,
  pieceBytes: number = defaultPieceBytes
): Generator<Uint8Array, SnapshotContents, undefined> {
  const out = new Pieces(pieceBytes)
  // One cluster's affiliates, sizes and ID lengths (or, packed, where each one's spans start): sized first, then
  // written while still in cache.
  const members: Array<Affiliate> = []
  let sizes = new Float64Array(64)
  let idLengths = new Float64Array(64)
  let packed: PackedAffiliates | undefined
  const spans: Array<number> = []
  let n = 0
  let endpoints = 0
  const oversized: Array<string> = []
  let total = 0
  let clusterCount = 0
  let affiliateCount = 0
  let endpointCount = 0
  /** Makes room for `count` affiliates in `sizes` and `idLengths`. */
  const reserve = (count: number): void => {
    if (count <= sizes.length) return
    sizes = new Float64Array(2 * count)
    idLengths = new Float64Array(2 * count)
  }
  /** Sizes `cluster` into `members` (or `spans`), `sizes` and `idLengths`; returns its body size. */
  const size = (cluster: ClusterEntry, idLength: number): number => {
    let clusterSize = idLength === 0 ? 0 : fieldSize(idLength)
    members.length = 0
    endpoints = 0
    n = 0
    packed = cluster.packed
    if (packed !== undefined) {
      reserve(packed.affiliates)
      const length = packed.spans(spans)
      for (let at = 0; at < length; at += 6 + 3 * spans[at + 5]!) {
        const bodySize = spannedAffiliateSize(spans, at, now)
        sizes[n] = bodySize
        idLengths[n++] = at
        clusterSize += fieldSize(bodySize)
        endpoints += spans[at + 5]!
      }
      return clusterSize
    }
    reserve(cluster.affiliates.size)
    for (const entry of cluster.affiliates.values()) {
      const affiliate = entry instanceof Affiliate ? entry : Affiliate.fromEntry(entry)
      const affiliateIdLength = utf8Length(affiliate.id)
      const bodySize = affiliateSize(affiliate, affiliateIdLength, now)
      members[n] = affiliate
      sizes[n] = bodySize
      idLengths[n++] = affiliateIdLength
      clusterSize += fieldSize(bodySize)
      endpoints += affiliate.endpointCount
    }
    return clusterSize
  }
  for (const cluster of clusters) {
    const idLength = utf8Length(cluster.id)
    let clusterSize = size(cluster, idLength)
    if (clusterSize <= maxClusterSize && out.full(fieldSize(clusterSize))) {
      yield out.take()
      // The cluster may have changed while the piece was consumed: size it again.
      clusterSize = size(cluster, idLength)
    }
    if (clusterSize > maxClusterSize) {
      oversized.push(cluster.id)
      members.length = 0
      continue
    }
    const recordSize = fieldSize(clusterSize)
    out.room(recordSize)
    const bytes = out.bytes
    let pos = putHeader(bytes, out.pos, 0x0a, clusterSize)
    if (idLength > 0) pos = putStringField(bytes, pos, 0x0a, cluster.id, idLength)
    if (packed !== undefined) {
      const record = packed.record
      for (let i = 0; i < n; i++) pos = putSpannedAffiliate(bytes, pos, record, spans, idLengths[i]!, sizes[i]!, now)
    } else {
      for (let i = 0; i < n; i++) pos = putAffiliate(bytes, pos, members[i]!, sizes[i]!, idLengths[i]!, now)
    }
    out.pos = pos
    members.length = 0
    total += recordSize
    clusterCount++
    affiliateCount += n
    endpointCount += endpoints
  }
  if (out.pos > 0) yield out.take()
  return { clusters: clusterCount, affiliates: affiliateCount, endpoints: endpointCount, oversized, size: total }
}
