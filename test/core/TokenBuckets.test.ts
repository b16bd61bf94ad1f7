import { assert, describe, it } from "@effect/vitest"
import { TokenBuckets } from "../../src/core/TokenBuckets.ts"

describe("TokenBuckets", () => {
  it("drops only full buckets when swept and makes new ones afterwards (T35)", () => {
    const limiter = new TokenBuckets(1, 1)
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
    const limiter = new TokenBuckets(1, 1)
    assert.strictEqual(limiter.reserve("1.1.1.1", 0, 0), 0)
    assert.strictEqual(limiter.reserve("1.1.1.1", 0, 0), -1)
    assert.strictEqual(limiter.reserve("2.2.2.2", 0, 0), 0)
  })

  it("starts full, refills at the rate up to the burst, and reserves future tokens", () => {
    const limiter = new TokenBuckets(10, 3)
    for (let i = 0; i < 3; i++) assert.strictEqual(limiter.reserve("k", 0, 0), 0)
    assert.strictEqual(limiter.reserve("k", 0, 1000), 100)
    assert.strictEqual(limiter.reserve("k", 0, 1000), 200)
    assert.strictEqual(limiter.reserve("k", 250, 1000), 50)
    assert.strictEqual(limiter.reserve("k", 10_000, 0), 0)
    assert.strictEqual(limiter.bucket("k", 10_000).tokens, 2)
  })

  it("refuses a token due at or after the limit without taking it", () => {
    const limiter = new TokenBuckets(1, 1)
    assert.strictEqual(limiter.reserve("k", 0, 0), 0)
    assert.strictEqual(limiter.reserve("k", 0, 1000), -1)
    assert.strictEqual(limiter.reserve("k", 0, 999), -1)
    assert.strictEqual(limiter.bucket("k", 0).tokens, 0)
    assert.strictEqual(limiter.reserve("k", 0, 1001), 1000)
  })

  it("takes a released token back", () => {
    const limiter = new TokenBuckets(1, 1)
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
    const limiter = new TokenBuckets(1, 1, 2)
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
    assert.throws(() => new TokenBuckets(0, 1), /rate must be positive/)
    assert.throws(() => new TokenBuckets(1, 0.5), /burst must be at least 1/)
    assert.throws(() => new TokenBuckets(1, 1, 0), /maxBuckets must be at least 1/)
  })

  it("takes a token when one is there, and otherwise gives the wait and takes nothing", () => {
    const buckets = new TokenBuckets(5, 2)
    assert.strictEqual(buckets.tryTake("k", 0), 0)
    assert.strictEqual(buckets.tryTake("k", 0), 0)
    assert.strictEqual(buckets.tryTake("k", 0), 200)
    assert.strictEqual(buckets.tryTake("k", 100), 100)
    assert.strictEqual(buckets.bucket("k", 100).tokens, 0.5)
    assert.strictEqual(buckets.tryTake("k", 200), 0)
    assert.strictEqual(buckets.tryTake("other", 200), 0)
  })
})
