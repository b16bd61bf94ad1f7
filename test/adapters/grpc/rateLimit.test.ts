import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as RateLimit from "../../../src/adapters/grpc/rateLimit.ts"
import { failureOf } from "./fixtures.ts"

describe("rateLimit", () => {
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
