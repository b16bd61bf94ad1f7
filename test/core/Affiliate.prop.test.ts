/**
 * Property tests of the compact affiliate: random merges, limit checks and
 * expiry passes, checked after every step against a reference model that
 * keeps each blob as its own byte array (the representation the store had
 * before it packed an affiliate into one binary string), and round trips
 * through `fromEntry` and the snapshot codec.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { Affiliate } from "../../src/core/server/Affiliate.ts"
import { decode, encode } from "../../src/core/server/SnapshotCodec.ts"

interface ModelEndpoint {
  readonly data: ReadonlyArray<number>
  expiresAt: number
}

/** The rules of PROTOCOL.md §2.5 and §2.12 over plain arrays. */
class Model {
  data: ReadonlyArray<number> = []
  expiresAt = Number.NEGATIVE_INFINITY
  endpoints: Array<ModelEndpoint> = []

  private indexOf(blob: ReadonlyArray<number>): number {
    return this.endpoints.findIndex((e) => same(e.data, blob))
  }

  wouldExceed(blobs: ReadonlyArray<ReadonlyArray<number>>, limit: number): boolean {
    const added: Array<ReadonlyArray<number>> = []
    for (const blob of blobs) {
      if (this.indexOf(blob) === -1 && !added.some((a) => same(a, blob))) added.push(blob)
    }
    // Blobs that are all known change nothing, so never exceed, even past a lowered limit.
    return added.length > 0 && this.endpoints.length + added.length > limit
  }

  merge(
    data: ReadonlyArray<number> | undefined,
    blobs: ReadonlyArray<ReadonlyArray<number>>,
    expiresAt: number
  ): boolean {
    let changed = false
    if (data !== undefined && data.length > 0) {
      if (!same(this.data, data)) {
        this.data = [...data]
        changed = true
      }
      this.expiresAt = expiresAt
    }
    for (const blob of blobs) {
      const index = this.indexOf(blob)
      if (index === -1) {
        this.endpoints.push({ data: [...blob], expiresAt })
        changed = true
      } else if (this.endpoints[index]!.expiresAt < expiresAt) this.endpoints[index]!.expiresAt = expiresAt
    }
    if (this.expiresAt < expiresAt) this.expiresAt = expiresAt
    return changed
  }

  expire(now: number): "kept" | "trimmed" | "expired" {
    if (this.expiresAt < now) return "expired"
    const kept = this.endpoints.filter((e) => e.expiresAt > now)
    if (kept.length === this.endpoints.length) return "kept"
    this.endpoints = kept
    return "trimmed"
  }
}

const same = (a: ArrayLike<number>, b: ArrayLike<number>): boolean =>
  a.length === b.length && Array.prototype.every.call(a, (x: number, i: number) => x === b[i])

/** Bytes of every value, so that chars at and above 0x80 (two UTF-8 bytes) are exercised. */
const bytes = (maxLength: number) => fc.array(fc.integer({ min: 0, max: 255 }), { maxLength })
/** A few short blobs, so that repeats and known endpoints are common. */
const endpointBlob = fc.oneof(fc.constantFrom([1], [2, 200], [0x80, 0xff, 0], [], [7, 7, 7, 7]), bytes(40))

type Step =
  | {
      readonly _tag: "merge"
      readonly data?: ReadonlyArray<number>
      readonly blobs: ReadonlyArray<ReadonlyArray<number>>
      readonly at: number
    }
  | { readonly _tag: "expire"; readonly at: number }
  | { readonly _tag: "check"; readonly blobs: ReadonlyArray<ReadonlyArray<number>>; readonly limit: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    arbitrary: fc.record(
      {
        _tag: fc.constant("merge" as const),
        data: fc.oneof(fc.constant([]), fc.constant([9, 9]), bytes(300)),
        blobs: fc.array(endpointBlob, { maxLength: 6 }),
        at: fc.integer({ min: 0, max: 100 })
      },
      { requiredKeys: ["_tag", "blobs", "at"] }
    ),
    weight: 4
  },
  { arbitrary: fc.record({ _tag: fc.constant("expire" as const), at: fc.integer({ min: 0, max: 100 }) }), weight: 1 },
  {
    arbitrary: fc.record({
      _tag: fc.constant("check" as const),
      blobs: fc.array(endpointBlob, { maxLength: 6 }),
      limit: fc.integer({ min: 0, max: 8 })
    }),
    weight: 1
  }
)

const observed = (affiliate: Affiliate) => {
  const view = affiliate.view()
  return {
    data: Array.from(view.data),
    expiresAt: affiliate.expiresAt,
    endpoints: affiliate.endpoints.map((e, i) => {
      assert.deepStrictEqual(Array.from(e.data), Array.from(view.endpoints[i]!))
      return { data: Array.from(e.data), expiresAt: e.expiresAt }
    }),
    count: affiliate.endpointCount
  }
}

const expected = (model: Model) => ({
  data: model.data,
  expiresAt: model.expiresAt,
  endpoints: model.endpoints.map((e) => ({ data: e.data, expiresAt: e.expiresAt })),
  count: model.endpoints.length
})

describe("Affiliate properties", () => {
  it("behaves like the reference model under any sequence of merges, limit checks and expiry passes", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), (steps) => {
        const affiliate = new Affiliate("a")
        const model = new Model()
        for (const s of steps) {
          switch (s._tag) {
            case "merge": {
              const data = s.data === undefined ? undefined : Uint8Array.from(s.data)
              const blobs = s.blobs.map((b) => Uint8Array.from(b))
              assert.strictEqual(affiliate.merge(data, blobs, s.at) !== 0, model.merge(s.data, s.blobs, s.at))
              break
            }
            case "expire":
              assert.strictEqual(affiliate.expire(s.at), model.expire(s.at))
              break
            case "check":
              assert.strictEqual(
                affiliate.wouldExceed(
                  s.blobs.map((b) => Uint8Array.from(b)),
                  s.limit
                ),
                model.wouldExceed(s.blobs, s.limit)
              )
              break
          }
          assert.deepStrictEqual(observed(affiliate), expected(model))
        }
      }),
      { numRuns: 300 }
    )
  })

  it("never lets a caller's bytes reach the store, in either direction", () => {
    fc.assert(
      fc.property(bytes(50), fc.array(endpointBlob, { maxLength: 4 }), (data, blobs) => {
        fc.pre(data.length > 0)
        const input = Uint8Array.from(data)
        const inputs = blobs.map((b) => Uint8Array.from(b))
        const affiliate = new Affiliate("a")
        affiliate.merge(input, inputs, 10)
        const before = observed(affiliate)
        input.fill(0x55)
        for (const blob of inputs) blob.fill(0x55)
        const view = affiliate.view()
        view.data.fill(0xaa)
        for (const endpoint of view.endpoints) endpoint.fill(0xaa)
        for (const endpoint of affiliate.endpoints) endpoint.data.fill(0xaa)
        affiliate.data.fill(0xaa)
        assert.deepStrictEqual(observed(affiliate), before)
      })
    )
  })

  it("keeps every byte, expiry and duplicate of an entry through fromEntry and the snapshot codec", () => {
    const entry = fc.record({
      data: bytes(300),
      expiresAt: fc.integer({ min: 1, max: 10_000 }).map((s) => 1_000_000 + s * 1000),
      endpoints: fc.array(
        fc.record({
          data: endpointBlob,
          expiresAt: fc.integer({ min: 1, max: 10_000 }).map((s) => 1_000_000 + s * 1000)
        }),
        { maxLength: 5 }
      )
    })
    fc.assert(
      fc.property(entry, (plain) => {
        const affiliate = Affiliate.fromEntry({
          id: "a",
          data: Uint8Array.from(plain.data),
          expiresAt: plain.expiresAt,
          endpoints: plain.endpoints.map((e) => ({ data: Uint8Array.from(e.data), expiresAt: e.expiresAt }))
        })
        const want = {
          data: plain.data,
          expiresAt: plain.expiresAt,
          endpoints: plain.endpoints,
          count: plain.endpoints.length
        }
        assert.deepStrictEqual(observed(affiliate), want)
        const now = 1_000_000
        const decoded = decode(encode([{ id: "c", affiliates: new Map([["a", affiliate]]) }], now).bytes, now)
        assert.deepStrictEqual(decoded.skipped, [])
        const back = decoded.clusters[0]!.affiliates.get("a")!
        assert.instanceOf(back, Affiliate)
        assert.deepStrictEqual(observed(back), want)
      })
    )
  })
})
