/**
 * The times of a snapshot record: a `google.protobuf.Duration` TTL or a
 * legacy `google.protobuf.Timestamp` expiration, read by the cluster reader
 * and turned into the instant an entry expires.
 *
 * @since 0.1.0
 */
import type { WireReader } from "../wire/WireReader.ts"
import { maxDurationMillis } from "./snapshotFormat.ts"

/**
 * A Duration or Timestamp being read (`seconds` 1, `nanos` 2); repeated
 * occurrences merge, as protobuf merges a message field. One instance is
 * reused from entry to entry.
 *
 * @category decoding
 * @since 0.1.0
 */
export class TimeReader {
  present = false
  seconds = 0
  nanos = 0

  reset(): void {
    this.present = false
    this.seconds = 0
    this.nanos = 0
  }

  /** Reads the message whose payload comes next into this time. */
  read(reader: WireReader): void {
    const outer = reader.enter()
    this.present = true
    for (let field = reader.nextField(); field !== 0; field = reader.nextField()) {
      if (field === 1) {
        reader.expect(0, "seconds")
        this.seconds = reader.int64()
      } else if (field === 2) {
        reader.expect(0, "nanos")
        this.nanos = reader.uint32() | 0
      } else reader.skip(reader.wireType, field)
    }
    reader.leave(outer)
  }

  get millis(): number {
    return this.seconds * 1000 + Math.trunc(this.nanos / 1e6)
  }
}

const clampDuration = (millis: number): number => Math.min(Math.max(millis, -maxDurationMillis), maxDurationMillis)

/**
 * The expiry of an entry: `now + ttl` when a TTL is present (saturated like
 * Go's Duration), else the legacy absolute expiration (the epoch when absent).
 *
 * @category decoding
 * @since 0.1.0
 */
export const expiryOf = (ttl: TimeReader, expiration: TimeReader, now: number): number => {
  if (ttl.present) return now + clampDuration(ttl.millis)
  return expiration.present ? expiration.millis : 0
}
