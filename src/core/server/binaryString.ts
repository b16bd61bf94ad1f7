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
 * Builds one binary string from pieces of bytes and of other binary strings.
 * It widens the pieces into a scratch buffer of UTF-16 code units (a native
 * copy for bytes) and lets `TextDecoder` turn that into a string in one native
 * step; V8 stores the result with one byte per char, since every char is
 * below 256. This is several times faster than `String.fromCharCode` or any
 * per-byte branching on random bytes. One builder serves one string at a
 * time: `finish` resets it.
 *
 * @category models
 * @since 0.1.0
 */
export class BinaryStringBuilder {
  private units: Uint16Array
  private length = 0
  private readonly decoder = new TextDecoder("utf-16le", { ignoreBOM: true })
  constructor(capacity = 4096) {
    this.units = new Uint16Array(capacity)
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

  /** The string built so far; the builder starts over empty. */
  finish(): string {
    const length = this.length
    this.length = 0
    return length === 0 ? "" : this.decoder.decode(new Uint8Array(this.units.buffer, 0, 2 * length))
  }

  /** The scratch buffer, grown to take `count` more units. */
  private reserve(count: number): Uint16Array {
    const needed = this.length + count
    if (needed > this.units.length) {
      const grown = new Uint16Array(Math.max(needed, 2 * this.units.length))
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
 * `offset`, as bytes.
 *
 * @category encoding
 * @since 0.1.0
 */
export const writeBytes = (text: string, start: number, end: number, target: Uint8Array, offset: number): void => {
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
