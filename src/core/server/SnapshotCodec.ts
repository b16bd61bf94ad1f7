/**
 * The snapshot file format of the original service (`state.binpb`), encoded
 * and decoded by hand: the protobuf encoding of a `StateSnapshot`, one
 * `0A len ClusterSnapshot` record per cluster (PROTOCOL.md §1.4, §1.5).
 *
 * Writing is byte-exact with the original: fields in ascending order, defaults
 * left out, TTLs as whole seconds truncated toward zero, never the legacy
 * expiration. Reading takes every complete, well-formed record and reports
 * precisely what it had to skip, instead of failing the whole load: truncated
 * or malformed records, records over {@link maxClusterSize}, duplicate cluster
 * IDs and unknown top-level fields. Pure functions over bytes, no I/O.
 *
 * @since 0.1.0
 */
import { utf8Length } from "../utf8.ts"
import { Affiliate, layoutOf } from "./Affiliate.ts"
import { BinaryStringBuilder, writeBytes } from "./binaryString.ts"

/**
 * The largest ClusterSnapshot record accepted, in bytes: the exact size of a
 * cluster of 1024 affiliates, each with a 256-byte ID, 2048-byte data and 64
 * endpoints of 2048 bytes, with the largest TTLs.
 *
 * @category models
 * @since 0.1.0
 */
export const maxClusterSize = 137_912_579

/**
 * One endpoint as the encoder reads it and the decoder returns it. Times are
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
 * One affiliate as the encoder reads it and the decoder returns it.
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
 * One cluster as the encoder reads it. The store's own clusters have this
 * shape, and their {@link Affiliate} values are encoded straight from their
 * compact form; other entries are copied into that form first.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterEntry {
  readonly id: string
  readonly affiliates: ReadonlyMap<string, AffiliateEntry>
}

/**
 * One cluster as the decoder returns it: its affiliates are already in the
 * store's compact form, ready for `ClusterStore.restore` to take over.
 *
 * @category models
 * @since 0.1.0
 */
export interface DecodedCluster extends ClusterEntry {
  readonly affiliates: ReadonlyMap<string, Affiliate>
}

/**
 * The encoded snapshot and what it holds.
 *
 * @category models
 * @since 0.1.0
 */
export interface EncodedSnapshot {
  readonly bytes: Uint8Array
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  /** IDs of clusters left out because their record would exceed {@link maxClusterSize}. */
  readonly oversized: ReadonlyArray<string>
}

/**
 * A byte range of a snapshot that was not loaded, and why.
 *
 * @category models
 * @since 0.1.0
 */
export interface SkippedRange {
  readonly offset: number
  readonly length: number
  readonly reason: string
}

/**
 * What the decoder read: the clusters in file order, and the ranges it had to
 * skip (empty for an intact snapshot).
 *
 * @category models
 * @since 0.1.0
 */
export interface DecodedSnapshot {
  readonly clusters: ReadonlyArray<DecodedCluster>
  readonly skipped: ReadonlyArray<SkippedRange>
  readonly size: number
}

// Go's time.Duration bounds (±(2^63−1) ns) in whole seconds and in milliseconds.
const maxDurationSeconds = 9_223_372_036
const maxDurationMillis = 9_223_372_036_854

/** The TTL written for an entry: whole seconds left, truncated toward zero, saturated like Go's Duration. */
const ttlSeconds = (expiresAt: number, now: number): number =>
  Math.min(Math.max(Math.trunc((expiresAt - now) / 1000), -maxDurationSeconds), maxDurationSeconds)

const varintSize = (value: number): number => {
  if (value < 0) return 10
  let size = 1
  while (value >= 128) {
    value = Math.floor(value / 128)
    size++
  }
  return size
}

/** Bytes of a length-delimited field with a one-byte tag. */
const fieldSize = (length: number): number => 1 + varintSize(length) + length

/** Bytes of a Duration holding only `seconds` (nanos is always 0, so left out). */
const durationSize = (seconds: number): number => (seconds === 0 ? 0 : 1 + varintSize(seconds))

/** Body bytes of an EndpointSnapshot with `length` bytes of data expiring at `expiresAt`. */
const endpointSize = (length: number, expiresAt: number, now: number): number =>
  (length > 0 ? fieldSize(length) : 0) + fieldSize(durationSize(ttlSeconds(expiresAt, now)))

class Writer {
  bytes: Uint8Array
  pos = 0
  /** Bytes handed to `emit` so far. */
  private emitted = 0
  private readonly total: number
  private readonly pieceBytes: number
  private readonly emit: (piece: Uint8Array) => void
  /** Writes `total` bytes in buffers of `pieceBytes` (more for a record that needs it), each handed to `emit` when full. */
  constructor(total: number, pieceBytes: number, emit: (piece: Uint8Array) => void) {
    this.bytes = new Uint8Array(Math.min(total, pieceBytes))
    this.total = total
    this.pieceBytes = pieceBytes
    this.emit = emit
  }

  /** Makes room for a record of `size` bytes: when the buffer cannot hold it, the buffer is emitted and a new one started. */
  room(size: number): void {
    if (this.pos + size <= this.bytes.length) return
    this.flush()
    this.bytes = new Uint8Array(Math.min(Math.max(size, this.pieceBytes), this.total - this.emitted))
  }

  /** Emits what the buffer holds. */
  flush(): void {
    if (this.pos === 0) return
    this.emit(this.pos === this.bytes.length ? this.bytes : this.bytes.subarray(0, this.pos))
    this.emitted += this.pos
    this.pos = 0
  }

  byte(value: number): void {
    this.bytes[this.pos++] = value
  }

  varint(value: number): void {
    if (value >= 0 && value <= 0x7fff_ffff) {
      const bytes = this.bytes
      let pos = this.pos
      let rest = value | 0
      while (rest >= 0x80) {
        bytes[pos++] = (rest & 0x7f) | 0x80
        rest >>>= 7
      }
      bytes[pos++] = rest
      this.pos = pos
      return
    }
    if (value < 0) {
      let big = BigInt.asUintN(64, BigInt(value))
      for (let i = 0; i < 9; i++) {
        this.bytes[this.pos++] = Number(big & 0x7fn) | 0x80
        big >>= 7n
      }
      this.bytes[this.pos++] = Number(big)
      return
    }
    while (value >= 128) {
      this.bytes[this.pos++] = (value % 128) | 0x80
      value = Math.floor(value / 128)
    }
    this.bytes[this.pos++] = value
  }

  /** A bytes field holding the chars `record[start, end)` of a binary string. */
  blob(tag: number, record: string, start: number, end: number): void {
    this.byte(tag)
    this.varint(end - start)
    writeBytes(record, start, end, this.bytes, this.pos)
    this.pos += end - start
  }

  string(tag: number, text: string, length: number): void {
    this.byte(tag)
    this.varint(length)
    const bytes = this.bytes
    let pos = this.pos
    if (length === text.length) {
      // Only ASCII has as many UTF-8 bytes as UTF-16 units.
      for (let i = 0; i < length; i++) bytes[pos++] = text.charCodeAt(i)
      this.pos = pos
      return
    }
    for (let i = 0; i < text.length; i++) {
      let code = text.charCodeAt(i)
      if (code < 0x80) {
        bytes[pos++] = code
        continue
      }
      if (code >= 0xd800 && code <= 0xdfff) {
        const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0
        if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00)
          i++
        } else code = 0xfffd
      }
      if (code < 0x800) {
        bytes[pos++] = 0xc0 | (code >> 6)
        bytes[pos++] = 0x80 | (code & 0x3f)
      } else if (code < 0x10000) {
        bytes[pos++] = 0xe0 | (code >> 12)
        bytes[pos++] = 0x80 | ((code >> 6) & 0x3f)
        bytes[pos++] = 0x80 | (code & 0x3f)
      } else {
        bytes[pos++] = 0xf0 | (code >> 18)
        bytes[pos++] = 0x80 | ((code >> 12) & 0x3f)
        bytes[pos++] = 0x80 | ((code >> 6) & 0x3f)
        bytes[pos++] = 0x80 | (code & 0x3f)
      }
    }
    this.pos = pos
  }

  duration(tag: number, seconds: number): void {
    this.byte(tag)
    if (seconds === 0) {
      this.byte(0)
      return
    }
    this.varint(1 + varintSize(seconds))
    this.byte(0x08)
    this.varint(seconds)
  }
}

/**
 * What a snapshot holds, and its size in bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface SnapshotContents {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  /** IDs of clusters left out because their record would exceed {@link maxClusterSize}. */
  readonly oversized: ReadonlyArray<string>
  readonly size: number
}

/**
 * The size of the pieces `encodeTo` emits by default: 8 MiB.
 *
 * @category encoding
 * @since 0.1.0
 */
export const defaultPieceBytes = 8 * 1024 * 1024

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
  let bytes: Uint8Array = new Uint8Array(0)
  const contents = encodeTo(
    clusters,
    now,
    (piece) => {
      bytes = piece
    },
    Number.POSITIVE_INFINITY
  )
  return {
    bytes,
    clusters: contents.clusters,
    affiliates: contents.affiliates,
    endpoints: contents.endpoints,
    oversized: contents.oversized
  }
}

/**
 * `encode`, handing the bytes to `emit` in pieces of about `pieceBytes`
 * (whole cluster records; a record larger than that is one piece of its own)
 * as they are written, so a store can write each piece while the next is
 * encoded. Still one synchronous step; each piece is a new buffer.
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
  const list: ReadonlyArray<ClusterEntry> = Array.isArray(clusters) ? clusters : Array.from(clusters)
  // Pass 1: the body size and ID length of every cluster and affiliate
  // message, in the order pass 2 writes them (a cluster, then its
  // affiliates); endpoint sizes are cheap enough to compute again. -1 marks
  // an oversized cluster, left out. Entries that are not `Affiliate`s are
  // converted once, in `converted`.
  let messages = list.length
  for (const cluster of list) messages += cluster.affiliates.size
  const sizes = new Float64Array(messages)
  const idLengths = new Float64Array(messages)
  const converted: Array<Affiliate> = []
  const oversized: Array<string> = []
  let slot = 0
  let total = 0
  let clusterCount = 0
  let affiliateCount = 0
  let endpointCount = 0
  for (const cluster of list) {
    const clusterSlot = slot++
    const idLength = utf8Length(cluster.id)
    idLengths[clusterSlot] = idLength
    let clusterSize = idLength === 0 ? 0 : fieldSize(idLength)
    let endpoints = 0
    for (const entry of cluster.affiliates.values()) {
      let affiliate: Affiliate
      if (entry instanceof Affiliate) affiliate = entry
      else {
        affiliate = Affiliate.fromEntry(entry)
        converted.push(affiliate)
      }
      const layout = affiliate.unsafeLayout
      const affiliateIdLength = utf8Length(affiliate.id)
      let affiliateSize = affiliateIdLength === 0 ? 0 : fieldSize(affiliateIdLength)
      if (layout[1]! > 0) affiliateSize += fieldSize(layout[1]!)
      for (let j = 2; j < layout.length; j += 2) {
        affiliateSize += fieldSize(endpointSize(layout[j + 1]! - layout[j - 1]!, layout[j]!, now))
      }
      affiliateSize += fieldSize(durationSize(ttlSeconds(layout[0]!, now)))
      idLengths[slot] = affiliateIdLength
      sizes[slot++] = affiliateSize
      clusterSize += fieldSize(affiliateSize)
      endpoints += (layout.length - 2) >> 1
    }
    if (clusterSize > maxClusterSize) {
      sizes[clusterSlot] = -1
      oversized.push(cluster.id)
      continue
    }
    sizes[clusterSlot] = clusterSize
    total += fieldSize(clusterSize)
    clusterCount++
    affiliateCount += cluster.affiliates.size
    endpointCount += endpoints
  }

  // Pass 2: write.
  const out = new Writer(total, pieceBytes, emit)
  slot = 0
  let next = 0
  for (const cluster of list) {
    const clusterSize = sizes[slot]!
    if (clusterSize === -1) {
      slot += 1 + cluster.affiliates.size
      for (const entry of cluster.affiliates.values()) if (!(entry instanceof Affiliate)) next++
      continue
    }
    out.room(fieldSize(clusterSize))
    out.byte(0x0a)
    out.varint(clusterSize)
    const idLength = idLengths[slot++]!
    if (idLength > 0) out.string(0x0a, cluster.id, idLength)
    for (const entry of cluster.affiliates.values()) {
      const affiliate = entry instanceof Affiliate ? entry : converted[next++]!
      const record = affiliate.unsafeRecord
      const layout = affiliate.unsafeLayout
      out.byte(0x12)
      out.varint(sizes[slot]!)
      const affiliateIdLength = idLengths[slot++]!
      if (affiliateIdLength > 0) out.string(0x0a, affiliate.id, affiliateIdLength)
      if (layout[1]! > 0) out.blob(0x1a, record, 0, layout[1]!)
      for (let j = 2; j < layout.length; j += 2) {
        const start = layout[j - 1]!
        const end = layout[j + 1]!
        out.byte(0x22)
        out.varint(endpointSize(end - start, layout[j]!, now))
        if (end > start) out.blob(0x12, record, start, end)
        out.duration(0x1a, ttlSeconds(layout[j]!, now))
      }
      out.duration(0x2a, ttlSeconds(layout[0]!, now))
    }
  }
  out.flush()
  return { clusters: clusterCount, affiliates: affiliateCount, endpoints: endpointCount, oversized, size: total }
}

/** A structural problem inside one record; the record is skipped. */
class Malformed {
  readonly reason: string
  constructor(reason: string) {
    this.reason = reason
  }
}

// Fatal: the service never accepts IDs that are not UTF-8, so a file holding one (the original accepts any
// bytes) has that record skipped and reported rather than its ID silently changed.
const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true })

const decodeId = (bytes: Uint8Array, field: string): string => {
  try {
    return utf8Decoder.decode(bytes)
  } catch {
    throw new Malformed(`${field} is not valid UTF-8`)
  }
}

/** A cursor over `bytes[pos, end)` for one message. */
class Reader {
  readonly bytes: Uint8Array
  pos: number
  end: number
  /** Low and high 32 bits of the last varint read by `varint64`. */
  lo = 0
  hi = 0
  constructor(bytes: Uint8Array, pos: number, end: number) {
    this.bytes = bytes
    this.pos = pos
    this.end = end
  }

  /** Reads a varint of up to 64 bits into `lo`/`hi`. */
  varint64(): void {
    let lo = 0
    let hi = 0
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Malformed("truncated varint")
      const b = this.bytes[this.pos++]!
      if (i < 4) lo |= (b & 0x7f) << (7 * i)
      else if (i === 4) {
        lo |= (b & 0x0f) << 28
        hi |= (b & 0x7f) >> 4
      } else {
        if (i === 9 && b > 1) throw new Malformed("varint overflows 64 bits")
        hi |= (b & 0x7f) << (7 * i - 32)
      }
      if (b < 0x80) {
        this.lo = lo >>> 0
        this.hi = hi >>> 0
        return
      }
    }
    throw new Malformed("varint overflows 64 bits")
  }

  /** A non-negative varint as a number (lengths and tags); huge values stay huge. */
  uint(): number {
    this.varint64()
    return this.hi * 0x1_0000_0000 + this.lo
  }

  /** A signed 64-bit varint as a number (exact up to 2^53). */
  int64(): number {
    this.varint64()
    return (this.hi | 0) * 0x1_0000_0000 + this.lo
  }

  /** The bounds of a length-delimited field's payload; `pos` moves past it. */
  delimited(): number {
    const length = this.uint()
    if (length > this.end - this.pos) throw new Malformed("length runs past the end of its message")
    const start = this.pos
    this.pos += length
    return start
  }

  /** Skips one field of wire type `wireType` (after its tag). */
  skip(wireType: number, field: number, depth = 0): void {
    switch (wireType) {
      case 0:
        this.varint64()
        return
      case 1:
        this.advance(8)
        return
      case 2:
        this.delimited()
        return
      case 3: {
        if (depth > 32) throw new Malformed("groups nested too deeply")
        for (;;) {
          const tag = this.uint()
          const type = tag % 8
          const number = Math.floor(tag / 8)
          if (type === 4) {
            if (number !== field) throw new Malformed("mismatched end of group")
            return
          }
          if (number === 0) throw new Malformed("field number 0")
          this.skip(type, number, depth + 1)
        }
      }
      case 5:
        this.advance(4)
        return
      default:
        throw new Malformed(`invalid wire type ${wireType}`)
    }
  }

  private advance(count: number): void {
    if (this.end - this.pos < count) throw new Malformed("truncated fixed-size field")
    this.pos += count
  }
}

/** Runs `read` on the message whose payload comes next, with the reader confined to its bytes. */
const nested = <A>(reader: Reader, read: (reader: Reader) => A): A => {
  const start = reader.delimited()
  const stop = reader.pos
  const outer = reader.end
  reader.pos = start
  reader.end = stop
  const value = read(reader)
  reader.end = outer
  reader.pos = stop
  return value
}

/** The payload of the length-delimited field that comes next, as a view. */
const payload = (reader: Reader): Uint8Array => {
  const start = reader.delimited()
  return reader.bytes.subarray(start, reader.pos)
}

/** A Duration or Timestamp being read; repeated occurrences merge, as protobuf merges a message field. */
class Time {
  present = false
  seconds = 0
  nanos = 0

  reset(): void {
    this.present = false
    this.seconds = 0
    this.nanos = 0
  }

  /** Reads the message whose payload comes next (`seconds` 1, `nanos` 2) into this time. */
  read(reader: Reader): void {
    const start = reader.delimited()
    const stop = reader.pos
    const outer = reader.end
    reader.pos = start
    reader.end = stop
    this.present = true
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      if (field === 1) {
        expectWireType(type, 0, "seconds")
        this.seconds = reader.int64()
      } else if (field === 2) {
        expectWireType(type, 0, "nanos")
        reader.varint64()
        this.nanos = reader.lo | 0
      } else if (field === 0) throw new Malformed("field number 0")
      else reader.skip(type, field)
    }
    reader.end = outer
    reader.pos = stop
  }

  get millis(): number {
    return this.seconds * 1000 + Math.trunc(this.nanos / 1e6)
  }
}

const clampDuration = (millis: number): number => Math.min(Math.max(millis, -maxDurationMillis), maxDurationMillis)

/** The expiry of an entry: `now + ttl` when a TTL is present, else the legacy absolute expiration (epoch when absent). */
const expiryOf = (ttl: Time, expiration: Time, now: number): number => {
  if (ttl.present) return now + clampDuration(ttl.millis)
  return expiration.present ? expiration.millis : 0
}

const expectWireType = (type: number, wanted: number, name: string): void => {
  if (type !== wanted) throw new Malformed(`field ${name} has wire type ${type}, expected ${wanted}`)
}

/** Bytes of records after which the decoder makes their strings, so one huge cluster needs no huge scratch. */
const flushSize = 1 << 20

/**
 * The state of one decode, reused from one message to the next. An
 * affiliate's bytes go straight from the file into a binary string, with no
 * buffer per blob, and all affiliates of a cluster share one string (made
 * by one native call), each holding its piece: a record so outlives its
 * siblings' only while they are in memory too, and at most a cluster's
 * worth of bytes is ever kept that way.
 */
class Decoding {
  readonly now: number
  readonly builder = new BinaryStringBuilder(1 << 16)
  readonly ttl = new Time()
  readonly expiration = new Time()
  readonly endpointTtl = new Time()
  readonly endpointExpiration = new Time()
  /** Bounds and expiry of each endpoint of the affiliate being read. */
  readonly starts: Array<number> = []
  readonly ends: Array<number> = []
  readonly expiries: Array<number> = []
  count = 0
  /** The affiliates read since the last flush: ID, layout and where the record starts in the builder. */
  readonly ids: Array<string> = []
  readonly layouts: Array<Array<number>> = []
  readonly offsets: Array<number> = []
  pending = 0
  constructor(now: number) {
    this.now = now
  }

  /** Reads one EndpointSnapshot and records its bounds and expiry. */
  readonly endpoint = (reader: Reader): void => {
    let start = 0
    let end = 0
    const ttl = this.endpointTtl
    const expiration = this.endpointExpiration
    ttl.reset()
    expiration.reset()
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      switch (field) {
        case 1:
          expectWireType(type, 2, "EndpointSnapshot.expiration")
          expiration.read(reader)
          break
        case 2:
          expectWireType(type, 2, "EndpointSnapshot.data")
          start = reader.delimited()
          end = reader.pos
          break
        case 3:
          expectWireType(type, 2, "EndpointSnapshot.ttl")
          ttl.read(reader)
          break
        case 0:
          throw new Malformed("field number 0")
        default:
          reader.skip(type, field)
      }
    }
    const i = this.count++
    this.starts[i] = start
    this.ends[i] = end
    this.expiries[i] = expiryOf(ttl, expiration, this.now)
  }

  /** Reads one AffiliateSnapshot and adds it to the pending ones, its bytes to the builder. */
  readonly affiliate = (reader: Reader): void => {
    let id = ""
    let dataStart = 0
    let dataEnd = 0
    this.count = 0
    const ttl = this.ttl
    const expiration = this.expiration
    ttl.reset()
    expiration.reset()
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      switch (field) {
        case 1:
          expectWireType(type, 2, "AffiliateSnapshot.id")
          id = decodeId(payload(reader), "AffiliateSnapshot.id")
          break
        case 2:
          expectWireType(type, 2, "AffiliateSnapshot.expiration")
          expiration.read(reader)
          break
        case 3:
          expectWireType(type, 2, "AffiliateSnapshot.data")
          dataStart = reader.delimited()
          dataEnd = reader.pos
          break
        case 4:
          expectWireType(type, 2, "AffiliateSnapshot.endpoints")
          nested(reader, this.endpoint)
          break
        case 5:
          expectWireType(type, 2, "AffiliateSnapshot.ttl")
          ttl.read(reader)
          break
        case 0:
          throw new Malformed("field number 0")
        default:
          reader.skip(type, field)
      }
    }
    const bytes = reader.bytes
    const builder = this.builder
    const count = this.count
    const layout = layoutOf(2 + 2 * count)
    layout[0] = expiryOf(ttl, expiration, this.now)
    layout[1] = dataEnd - dataStart
    const i = this.pending++
    this.ids[i] = id
    this.layouts[i] = layout
    this.offsets[i] = builder.size
    builder.bytes(bytes, dataStart, dataEnd)
    let end = dataEnd - dataStart
    for (let e = 0; e < count; e++) {
      builder.bytes(bytes, this.starts[e]!, this.ends[e]!)
      end += this.ends[e]! - this.starts[e]!
      layout[2 + 2 * e] = this.expiries[e]!
      layout[3 + 2 * e] = end
    }
  }

  /**
   * Turns the affiliates read since the last flush into `Affiliate`s, their
   * records all pieces of one new string (later ones replace earlier ones
   * with the same ID, as in the original).
   */
  private flush(into: Map<string, Affiliate>): void {
    const builder = this.builder
    const size = builder.size
    const pending = this.pending
    for (let i = 0; i < pending; i++) {
      const end = i + 1 < pending ? this.offsets[i + 1]! : size
      // A string of its own per affiliate: a slice of a shared one would keep all of it alive.
      const record = builder.take(this.offsets[i]!, end)
      into.set(this.ids[i]!, Affiliate.unsafeMake(this.ids[i]!, record, this.layouts[i]!))
    }
    builder.reset()
    this.pending = 0
  }

  cluster(reader: Reader): DecodedCluster {
    let id = ""
    const affiliates = new Map<string, Affiliate>()
    this.pending = 0
    this.builder.reset()
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      switch (field) {
        case 1:
          expectWireType(type, 2, "ClusterSnapshot.id")
          id = decodeId(payload(reader), "ClusterSnapshot.id")
          break
        case 2:
          expectWireType(type, 2, "ClusterSnapshot.affiliates")
          nested(reader, this.affiliate)
          if (this.builder.size >= flushSize) this.flush(affiliates)
          break
        case 0:
          throw new Malformed("field number 0")
        default:
          reader.skip(type, field)
      }
    }
    this.flush(affiliates)
    return { id, affiliates }
  }
}

/**
 * Decodes a snapshot file, turning TTLs into expiry instants from `now` (ms
 * since the epoch); an entry without a TTL takes its legacy absolute
 * expiration (the epoch when that is missing too). Expired entries are
 * returned as they are.
 *
 * Never throws: every complete, well-formed record is returned, and every
 * byte range that was not is listed in `skipped` with its reason. A record
 * whose framing is intact but whose content is malformed, too large, has no
 * ID or repeats an earlier cluster ID (the first one wins) is skipped alone;
 * unknown top-level fields are skipped; a truncated record or an unreadable
 * tag ends the file there.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decode = (bytes: Uint8Array, now: number): DecodedSnapshot => {
  const clusters: Array<DecodedCluster> = []
  const decoding = new Decoding(now)
  const skipped: Array<SkippedRange> = []
  const seen = new Set<string>()
  const size = bytes.length
  const reader = new Reader(bytes, 0, size)
  const skipRest = (offset: number, reason: string) => {
    skipped.push({ offset, length: size - offset, reason })
  }
  while (reader.pos < size) {
    const offset = reader.pos
    let tag: number
    try {
      tag = reader.uint()
    } catch (error) {
      skipRest(offset, `unreadable record tag at offset ${offset}: ${(error as Malformed).reason}`)
      break
    }
    const field = Math.floor(tag / 8)
    const type = tag % 8
    if (field === 0 || type === 4 || type > 5 || tag > 0xffff_ffff) {
      skipRest(offset, `invalid record tag 0x${tag.toString(16)} at offset ${offset}`)
      break
    }
    if (field !== 1 || type !== 2) {
      try {
        reader.skip(type, field)
      } catch (error) {
        skipRest(
          offset,
          `truncated unknown top-level field ${field} at offset ${offset}: ${(error as Malformed).reason}`
        )
        break
      }
      skipped.push({
        offset,
        length: reader.pos - offset,
        reason: `unknown top-level field ${field} (wire type ${type}) at offset ${offset}`
      })
      continue
    }
    let length: number
    try {
      length = reader.uint()
    } catch (error) {
      skipRest(offset, `truncated record header at offset ${offset}: ${(error as Malformed).reason}`)
      break
    }
    const start = reader.pos
    const available = size - start
    if (length > maxClusterSize) {
      if (length > available) {
        skipRest(offset, `record at offset ${offset} claims ${length} bytes, over the ${maxClusterSize}-byte limit`)
        break
      }
      reader.pos = start + length
      skipped.push({
        offset,
        length: reader.pos - offset,
        reason: `record at offset ${offset} has ${length} bytes, over the ${maxClusterSize}-byte limit`
      })
      continue
    }
    if (length > available) {
      skipRest(offset, `truncated record at offset ${offset}: needs ${length} bytes, ${available} left`)
      break
    }
    reader.pos = start + length
    const skipRecord = (reason: string) => {
      skipped.push({ offset, length: reader.pos - offset, reason })
    }
    let cluster: DecodedCluster
    try {
      cluster = decoding.cluster(new Reader(bytes, start, start + length))
    } catch (error) {
      if (!(error instanceof Malformed)) throw error
      skipRecord(`malformed record at offset ${offset}: ${error.reason}`)
      continue
    }
    if (cluster.id === "") {
      skipRecord(`record at offset ${offset} has no cluster ID`)
      continue
    }
    if (seen.has(cluster.id)) {
      skipRecord(`duplicate cluster ${JSON.stringify(cluster.id)} at offset ${offset} (the first record was kept)`)
      continue
    }
    seen.add(cluster.id)
    clusters.push(cluster)
  }
  return { clusters, skipped, size }
}
