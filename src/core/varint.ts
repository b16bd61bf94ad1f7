/**
 * Protobuf varints, sized and written by hand where the service encodes
 * messages itself (snapshot records, Watch and Hello responses).
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
