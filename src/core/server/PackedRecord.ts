/**
 * Packed clusters: a decoded cluster whose affiliates stay in the bytes of
 * its snapshot record, one char per byte, until first used, so a restart
 * makes far fewer objects and is ready sooner. The record was fully checked
 * when it was read, so unpacking it builds exactly what reading it at once
 * would have.
 *
 * @since 0.1.0
 */
import { WireReader } from "../wire/WireReader.ts"
import type { Affiliate } from "./Affiliate.ts"
import { binaryText, writeBytes } from "./binaryString.ts"
import { ClusterReader } from "./ClusterReader.ts"
import type { DecodedCluster, PackedAffiliates } from "./snapshotFormat.ts"

/** Records up to this size are read back with the shared reader and buffer; larger ones with their own. */
const sharedUnpackBytes = 1 << 16

/** Reads packed records back; one serves all, since reading is synchronous. */
let unpacker: ClusterReader | undefined
const unpackBytes = new Uint8Array(sharedUnpackBytes)

/** A cluster's affiliates kept as the bytes of its snapshot record, with the instant its TTLs count from. */
class PackedRecord implements PackedAffiliates {
  readonly record: string
  private readonly readAt: number
  readonly affiliates: number
  readonly endpoints: number
  readonly earliestExpiry: number
  /** `scanned` has just scanned the record, at the instant its TTLs count from. */
  constructor(record: string, scanned: ClusterReader) {
    this.record = record
    this.readAt = scanned.now
    this.affiliates = scanned.scannedAffiliates
    this.endpoints = scanned.scannedEndpointCount
    this.earliestExpiry = scanned.earliestExpiry
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
  private bytes(): WireReader {
    const length = this.record.length
    const bytes = length > sharedUnpackBytes ? new Uint8Array(length) : unpackBytes
    writeBytes(this.record, 0, length, bytes, 0)
    return new WireReader(bytes, 0, length)
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

/**
 * Reads the ClusterSnapshot in `reader`'s bounds with `clusters`: scanned
 * first, and kept packed when it holds 1 to 64 affiliates, no repeated
 * affiliate ID and nothing expired at `clusters.now`; else built at once.
 *
 * @category decoding
 * @since 0.1.0
 */
export const readPacked = (clusters: ClusterReader, reader: WireReader): DecodedCluster => {
  const start = reader.pos
  const end = reader.end
  const id = clusters.check(reader)
  if (clusters.packable) return new PackedCluster(id, new PackedRecord(binaryText(reader.bytes, start, end), clusters))
  reader.pos = start
  return clusters.read(reader)
}
