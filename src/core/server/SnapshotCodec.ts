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
 * One cluster as the encoder reads it and the decoder returns it; the store's
 * own clusters have this shape, so they are encoded without copying.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterEntry {
  readonly id: string
  readonly affiliates: ReadonlyMap<string, AffiliateEntry>
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
  readonly clusters: ReadonlyArray<ClusterEntry>
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

/** UTF-8 byte length of a string, as TextEncoder would encode it (lone surrogates become U+FFFD). */
class Writer {
  readonly bytes: Uint8Array
  pos = 0
  constructor(size: number) {
    this.bytes = new Uint8Array(size)
  }

  byte(value: number): void {
    this.bytes[this.pos++] = value
  }

  varint(value: number): void {
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

  blob(tag: number, data: Uint8Array): void {
    this.byte(tag)
    this.varint(data.length)
    this.bytes.set(data, this.pos)
    this.pos += data.length
  }

  string(tag: number, text: string, length: number): void {
    this.byte(tag)
    this.varint(length)
    const bytes = this.bytes
    let pos = this.pos
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
 * Encodes clusters as the snapshot file, with every TTL measured from `now`
 * (ms since the epoch). Runs in one synchronous step, so the snapshot is
 * consistent across all clusters. Clusters with no affiliates are written as
 * a record holding only the ID; an empty iterable gives empty bytes.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encode = (clusters: Iterable<ClusterEntry>, now: number): EncodedSnapshot => {
  const list: ReadonlyArray<ClusterEntry> = Array.isArray(clusters) ? clusters : Array.from(clusters)
  // Pass 1: the body size of every message, in the order pass 2 writes them
  // (a cluster, then each affiliate followed by its endpoints). -1 marks an
  // oversized cluster that is left out.
  const sizes: Array<number> = []
  const idLengths: Array<number> = []
  const oversized: Array<string> = []
  let total = 0
  let clusterCount = 0
  let affiliateCount = 0
  let endpointCount = 0
  for (const cluster of list) {
    const clusterSlot = sizes.length
    sizes.push(0)
    const idLength = utf8Length(cluster.id)
    idLengths.push(idLength)
    let clusterSize = idLength === 0 ? 0 : fieldSize(idLength)
    let affiliates = 0
    let endpoints = 0
    for (const affiliate of cluster.affiliates.values()) {
      const affiliateSlot = sizes.length
      sizes.push(0)
      const affiliateIdLength = utf8Length(affiliate.id)
      idLengths.push(affiliateIdLength)
      let affiliateSize = affiliateIdLength === 0 ? 0 : fieldSize(affiliateIdLength)
      if (affiliate.data.length > 0) affiliateSize += fieldSize(affiliate.data.length)
      for (const endpoint of affiliate.endpoints) {
        const endpointSize =
          (endpoint.data.length > 0 ? fieldSize(endpoint.data.length) : 0) +
          fieldSize(durationSize(ttlSeconds(endpoint.expiresAt, now)))
        sizes.push(endpointSize)
        affiliateSize += fieldSize(endpointSize)
      }
      affiliateSize += fieldSize(durationSize(ttlSeconds(affiliate.expiresAt, now)))
      sizes[affiliateSlot] = affiliateSize
      clusterSize += fieldSize(affiliateSize)
      affiliates++
      endpoints += affiliate.endpoints.length
    }
    if (clusterSize > maxClusterSize) {
      sizes[clusterSlot] = -1
      oversized.push(cluster.id)
      continue
    }
    sizes[clusterSlot] = clusterSize
    total += fieldSize(clusterSize)
    clusterCount++
    affiliateCount += affiliates
    endpointCount += endpoints
  }

  // Pass 2: write.
  const out = new Writer(total)
  let slot = 0
  let idSlot = 0
  for (const cluster of list) {
    const clusterSize = sizes[slot++]!
    if (clusterSize === -1) {
      for (const affiliate of cluster.affiliates.values()) slot += 1 + affiliate.endpoints.length
      idSlot += 1 + cluster.affiliates.size
      continue
    }
    out.byte(0x0a)
    out.varint(clusterSize)
    const idLength = idLengths[idSlot++]!
    if (idLength > 0) out.string(0x0a, cluster.id, idLength)
    for (const affiliate of cluster.affiliates.values()) {
      out.byte(0x12)
      out.varint(sizes[slot++]!)
      const affiliateIdLength = idLengths[idSlot++]!
      if (affiliateIdLength > 0) out.string(0x0a, affiliate.id, affiliateIdLength)
      if (affiliate.data.length > 0) out.blob(0x1a, affiliate.data)
      for (const endpoint of affiliate.endpoints) {
        out.byte(0x22)
        out.varint(sizes[slot++]!)
        if (endpoint.data.length > 0) out.blob(0x12, endpoint.data)
        out.duration(0x1a, ttlSeconds(endpoint.expiresAt, now))
      }
      out.duration(0x2a, ttlSeconds(affiliate.expiresAt, now))
    }
  }
  return {
    bytes: out.bytes,
    clusters: clusterCount,
    affiliates: affiliateCount,
    endpoints: endpointCount,
    oversized
  }
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
/** A plain Uint8Array copy that owns its memory (even when the input is a Node Buffer, whose `slice` is a view). */
const copy = (view: Uint8Array): Uint8Array => new Uint8Array(view)

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

type SecondsNanos = { seconds: number; nanos: number }

/** Reads the message whose payload comes next, with `read` confined to its bytes. */
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

/** Merges the fields of a Duration or Timestamp (`seconds` 1, `nanos` 2) into `into`, as protobuf merges a repeated message field. */
const readSecondsNanos =
  (into: SecondsNanos | undefined) =>
  (reader: Reader): SecondsNanos => {
    const value = into ?? { seconds: 0, nanos: 0 }
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      if (field === 1) {
        expectWireType(type, 0, "seconds")
        value.seconds = reader.int64()
      } else if (field === 2) {
        expectWireType(type, 0, "nanos")
        reader.varint64()
        value.nanos = reader.lo | 0
      } else if (field === 0) throw new Malformed("field number 0")
      else reader.skip(type, field)
    }
    return value
  }

const toMillis = (value: SecondsNanos): number => value.seconds * 1000 + Math.trunc(value.nanos / 1e6)

const clampDuration = (millis: number): number => Math.min(Math.max(millis, -maxDurationMillis), maxDurationMillis)

/** The expiry of an entry: `now + ttl` when a TTL is present, else the legacy absolute expiration (epoch when absent). */
const expiryOf = (ttl: SecondsNanos | undefined, expiration: SecondsNanos | undefined, now: number): number => {
  if (ttl !== undefined) return now + clampDuration(toMillis(ttl))
  return expiration === undefined ? 0 : toMillis(expiration)
}

const expectWireType = (type: number, wanted: number, name: string): void => {
  if (type !== wanted) throw new Malformed(`field ${name} has wire type ${type}, expected ${wanted}`)
}

const readEndpoint =
  (now: number) =>
  (reader: Reader): EndpointEntry => {
    let data: Uint8Array = new Uint8Array(0)
    let ttl: SecondsNanos | undefined
    let expiration: SecondsNanos | undefined
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      switch (field) {
        case 1:
          expectWireType(type, 2, "EndpointSnapshot.expiration")
          expiration = nested(reader, readSecondsNanos(expiration))
          break
        case 2:
          expectWireType(type, 2, "EndpointSnapshot.data")
          data = copy(payload(reader))
          break
        case 3:
          expectWireType(type, 2, "EndpointSnapshot.ttl")
          ttl = nested(reader, readSecondsNanos(ttl))
          break
        case 0:
          throw new Malformed("field number 0")
        default:
          reader.skip(type, field)
      }
    }
    return { data, expiresAt: expiryOf(ttl, expiration, now) }
  }

const readAffiliate =
  (now: number) =>
  (reader: Reader): AffiliateEntry => {
    let id = ""
    let data: Uint8Array = new Uint8Array(0)
    const endpoints: Array<EndpointEntry> = []
    let ttl: SecondsNanos | undefined
    let expiration: SecondsNanos | undefined
    const readOne = readEndpoint(now)
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
          expiration = nested(reader, readSecondsNanos(expiration))
          break
        case 3:
          expectWireType(type, 2, "AffiliateSnapshot.data")
          data = copy(payload(reader))
          break
        case 4:
          expectWireType(type, 2, "AffiliateSnapshot.endpoints")
          endpoints.push(nested(reader, readOne))
          break
        case 5:
          expectWireType(type, 2, "AffiliateSnapshot.ttl")
          ttl = nested(reader, readSecondsNanos(ttl))
          break
        case 0:
          throw new Malformed("field number 0")
        default:
          reader.skip(type, field)
      }
    }
    return { id, data, expiresAt: expiryOf(ttl, expiration, now), endpoints }
  }

const readCluster = (reader: Reader, now: number): ClusterEntry => {
  let id = ""
  // Affiliates with the same ID: the last one wins, as in the original.
  const affiliates = new Map<string, AffiliateEntry>()
  const readOne = readAffiliate(now)
  while (reader.pos < reader.end) {
    const tag = reader.uint()
    const field = Math.floor(tag / 8)
    const type = tag % 8
    switch (field) {
      case 1:
        expectWireType(type, 2, "ClusterSnapshot.id")
        id = decodeId(payload(reader), "ClusterSnapshot.id")
        break
      case 2: {
        expectWireType(type, 2, "ClusterSnapshot.affiliates")
        const affiliate = nested(reader, readOne)
        affiliates.set(affiliate.id, affiliate)
        break
      }
      case 0:
        throw new Malformed("field number 0")
      default:
        reader.skip(type, field)
    }
  }
  return { id, affiliates }
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
  const clusters: Array<ClusterEntry> = []
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
    let cluster: ClusterEntry
    try {
      cluster = readCluster(new Reader(bytes, start, start + length), now)
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
