/**
 * The one protobuf wire writer of the core, for the messages the service
 * encodes by hand (snapshot records, client payloads, Watch and Hello
 * responses): a message is sized first, then written field by field into a
 * buffer of exactly that size. Each `put` writes at a position and returns
 * the position after what it wrote, so nothing is allocated per field.
 * Tags are one byte: fields 1 to 15.
 *
 * @since 0.1.0
 */

/**
 * Bytes of `value` as a varint (10 for a negative number, as an int64).
 *
 * @category encoding
 * @since 0.1.0
 */
export const varintSize = (value: number): number => {
  if (value < 0) return 10
  if (value < 0x80) return 1
  if (value < 0x4000) return 2
  if (value < 0x20_0000) return 3
  let size = 4
  for (value = Math.floor(value / 0x20_0000); value >= 128; value = Math.floor(value / 128)) size++
  return size
}

/**
 * Bytes of a length-delimited field with a one-byte tag and a body of
 * `length` bytes.
 *
 * @category encoding
 * @since 0.1.0
 */
export const fieldSize = (length: number): number => 1 + varintSize(length) + length

/**
 * Writes `value` (a length, tag or count; a negative one as an int64) as a
 * varint at `pos`; returns the position after it.
 *
 * @category encoding
 * @since 0.1.0
 */
export const putVarint = (bytes: Uint8Array, pos: number, value: number): number => {
  if (value >= 0 && value <= 0x7fff_ffff) {
    let rest = value | 0
    while (rest >= 0x80) {
      bytes[pos++] = (rest & 0x7f) | 0x80
      rest >>>= 7
    }
    bytes[pos++] = rest
    return pos
  }
  if (value < 0) {
    let big = BigInt.asUintN(64, BigInt(value))
    for (let i = 0; i < 9; i++) {
      bytes[pos++] = Number(big & 0x7fn) | 0x80
      big >>= 7n
    }
    bytes[pos++] = Number(big)
    return pos
  }
  while (value >= 128) {
    bytes[pos++] = (value % 128) | 0x80
    value = Math.floor(value / 128)
  }
  bytes[pos++] = value
  return pos
}

/**
 * Writes a length-delimited field's one-byte tag and its length; returns the
 * position of its body.
 *
 * @category encoding
 * @since 0.1.0
 */
export const putHeader = (bytes: Uint8Array, pos: number, tag: number, length: number): number => {
  bytes[pos++] = tag
  return putVarint(bytes, pos, length)
}

/**
 * Writes `text` as UTF-8 (a lone surrogate as U+FFFD, as `TextEncoder`
 * writes it; `utf8Length` counts its bytes); returns the position after it.
 *
 * @category encoding
 * @since 0.1.0
 */
export const putUtf8 = (bytes: Uint8Array, pos: number, text: string): number => {
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
  return pos
}
