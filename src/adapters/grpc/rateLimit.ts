/**
 * Per-client rate limiting of the gRPC calls (PROTOCOL.md §3.1): one token
 * bucket per client address, refilled at `rate` tokens per second up to
 * `burst`, new buckets full. A call that finds its bucket empty reserves the
 * next token and waits for it, unless that token is due at or after the
 * call's deadline (or after `maxWait`), in which case it fails at once without
 * taking a token; a call cancelled while waiting gives its token back. Buckets
 * that have refilled are dropped by a periodic sweep. `make` runs the core's
 * `TokenBuckets` on Effect's `Clock`, so `TestClock` drives it in tests.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Duration, Effect } from "effect"
import { TokenBuckets } from "../../core/TokenBuckets.ts"
import { ResourceExhausted } from "../../ports/DiscoveryError.ts"
import { limiterKey } from "./clientAddress.ts"
import type { Interceptor } from "./interceptors.ts"
import { timeLeft } from "./interceptors.ts"

/**
 * How calls are limited. Every field has the default of the original service
 * except `maxWait`, which it does not have (quirk Q10).
 *
 * @category models
 * @since 0.1.0
 */
export interface RateLimitOptions {
  /** Tokens added to a client's bucket per second (default 15). Must be positive. */
  readonly rate?: number | undefined
  /** Bucket capacity: the calls a client that was idle may make at once (default 60). At least 1. */
  readonly burst?: number | undefined
  /**
   * The longest a call waits for a token (default 10 seconds). A call also
   * never waits past its deadline; without this bound a call with no
   * deadline, such as a Watch, would queue for as long as it takes (Q10).
   */
  readonly maxWait?: Duration.Input | undefined
  /** How often buckets that have refilled (idle clients) are dropped (default 1 minute). */
  readonly sweepInterval?: Duration.Input | undefined
  /**
   * The most buckets held at once (default: no cap, like the original). When
   * it is reached, calls from addresses without a bucket share one overflow
   * bucket until a sweep makes room, so memory stays bounded under address
   * rotation while those clients are still limited.
   */
  readonly maxBuckets?: number | undefined
}

/**
 * The defaults of `RateLimitOptions`.
 *
 * @category models
 * @since 0.1.0
 */
export const defaults = {
  rate: 15,
  burst: 60,
  maxWait: Duration.seconds(10),
  sweepInterval: Duration.minutes(1),
  maxBuckets: Number.POSITIVE_INFINITY
} as const

/**
 * The message of the RESOURCE_EXHAUSTED failure of a call that could not get
 * a token in time (the original's text).
 *
 * @category errors
 * @since 0.1.0
 */
export const rateLimitExceededMessage = "rate limit exceeds request timeout"

const exceeded = new ResourceExhausted({ message: rateLimitExceededMessage })

/**
 * The running limiter of a server.
 *
 * @category models
 * @since 0.1.0
 */
export interface RateLimiter {
  /**
   * Waits for a token of `key`, for at most `timeoutMillis` (the time left
   * until the call's deadline, `Infinity` when it has none) and never longer
   * than `maxWait`. Fails at once with ResourceExhausted (`rate limit exceeds
   * request timeout`) when the token would come too late; an interrupted
   * wait gives the token back.
   */
  readonly take: (key: string, timeoutMillis: number) => Effect.Effect<void, ResourceExhausted>
  /**
   * Takes or reserves a token of `key` without waiting: 0 when one was taken,
   * the milliseconds until the reserved one is due, or -1 when it would come
   * after `timeoutMillis` (or `maxWait`) and none was reserved.
   */
  readonly reserve: (key: string, timeoutMillis: number) => Effect.Effect<number>
  /** Gives back the token a wait that was cut short had reserved. */
  readonly release: (key: string) => Effect.Effect<void>
  /** Drops the buckets that are full now, as the periodic sweep does; gives how many. */
  readonly sweep: Effect.Effect<number>
  /** Buckets held now. */
  readonly size: Effect.Effect<number>
}

const millisOf = (nanos: bigint): number => Number(nanos) / 1_000_000

/**
 * Starts a limiter on Effect's `Clock`: buckets are measured on the monotonic
 * time of the clock of the fiber that calls `take`, and the sweep runs every
 * `sweepInterval` of the clock of the scope's fiber until the scope closes.
 * Dies with a RangeError for a non-positive rate, a burst below 1 or a bucket
 * cap below 1.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: RateLimitOptions = {}): Effect.Effect<RateLimiter, never, Scope.Scope> =>
  Effect.gen(function* () {
    const limiter = new TokenBuckets(
      options.rate ?? defaults.rate,
      options.burst ?? defaults.burst,
      options.maxBuckets ?? defaults.maxBuckets
    )
    const maxWaitMillis = Duration.toMillis(Duration.fromInputUnsafe(options.maxWait ?? defaults.maxWait))
    const sweepInterval = Duration.fromInputUnsafe(options.sweepInterval ?? defaults.sweepInterval)
    const sweep = Effect.clockWith((clock) =>
      Effect.sync(() => limiter.sweep(millisOf(clock.monotonicTimeNanosUnsafe())))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(sweepInterval), sweep)))

    const reserve = (key: string, timeoutMillis: number): Effect.Effect<number> =>
      Effect.clockWith((clock) =>
        Effect.sync(() =>
          limiter.reserve(key, millisOf(clock.monotonicTimeNanosUnsafe()), Math.min(timeoutMillis, maxWaitMillis))
        )
      )
    const release = (key: string): Effect.Effect<void> =>
      Effect.clockWith((clock) => Effect.sync(() => limiter.release(key, millisOf(clock.monotonicTimeNanosUnsafe()))))
    // the buckets are here: reserve and wait in one step, with nothing more per call than before reservations
    const take = (key: string, timeoutMillis: number): Effect.Effect<void, ResourceExhausted> =>
      Effect.clockWith((clock) =>
        waitFor(
          limiter.reserve(key, millisOf(clock.monotonicTimeNanosUnsafe()), Math.min(timeoutMillis, maxWaitMillis)),
          key,
          release
        )
      )

    return { take, reserve, release, sweep, size: Effect.sync(() => limiter.size) }
  })

/** Waits for a token reserved `wait` ms ahead (0: taken; negative: none in time), giving it back if interrupted. */
const waitFor = (
  wait: number,
  key: string,
  release: RateLimiter["release"]
): Effect.Effect<void, ResourceExhausted> => {
  if (wait === 0) return Effect.void
  if (wait < 0) return Effect.fail(exceeded)
  return Effect.onInterrupt(Effect.sleep(Duration.millis(wait)), () => release(key))
}

/**
 * The waiting side of a limiter whose buckets are elsewhere (another
 * thread's, over a `MessagePort`): `take` asks `reserve`, waits on this
 * fiber's clock for the token it was given, and gives it back with `release`
 * when interrupted while waiting.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromReservations = (
  reserve: RateLimiter["reserve"],
  release: RateLimiter["release"]
): Pick<RateLimiter, "take" | "reserve" | "release"> => ({
  reserve,
  release,
  take: (key, timeoutMillis) => Effect.flatMap(reserve(key, timeoutMillis), (wait) => waitFor(wait, key, release))
})

/**
 * The limiter as an interceptor: a call takes a token of its client's
 * address (waiting no longer than its deadline) before the rest of the chain
 * runs; a call whose address is unknown is not limited.
 *
 * @category constructors
 * @since 0.1.0
 */
export const interceptor = (limiter: Pick<RateLimiter, "take">): Interceptor => ({
  name: "rateLimit",
  admit: (context) =>
    context.address === undefined ? undefined : limiter.take(limiterKey(context.address), timeLeft(context.call))
})
