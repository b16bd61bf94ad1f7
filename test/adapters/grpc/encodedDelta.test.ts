/**
 * A delta encoded once serves both forms: the positioned message, and as its
 * prefix the original's, byte for byte what `encodeDelta` gives each; read
 * back, it is the same delta and remembers its bytes.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { encodeDelta } from "../../../src/adapters/grpc/codec.ts"
import { decodeDeltaForms, encodeDeltaForms, knownEncoding } from "../../../src/adapters/grpc/encodedDelta.ts"
import type { WatchDelta } from "../../../src/ports/ClusterApi.ts"

const bytes = fc.uint8Array({ maxLength: 600 }).map((array) => new Uint8Array(array))
const delta: fc.Arbitrary<WatchDelta> = fc.oneof(
  fc.record({
    _tag: fc.constant("Updated" as const),
    revision: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    affiliate: fc.record({
      id: fc.string({ maxLength: 80 }),
      data: bytes,
      endpoints: fc.array(bytes, { maxLength: 5 })
    })
  }),
  fc.record({
    _tag: fc.constant("Deleted" as const),
    revision: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    affiliateId: fc.string({ maxLength: 80 })
  })
)
const epoch = fc.string({ minLength: 1, maxLength: 300 })

describe("encodedDelta", () => {
  it("gives the original's message as a prefix of the positioned one, each equal to encodeDelta's", () =>
    fc.assert(
      fc.property(delta, epoch, (change, sequence) => {
        const encoded = encodeDeltaForms(change, sequence)
        assert.deepStrictEqual(encoded.bytes, encodeDelta(change, sequence))
        assert.deepStrictEqual(encoded.bytes.subarray(0, encoded.plainLength), encodeDelta(change, undefined))
      }),
      { numRuns: 300 }
    ))

  it("reads the delta back, and its bytes need no encoding again", () =>
    fc.assert(
      fc.property(delta, epoch, (change, sequence) => {
        const encoded = encodeDeltaForms(change, sequence)
        const read = decodeDeltaForms(encoded)
        assert.deepStrictEqual(read, change)
        assert.strictEqual(knownEncoding(read, sequence), encoded.bytes)
        assert.deepStrictEqual(knownEncoding(read, undefined), encodeDelta(change, undefined))
        assert.isUndefined(knownEncoding(change, sequence))
      }),
      { numRuns: 300 }
    ))
})
