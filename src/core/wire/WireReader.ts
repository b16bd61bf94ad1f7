/**
 * The one protobuf wire reader of the core, over which the snapshot decoder
 * and the client payload codec are written by hand: a cursor confined to one
 * message's bytes at a time, reading varints without allocating and
 * throwing {@link Malformed} on anything it cannot read.
 *
 * @since 0.1.0
 */

/**
 * Bytes that are not a valid protobuf encoding. `truncated` marks a read
 * past the end of the bytes at hand, which a reader of a file still arriving
 * takes as a need for more of it.
 *
 * @category errors
 * @since 0.1.0
 */
export class Malformed {
  readonly _tag = "Malformed"
  readonly reason: string
  readonly truncated: boolean
  constructor(reason: string, truncated = false) {
    this.reason = reason
    this.truncated = truncated
  }
}

/**
 * How a {@link WireReader} treats what decoders of protobuf disagree on.
 *
 * @category decoding
 * @since 0.1.0
 */
export interface WireReaderOptions {
  /**
   * Whether a skipped group must end with a tag of its own field number
   * (default true), as protobuf-go's `protowire` and protobuf-es require;
   * vtprotobuf's generated `UnmarshalVT` only counts start and end tags.
   */
  readonly checkGroupEnd?: boolean
}

/** A group inside more than this many others is refused rather than skipped. */
const maxGroupDepth = 32

/**
 * A cursor over the message in `bytes[pos, end)`. A message field is read by
 * confining the reader to its payload (`enter`, then `leave`), so one reader
 * serves a whole record. Fields are read in a loop over `nextField`:
 *
 * ```ts
 * for (let field = reader.nextField(); field !== 0; field = reader.nextField()) {
 *   if (field === 1) { reader.expect(2, "Message.name"); name = reader.delimited() }
 *   else reader.skip(reader.wireType, field)
 * }
 * ```
 *
 * @category decoding
 * @since 0.1.0
 */
export class WireReader {
  bytes: Uint8Array
  pos: number
  end: number
  readonly checkGroupEnd: boolean
  /** Low and high 32 bits of the last varint read by `varint64`. */
  lo = 0
  hi = 0
  /** The wire type of the last tag read by `nextField`. */
  wireType = 0
  constructor(bytes: Uint8Array, pos = 0, end = bytes.length, options?: WireReaderOptions) {
    this.bytes = bytes
    this.pos = pos
    this.end = end
    this.checkGroupEnd = options?.checkGroupEnd ?? true
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

  /** A `uint32` field: the low 32 bits of a varint, as Go truncates it. */
  uint32(): number {
    this.varint64()
    return this.lo
  }

  /** A signed 64-bit varint as a number (exact up to 2^53). */
  int64(): number {
    this.varint64()
    return (this.hi | 0) * 0x1_0000_0000 + this.lo
  }

  /**
   * Reads the next tag of the message: returns its field number and keeps
   * its wire type in `wireType`, or returns 0 at the end of the message.
   */
  nextField(): number {
    if (this.pos >= this.end) return 0
    const tag = this.uint()
    const field = Math.floor(tag / 8)
    if (field === 0) throw new Malformed("field number 0")
    this.wireType = tag % 8
    return field
  }

  /** Throws unless the last tag read has wire type `wanted`; `name` names its field in the reason. */
  expect(wanted: number, name: string): void {
    if (this.wireType !== wanted) {
      throw new Malformed(`field ${name} has wire type ${this.wireType}, expected ${wanted}`)
    }
  }

  /** The start of a length-delimited field's payload; `pos` moves past it. */
  delimited(): number {
    const length = this.uint()
    if (length > this.end - this.pos) throw new Malformed("length runs past the end of its message", true)
    const start = this.pos
    this.pos += length
    return start
  }

  /**
   * Confines the reader to the payload of the length-delimited field that
   * comes next; returns the bound to hand to `leave` once it is read.
   */
  enter(): number {
    const start = this.delimited()
    const outer = this.end
    this.end = this.pos
    this.pos = start
    return outer
  }

  /** Ends reading a payload `enter` confined the reader to: moves past it and restores the bound `outer`. */
  leave(outer: number): void {
    this.pos = this.end
    this.end = outer
  }

  /** Skips one field of wire type `wireType` (after its tag, of field number `field`). */
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
        if (depth > maxGroupDepth) throw new Malformed("groups nested too deeply")
        for (;;) {
          const tag = this.uint()
          const type = tag % 8
          const number = Math.floor(tag / 8)
          if (type === 4) {
            if (this.checkGroupEnd && number !== field) throw new Malformed("mismatched end of group")
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
