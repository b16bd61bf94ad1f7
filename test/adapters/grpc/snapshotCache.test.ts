import { assert, describe, it } from "@effect/vitest"
import { SnapshotCache } from "../../../src/adapters/grpc/snapshotCache.ts"

const bytes = (n: number) => [new Uint8Array(n)]

describe("SnapshotCache", () => {
  it("encodes a snapshot once per cluster, epoch and revision", () => {
    const cache = new SnapshotCache(100)
    let encoded = 0
    const encode = () => {
      encoded++
      return bytes(10)
    }
    const first = cache.messages("c", "e", 3, encode)
    assert.strictEqual(cache.messages("c", "e", 3, encode), first)
    cache.messages("c", "e", 4, encode)
    cache.messages("c", "other", 3, encode)
    cache.messages("d", "e", 3, encode)
    assert.strictEqual(encoded, 4)
  })

  it("keeps within its budget, dropping the oldest, and never holds a snapshot larger than it", () => {
    const cache = new SnapshotCache(25)
    let encoded = 0
    const encode = (n: number) => () => {
      encoded++
      return bytes(n)
    }
    cache.messages("c", "e", 1, encode(10))
    cache.messages("c", "e", 2, encode(10))
    cache.messages("c", "e", 3, encode(10)) // drops revision 1
    cache.messages("c", "e", 2, encode(10))
    assert.strictEqual(encoded, 3)
    cache.messages("c", "e", 1, encode(10))
    assert.strictEqual(encoded, 4)
    cache.messages("big", "e", 1, encode(30))
    cache.messages("big", "e", 1, encode(30))
    assert.strictEqual(encoded, 6)
  })
})
