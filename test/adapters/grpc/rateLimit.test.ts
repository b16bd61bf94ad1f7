import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as RateLimit from "../../../src/adapters/grpc/rateLimit.ts"
import { failureOf } from "./fixtures.ts"

describe("rateLimit", () => {
  describe("Limiter", () => {
    it("drops only full buckets when swept and makes new ones afterwards (T35)", () => {
      const limiter = new RateLimit.Limiter(1, 1)
      const ip1 = limiter.bucket("1.1.1.1", 0)
      const ip2 = limiter.bucket("2.2.2.2", 0)
      assert.strictEqual(limiter.reserve("2.2.2.2", 0, 0), 0)
      assert.strictEqual(limiter.size, 2)
      assert.strictEqual(limiter.sweep(0), 1)
      assert.strictEqual(limiter.size, 1)
      assert.notStrictEqual(limiter.bucket("1.1.1.1", 0), ip1)
      assert.strictEqual(limiter.bucket("2.2.2.2", 0), ip2)
      assert.strictEqual(limiter.sweep(2000), 2)
      assert.strictEqual(limiter.size, 0)
    })

    it("keeps buckets independent (T36)", () => {
      const limiter = new RateLimit.Limiter(1, 1)
      assert.strictEqual(limiter.reserve("1.1.1.1", 0, 0), 0)
      assert.strictEqual(limiter.reserve("1.1.1.1", 0, 0), -1)
      assert.strictEqual(limiter.reserve("2.2.2.2", 0, 0), 0)
    })

    it("starts full, refills at the rate up to the burst, and reserves future tokens", () => {
      const limiter = new RateLimit.Limiter(10, 3)
      for (let i = 0; i < 3; i++) assert.strictEqual(limiter.reserve("k", 0, 0), 0)
      assert.strictEqual(limiter.reserve("k", 0, 1000), 100)
      assert.strictEqual(limiter.reserve("k", 0, 1000), 200)
      assert.strictEqual(limiter.reserve("k", 250, 1000), 50)
      assert.strictEqual(limiter.reserve("k", 10_000, 0), 0)
      assert.strictEqual(limiter.bucket("k", 10_000).tokens, 2)
    })

    it("refuses a token due at or after the limit without taking it", () => {
      const limiter = new RateLimit.Limiter(1, 1)
      assert.strictEqual(limiter.reserve("k", 0, 0), 0)
      assert.strictEqual(limiter.reserve("k", 0, 1000), -1)
      assert.strictEqual(limiter.reserve("k", 0, 999), -1)
      assert.strictEqual(limiter.bucket("k", 0).tokens, 0)
      assert.strictEqual(limiter.reserve("k", 0, 1001), 1000)
    })

    it("takes a released token back", () => {
      const limiter = new RateLimit.Limiter(1, 1)
      limiter.reserve("k", 0, 0)
      assert.strictEqual(limiter.reserve("k", 0, 5000), 1000)
      limiter.release("k", 0)
      assert.strictEqual(limiter.reserve("k", 0, 5000), 1000)
      limiter.release("k", 0)
      limiter.release("k", 0)
      limiter.release("k", 0)
      assert.strictEqual(limiter.bucket("k", 0).tokens, 1)
    })

    it("puts new addresses in one shared bucket once maxBuckets are held", () => {
      const limiter = new RateLimit.Limiter(1, 1, 2)
      assert.strictEqual(limiter.reserve("a", 0, 0), 0)
      assert.strictEqual(limiter.reserve("b", 0, 0), 0)
      assert.strictEqual(limiter.reserve("c", 0, 0), 0)
      assert.strictEqual(limiter.reserve("d", 0, 0), -1)
      assert.strictEqual(limiter.size, 2)
      assert.strictEqual(limiter.sweep(1000), 2)
      assert.strictEqual(limiter.reserve("d", 1000, 0), 0)
      assert.strictEqual(limiter.size, 1)
    })

    it("rejects settings that cannot limit anything", () => {
      assert.throws(() => new RateLimit.Limiter(0, 1), /rate must be positive/)
      assert.throws(() => new RateLimit.Limiter(1, 0.5), /burst must be at least 1/)
      assert.throws(() => new RateLimit.Limiter(1, 1, 0), /maxBuckets must be at least 1/)
    })
  })

  describe("make", () => {
    const exhaust = (limiter: RateLimit.RateLimiter, key: string, n: number) =>
      Effect.forEach(Array.from({ length: n }), () => limiter.take(key, 0), { discard: true })

    it.effect("waits for a reserved token on the clock", () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimit.make({ rate: 1, burst: 2 })
        yield* exhaust(limiter, "k", 2)
        const waiting = yield* Effect.forkChild(limiter.take("k", Number.POSITIVE_INFINITY))
        yield* TestClock.adjust("999 millis")
        assert.isUndefined(waiting.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(waiting)))
      })
    )

    it.effect("fails at once with the original's message when the token is due after the deadline", () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimit.make({ rate: 1, burst: 60 })
        yield* exhaust(limiter, "1.2.3.4", 60)
        const error = failureOf(yield* Effect.exit(limiter.take("1.2.3.4", 1000)))
        assert.deepStrictEqual([error._tag, error.message], ["ResourceExhausted", "rate limit exceeds request timeout"])
        yield* limiter.take("5.6.7.8", 1000)
      })
    )

    it.effect("bounds the wait of a call without a deadline by maxWait (Q10)", () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimit.make({ rate: 1, burst: 1, maxWait: "2 seconds" })
        yield* exhaust(limiter, "k", 1)
        const first = yield* Effect.forkChild(limiter.take("k", Number.POSITIVE_INFINITY))
        yield* Effect.yieldNow
        const second = yield* Effect.exit(limiter.take("k", Number.POSITIVE_INFINITY))
        assert.strictEqual(failureOf(second).message, RateLimit.rateLimitExceededMessage)
        yield* TestClock.adjust("1 second")
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(first)))
      })
    )

    it.effect("gives the token back when a waiting call is interrupted", () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimit.make({ rate: 1, burst: 1 })
        yield* exhaust(limiter, "k", 1)
        const waiting = yield* Effect.forkChild(limiter.take("k", 5000))
        yield* Effect.yieldNow
        yield* Fiber.interrupt(waiting)
        yield* TestClock.adjust("1 second")
        yield* limiter.take("k", 0)
      })
    )

    it.effect("drops idle buckets every sweep interval", () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimit.make({ rate: 1, burst: 2, sweepInterval: "1 minute" })
        yield* exhaust(limiter, "a", 2)
        yield* limiter.take("b", 0)
        assert.strictEqual(yield* limiter.size, 2)
        yield* TestClock.adjust("59 seconds")
        assert.strictEqual(yield* limiter.size, 2)
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* limiter.size, 0)
        yield* exhaust(limiter, "a", 2)
        assert.strictEqual(yield* limiter.sweep, 0)
      })
    )
  })
})
