import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as RateLimiter from "../../../src/adapters/http/RateLimiter.ts"

const allowed = (limiter: RateLimiter.RateLimiter, key: string, n: number) =>
  Effect.forEach(Array.from({ length: n }), () => Effect.map(limiter.take(key), (d) => d.allowed))

describe("RateLimiter", () => {
  it.effect("allows a burst, then one request per refill interval", () =>
    Effect.gen(function* () {
      const limiter = RateLimiter.make({ perSecond: 5, burst: 10 })
      assert.deepStrictEqual(yield* allowed(limiter, "a", 11), [...Array(10).fill(true), false])
      const denied = yield* limiter.take("a")
      assert.deepStrictEqual(denied, { allowed: false, retryAfterMillis: 200 })
      yield* TestClock.adjust("200 millis")
      assert.deepStrictEqual(yield* allowed(limiter, "a", 2), [true, false])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* allowed(limiter, "a", 6), [true, true, true, true, true, false])
    })
  )

  it.effect("keeps one bucket per key", () =>
    Effect.gen(function* () {
      const limiter = RateLimiter.make({ perSecond: 1, burst: 1 })
      assert.deepStrictEqual(yield* allowed(limiter, "a", 2), [true, false])
      assert.deepStrictEqual(yield* allowed(limiter, "b", 2), [true, false])
    })
  )

  it.effect("drops buckets once they have refilled", () =>
    Effect.gen(function* () {
      const limiter = RateLimiter.make({ perSecond: 1, burst: 2 })
      yield* allowed(limiter, "a", 1)
      yield* allowed(limiter, "b", 1)
      assert.strictEqual(yield* limiter.size, 2)
      yield* TestClock.adjust("2 seconds")
      yield* allowed(limiter, "c", 1)
      assert.strictEqual(yield* limiter.size, 1)
    })
  )

  it.effect("runs on monotonic time: a wall clock set back locks no client out", () =>
    Effect.gen(function* () {
      const limiter = RateLimiter.make({ perSecond: 5, burst: 10 })
      yield* TestClock.setTime(10 * 3_600_000)
      assert.deepStrictEqual(yield* allowed(limiter, "a", 11), [...Array(10).fill(true), false])
      yield* TestClock.setTime(9 * 3_600_000)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* allowed(limiter, "a", 6), [true, true, true, true, true, false])
    })
  )

  it("refuses a rate that is not positive or a burst below one", () => {
    assert.throws(() => RateLimiter.make({ perSecond: 0, burst: 1 }), RangeError)
    assert.throws(() => RateLimiter.make({ perSecond: 1, burst: 0 }), RangeError)
    assert.throws(() => RateLimiter.make({ perSecond: Number.POSITIVE_INFINITY, burst: 1 }), RangeError)
  })
})
