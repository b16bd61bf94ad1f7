/**
 * Parses durations written the way Go's `time.ParseDuration` accepts them
 * (`1m`, `1h30m`, `1.5s`, `300ms`), so flag values carry over from the
 * original service unchanged.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"

const unitNanos: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3,
  μs: 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9
}

const part = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/

/**
 * A Go-style duration as an Effect `Duration`, or `undefined` when the text is
 * not one. `0` alone is allowed without a unit, as in Go.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseGoDuration = (text: string): Duration.Duration | undefined => {
  let rest = text
  let sign = 1
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1 : 1
    rest = rest.slice(1)
  }
  if (rest === "0") return Duration.zero
  if (rest === "") return undefined
  let nanos = 0
  while (rest !== "") {
    const match = part.exec(rest)
    if (match === null) return undefined
    nanos += Number(match[1]) * unitNanos[match[2]!]!
    rest = rest.slice(match[0].length)
  }
  return Duration.nanos(BigInt(Math.round(sign * nanos)))
}
