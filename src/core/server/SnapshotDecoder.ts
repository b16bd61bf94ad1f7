/**
 * The snapshot decoder (PROTOCOL.md §1.5): reads `0A len ClusterSnapshot`
 * records into clusters of compact `Affiliate`s, and reports every byte
 * range it could not load instead of failing the whole load. It reads a file
 * whole or as it arrives, piece by piece, with the same result either way.
 * Each record is read by `ClusterReader.ts`, most kept packed by
 * `PackedRecord.ts`.
 *
 * @since 0.1.0
 */
import { Malformed, WireReader } from "../wire/WireReader.ts"
import { ClusterReader } from "./ClusterReader.ts"
import { readPacked } from "./PackedRecord.ts"
import type { DecodedCluster, DecodedSnapshot, SkippedRange } from "./snapshotFormat.ts"
import { maxClusterSize } from "./snapshotFormat.ts"

/**
 * Options of the snapshot decoder.
 *
 * @category decoding
 * @since 0.1.0
 */
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
  /** Whether clusters may be kept packed. */
  private readonly pack: boolean
  private readonly top = new WireReader(noBytes, 0, 0)
  /** The file offset of the next byte to read. */
  private offset = 0
  /** Where the rest of the file started to be skipped, and why. */
  private rest: { readonly offset: number; readonly reason: string } | undefined
  private skipping: Skipping | undefined
  private ended = false
  /** Turns TTLs into expiry instants from `now` (ms since the epoch). */
  constructor(now: number, options: DecodeOptions = {}) {
    this.reader = new ClusterReader(now)
    this.pack = options.pack ?? true
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
    let tag: number
    try {
      tag = top.uint()
    } catch (error) {
      return this.settle(error, final, offset, (reason) => `unreadable record tag at offset ${offset}: ${reason}`)
    }
    const field = Math.floor(tag / 8)
    const type = tag % 8
    if (field === 0 || type === 4 || type > 5 || tag > 0xffff_ffff) {
      return this.skipRest(offset, `invalid record tag 0x${tag.toString(16)} at offset ${offset}`)
    }
    if (field !== 1 || type !== 2) {
      const unknown = `unknown top-level field ${field} (wire type ${type}) at offset ${offset}`
      const truncated = (reason: string) => `truncated unknown top-level field ${field} at offset ${offset}: ${reason}`
      if (type === 2) {
        let length: number
        try {
          length = top.uint()
        } catch (error) {
          return this.settle(error, final, offset, truncated)
        }
        return this.pass(base, offset, length, unknown, truncated("length runs past the end of its message"), final)
      }
      try {
        top.skip(type, field)
      } catch (error) {
        return this.settle(error, final, offset, truncated)
      }
      this.skipped.push({ offset, length: base + top.pos - offset, reason: unknown })
      return done
    }
    let length: number
    try {
      length = top.uint()
    } catch (error) {
      return this.settle(error, final, offset, (reason) => `truncated record header at offset ${offset}: ${reason}`)
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
      return this.skipRest(offset, `truncated record at offset ${offset}: needs ${length} bytes, ${available} left`)
    }
    top.pos = start + length
    const skipRecord = (reason: string): boolean => {
      this.skipped.push({ offset, length: base + top.pos - offset, reason })
      return done
    }
    let cluster: DecodedCluster
    try {
      const record = new WireReader(top.bytes, start, start + length)
      cluster = this.pack ? readPacked(this.reader, record) : this.reader.read(record)
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

  /** Skips the rest of the file from `offset`, for `reason`. */
  private skipRest(offset: number, reason: string): boolean {
    this.rest = { offset, reason }
    return done
  }

  /**
   * What the top-level read that threw `error`, for the item at `offset`,
   * means: more of the file is needed when it was cut short before the
   * final bytes, else the rest of the file is skipped, for the reason
   * `why` makes of the error's.
   */
  private settle(error: unknown, final: boolean, offset: number, why: (reason: string) => string): boolean {
    const malformed = error as Malformed
    if (malformed.truncated && !final) return needMore
    return this.skipRest(offset, why(malformed.reason))
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
