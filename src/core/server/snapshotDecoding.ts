/**
 * The snapshot decoder (PROTOCOL.md §1.5): reads `0A len ClusterSnapshot`
 * records into clusters of compact {@link Affiliate}s, and reports every byte
 * range it could not load instead of failing the whole load. It reads a file
 * whole or as it arrives, piece by piece, with the same result either way.
 *
 * @since 0.1.0
 */
import { Affiliate, layoutOf } from "./Affiliate.ts"
import { asciiText, BinaryStringBuilder, binaryText, writeBytes } from "./binaryString.ts"
import type { DecodedCluster, DecodedSnapshot, PackedAffiliates, SkippedRange } from "./SnapshotCodec.ts"
import { maxClusterSize, maxDurationMillis } from "./snapshotFormat.ts"

/**
 * A structural problem inside one record; the record is skipped. `truncated`
 * marks a read past the end of the bytes at hand, which at the top level
 * only means that more of the file is needed.
 */
class Malformed {
  readonly _tag = "Malformed"
  readonly reason: string
  readonly truncated: boolean
  constructor(reason: string, truncated = false) {
    this.reason = reason
    this.truncated = truncated
  }
}

// Fatal: the service never accepts IDs that are not UTF-8, so a file holding one (the original accepts any
// bytes) has that record skipped and reported rather than its ID silently changed.
const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true })

/** A cursor over `bytes[pos, end)` for one message. */
class Reader {
  bytes: Uint8Array
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
      if (this.pos >= this.end) throw new Malformed("truncated varint", true)
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
    const pos = this.pos
    if (pos < this.end) {
      const b = this.bytes[pos]!
      if (b < 0x80) {
        this.pos = pos + 1
        return b
      }
    }
    this.varint64()
    return this.hi * 0x1_0000_0000 + this.lo
  }

  /** A signed 64-bit varint as a number (exact up to 2^53). */
  int64(): number {
    this.varint64()
    return (this.hi | 0) * 0x1_0000_0000 + this.lo
  }

  /** The start of a length-delimited field's payload; `pos` moves past it. */
  delimited(): number {
    const length = this.uint()
    if (length > this.end - this.pos) throw new Malformed("length runs past the end of its message", true)
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
    if (this.end - this.pos < count) throw new Malformed("truncated fixed-size field", true)
    this.pos += count
  }
}

/** Runs `read` on the message whose payload comes next, with the reader confined to its bytes. */
const nested = (reader: Reader, read: (reader: Reader) => void): void => {
  const start = reader.delimited()
  const stop = reader.pos
  const outer = reader.end
  reader.pos = start
  reader.end = stop
  read(reader)
  reader.end = outer
  reader.pos = stop
}

/** Reads the ID whose payload comes next: ASCII in one native step, anything else through the strict UTF-8 decoder. */
const readId = (reader: Reader, field: string): string => {
  const start = reader.delimited()
  const end = reader.pos
  const ascii = asciiText(reader.bytes, start, end)
  if (ascii !== undefined) return ascii
  try {
    return utf8Decoder.decode(reader.bytes.subarray(start, end))
  } catch {
    throw new Malformed(`${field} is not valid UTF-8`)
  }
}

/** Checks the ID whose payload comes next as `readId` does (making a string only of a non-ASCII one); returns where it starts. */
const checkId = (reader: Reader, field: string): number => {
  const start = reader.delimited()
  const bytes = reader.bytes
  const end = reader.pos
  let high = 0
  for (let i = start; i < end; i++) high |= bytes[i]!
  if (high >= 0x80) checkUtf8(bytes, start, end, field)
  return start
}

/** Throws `Malformed` unless `bytes[start, end)` is valid UTF-8. */
const checkUtf8 = (bytes: Uint8Array, start: number, end: number, field: string): void => {
  try {
    utf8Decoder.decode(bytes.subarray(start, end))
  } catch {
    throw new Malformed(`${field} is not valid UTF-8`)
  }
}

/** Whether `bytes[a, aEnd)` and `bytes[b, bEnd)` are equal. */
const sameRange = (bytes: Uint8Array, a: number, aEnd: number, b: number, bEnd: number): boolean => {
  if (aEnd - a !== bEnd - b) return false
  while (a < aEnd) if (bytes[a++] !== bytes[b++]) return false
  return true
}

/** Clusters with more affiliates are decoded at once: their ID check for repeats would cost too much. */
const maxPackedAffiliates = 64

const noSpans: Array<number> = []

const expectWireType = (type: number, wanted: number, name: string): void => {
  if (type !== wanted) throw new Malformed(`field ${name} has wire type ${type}, expected ${wanted}`)
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
    while (reader.pos < stop) {
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

/**
 * Reads ClusterSnapshot messages, with state reused from one message to the
 * next. An affiliate's data and endpoints are gathered in a scratch buffer
 * and made into one string of its own, never a slice of a larger one, which
 * would keep all of that alive.
 *
 * `decode` first only scans a record, checking it exactly as a full read
 * would, and keeps it packed when it can (see {@link PackedRecord}).
 */
class ClusterReader {
  /** The instant TTLs count from. */
  now: number
  private readonly builder = new BinaryStringBuilder(1 << 16)
  private readonly ttl = new Time()
  private readonly expiration = new Time()
  private readonly endpointTtl = new Time()
  private readonly endpointExpiration = new Time()
  /** Bounds and expiry of each endpoint of the affiliate being read. */
  private readonly starts: Array<number> = []
  private readonly ends: Array<number> = []
  private readonly expiries: Array<number> = []
  private count = 0
  /** The affiliates of the cluster being read, only while `read` runs. */
  private affiliates: Map<string, Affiliate> | undefined
  /** Whether `decode` may keep clusters packed. */
  private readonly pack: boolean
  /** While scanning, affiliates are checked and counted instead of built. */
  private scanning = false
  private scanned = 0
  private scannedEndpoints = 0
  private earliest = Number.POSITIVE_INFINITY
  /** False once the scan found what a packed record cannot hold: a repeated affiliate ID, or too many to check. */
  private packable = true
  private readonly idStarts: Array<number> = []
  private readonly idEnds: Array<number> = []
  /** Where a scan writes each affiliate's parts, as `PackedAffiliates.spans` describes, and how many numbers so far. */
  private spanOut: Array<number> = noSpans
  private spanLength = 0
  constructor(now: number, pack = true) {
    this.now = now
    this.pack = pack
  }

  /** Reads one EndpointSnapshot and records its bounds and expiry. */
  private readonly endpoint = (reader: Reader): void => {
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

  /** Reads one AffiliateSnapshot into the cluster (a later one with the same ID replaces it, as in the original). */
  private readonly affiliate = (reader: Reader): void => {
    let id = ""
    let idStart = 0
    let idEnd = 0
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
          if (this.scanning) {
            idStart = checkId(reader, "AffiliateSnapshot.id")
            idEnd = reader.pos
          } else id = readId(reader, "AffiliateSnapshot.id")
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
    const count = this.count
    if (this.scanning) {
      this.noteScanned(bytes, idStart, idEnd, dataStart, dataEnd, expiryOf(ttl, expiration, this.now))
      return
    }
    const layout = layoutOf(2 + 2 * count)
    layout[0] = expiryOf(ttl, expiration, this.now)
    layout[1] = dataEnd - dataStart
    const builder = this.builder
    builder.bytes(bytes, dataStart, dataEnd)
    let end = dataEnd - dataStart
    for (let e = 0; e < count; e++) {
      builder.bytes(bytes, this.starts[e]!, this.ends[e]!)
      end += this.ends[e]! - this.starts[e]!
      layout[2 + 2 * e] = this.expiries[e]!
      layout[3 + 2 * e] = end
    }
    this.affiliates!.set(id, Affiliate.unsafeMake(id, builder.finish(), layout))
  }

  /** Counts a scanned affiliate, writes its spans, notes its earliest expiry and checks its ID against those before it. */
  private noteScanned(
    bytes: Uint8Array,
    idStart: number,
    idEnd: number,
    dataStart: number,
    dataEnd: number,
    expiresAt: number
  ): void {
    const out = this.spanOut
    let at = this.spanLength
    out[at++] = expiresAt
    out[at++] = idStart
    out[at++] = idEnd
    out[at++] = dataStart
    out[at++] = dataEnd
    out[at++] = this.count
    let earliest = Math.min(this.earliest, expiresAt)
    for (let e = 0; e < this.count; e++) {
      out[at++] = this.starts[e]!
      out[at++] = this.ends[e]!
      out[at++] = this.expiries[e]!
      earliest = Math.min(earliest, this.expiries[e]!)
    }
    this.spanLength = at
    this.earliest = earliest
    const n = this.scanned++
    this.scannedEndpoints += this.count
    if (!this.packable) return
    if (n >= maxPackedAffiliates) {
      this.packable = false
      return
    }
    for (let i = 0; i < n; i++) {
      if (sameRange(bytes, this.idStarts[i]!, this.idEnds[i]!, idStart, idEnd)) {
        this.packable = false
        return
      }
    }
    this.idStarts[n] = idStart
    this.idEnds[n] = idEnd
  }

  /**
   * Reads the ClusterSnapshot in `reader`'s bounds: packed when packing is on
   * and it holds 1 to 64 affiliates, no repeated affiliate ID and nothing
   * expired at `now`, else built at once.
   */
  decode(reader: Reader): DecodedCluster {
    if (!this.pack) return this.read(reader)
    const start = reader.pos
    const end = reader.end
    const id = this.scan(reader, this.scratchSpans)
    if (this.packable && this.scanned > 0 && this.earliest > this.now) {
      const record = binaryText(reader.bytes, start, end)
      return new PackedCluster(
        id,
        new PackedRecord(record, this.now, this.scanned, this.scannedEndpoints, this.earliest)
      )
    }
    reader.pos = start
    return this.read(reader)
  }

  /** Spans written by scans at load, which only their counts are kept of. */
  private readonly scratchSpans: Array<number> = []

  /**
   * Checks the ClusterSnapshot in `reader`'s bounds as `read` would, writing
   * its affiliates' spans into `spans` (offsets into `reader.bytes`), without
   * building them; returns its ID.
   */
  scan(reader: Reader, spans: Array<number>): string {
    this.scanning = true
    this.scanned = 0
    this.scannedEndpoints = 0
    this.earliest = Number.POSITIVE_INFINITY
    this.packable = true
    this.spanOut = spans
    this.spanLength = 0
    try {
      return this.readCluster(reader)
    } finally {
      this.scanning = false
      this.spanOut = noSpans
    }
  }

  /** How many numbers the last scan wrote. */
  get scannedSpans(): number {
    return this.spanLength
  }

  /** Reads the ClusterSnapshot in `reader`'s bounds and builds its affiliates. */
  read(reader: Reader): DecodedCluster {
    const affiliates = new Map<string, Affiliate>()
    this.affiliates = affiliates
    this.builder.reset()
    try {
      return { id: this.readCluster(reader), affiliates, packed: undefined }
    } finally {
      this.affiliates = undefined
    }
  }

  /** Reads the fields of the ClusterSnapshot in `reader`'s bounds; returns its ID. */
  private readCluster(reader: Reader): string {
    let id = ""
    while (reader.pos < reader.end) {
      const tag = reader.uint()
      const field = Math.floor(tag / 8)
      const type = tag % 8
      switch (field) {
        case 1:
          expectWireType(type, 2, "ClusterSnapshot.id")
          id = readId(reader, "ClusterSnapshot.id")
          break
        case 2:
          expectWireType(type, 2, "ClusterSnapshot.affiliates")
          nested(reader, this.affiliate)
          break
        case 0:
          throw new Malformed("field number 0")
        default:
          reader.skip(type, field)
      }
    }
    return id
  }
}

/** Records up to this size are read back with the shared reader and buffer; larger ones with their own. */
const sharedUnpackBytes = 1 << 16

/** Reads packed records back; one serves all, since reading is synchronous. */
let unpacker: ClusterReader | undefined
const unpackBytes = new Uint8Array(sharedUnpackBytes)

/**
 * A cluster's affiliates kept as the bytes of its snapshot record (one char
 * per byte), with the instant its TTLs count from. The record was fully
 * checked when it was read, so unpacking it builds exactly what reading it
 * at once would have.
 */
class PackedRecord implements PackedAffiliates {
  readonly record: string
  private readonly readAt: number
  readonly affiliates: number
  readonly endpoints: number
  readonly earliestExpiry: number
  constructor(record: string, readAt: number, affiliates: number, endpoints: number, earliestExpiry: number) {
    this.record = record
    this.readAt = readAt
    this.affiliates = affiliates
    this.endpoints = endpoints
    this.earliestExpiry = earliestExpiry
  }

  spans(spans: Array<number>): number {
    const reader = this.reader()
    reader.scan(this.bytes(), spans)
    return reader.scannedSpans
  }

  unpack(): Map<string, Affiliate> {
    return this.reader().read(this.bytes()).affiliates
  }

  /**
   * A reader counting TTLs from the instant the record was read: the shared
   * one for a small record, else one of its own, so that no scratch buffer
   * stays at the size of the largest record ever read back.
   */
  private reader(): ClusterReader {
    if (this.record.length > sharedUnpackBytes) return new ClusterReader(this.readAt)
    unpacker ??= new ClusterReader(0)
    unpacker.now = this.readAt
    return unpacker
  }

  /** The record's bytes: in the shared buffer when small, else in a buffer of their own. */
  private bytes(): Reader {
    const length = this.record.length
    const bytes = length > sharedUnpackBytes ? new Uint8Array(length) : unpackBytes
    writeBytes(this.record, 0, length, bytes, 0)
    return new Reader(bytes, 0, length)
  }
}

/**
 * A decoded cluster kept packed. Reading `affiliates` unpacks it, once, and
 * hands that map over: from then on `packed` is `undefined`, so the map,
 * however the caller changed it, is what is restored or written.
 */
class PackedCluster implements DecodedCluster {
  readonly id: string
  private readonly record: PackedRecord
  private unpacked: Map<string, Affiliate> | undefined
  constructor(id: string, record: PackedRecord) {
    this.id = id
    this.record = record
  }

  get packed(): PackedRecord | undefined {
    return this.unpacked === undefined ? this.record : undefined
  }

  get affiliates(): Map<string, Affiliate> {
    this.unpacked ??= this.record.unpack()
    return this.unpacked
  }
}

/** Options of the snapshot decoder. */
export interface DecodeOptions {
  /**
   * Whether clusters may be kept packed until first used (default true);
   * false builds every affiliate at once, as a reference or to measure.
   */
  readonly pack?: boolean
}

/** What `SnapshotDecoder.item` answers: the item was read or skipped, or it needs more of the file than is at hand. */
const done = false
const needMore = true

const noBytes = new Uint8Array(0)

/** A record or field skipped as it streams past, without holding its bytes; it ends at file offset `end`. */
interface Skipping {
  readonly offset: number
  readonly end: number
  /** The reason when the file holds all of it. */
  readonly whole: string
  /** The reason when the file ends first. */
  readonly cut: string
}

/**
 * Reads a snapshot file as it arrives, in pieces of any size, with exactly
 * the result of reading it whole: the same clusters and the same skipped
 * ranges, with the same reasons. Each call to {@link SnapshotDecoder.feed}
 * reads the complete records at hand and says where it stopped; the caller
 * passes the bytes from there again, followed by more of the file, until
 * the last call, marked `final`. Only a record cut by a piece's end is ever
 * held twice; a record over {@link maxClusterSize} is skipped without being
 * held at all.
 *
 * @category decoding
 * @since 0.1.0
 */
export class SnapshotDecoder {
  private readonly clusters: Array<DecodedCluster> = []
  private readonly skipped: Array<SkippedRange> = []
  private readonly seen = new Set<string>()
  private readonly reader: ClusterReader
  private readonly top = new Reader(noBytes, 0, 0)
  /** The file offset of the next byte to read. */
  private offset = 0
  /** Where the rest of the file started to be skipped, and why. */
  private rest: { readonly offset: number; readonly reason: string } | undefined
  private skipping: Skipping | undefined
  private ended = false
  /** Turns TTLs into expiry instants from `now` (ms since the epoch). */
  constructor(now: number, options: DecodeOptions = {}) {
    this.reader = new ClusterReader(now, options.pack ?? true)
  }

  /**
   * Reads `bytes[start, end)`, the file's bytes after those consumed so far,
   * and returns the index where it stopped: the bytes before it are
   * consumed, the bytes from it on must come again at the start of the next
   * call. With `final` (the bytes run to the end of the file) everything is
   * consumed and the result is ready.
   */
  feed(bytes: Uint8Array, start: number, end: number, final: boolean): number {
    if (this.ended) throw new Error("SnapshotDecoder: fed after the final bytes")
    const base = this.offset - start
    let pos = start
    if (this.skipping !== undefined) {
      const skipping = this.skipping
      if (skipping.end - base <= end) {
        pos = skipping.end - base
        this.skipped.push({ offset: skipping.offset, length: skipping.end - skipping.offset, reason: skipping.whole })
        this.skipping = undefined
      } else {
        pos = end
      }
    }
    const top = this.top
    top.bytes = bytes
    top.pos = pos
    top.end = end
    while (this.rest === undefined && this.skipping === undefined && top.pos < end) {
      const at = top.pos
      if (this.item(base, final)) {
        top.pos = at
        break
      }
    }
    const stop = this.rest === undefined && this.skipping === undefined ? top.pos : end
    top.bytes = noBytes
    this.offset = base + stop
    if (final) {
      this.ended = true
      if (this.skipping !== undefined) {
        this.rest = { offset: this.skipping.offset, reason: this.skipping.cut }
        this.skipping = undefined
      }
    }
    return stop
  }

  /** What the file held, once its final bytes were fed. */
  result(): DecodedSnapshot {
    if (!this.ended) throw new Error("SnapshotDecoder: the final bytes were not fed")
    const skipped = [...this.skipped]
    if (this.rest !== undefined) {
      skipped.push({ offset: this.rest.offset, length: this.offset - this.rest.offset, reason: this.rest.reason })
    }
    return { clusters: this.clusters, skipped, size: this.offset }
  }

  /** Reads or skips the top-level item at the reader's position; true when it needs more of the file. */
  private item(base: number, final: boolean): boolean {
    const top = this.top
    const end = top.end
    const offset = base + top.pos
    const skipRest = (reason: string): boolean => {
      this.rest = { offset, reason }
      return done
    }
    let tag: number
    try {
      tag = top.uint()
    } catch (error) {
      const malformed = error as Malformed
      if (malformed.truncated && !final) return needMore
      return skipRest(`unreadable record tag at offset ${offset}: ${malformed.reason}`)
    }
    const field = Math.floor(tag / 8)
    const type = tag % 8
    if (field === 0 || type === 4 || type > 5 || tag > 0xffff_ffff) {
      return skipRest(`invalid record tag 0x${tag.toString(16)} at offset ${offset}`)
    }
    if (field !== 1 || type !== 2) {
      const unknown = `unknown top-level field ${field} (wire type ${type}) at offset ${offset}`
      const truncated = (reason: string) => `truncated unknown top-level field ${field} at offset ${offset}: ${reason}`
      if (type === 2) {
        let length: number
        try {
          length = top.uint()
        } catch (error) {
          const malformed = error as Malformed
          if (malformed.truncated && !final) return needMore
          return skipRest(truncated(malformed.reason))
        }
        return this.pass(base, offset, length, unknown, truncated("length runs past the end of its message"), final)
      }
      try {
        top.skip(type, field)
      } catch (error) {
        const malformed = error as Malformed
        if (malformed.truncated && !final) return needMore
        return skipRest(truncated(malformed.reason))
      }
      this.skipped.push({ offset, length: base + top.pos - offset, reason: unknown })
      return done
    }
    let length: number
    try {
      length = top.uint()
    } catch (error) {
      const malformed = error as Malformed
      if (malformed.truncated && !final) return needMore
      return skipRest(`truncated record header at offset ${offset}: ${malformed.reason}`)
    }
    const start = top.pos
    const available = end - start
    if (length > maxClusterSize) {
      const over = `${length} bytes, over the ${maxClusterSize}-byte limit`
      return this.pass(
        base,
        offset,
        length,
        `record at offset ${offset} has ${over}`,
        `record at offset ${offset} claims ${over}`,
        final
      )
    }
    if (length > available) {
      if (!final) return needMore
      return skipRest(`truncated record at offset ${offset}: needs ${length} bytes, ${available} left`)
    }
    top.pos = start + length
    const skipRecord = (reason: string): boolean => {
      this.skipped.push({ offset, length: base + top.pos - offset, reason })
      return done
    }
    let cluster: DecodedCluster
    try {
      cluster = this.reader.decode(new Reader(top.bytes, start, start + length))
    } catch (error) {
      if (!(error instanceof Malformed)) throw error
      return skipRecord(`malformed record at offset ${offset}: ${error.reason}`)
    }
    if (cluster.id === "") return skipRecord(`record at offset ${offset} has no cluster ID`)
    if (this.seen.has(cluster.id)) {
      return skipRecord(
        `duplicate cluster ${JSON.stringify(cluster.id)} at offset ${offset} (the first record was kept)`
      )
    }
    this.seen.add(cluster.id)
    this.clusters.push(cluster)
    return done
  }

  /**
   * Skips an item whose `length` payload bytes start at the reader's
   * position: reported as `whole` when the file holds them all, else the
   * rest of the file is skipped as `cut`. The bytes are passed over as they
   * arrive, never held.
   */
  private pass(base: number, offset: number, length: number, whole: string, cut: string, final: boolean): boolean {
    const top = this.top
    if (length <= top.end - top.pos) {
      top.pos += length
      this.skipped.push({ offset, length: base + top.pos - offset, reason: whole })
    } else if (final) this.rest = { offset, reason: cut }
    else this.skipping = { offset, end: base + top.pos + length, whole, cut }
    return done
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
export const decode = (bytes: Uint8Array, now: number, options: DecodeOptions = {}): DecodedSnapshot => {
  const decoder = new SnapshotDecoder(now, options)
  decoder.feed(bytes, 0, bytes.length, true)
  return decoder.result()
}
