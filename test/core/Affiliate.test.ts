import { assert, describe, it } from "@effect/vitest"
import { Affiliate } from "../../src/core/server/Affiliate.ts"
import { endpoint, plain, utf8 } from "./fixtures/discovery.ts"

const now = 1_000_000
const minute = 60_000
const e1 = endpoint(1)
const e2 = endpoint(2)
const e3 = endpoint(3)

/** The affiliate of the original's affiliate_test: data at +1m, then e1 and e2 at +1m. */
const seeded = (): Affiliate => {
  const affiliate = new Affiliate("af1")
  affiliate.merge(utf8("data"), [], now + minute)
  affiliate.merge(undefined, [e1, e2], now + minute)
  return affiliate
}

describe("Affiliate", () => {
  it("starts empty and already expired", () => {
    const affiliate = new Affiliate("af1")
    assert.deepStrictEqual(plain(affiliate.view()), { id: "af1", data: [], endpoints: [] })
    assert.strictEqual(affiliate.expire(Number.MIN_SAFE_INTEGER), "expired")
  })

  it("takes new data, reports a change and exports an empty endpoint list", () => {
    const affiliate = new Affiliate("af1")
    assert.notStrictEqual(affiliate.merge(utf8("data"), [], now + minute), 0)
    const view = affiliate.view()
    assert.deepStrictEqual(plain(view), { id: "af1", data: Array.from(utf8("data")), endpoints: [] })
    assert.isArray(view.endpoints)
    assert.strictEqual(affiliate.expiresAt, now + minute)
  })

  it("replaces different data and reports a change", () => {
    const affiliate = new Affiliate("af1")
    affiliate.merge(utf8("data"), [], now + minute)
    assert.notStrictEqual(affiliate.merge(utf8("data2"), [], now + minute), 0)
    assert.deepStrictEqual(Array.from(affiliate.view().data), Array.from(utf8("data2")))
  })

  it("reports no change for identical data bytes but still sets the expiry", () => {
    const affiliate = new Affiliate("af1")
    affiliate.merge(utf8("data"), [], now + minute)
    assert.strictEqual(affiliate.merge(utf8("data"), [], now + 5 * minute), 0)
    assert.strictEqual(affiliate.expiresAt, now + 5 * minute)
  })

  it("lets an update with data shorten the expiry, as the original does", () => {
    const affiliate = new Affiliate("af1")
    affiliate.merge(utf8("data"), [], now + 5 * minute)
    affiliate.merge(utf8("data"), [], now + minute)
    assert.strictEqual(affiliate.expiresAt, now + minute)
  })

  it("leaves the data alone when the update carries none or an empty blob", () => {
    const affiliate = new Affiliate("af1")
    affiliate.merge(utf8("data"), [], now + minute)
    assert.strictEqual(affiliate.merge(undefined, [], now + minute), 0)
    assert.strictEqual(affiliate.merge(new Uint8Array(0), [], now + minute), 0)
    assert.deepStrictEqual(Array.from(affiliate.view().data), Array.from(utf8("data")))
  })

  it("appends new endpoints in request order and reports a change", () => {
    const affiliate = new Affiliate("af1")
    affiliate.merge(utf8("data"), [], now + minute)
    assert.notStrictEqual(affiliate.merge(undefined, [e1, e2], now + minute), 0)
    assert.deepStrictEqual(plain(affiliate.view()).endpoints, [Array.from(e1), Array.from(e2)])
  })

  it("reports no change for a known endpoint with the same expiry", () => {
    const affiliate = seeded()
    assert.strictEqual(affiliate.merge(undefined, [endpoint(1)], now + minute), 0)
    assert.strictEqual(affiliate.endpoints.length, 2)
  })

  it("appends an unknown endpoint and raises the expiry of known ones and of the affiliate", () => {
    const affiliate = seeded()
    assert.notStrictEqual(affiliate.merge(undefined, [e1, e3], now + 3 * minute), 0)
    assert.deepStrictEqual(plain(affiliate.view()).endpoints, [Array.from(e1), Array.from(e2), Array.from(e3)])
    assert.deepStrictEqual(
      affiliate.endpoints.map((e) => e.expiresAt),
      [now + 3 * minute, now + minute, now + 3 * minute]
    )
    assert.strictEqual(affiliate.expiresAt, now + 3 * minute)
  })

  it("never lowers an endpoint's expiry", () => {
    const affiliate = seeded()
    affiliate.merge(undefined, [e1], now + 3 * minute)
    affiliate.merge(undefined, [e1], now + minute)
    assert.strictEqual(affiliate.endpoints[0]!.expiresAt, now + 3 * minute)
  })

  it("extends the affiliate's expiry on an endpoint-only or empty update", () => {
    const affiliate = seeded()
    affiliate.merge(undefined, [], now + 2 * minute)
    assert.strictEqual(affiliate.expiresAt, now + 2 * minute)
    affiliate.merge(undefined, [e1], now + 4 * minute)
    assert.strictEqual(affiliate.expiresAt, now + 4 * minute)
  })

  it("collapses duplicates inside one request", () => {
    const affiliate = new Affiliate("af1")
    assert.notStrictEqual(affiliate.merge(undefined, [e1, endpoint(1), e2, e1], now + minute), 0)
    assert.strictEqual(affiliate.endpoints.length, 2)
  })

  it("counts only endpoints that are neither stored nor repeated against the limit", () => {
    const affiliate = seeded()
    const stored = affiliate.endpoints.length
    assert.isFalse(affiliate.wouldExceed([], stored))
    assert.isFalse(affiliate.wouldExceed([e1, e2], stored))
    assert.isFalse(affiliate.wouldExceed([e3, e1, endpoint(3), endpoint(4)], stored + 2))
    assert.isTrue(affiliate.wouldExceed([e3, e1, endpoint(3), endpoint(4)], stored + 1))
  })

  it("answers for a request of many thousands of blobs without quadratic work", () => {
    const affiliate = seeded()
    const known = affiliate.endpoints.map((e) => e.data)
    const fresh = endpoint(200)
    const many = Array.from({ length: 400_000 }, (_, i) => (i < 200_000 ? known[i % known.length]! : fresh))
    // No clock here: the linear check answers in milliseconds, while the old quadratic one
    // (about 10^10 comparisons for this request) would not finish within the test timeout.
    assert.isFalse(affiliate.wouldExceed(many, 64))
    const overflowing = Array.from({ length: 100 }, (_, i) => endpoint(i + 300)).concat(many)
    assert.isTrue(affiliate.wouldExceed(overflowing, 64))
  })

  it("keeps copies of the blobs it was given", () => {
    const affiliate = new Affiliate("af1")
    const data = utf8("data")
    const blob = endpoint(1)
    affiliate.merge(data, [blob], now + minute)
    data.fill(0)
    blob.fill(0)
    assert.deepStrictEqual(plain(affiliate.view()), {
      id: "af1",
      data: Array.from(utf8("data")),
      endpoints: [Array.from(endpoint(1))]
    })
  })

  it("hands out a fresh endpoint list in each view", () => {
    const affiliate = seeded()
    const view = affiliate.view()
    ;(view.endpoints as Array<Uint8Array>).length = 0
    assert.strictEqual(affiliate.view().endpoints.length, 2)
  })

  describe("expire", () => {
    it("keeps everything before any expiry", () => {
      const affiliate = seeded()
      affiliate.merge(undefined, [e3], now + 3 * minute)
      assert.strictEqual(affiliate.expire(now), "kept")
      assert.strictEqual(affiliate.endpoints.length, 3)
    })

    it("drops only the expired endpoints and keeps their order", () => {
      const affiliate = seeded()
      affiliate.merge(undefined, [e1, e3], now + 3 * minute)
      assert.strictEqual(affiliate.expire(now + 2 * minute), "trimmed")
      assert.deepStrictEqual(plain(affiliate.view()).endpoints, [Array.from(e1), Array.from(e3)])
    })

    it("removes the affiliate once its own expiry has passed", () => {
      const affiliate = seeded()
      affiliate.merge(undefined, [e1, e3], now + 3 * minute)
      assert.strictEqual(affiliate.expire(now + 4 * minute), "expired")
    })

    it("keeps an affiliate whose expiry is exactly now and removes it one millisecond later", () => {
      const affiliate = new Affiliate("af1")
      affiliate.merge(utf8("data"), [], now)
      assert.strictEqual(affiliate.expire(now), "kept")
      assert.strictEqual(affiliate.expire(now + 1), "expired")
    })

    it("drops an endpoint whose expiry is exactly now", () => {
      const affiliate = new Affiliate("af1")
      affiliate.merge(utf8("data"), [], now + minute)
      affiliate.merge(undefined, [e1], now)
      affiliate.merge(undefined, [e2], now + 1)
      assert.strictEqual(affiliate.expire(now), "trimmed")
      assert.deepStrictEqual(plain(affiliate.view()).endpoints, [Array.from(e2)])
    })
  })
})
