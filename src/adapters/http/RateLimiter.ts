/**
 * A per-key token bucket on Effect's `Clock` (so `TestClock` drives it), used
 * to limit `/inspect` per client address. Buckets that have refilled are
 * dropped, so memory follows the number of recently active keys.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"

/**
 * A token bucket: `burst` requests at once, refilled at `perSecond`.
 *
 * @category models
 * @since 0.1.0
 */
export interface RateLimit {
  /** Tokens added per second; must be positive. */
  readonly perSecond: number
  /** Bucket size: the most requests allowed at once; at least 1. */
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

interface Bucket {
  tokens: number
  at: number
}

const allowed: Decision = { allowed: true }

/**
 * Builds a limiter; every key starts with a full bucket.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (limit: RateLimit): RateLimiter => {
  if (!(limit.perSecond > 0) || !(limit.burst >= 1)) {
    throw new RangeError(`invalid rate limit: ${limit.perSecond}/s, burst ${limit.burst}`)
  }
  const buckets = new Map<string, Bucket>()
  const perMilli = limit.perSecond / 1000
  // A bucket untouched for this long is full again, the same as a new one.
  const refillMillis = limit.burst / perMilli
  let lastSweep = Number.NEGATIVE_INFINITY

  const level = (bucket: Bucket, now: number) =>
    Math.min(limit.burst, bucket.tokens + Math.max(0, now - bucket.at) * perMilli)

  const sweep = (now: number) => {
    for (const [key, bucket] of buckets) {
      if (level(bucket, now) >= limit.burst) buckets.delete(key)
    }
  }

  const take = (key: string, now: number): Decision => {
    if (now - lastSweep >= refillMillis) {
      sweep(now)
      lastSweep = now
    }
    const bucket = buckets.get(key)
    const tokens = bucket === undefined ? limit.burst : level(bucket, now)
    if (tokens < 1) {
      buckets.set(key, { tokens, at: now })
      return { allowed: false, retryAfterMillis: Math.ceil((1 - tokens) / perMilli) }
    }
    buckets.set(key, { tokens: tokens - 1, at: now })
    return allowed
  }

  return {
    take: (key) => Clock.clockWith((clock) => Effect.sync(() => take(key, clock.currentTimeMillisUnsafe()))),
    size: Effect.sync(() => buckets.size)
  }
}
