/**
 * The reader of one ClusterSnapshot record of the snapshot file: it builds
 * the record's affiliates in the store's compact form, or only scans the
 * record, checking it exactly as building it would, for the packed form
 * (`PackedRecord.ts`) to keep its bytes instead.
 *
 * @since 0.1.0
 */
import { Malformed, type WireReader } from "../wire/WireReader.ts"
import { Affiliate, layoutOf } from "./Affiliate.ts"
import { asciiText, BinaryStringBuilder } from "./binaryString.ts"
import type { DecodedCluster } from "./snapshotFormat.ts"
import { expiryOf, TimeReader } from "./TimeReader.ts"

// Fatal: the service never accepts IDs that are not UTF-8, so a file holding one (the original accepts any
// bytes) has that record skipped and reported rather than its ID silently changed.
const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true })

/** Throws `Malformed` unless `bytes[start, end)` is valid UTF-8; returns its text. */
const utf8Text = (bytes: Uint8Array, start: number, end: number, field: string): string => {
  try {
    return utf8Decoder.decode(bytes.subarray(start, end))
  } catch {
    throw new Malformed(`${field} is not valid UTF-8`)
  }
}

/** Reads the ID whose payload comes next: ASCII in one native step, anything else through the strict UTF-8 decoder. */
const readId = (reader: WireReader, field: string): string => {
  const start = reader.delimited()
  const end = reader.pos
  return asciiText(reader.bytes, start, end) ?? utf8Text(reader.bytes, start, end, field)
}

/** Checks the ID whose payload comes next as `readId` does (making a string only of a non-ASCII one); returns where it starts. */
const checkId = (reader: WireReader, field: string): number => {
  const start = reader.delimited()
  const bytes = reader.bytes
  const end = reader.pos
  let high = 0
  for (let i = start; i < end; i++) high |= bytes[i]!
  if (high >= 0x80) utf8Text(bytes, start, end, field)
  return start
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

/**
 * Reads ClusterSnapshot messages, with state reused from one message to the
 * next. An affiliate's data and endpoints are gathered in a scratch buffer
 * and made into one string of its own, never a slice of a larger one, which
 * would keep all of that alive.
 *
 * @category decoding
 * @since 0.1.0
 */
export class ClusterReader {
  /** The instant TTLs count from. */
  now: number
  private readonly builder = new BinaryStringBuilder(1 << 16)
  private readonly ttl = new TimeReader()
  private readonly expiration = new TimeReader()
  private readonly endpointTtl = new TimeReader()
  private readonly endpointExpiration = new TimeReader()
  /** Bounds and expiry of each endpoint of the affiliate being read. */
  private readonly starts: Array<number> = []
  private readonly ends: Array<number> = []
  private readonly expiries: Array<number> = []
  private count = 0
  /** The affiliates of the cluster being read, only while `read` runs. */
  private affiliates: Map<string, Affiliate> | undefined
  /** While scanning, affiliates are checked and counted instead of built. */
  private scanning = false
  private scanned = 0
  private scannedEndpoints = 0
  private earliest = Number.POSITIVE_INFINITY
  /** False once the scan found what a packed record cannot hold: a repeated affiliate ID, or too many to check. */
  private distinct = true
  private readonly idStarts: Array<number> = []
  private readonly idEnds: Array<number> = []
  /** Where a scan writes each affiliate's parts, as `PackedAffiliates.spans` describes, and how many numbers so far. */
  private spanOut: Array<number> = noSpans
  private spanLength = 0
  /** Spans written by `check`, which only their counts are kept of. */
  private readonly scratchSpans: Array<number> = []
  constructor(now: number) {
    this.now = now
  }

  /** Reads one EndpointSnapshot and records its bounds and expiry. */
  private endpoint(reader: WireReader): void {
    let start = 0
    let end = 0
    const ttl = this.endpointTtl
    const expiration = this.endpointExpiration
    ttl.reset()
    expiration.reset()
    for (let field = reader.nextField(); field !== 0; field = reader.nextField()) {
      if (field === 1) {
        reader.expect(2, "EndpointSnapshot.expiration")
        expiration.read(reader)
      } else if (field === 2) {
        reader.expect(2, "EndpointSnapshot.data")
        start = reader.delimited()
        end = reader.pos
      } else if (field === 3) {
        reader.expect(2, "EndpointSnapshot.ttl")
        ttl.read(reader)
      } else reader.skip(reader.wireType, field)
    }
    const i = this.count++
    this.starts[i] = start
    this.ends[i] = end
    this.expiries[i] = expiryOf(ttl, expiration, this.now)
  }

  /** Reads one AffiliateSnapshot into the cluster (a later one with the same ID replaces it, as in the original). */
  private affiliate(reader: WireReader): void {
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
    for (let field = reader.nextField(); field !== 0; field = reader.nextField()) {
      switch (field) {
        case 1:
          reader.expect(2, "AffiliateSnapshot.id")
          if (this.scanning) {
            idStart = checkId(reader, "AffiliateSnapshot.id")
            idEnd = reader.pos
          } else id = readId(reader, "AffiliateSnapshot.id")
          break
        case 2:
          reader.expect(2, "AffiliateSnapshot.expiration")
          expiration.read(reader)
          break
        case 3:
          reader.expect(2, "AffiliateSnapshot.data")
          dataStart = reader.delimited()
          dataEnd = reader.pos
          break
        case 4: {
          reader.expect(2, "AffiliateSnapshot.endpoints")
          const outer = reader.enter()
          this.endpoint(reader)
          reader.leave(outer)
          break
        }
        case 5:
          reader.expect(2, "AffiliateSnapshot.ttl")
          ttl.read(reader)
          break
        default:
          reader.skip(reader.wireType, field)
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
    if (!this.distinct) return
    if (n >= maxPackedAffiliates) {
      this.distinct = false
      return
    }
    for (let i = 0; i < n; i++) {
      if (sameRange(bytes, this.idStarts[i]!, this.idEnds[i]!, idStart, idEnd)) {
        this.distinct = false
        return
      }
    }
    this.idStarts[n] = idStart
    this.idEnds[n] = idEnd
  }

  /**
   * Checks the ClusterSnapshot in `reader`'s bounds as `read` would, without
   * building it; returns its ID. What it found is then in `packable`,
   * `scannedAffiliates`, `scannedEndpointCount` and `earliestExpiry`.
   */
  check(reader: WireReader): string {
    return this.scan(reader, this.scratchSpans)
  }

  /**
   * Checks the ClusterSnapshot in `reader`'s bounds as `read` would, writing
   * its affiliates' spans into `spans` (offsets into `reader.bytes`), without
   * building them; returns its ID.
   */
  scan(reader: WireReader, spans: Array<number>): string {
    this.scanning = true
    this.scanned = 0
    this.scannedEndpoints = 0
    this.earliest = Number.POSITIVE_INFINITY
    this.distinct = true
    this.spanOut = spans
    this.spanLength = 0
    try {
      return this.readCluster(reader)
    } finally {
      this.scanning = false
      this.spanOut = noSpans
    }
  }

  /**
   * Whether the last scan found a record a packed one can hold: 1 to 64
   * affiliates, no repeated affiliate ID and nothing expired at `now`.
   */
  get packable(): boolean {
    return this.distinct && this.scanned > 0 && this.earliest > this.now
  }

  /** How many affiliates the last scan found. */
  get scannedAffiliates(): number {
    return this.scanned
  }

  /** How many endpoints the last scan found in all. */
  get scannedEndpointCount(): number {
    return this.scannedEndpoints
  }

  /** The earliest expiry of any affiliate or endpoint the last scan found. */
  get earliestExpiry(): number {
    return this.earliest
  }

  /** How many numbers the last scan wrote. */
  get scannedSpans(): number {
    return this.spanLength
  }

  /** Reads the ClusterSnapshot in `reader`'s bounds and builds its affiliates. */
  read(reader: WireReader): DecodedCluster {
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
  private readCluster(reader: WireReader): string {
    let id = ""
    for (let field = reader.nextField(); field !== 0; field = reader.nextField()) {
      if (field === 1) {
        reader.expect(2, "ClusterSnapshot.id")
        id = readId(reader, "ClusterSnapshot.id")
      } else if (field === 2) {
        reader.expect(2, "ClusterSnapshot.affiliates")
        const outer = reader.enter()
        this.affiliate(reader)
        reader.leave(outer)
      } else reader.skip(reader.wireType, field)
    }
    return id
  }
}
