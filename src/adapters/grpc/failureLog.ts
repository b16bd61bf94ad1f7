/**
 * Keeps the request log bounded under abuse: the line of a call that did not
 * end OK is written only while its client address has a token in its own
 * bucket (`perAddressRate` lines per second) and in the bucket all addresses
 * share (`totalRate`), so neither one client failing in a loop nor many
 * clients rotating addresses can fill a disk. The line of a call that ended OK
 * is always written. Lines held back are counted in
 * `discovery_server_log_lines_suppressed_total` and summed up once per
 * `summaryInterval` in one Warn line. The buckets are the core's
 * `TokenBuckets` on Effect's `Clock`, so `TestClock` drives them in tests.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Clock, Duration, Effect, Schedule } from "effect"
import { TokenBuckets } from "../../core/TokenBuckets.ts"
import { formatIp, limiterKey } from "./clientAddress.ts"
import { logLinesSuppressed } from "./metrics.ts"

/**
 * How failure lines are limited. Each bucket holds ten seconds of its rate
 * (at least one line), so a client that was quiet has its first failures
 * logged in full.
 *
 * @category models
 * @since 0.1.0
 */
export interface FailureLogOptions {
  /**
   * Failure lines per second of one client address (default 1, so bursts of
   * 10). Positive and finite. Addresses are told apart as the rate limiter
   * tells them, so an IPv4-mapped IPv6 address counts as its IPv4 address;
   * calls whose address is unknown share one bucket.
   */
  readonly perAddressRate?: number | undefined
  /** Failure lines per second of all addresses together (default 100, so bursts of 1000). Positive and finite. */
  readonly totalRate?: number | undefined
  /**
   * How often the summary of the lines held back is written, when there were
   * any, and the buckets of quiet addresses are dropped (default 1 minute).
   */
  readonly summaryInterval?: Duration.Input | undefined
  /**
   * The most addresses told apart at once (default 10,000). Beyond it, new
   * addresses share one bucket until quiet ones are dropped, and a summary's
   * `addresses` counts at most this many.
   */
  readonly maxAddresses?: number | undefined
  /**
   * Counts the lines held back in `discovery_server_log_lines_suppressed_total`
   * of the context's metric registry, created at zero (default true). The
   * server turns it off with its own `metrics`.
   */
  readonly metrics?: boolean | undefined
}

/**
 * The defaults of `FailureLogOptions`.
 *
 * @category models
 * @since 0.1.0
 */
export const defaults = {
  perAddressRate: 1,
  totalRate: 100,
  summaryInterval: Duration.minutes(1),
  maxAddresses: 10_000
} as const

/**
 * Seconds of its rate that a bucket holds: its burst is this times its rate.
 *
 * @category models
 * @since 0.1.0
 */
export const burstSeconds = 10

/**
 * The message of the summary line.
 *
 * @category models
 * @since 0.1.0
 */
export const summaryMessage = "request log lines suppressed"

/**
 * The running failure log of a server.
 *
 * @category models
 * @since 0.1.0
 */
export interface FailureLog {
  /**
   * Whether the log line of a call that ended with gRPC status `code`, from
   * `address` (`undefined` when unknown), may be written now. An OK line
   * always may, and reads no clock and no bucket. Another line may when its
   * address's bucket and the shared bucket both have a token, and takes one
   * of each; otherwise it takes none and is counted as suppressed.
   * Synchronous, on the clock of the context `make` ran in.
   */
  readonly admitUnsafe: (code: number, address: Uint8Array | undefined) => boolean
  /**
   * Writes the summary of the lines suppressed since the last one, if any:
   * one Warn line `request log lines suppressed` with `suppressed` (lines),
   * `addresses` (distinct addresses) and `peer.address` (the address with the
   * most). The periodic fiber runs this, and so does closing the scope.
   */
  readonly summarize: Effect.Effect<void>
  /** Drops the buckets of addresses that are full now, as the periodic fiber does; gives how many. */
  readonly sweep: Effect.Effect<number>
  /** Addresses with a bucket now. */
  readonly size: Effect.Effect<number>
}

/** The gRPC status code OK. */
const ok = 0
const totalKey = ""

const bucketsOf = (name: string, rate: number, maxBuckets: number): TokenBuckets => {
  if (!(rate > 0) || !Number.isFinite(rate)) {
    throw new RangeError(`failure log: ${name} must be positive and finite, got ${rate}`)
  }
  return new TokenBuckets(rate, Math.max(1, burstSeconds * rate), maxBuckets)
}

/**
 * Starts a failure log on the `Clock` and metric registry of the context:
 * buckets are measured on the clock's monotonic time, and a fiber of the
 * scope writes the summary and drops quiet buckets every `summaryInterval`.
 * When the scope closes, a last summary covers what the final interval held
 * back. Dies with a RangeError for a rate that is not positive and finite or
 * an address cap below 1.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: FailureLogOptions = {}): Effect.Effect<FailureLog, never, Scope.Scope> =>
  Effect.gen(function* () {
    const maxAddresses = options.maxAddresses ?? defaults.maxAddresses
    const perAddress = bucketsOf("perAddressRate", options.perAddressRate ?? defaults.perAddressRate, maxAddresses)
    const total = bucketsOf("totalRate", options.totalRate ?? defaults.totalRate, 1)
    const interval = Duration.fromInputUnsafe(options.summaryInterval ?? defaults.summaryInterval)
    const clock = yield* Clock.Clock
    const context = yield* Effect.context<never>()
    const metered = options.metrics !== false
    if (metered) logLinesSuppressed.valueUnsafe(context)

    const now = (): number => Number(clock.monotonicTimeNanosUnsafe()) / 1_000_000
    let suppressed = 0
    const byAddress = new Map<string, number>()

    const admitUnsafe = (code: number, address: Uint8Array | undefined): boolean => {
      if (code === ok) return true
      const at = now()
      const key = address === undefined ? formatIp(undefined) : limiterKey(address)
      const own = perAddress.bucket(key, at)
      const shared = total.bucket(totalKey, at)
      // Both tokens or neither: a line held back by one bucket costs the other nothing.
      if (own.tokens >= 1 && shared.tokens >= 1) {
        own.tokens -= 1
        shared.tokens -= 1
        return true
      }
      suppressed++
      const seen = byAddress.get(key)
      if (seen !== undefined) byAddress.set(key, seen + 1)
      else if (byAddress.size < maxAddresses) byAddress.set(key, 1)
      if (metered) logLinesSuppressed.updateUnsafe(1, context)
      return false
    }

    const summarize = Effect.suspend(() => {
      if (suppressed === 0) return Effect.void
      let top = ""
      let most = 0
      for (const [key, count] of byAddress) {
        if (count > most) {
          top = key
          most = count
        }
      }
      const annotations = { suppressed, addresses: byAddress.size, "peer.address": top }
      suppressed = 0
      byAddress.clear()
      return Effect.annotateLogs(Effect.logWarning(summaryMessage), annotations)
    })

    const sweep = Effect.sync(() => perAddress.sweep(now()))

    yield* Effect.andThen(sweep, summarize).pipe(Effect.schedule(Schedule.spaced(interval)), Effect.forkScoped)
    yield* Effect.addFinalizer(() => summarize)

    return { admitUnsafe, summarize, sweep, size: Effect.sync(() => perAddress.size) }
  })
