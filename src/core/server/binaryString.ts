/**
 * Bytes held as JavaScript strings of one char per byte (every char below
 * 256). V8 stores such a string inline on its heap with one byte per char and
 * no external buffer, so a stored blob costs 12 bytes more than its content,
 * against more than 200 for a `Uint8Array` with its own `ArrayBuffer`.
 *
 * @since 0.1.0
 */

/** Pieces longer than this are copied by a native call, whose fixed cost is then worth paying. */
const nativeCopyFrom = 64

/**
 * One-byte string copies a host may have natively: Node's `Buffer` has both
 * (`latin1Slice`, `latin1Write`), several times faster than the portable
 * loops of this module. Other hosts use the loops.
 *
 * @category models
 * @since 0.1.0
 */
export interface Latin1Native {
  /** A string of one char per byte of `bytes[start, end)`. */
  readonly slice: (bytes: Uint8Array, start: number, end: number) => string
  /** Writes each of the first `length` chars of `text` as one byte into `target` at `offset`. */
  readonly write: (text: string, target: Uint8Array, offset: number, length: number) => void
}

interface BufferPrototype {
  readonly latin1Slice?: (this: Uint8Array, start: number, end: number) => string
  readonly latin1Write?: (this: Uint8Array, text: string, offset: number, length: number) => number
}

/**
 * The host's native copies, found on the global `Buffer` when there is one
 * (no import: the core stays free of Node modules), else `undefined`.
 *
 * @category models
 * @since 0.1.0
 */
export const hostLatin1: Latin1Native | undefined = (() => {
  const prototype = (globalThis as { readonly Buffer?: { readonly prototype?: BufferPrototype } }).Buffer?.prototype
  const latin1Slice = prototype?.latin1Slice
  const latin1Write = prototype?.latin1Write
  if (typeof latin1Slice !== "function" || typeof latin1Write !== "function") return undefined
  return {
    slice: (bytes, start, end) => latin1Slice.call(bytes, start, end),
    write: (text, target, offset, length) => {
      latin1Write.call(target, text, offset, length)
    }
  }
})()

/** `hostLatin1`, or `null` (the portable path) where the host has none. */
const hostNative: Latin1Native | null = hostLatin1 ?? null

/**
 * Builds one binary string from pieces of bytes and of other binary strings.
 * With the host's native copies it gathers the pieces into a scratch buffer
 * of bytes and makes the string in one native step; otherwise it widens them
 * into UTF-16 code units and lets `TextDecoder` make the string. Either way
 * V8 stores the result with one byte per char, since every char is below
 * 256, and both are several times faster than `String.fromCharCode` or any
 * per-byte branching on random bytes. One builder serves one string at a
 * time: `finish` resets it.
 *
 * @category models
 * @since 0.1.0
 */
export class BinaryStringBuilder {
  private units: Uint8Array | Uint16Array
  private length = 0
  private readonly native: Latin1Native | null
  private readonly decoder = new TextDecoder("utf-16le", { ignoreBOM: true })
  /** `native`: the host's copies to use (default `hostLatin1`), `null` for the portable path. */
  constructor(capacity = 4096, native: Latin1Native | null = hostNative) {
    this.native = native
    this.units = native === null ? new Uint16Array(capacity) : new Uint8Array(capacity)
  }

  /** Appends `bytes[start, end)`. */
  bytes(bytes: Uint8Array, start: number, end: number): void {
    const units = this.reserve(end - start)
    if (end - start > nativeCopyFrom) units.set(bytes.subarray(start, end), this.length)
    else for (let i = start, pos = this.length; i < end; i++) units[pos++] = bytes[i]!
    this.length += end - start
  }

  /** Appends the chars `text[start, end)` of another binary string. */
  chars(text: string, start: number, end: number): void {
    const units = this.reserve(end - start)
    let pos = this.length
    for (let i = start; i < end; i++) units[pos++] = text.charCodeAt(i)
    this.length = pos
  }

  /** How many chars the string built so far has. */
  get size(): number {
    return this.length
  }

  /** Drops what was built so far. */
  reset(): void {
    this.length = 0
  }

  /**
   * A string of its own (never a slice of a larger one) holding the chars
   * `[start, end)` built so far; the builder keeps them.
   */
  take(start: number, end: number): string {
    if (end <= start) return ""
    const units = this.units
    return this.native === null
      ? this.decoder.decode(new Uint8Array(units.buffer, 2 * start, 2 * (end - start)))
      : this.native.slice(units as Uint8Array, start, end)
  }

  /** The string built so far; the builder starts over empty. */
  finish(): string {
    const length = this.length
    this.length = 0
    if (length === 0) return ""
    const units = this.units
    return this.native === null
      ? this.decoder.decode(new Uint8Array(units.buffer, 0, 2 * length))
      : this.native.slice(units as Uint8Array, 0, length)
  }

  /** The scratch buffer, grown to take `count` more units. */
  private reserve(count: number): Uint8Array | Uint16Array {
    const needed = this.length + count
    if (needed > this.units.length) {
      const capacity = Math.max(needed, 2 * this.units.length)
      const grown = this.native === null ? new Uint16Array(capacity) : new Uint8Array(capacity)
      grown.set(this.units.subarray(0, this.length))
      this.units = grown
    }
    return this.units
  }
}

/**
 * Whether the chars `text[start, end)` of a binary string are the bytes of
 * `bytes`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const sameBytes = (text: string, start: number, end: number, bytes: Uint8Array): boolean => {
  if (end - start !== bytes.length) return false
  for (let i = 0; i < bytes.length; i++) if (text.charCodeAt(start + i) !== bytes[i]) return false
  return true
}

/**
 * Writes the chars `text[start, end)` of a binary string into `target` at
 * `offset`, as bytes (long ranges with `native` when there is one; `null`
 * for the portable loop).
 *
 * @category encoding
 * @since 0.1.0
 */
export const writeBytes = (
  text: string,
  start: number,
  end: number,
  target: Uint8Array,
  offset: number,
  native: Latin1Native | null = hostNative
): void => {
  if (native !== null && end - start > nativeCopyFrom) {
    // A prefix needs no substring: the native copy stops after `end` chars.
    native.write(start === 0 ? text : text.substring(start, end), target, offset, end - start)
    return
  }
  for (let i = start; i < end; i++) target[offset++] = text.charCodeAt(i)
}

/**
 * A new `Uint8Array` holding the chars `text[start, end)` of a binary string.
 *
 * @category encoding
 * @since 0.1.0
 */
export const toBytes = (text: string, start: number, end: number): Uint8Array => {
  const bytes = new Uint8Array(end - start)
  writeBytes(text, start, end, bytes, 0)
  return bytes
}

/**
 * The string of `bytes[start, end)` when every byte is ASCII and the host has
 * native copies (one native call, no view of the bytes), else `undefined`:
 * the caller then decodes the bytes as UTF-8 itself. `native` is `null` on
 * the portable path.
 *
 * @category encoding
 * @since 0.1.0
 */
export const asciiText = (
  bytes: Uint8Array,
  start: number,
  end: number,
  native: Latin1Native | null = hostNative
): string | undefined => {
  if (native === null) return undefined
  for (let i = start; i < end; i++) if (bytes[i]! >= 0x80) return undefined
  return native.slice(bytes, start, end)
}

/**
 * A binary string of its own (never a slice of a larger one) holding the
 * bytes `bytes[start, end)`, one char per byte; `native` is `null` on the
 * portable path.
 *
 * @category encoding
 * @since 0.1.0
 */
export const binaryText = (
  bytes: Uint8Array,
  start: number,
  end: number,
  native: Latin1Native | null = hostNative
): string => {
  if (native !== null) return native.slice(bytes, start, end)
  const builder = new BinaryStringBuilder(Math.max(end - start, 1), null)
  builder.bytes(bytes, start, end)
  return builder.finish()
}
