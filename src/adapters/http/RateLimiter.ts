/**
 * A per-key token bucket on the monotonic time of Effect's `Clock` (so
 * `TestClock` drives it, and a wall clock set back locks no client out), used
 * to limit `/inspect` per client address: the core's `TokenBuckets`, which
 * refuses a request with the wait until its next token instead of making it
 * wait. Buckets that have refilled are dropped, so memory follows the number
 * of recently active keys.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import { TokenBuckets } from "../../core/TokenBuckets.ts"

/**
 * A token bucket: `burst` requests at once, refilled at `perSecond`.
 *
 * @category models
 * @since 0.1.0
 */
export interface RateLimit {
  /** Tokens added per second; positive and finite. */
  readonly perSecond: number
  /** Bucket size: the most requests allowed at once; at least 1 and finite. */
  readonly burst: number
}

/**
 * The outcome of taking a token: allowed, or denied with the wait until the
 * next token.
 *
 * @category models
 * @since 0.1.0
 */
export type Decision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterMillis: number }

/**
 * Takes one token from the bucket of a key.
 *
 * @category models
 * @since 0.1.0
 */
export interface RateLimiter {
  readonly take: (key: string) => Effect.Effect<Decision>
  /** Buckets currently held (for tests and diagnostics). */
  readonly size: Effect.Effect<number>
}

const allowed: Decision = { allowed: true }

/**
 * Builds a limiter; every key starts with a full bucket. Throws a RangeError
 * for a rate that is not positive, a burst below 1, or either one infinite.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (limit: RateLimit): RateLimiter => {
  const buckets = new TokenBuckets(limit.perSecond, limit.burst)
  // A bucket untouched for this long is full again, the same as a new one.
  const refillMillis = limit.burst / (limit.perSecond / 1000)
  let lastSweep = Number.NEGATIVE_INFINITY

  const take = (key: string, now: number): Decision => {
    if (now - lastSweep >= refillMillis) {
      buckets.sweep(now)
      lastSweep = now
    }
    const wait = buckets.tryTake(key, now)
    return wait === 0 ? allowed : { allowed: false, retryAfterMillis: Math.ceil(wait) }
  }

  return {
    take: (key) =>
      Clock.clockWith((clock) => Effect.sync(() => take(key, Number(clock.monotonicTimeNanosUnsafe()) / 1_000_000))),
    size: Effect.sync(() => buckets.size)
  }
}
