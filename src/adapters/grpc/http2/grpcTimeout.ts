/**
 * The `grpc-timeout` request header: at most 8 ASCII digits and a unit,
 * `H` (hours), `M` (minutes), `S` (seconds), `m` (milliseconds), `u`
 * (microseconds) or `n` (nanoseconds), as the gRPC HTTP/2 protocol and
 * grpc-go read it.
 *
 * @since 0.1.0
 */

const unitMillis: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 0.001,
  n: 0.000_001
}

/**
 * The timeout in milliseconds (a fraction for `u` and `n`), or `undefined`
 * when the value is malformed.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseTimeout = (value: string): number | undefined => {
  const length = value.length
  if (length < 2 || length > 9) return undefined
  const millis = unitMillis[value[length - 1]!]
  if (millis === undefined) return undefined
  let amount = 0
  for (let i = 0; i < length - 1; i++) {
    const digit = value.charCodeAt(i) - 48
    if (digit < 0 || digit > 9) return undefined
    amount = amount * 10 + digit
  }
  return amount * millis
}
