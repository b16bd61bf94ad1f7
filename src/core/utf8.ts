/**
 * UTF-8 measures shared by the server and client cores: the protocol counts
 * IDs and sizes in UTF-8 bytes, never in UTF-16 code units.
 *
 * @since 0.1.0
 */

/**
 * The UTF-8 byte length of a string, without allocating (a lone surrogate
 * counts as the 3 bytes of U+FFFD, as `TextEncoder` writes it).
 *
 * @category encoding
 * @since 0.1.0
 */
export const utf8Length = (value: string): number => {
  let bytes = 0
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code < 0x80) bytes += 1
    else if (code < 0x800) bytes += 2
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4
        i++
      } else bytes += 3
    } else bytes += 3
  }
  return bytes
}
