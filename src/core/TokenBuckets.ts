/**
 * Per-key token buckets as plain arithmetic: refilled at `rate` tokens per
 * second up to `burst`, new buckets full, buckets that have refilled dropped
 * by `sweep`. They read no clock and schedule nothing: the caller passes each
 * instant, so both limiters built on them (the gRPC calls' and the landing
 * page's) run on Effect's `Clock` and `TestClock` drives them.
 *
 * @since 0.1.0
 */

/**
 * One key's bucket: its tokens (negative while calls wait for reserved
 * tokens) as of `updatedAt`, in milliseconds on the caller's clock.
 *
 * @category models
 * @since 0.1.0
 */
export interface Bucket {
  tokens: number
  updatedAt: number
}

/**
 * The token buckets of all keys, on the instants (milliseconds) the caller
 * passes.
 *
 * @category models
 * @since 0.1.0
 */
export class TokenBuckets {
  readonly rate: number
  readonly burst: number
  readonly maxBuckets: number
  readonly #perMilli: number
  readonly #buckets = new Map<string, Bucket>()
  #overflow: Bucket | undefined

  constructor(rate: number, burst: number, maxBuckets: number = Number.POSITIVE_INFINITY) {
    if (!(rate > 0) || !Number.isFinite(rate)) throw new RangeError(`token buckets: rate must be positive, got ${rate}`)
    if (!(burst >= 1) || !Number.isFinite(burst))
      throw new RangeError(`token buckets: burst must be at least 1, got ${burst}`)
    if (!(maxBuckets >= 1)) throw new RangeError(`token buckets: maxBuckets must be at least 1, got ${maxBuckets}`)
    this.rate = rate
    this.burst = burst
    this.maxBuckets = maxBuckets
    this.#perMilli = rate / 1000
  }

  /** Buckets held, the overflow bucket not included. */
  get size(): number {
    return this.#buckets.size
  }

  #refill(bucket: Bucket, now: number): Bucket {
    if (now > bucket.updatedAt) {
      bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.updatedAt) * this.#perMilli)
      bucket.updatedAt = now
    }
    return bucket
  }

  /** Milliseconds until `bucket` holds a whole token, 0 when it does. */
  #wait(bucket: Bucket): number {
    return bucket.tokens >= 1 ? 0 : (1 - bucket.tokens) / this.#perMilli
  }

  /**
   * The bucket of `key`, refilled up to `now`: the existing one, a new full
   * one, or the shared overflow bucket when `maxBuckets` are held.
   */
  bucket(key: string, now: number): Bucket {
    const bucket = this.#buckets.get(key)
    if (bucket !== undefined) return this.#refill(bucket, now)
    const fresh: Bucket = { tokens: this.burst, updatedAt: now }
    if (this.#buckets.size < this.maxBuckets) {
      this.#buckets.set(key, fresh)
      return fresh
    }
    this.#overflow ??= fresh
    return this.#refill(this.#overflow, now)
  }

  /**
   * Takes a token of `key` at `now`. Returns the milliseconds until it is due
   * (0 when one is available), or -1, taking nothing, when it is due at or
   * after `limitMillis` from now.
   */
  reserve(key: string, now: number, limitMillis: number): number {
    const bucket = this.bucket(key, now)
    const wait = this.#wait(bucket)
    if (wait > 0 && wait >= limitMillis) return -1
    bucket.tokens -= 1
    return wait
  }

  /**
   * Takes a token of `key` at `now` when one is there and gives 0; otherwise
   * takes nothing and gives the milliseconds until one is due.
   */
  tryTake(key: string, now: number): number {
    const bucket = this.bucket(key, now)
    const wait = this.#wait(bucket)
    if (wait === 0) bucket.tokens -= 1
    return wait
  }

  /** Gives back a token that `reserve` handed out for `key` and that was not used. */
  release(key: string, now: number): void {
    const bucket = this.#buckets.get(key) ?? this.#overflow
    if (bucket === undefined) return
    this.#refill(bucket, now).tokens = Math.min(this.burst, bucket.tokens + 1)
  }

  /** Drops every bucket that is full at `now`; returns how many were dropped. */
  sweep(now: number): number {
    let removed = 0
    for (const [key, bucket] of this.#buckets) {
      if (this.#refill(bucket, now).tokens >= this.burst) {
        this.#buckets.delete(key)
        removed++
      }
    }
    if (this.#overflow !== undefined && this.#refill(this.#overflow, now).tokens >= this.burst)
      this.#overflow = undefined
    return removed
  }
}
