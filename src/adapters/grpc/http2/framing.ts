/**
 * gRPC's length-prefixed messages on an HTTP/2 stream: each message is one
 * flag byte (1 when compressed), a 4-byte big-endian length, then the
 * payload. A message may be split over several DATA frames and one frame may
 * carry several messages, so the reader keeps its place between chunks.
 *
 * @since 0.1.0
 */

/**
 * Receives the messages a `MessageReader` finds, in order.
 *
 * @category models
 * @since 0.1.0
 */
export interface MessageSink {
  /**
   * One whole message: its flag byte and its payload (a view of the received
   * chunk when the message came whole in it, else a buffer of its own that
   * `reserve` paid for). Returns whether to go on reading: false once the
   * call is over.
   */
  onMessage(flag: number, payload: Buffer, gathered: boolean): boolean
  /**
   * Asks to hold `bytes` for a message that does not arrive whole in one
   * chunk, before its payload is gathered; false refuses it.
   */
  reserve(bytes: number): boolean
}

/**
 * Why reading stopped: a message announced longer than the limit, or one
 * the sink would not hold. Either ends the call.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReadFailure {
  readonly _tag: "TooLong" | "OverBudget"
  /** The length the message's prefix announced. */
  readonly length: number
}

const headerLength = 5

/**
 * Splits received chunks into messages, rejecting one whose announced length
 * is over `maxLength` (-1 means no limit) as soon as its prefix is read. A
 * message that arrives whole in one chunk is handed over as a view of it; one
 * that does not is gathered, once the sink reserved its length, into a
 * buffer of exactly that length, so no received chunk stays pinned by it.
 *
 * @category models
 * @since 0.1.0
 */
export class MessageReader {
  private readonly maxLength: number
  /** Prefix bytes read so far of the message being read (0 to 5). */
  private prefixRead = 0
  /** The prefix of a message split over chunks; allocated the first time one is. */
  private prefix: Buffer | undefined
  /** The payload being gathered, and how much of it has come. */
  private payload: Buffer | undefined
  private filled = 0

  constructor(maxLength: number) {
    this.maxLength = maxLength
  }

  /**
   * Reads `chunk`, handing each message it completes to `sink` until the
   * sink stops it. Returns why reading stopped (the call is then over), or
   * `undefined`.
   */
  read(chunk: Buffer, sink: MessageSink): ReadFailure | undefined {
    let at = 0
    const end = chunk.length
    while (at < end) {
      if (this.prefixRead < headerLength) {
        // The usual case: a whole prefix in this chunk, and often the whole message.
        if (this.prefixRead === 0 && end - at >= headerLength) {
          const length = chunk.readUInt32BE(at + 1)
          if (this.maxLength !== -1 && length > this.maxLength) return { _tag: "TooLong", length }
          if (end - at - headerLength >= length) {
            const more = sink.onMessage(
              chunk[at]!,
              chunk.subarray(at + headerLength, at + headerLength + length),
              false
            )
            if (!more) return undefined
            at += headerLength + length
            continue
          }
          this.prefix ??= Buffer.alloc(headerLength)
          chunk.copy(this.prefix, 0, at, at + headerLength)
          this.prefixRead = headerLength
          at += headerLength
          const failure = this.begin(length, sink)
          if (failure !== undefined) return failure
          continue
        }
        const taken = Math.min(headerLength - this.prefixRead, end - at)
        this.prefix ??= Buffer.alloc(headerLength)
        chunk.copy(this.prefix, this.prefixRead, at, at + taken)
        this.prefixRead += taken
        at += taken
        if (this.prefixRead < headerLength) break
        const length = this.prefix.readUInt32BE(1)
        if (this.maxLength !== -1 && length > this.maxLength) return { _tag: "TooLong", length }
        if (length === 0) {
          this.prefixRead = 0
          if (!sink.onMessage(this.prefix[0]!, emptyPayload, false)) return undefined
          continue
        }
        const failure = this.begin(length, sink)
        if (failure !== undefined) return failure
        continue
      }
      const payload = this.payload!
      const taken = Math.min(payload.length - this.filled, end - at)
      chunk.copy(payload, this.filled, at, at + taken)
      this.filled += taken
      at += taken
      if (this.filled === payload.length) {
        this.payload = undefined
        this.prefixRead = 0
        if (!sink.onMessage(this.prefix![0]!, payload, true)) return undefined
      }
    }
    return undefined
  }

  /** True between messages: no prefix or payload byte is pending. */
  get idle(): boolean {
    return this.prefixRead === 0
  }

  /** Starts gathering a message of `length` bytes, once the sink holds them. */
  private begin(length: number, sink: MessageSink): ReadFailure | undefined {
    if (!sink.reserve(length)) return { _tag: "OverBudget", length }
    this.payload = Buffer.allocUnsafe(length)
    this.filled = 0
    return undefined
  }
}

const emptyPayload = Buffer.alloc(0)

const emptyFrame = Buffer.alloc(headerLength)

/**
 * `bytes` as one uncompressed message: the 5-byte prefix, then the bytes
 * (copied). An empty message is a shared constant.
 *
 * @category constructors
 * @since 0.1.0
 */
export const frame = (bytes: Uint8Array): Buffer => {
  const length = bytes.length
  if (length === 0) return emptyFrame
  const framed = Buffer.allocUnsafe(headerLength + length)
  framed[0] = 0
  framed.writeUInt32BE(length, 1)
  framed.set(bytes, headerLength)
  return framed
}
